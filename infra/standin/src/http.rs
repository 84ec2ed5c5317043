//! The HTTP surface: `POST /v1/messages` in the Messages API's shape, Bedrock
//! Runtime's `POST /model/{modelId}/invoke` with the same behaviour (validation,
//! caching, faults, scripts, the log) in Bedrock's shape (the body without `model`,
//! `anthropic_version` in it, a SigV4 `Authorization`, errors as `{"message"}` with
//! `x-amzn-ErrorType`), and the test controls under `/stand-in/`.
//!
//! An answer may carry a quirk ([`crate::quirks`]) on every route: its JSON body is
//! [`Quirk::body`], its stream [`Quirk::events`]; an `error` event among them is,
//! on Bedrock's route, the exception frame Bedrock ends a stream with.
//!
//! A streamed call (`"stream": true` on `/v1/messages`, or Bedrock's
//! `POST /model/{modelId}/invoke-with-response-stream`) is checked, cached, logged
//! and answered the same way, the answer sent as its events ([`crate::stream`]):
//! `200 text/event-stream` Server-Sent Events, or on Bedrock's route
//! `application/vnd.amazon.eventstream` frames. An error before the stream is the
//! same JSON error as without it.
//!
//!
//! | endpoint | does |
//! |---|---|
//! | `POST /stand-in/faults` | queue faults (a JSON array of [`Fault`]) |
//! | `POST /stand-in/script` | queue scripted answers (a JSON array of [`ScriptedAnswer`]) |
//! | `POST /stand-in/quirks` | queue quirks (`{"next": [names]}`) or set the random mode (`{"random": {"seed", "per_mille"} \| null}`) ([`crate::control::QuirkControl`], [`crate::quirks`]); answers `{"queued", "random"}` |
//! | `GET /stand-in/requests` | the calls received, oldest first ([`LoggedCall`]) |
//! | `POST /stand-in/reset` | clear faults, script, quirks (queued and random), log, cache and clock |
//! | `POST /stand-in/clock` | `{"advance_seconds": n}` moves the cache clock; answers `{"now_ms"}` |
//! | `POST /stand-in/stream` | `{"delta_ms": n}`: the pause between two events of a streamed answer, and a whole answer's wait (its stream's events times the pause), like a model writing at that pace (default 0; reset by `/stand-in/reset`); answers `{"delta_ms"}` |
//! | `GET /stand-in/health` | `{"status": "ok"}` |
//!
//! The Graph API's send endpoint and its controls (`/stand-in/graph/…`) are
//! [`crate::graph`]'s, merged in.
//!
//! Handlers always answer; every error goes through [`ApiError::into_response`].
//! The control endpoints' handlers are in `http/controls.rs`.

mod controls;

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use crate::StandIn;
use crate::answer::{Answer, answer};
use crate::control::{Fault, LoggedCall, RawRequest, ScriptedAnswer};
use crate::error::ApiError;
use crate::parse::{from_bedrock, parse_request, parse_value};
use crate::prompt::{Prompt, tokens_for_chars};
use crate::quirks::Quirk;
use crate::stream::{self, End, Plan};
use crate::wire::{MessagesRequest, MessagesResponse, ResponseBlock, StopReason, Usage};

/// Largest body accepted: the real API's 32 MB (413 `request_too_large` above).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// How long a dropped response waits between its partial body and the break, so
/// the client really receives the headers and the first bytes.
const DROP_PAUSE: Duration = Duration::from_millis(50);

/// The stand-in's routes.
pub fn router(standin: StandIn) -> Router {
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/model/{model_id}/invoke", post(bedrock_invoke))
        .route(
            "/model/{model_id}/invoke-with-response-stream",
            post(bedrock_invoke_stream),
        )
        .route("/stand-in/stream", post(controls::stream_pace))
        .route("/stand-in/faults", post(controls::push_faults))
        .route("/stand-in/script", post(controls::push_script))
        .route("/stand-in/quirks", post(controls::push_quirks))
        .route("/stand-in/requests", get(controls::requests))
        .route("/stand-in/reset", post(controls::reset))
        .route("/stand-in/clock", post(controls::clock))
        .route("/stand-in/health", get(controls::health))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(standin)
        .merge(crate::graph::router(crate::graph::Graph::default()))
}

/// A successful call: the response (before its quirk), its usage and its quirk.
struct Answered {
    response: MessagesResponse,
    usage: Usage,
    quirk: Option<Quirk>,
}

impl Answered {
    /// The JSON body and the stream's events, the quirk's if there is one.
    fn wire(&self) -> (Value, Vec<Value>) {
        match self.quirk {
            Some(quirk) => (quirk.body(&self.response), quirk.events(&self.response)),
            // Serialising these plain data types cannot fail.
            None => (
                serde_json::to_value(&self.response).unwrap_or(Value::Null),
                stream::events(&self.response),
            ),
        }
    }
}

/// Which API a call came in through: the answer is the same, its envelope differs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// `POST /v1/messages`, the Messages API.
    Messages,
    /// `POST /model/{modelId}/invoke`, Bedrock Runtime's `InvokeModel`: the model is
    /// the path's (decoded), the body has none; or, when `stream`,
    /// `…/invoke-with-response-stream` (`InvokeModelWithResponseStream`).
    Bedrock {
        /// The model id or inference profile from the path.
        model: String,
        /// The streaming operation.
        stream: bool,
    },
}

impl Route {
    fn is_bedrock(&self) -> bool {
        matches!(self, Route::Bedrock { .. })
    }

    fn error_response(&self, error: ApiError, request_id: &str) -> Response {
        match self {
            Route::Messages => error.into_response(request_id),
            Route::Bedrock { .. } => error.into_bedrock_response(request_id),
        }
    }

    fn error_body(&self, error: &ApiError, request_id: &str) -> Value {
        match self {
            Route::Messages => error.envelope(request_id),
            Route::Bedrock { .. } => error.bedrock_body(),
        }
    }
}

async fn messages(
    State(standin): State<StandIn>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    call(standin, Route::Messages, &uri, headers, body).await
}

async fn bedrock_invoke(
    State(standin): State<StandIn>,
    model: Result<Path<String>, PathRejection>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    bedrock(standin, model, false, uri, headers, body).await
}

async fn bedrock_invoke_stream(
    State(standin): State<StandIn>,
    model: Result<Path<String>, PathRejection>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    bedrock(standin, model, true, uri, headers, body).await
}

async fn bedrock(
    standin: StandIn,
    model: Result<Path<String>, PathRejection>,
    stream: bool,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match model {
        Ok(Path(model)) => {
            let route = Route::Bedrock { model, stream };
            call(standin, route, &uri, headers, body).await
        }
        Err(rejection) => {
            let request_id = standin.next_request_id();
            ApiError::invalid(format!("invalid model identifier in the path: {rejection}"))
                .into_bedrock_response(&request_id)
        }
    }
}

/// A call on either route: faults first, then the checks, the cache and the answer,
/// and the log.
async fn call(
    standin: StandIn,
    route: Route,
    uri: &Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request_id = standin.next_request_id();
    let fault = standin.take_fault().unwrap_or_default();
    if let Some(ms) = fault.hang_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let logged_body = match &body {
        Ok(bytes) => serde_json::from_slice(bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned())),
        Err(_) => Value::Null,
    };
    let signed = route
        .is_bedrock()
        .then(|| raw_request(uri, &headers, &body));
    let path = uri.path().to_owned();
    let streamed = match &route {
        Route::Messages => logged_body.get("stream") == Some(&Value::Bool(true)),
        Route::Bedrock { stream, .. } => *stream,
    };
    // A mid-stream fault on a call that does not stream breaks it like `drop`.
    let dropped = fault.drop
        || (!streamed && (fault.stream_error_after.is_some() || fault.stream_drop_after.is_some()));

    let outcome = match fault.status {
        Some(status) => Err(injected_error(status, &fault)),
        None => handle(&standin, &route, &headers, body, streamed),
    };
    match outcome {
        Ok(answered) => {
            let usage = answered.usage;
            tracing::info!(
                request_id = %request_id,
                bedrock = route.is_bedrock(),
                input_tokens = usage.input_tokens,
                cache_creation_input_tokens = usage.cache_creation_input_tokens,
                cache_read_input_tokens = usage.cache_read_input_tokens,
                output_tokens = usage.output_tokens,
                streamed,
                dropped,
                quirk = answered.quirk.map(Quirk::name),
                "answered"
            );
            let (value, events) = answered.wire();
            let bytes = serde_json::to_vec(&value).unwrap_or_default();
            standin.record(LoggedCall {
                request_id: request_id.clone(),
                path,
                signed,
                status: 200,
                body: logged_body,
                usage: Some(usage),
                response: value,
                dropped: dropped || (streamed && fault.stream_drop_after.is_some()),
                streamed,
                quirks: answered.quirk.into_iter().collect(),
            });
            let pause = Duration::from_millis(standin.delta_ms());
            if streamed {
                streamed_response(&route, &request_id, &events, &fault, pause)
            } else {
                // Paced like a model writing it: a whole answer comes when the
                // last event of its stream would have (a pause between two events).
                let events = u32::try_from(events.len()).unwrap_or(u32::MAX);
                tokio::time::sleep(pause.saturating_mul(events.saturating_sub(1))).await;
                if dropped {
                    dropped_response(&route, &request_id, bytes)
                } else {
                    json_response(&route, &request_id, bytes)
                }
            }
        }
        Err(error) => {
            let answer = route.error_body(&error, &request_id);
            let refused = route.error_response(error.clone(), &request_id);
            tracing::info!(
                request_id = %request_id,
                bedrock = route.is_bedrock(),
                status = refused.status().as_u16(),
                kind = %error.kind,
                "refused"
            );
            standin.record(LoggedCall {
                request_id: request_id.clone(),
                path,
                signed,
                status: refused.status().as_u16(),
                body: logged_body,
                usage: None,
                response: answer.clone(),
                dropped,
                streamed,
                quirks: Vec::new(),
            });
            if dropped {
                let bytes = serde_json::to_vec(&answer).unwrap_or_default();
                let mut response = dropped_response(&route, &request_id, bytes);
                *response.status_mut() = refused.status();
                response
            } else {
                refused
            }
        }
    }
}

/// The request as received, for the log of a signed call.
fn raw_request(uri: &Uri, headers: &HeaderMap, body: &Result<Bytes, BytesRejection>) -> RawRequest {
    let mut all = std::collections::BTreeMap::<String, String>::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        all.entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push(',');
                v.push_str(&value);
            })
            .or_insert(value);
    }
    RawRequest {
        method: "POST".to_owned(),
        path: uri.path().to_owned(),
        query: uri.query().unwrap_or_default().to_owned(),
        headers: all,
        body: match body {
            Ok(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Err(_) => String::new(),
        },
    }
}

fn injected_error(status: u16, fault: &Fault) -> ApiError {
    let mut error = ApiError::new(status, "");
    if let Some(kind) = &fault.kind {
        error.kind.clone_from(kind);
    }
    error.message = fault.message.clone().unwrap_or_else(|| match status {
        529 => "Overloaded".to_owned(),
        500 => "Internal server error".to_owned(),
        _ => format!("Injected fault {status} (offline stand-in)"),
    });
    error.retry_after = fault.retry_after;
    error.retry_after_ms = fault.retry_after_ms;
    error.should_retry = fault.should_retry;
    error.error_code.clone_from(&fault.error_code);
    error
}

/// Everything after the faults: headers, body, limits, cache, answer and its quirk.
fn handle(
    standin: &StandIn,
    route: &Route,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    streamed: bool,
) -> Result<Answered, ApiError> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    match route {
        Route::Messages => {
            // The official SDKs send the key as `x-api-key` or (the Python SDK 2.x) as
            // `Authorization: Bearer`: either will do.
            let bearer = header("authorization")
                .and_then(|v| v.strip_prefix("Bearer "))
                .is_some_and(|token| !token.trim().is_empty());
            if header("x-api-key").is_none() && !bearer {
                return Err(ApiError::new(401, "x-api-key header is required"));
            }
            if header("anthropic-version").is_none() {
                return Err(ApiError::invalid("anthropic-version: header is required"));
            }
        }
        Route::Bedrock { .. } => {
            // The stand-in cannot know the secret key, so it checks the signature's
            // shape only; a test recomputes the signature from the log.
            let signed = header("authorization").is_some_and(|auth| {
                auth.starts_with("AWS4-HMAC-SHA256 ")
                    && ["Credential=", "SignedHeaders=", "Signature="]
                        .iter()
                        .all(|part| auth.contains(part))
            });
            if !signed || header("x-amz-date").is_none() {
                let mut error = ApiError::new(403, "Missing Authentication Token");
                "MissingAuthenticationTokenException".clone_into(&mut error.kind);
                return Err(error);
            }
        }
    }
    let bytes = body.map_err(|rejection| {
        if rejection.status().as_u16() == 413 {
            ApiError::new(413, "Request exceeds the maximum allowed number of bytes.")
        } else {
            ApiError::invalid(format!("could not read the request body: {rejection}"))
        }
    })?;
    let parsed = match route {
        Route::Messages => parse_request(&bytes)?,
        Route::Bedrock { model, .. } => parse_value(&from_bedrock(&bytes, model)?)?,
    };
    let prompt = Prompt::flatten(&parsed.request, &parsed.prelude);
    let total = prompt.total_tokens();
    let config = standin.config();
    if total > config.context_limit {
        return Err(ApiError::invalid(format!(
            "prompt is too long: {total} tokens > {} maximum",
            config.context_limit
        )));
    }

    let (scripted, cached, number) = standin.with(|state| {
        let now = standin.now_ms_of(state);
        let usage = state
            .cache
            .account(&prompt, now, config.min_cacheable_tokens);
        state.messages += 1;
        (state.script.pop_front(), usage, state.messages)
    });
    Ok(answered(
        standin,
        parsed.request,
        &prompt.fingerprint(),
        scripted,
        cached,
        format!("msg_standin_{number}"),
        streamed,
    ))
}

/// The answer to a valid request (the script's, else the heuristics' cut to
/// `max_tokens`), its quirk (queued or drawn) and its usage (`cached`'s input
/// counts, and the output of what is sent).
fn answered(
    standin: &StandIn,
    request: MessagesRequest,
    fingerprint: &str,
    scripted: Option<ScriptedAnswer>,
    cached: Usage,
    id: String,
    streamed: bool,
) -> Answered {
    let (content, stop_reason, output_tokens) = match scripted {
        Some(mut script) => {
            let stop = script.stop_reason();
            crate::thinking::sign_scripted(&mut script.content, fingerprint);
            let tokens = output_tokens(&script.content);
            (script.content, stop, tokens)
        }
        None => fit(answer(&request, fingerprint), request.max_tokens),
    };
    let answer = Answer {
        content,
        stop_reason,
    };
    let thinking = request.thinking_budget().is_some();
    let quirk = standin.take_quirk(&answer, streamed, thinking);
    // A cut answer spent its whole budget.
    let output_tokens = match quirk.map(|quirk| quirk.apply(answer.clone())) {
        Some(sent) if sent.stop_reason == StopReason::MaxTokens => request.max_tokens,
        Some(sent) => self::output_tokens(&sent.content),
        None => output_tokens,
    };
    let usage = Usage {
        output_tokens,
        ..cached
    };
    let response = MessagesResponse {
        id,
        kind: "message",
        role: "assistant",
        model: request.model,
        content: answer.content,
        stop_reason: answer.stop_reason,
        stop_sequence: None,
        usage,
    };
    Answered {
        response,
        usage,
        quirk,
    }
}

/// Output tokens of a reply: a quarter of its characters (text as is, tool calls
/// as JSON), rounded up.
fn output_tokens(content: &[ResponseBlock]) -> u64 {
    let chars: usize = content
        .iter()
        .map(|block| match block {
            ResponseBlock::Text { text } => text.chars().count(),
            other => serde_json::to_string(other).map_or(0, |j| j.chars().count()),
        })
        .sum();
    tokens_for_chars(chars)
}

/// Cuts a heuristic reply to `max_tokens` like the real API: the thinking and the
/// text survive (no tool call), and the stop reason says why.
fn fit(reply: Answer, max_tokens: u64) -> (Vec<ResponseBlock>, StopReason, u64) {
    let tokens = output_tokens(&reply.content);
    if tokens <= max_tokens {
        return (reply.content, reply.stop_reason, tokens);
    }
    let mut content: Vec<ResponseBlock> = reply
        .content
        .iter()
        .filter(|b| b.is_thinking())
        .cloned()
        .collect();
    // Thinking comes first and spends the budget first; the text gets what is left.
    let thought = usize::try_from(output_tokens(&content))
        .unwrap_or(usize::MAX)
        .saturating_mul(4);
    let keep = usize::try_from(max_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(4)
        .saturating_sub(if content.is_empty() { 0 } else { thought });
    let text: String = reply
        .content
        .iter()
        .filter_map(|b| match b {
            ResponseBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
        .chars()
        .take(keep)
        .collect();
    if !text.trim().is_empty() {
        content.push(ResponseBlock::text(text));
    }
    // What is kept fits `max_tokens * 4` characters, so the budget is never passed.
    let tokens = if content.is_empty() {
        max_tokens
    } else {
        output_tokens(&content).min(max_tokens)
    };
    (content, StopReason::MaxTokens, tokens)
}

fn json_response(route: &Route, request_id: &str, bytes: Vec<u8>) -> Response {
    let mut response = Body::from(bytes).into_response();
    set_headers(&mut response, route, request_id);
    response
}

fn set_headers(response: &mut Response, route: &Route, request_id: &str) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let name = if route.is_bedrock() {
        "x-amzn-requestid"
    } else {
        "request-id"
    };
    if let Ok(value) = HeaderValue::from_str(request_id) {
        headers.insert(name, value);
    }
}

/// Status, headers and the first half of the body; then the connection breaks
/// (the body stream fails, so hyper aborts the chunked response).
fn dropped_response(route: &Route, request_id: &str, bytes: Vec<u8>) -> Response {
    let bytes = Bytes::from(bytes);
    let half = bytes.slice(..bytes.len() / 2);
    let mut response = Body::from_stream(Truncated {
        chunk: Some(half),
        pause: Box::pin(tokio::time::sleep(DROP_PAUSE)),
    })
    .into_response();
    set_headers(&mut response, route, request_id);
    response
}

/// A streamed answer: its events as Server-Sent Events or, on Bedrock's route,
/// event-stream frames (an `error` event, Bedrock's exception frame), `pause`
/// apart, cut short as the fault says (`stream_error_after`, `stream_drop_after`,
/// or `drop`: half the events).
fn streamed_response(
    route: &Route,
    request_id: &str,
    events: &[Value],
    fault: &Fault,
    pause: Duration,
) -> Response {
    let bedrock = route.is_bedrock();
    let encode = |event: &Value| match event["type"].as_str() {
        Some("error") if bedrock => stream::exception_frame(
            event["error"]["type"].as_str().unwrap_or("api_error"),
            event["error"]["message"].as_str().unwrap_or_default(),
        ),
        _ if bedrock => stream::chunk_frame(event),
        _ => stream::sse(event),
    };
    let (count, end) = if let Some(after) = fault.stream_error_after {
        let kind = fault.kind.as_deref().unwrap_or("overloaded_error");
        let message = fault.message.clone().unwrap_or_else(|| match kind {
            "overloaded_error" => "Overloaded".to_owned(),
            _ => "Injected stream error (offline stand-in)".to_owned(),
        });
        let frame = if bedrock {
            stream::exception_frame(kind, &message)
        } else {
            stream::sse(&stream::error_event(kind, &message))
        };
        (after, End::Error(frame))
    } else if let Some(after) = fault.stream_drop_after {
        (after, End::Drop)
    } else if fault.drop {
        (events.len() / 2, End::Drop)
    } else {
        (events.len(), End::Whole)
    };
    let frames = events.iter().take(count).map(encode).collect();
    let mut answer = Body::from_stream(stream::body(Plan { frames, pause, end })).into_response();
    let headers = answer.headers_mut();
    let (content_type, id_header) = if bedrock {
        ("application/vnd.amazon.eventstream", "x-amzn-requestid")
    } else {
        ("text/event-stream; charset=utf-8", "request-id")
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if bedrock {
        headers.insert(
            "x-amzn-bedrock-content-type",
            HeaderValue::from_static("application/json"),
        );
    }
    if let Ok(value) = HeaderValue::from_str(request_id) {
        headers.insert(id_header, value);
    }
    answer
}

/// A body that yields one chunk, waits a moment, then fails.
///
/// The proxy has the same small stream (`infra/awsproxy/src/lib.rs`), on purpose:
/// the two local tools share no crate, and twenty lines do not make one.
struct Truncated {
    chunk: Option<Bytes>,
    pause: Pin<Box<tokio::time::Sleep>>,
}

impl futures_core::Stream for Truncated {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(chunk) = self.chunk.take() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        ready!(self.pause.as_mut().poll(cx));
        Poll::Ready(Some(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "connection dropped by an injected fault (offline stand-in)",
        ))))
    }
}

async fn not_found(State(standin): State<StandIn>, uri: axum::http::Uri) -> Response {
    let request_id = standin.next_request_id();
    ApiError::new(404, format!("Not found: {}", uri.path())).into_response(&request_id)
}

async fn method_not_allowed(State(standin): State<StandIn>) -> Response {
    let request_id = standin.next_request_id();
    ApiError::new(405, "Method not allowed").into_response(&request_id)
}
