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
//! | `POST /stand-in/script` | queue scripted answers (a JSON array of [`ScriptedAnswer`](crate::control::ScriptedAnswer)) |
//! | `POST /stand-in/quirks` | queue quirks (`{"next": [names]}`) or set the random mode (`{"random": {"seed", "per_mille"} \| null}`) ([`crate::control::QuirkControl`], [`crate::quirks`]); answers `{"queued", "random"}` |
//! | `GET /stand-in/requests` | the calls received, oldest first ([`LoggedCall`]) |
//! | `POST /stand-in/reset` | clear faults, script, quirks (queued and random), log, cache and clock |
//! | `POST /stand-in/clock` | `{"advance_seconds": n}` moves the cache clock; answers `{"now_ms"}` |
//! | `POST /stand-in/stream` | `{"delta_ms": n}`: the pause between two events of a streamed answer, and a whole answer's wait (its stream's events times the pause), like a model writing at that pace (default 0; reset by `/stand-in/reset`); answers `{"delta_ms"}` |
//! | `GET /stand-in/health` | `{"status": "ok"}` |
//!
//! The Graph API's send endpoint and its controls (`/stand-in/graph/…`) are
//! [`crate::graph`]'s, merged in, with the media of voice notes
//! ([`crate::graph_media`]) and speech-to-text ([`crate::speech`]).
//!
//! Handlers always answer; every error goes through [`ApiError::into_response`].
//!
//! # Layout
//!
//! This file: the routes, and a call from its faults to its log (`call`, `send`,
//! `refuse`). `http/route.rs` (which API, its error envelope), `http/handle.rs`
//! (the checks after the faults, the cache), `http/answered.rs` (the answer, its
//! quirk, its usage), `http/respond.rs` (JSON, streamed and broken bodies),
//! `http/controls.rs` (the control endpoints' handlers).

mod answered;
mod controls;
mod handle;
mod respond;
mod route;

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::Value;

use crate::StandIn;
use crate::control::{Fault, LoggedCall, RawRequest};
use crate::error::ApiError;
use crate::quirks::Quirk;
use answered::Answered;
use handle::handle;
use respond::{dropped_response, json_response, streamed_response};
use route::Route;

/// Largest body accepted: the real API's 32 MB (413 `request_too_large` above).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

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
        .merge(crate::graph_media::router(
            crate::graph_media::GraphMedia::default(),
        ))
        .merge(crate::speech::router())
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
    let received = Received::of(request_id, &route, uri, &headers, &body, &fault);
    let outcome = match fault.status {
        Some(status) => Err(injected_error(status, &fault)),
        None => handle(&standin, &route, &headers, body, received.streamed),
    };
    match outcome {
        Ok(answered) => send(&standin, &route, received, answered, &fault).await,
        Err(error) => refuse(&standin, &route, received, error),
    }
}

/// What the log keeps of a call whatever its outcome, and how it is answered.
struct Received {
    request_id: String,
    path: String,
    /// The request as received, on Bedrock's routes (signed calls).
    signed: Option<RawRequest>,
    /// The body as JSON, or as a string when it is not JSON.
    logged_body: Value,
    streamed: bool,
    /// Whether the answer breaks halfway: `drop`, or a mid-stream fault on a call
    /// that does not stream.
    dropped: bool,
}

impl Received {
    fn of(
        request_id: String,
        route: &Route,
        uri: &Uri,
        headers: &HeaderMap,
        body: &Result<Bytes, BytesRejection>,
        fault: &Fault,
    ) -> Received {
        let logged_body = match body {
            Ok(bytes) => serde_json::from_slice(bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned())),
            Err(_) => Value::Null,
        };
        let signed = route.is_bedrock().then(|| raw_request(uri, headers, body));
        let path = uri.path().to_owned();
        let streamed = match route {
            Route::Messages => logged_body.get("stream") == Some(&Value::Bool(true)),
            Route::Bedrock { stream, .. } => *stream,
        };
        // A mid-stream fault on a call that does not stream breaks it like `drop`.
        let dropped = fault.drop
            || (!streamed
                && (fault.stream_error_after.is_some() || fault.stream_drop_after.is_some()));
        Received {
            request_id,
            path,
            signed,
            logged_body,
            streamed,
            dropped,
        }
    }
}

/// Logs an answered call and sends its answer: streamed, or whole after the time
/// its stream would have taken, broken halfway when the fault says so.
async fn send(
    standin: &StandIn,
    route: &Route,
    received: Received,
    answered: Answered,
    fault: &Fault,
) -> Response {
    let Received {
        request_id,
        path,
        signed,
        logged_body,
        streamed,
        dropped,
    } = received;
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
        streamed_response(route, &request_id, &events, fault, pause)
    } else {
        // Paced like a model writing it: a whole answer comes when the
        // last event of its stream would have (a pause between two events).
        let events = u32::try_from(events.len()).unwrap_or(u32::MAX);
        tokio::time::sleep(pause.saturating_mul(events.saturating_sub(1))).await;
        if dropped {
            dropped_response(route, &request_id, bytes)
        } else {
            json_response(route, &request_id, bytes)
        }
    }
}

/// Logs a refused call and sends its error, broken halfway when the fault says so.
fn refuse(standin: &StandIn, route: &Route, received: Received, error: ApiError) -> Response {
    let Received {
        request_id,
        path,
        signed,
        logged_body,
        streamed,
        dropped,
    } = received;
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
        let mut response = dropped_response(route, &request_id, bytes);
        *response.status_mut() = refused.status();
        response
    } else {
        refused
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

async fn not_found(State(standin): State<StandIn>, uri: axum::http::Uri) -> Response {
    let request_id = standin.next_request_id();
    ApiError::new(404, format!("Not found: {}", uri.path())).into_response(&request_id)
}

async fn method_not_allowed(State(standin): State<StandIn>) -> Response {
    let request_id = standin.next_request_id();
    ApiError::new(405, "Method not allowed").into_response(&request_id)
}
