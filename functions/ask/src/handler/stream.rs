//! `POST /v1/contacts/{contact}/messages/stream`: the round of `POST .../messages`
//! (same body, auth, idempotency, limits and commit), answered as Server-Sent
//! Events while it runs.
//!
//! The round runs in its own task and hands its events to a channel; the answer's
//! head waits for the first of them. A round that fails before it showed anything
//! (bad input, auth, quota, an idempotency conflict, a model error before the first
//! delta) answers the JSON route's error, status and all; otherwise the answer is
//! `200 text/event-stream`: `delta`, `tool_started`, `tool_finished`, `restart`,
//! then `done` (the JSON route's body, once the round is stored) or `error` (nothing
//! stored). A replay answers `done` alone.
//!
//! The round does not depend on the connection: a client that goes away mid-stream
//! leaves the round to run to its end and be stored, and the same request sent
//! again with its `Idempotency-Key` replays it. (`docs/DESIGN.md`, "Streamed
//! replies".)

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use degrau::converse::{AskError, AskOutcome, RoundEvent, RoundEvents};
use degrau::deadline::Deadline;
use lambda_http::http::{HeaderMap, HeaderValue, StatusCode};
use lambda_http::lambda_runtime::{MetadataPrelude, StreamResponse};
use lambda_http::request::LambdaRequest;
use lambda_http::{Body, LambdaEvent, Request, RequestExt, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::info;

use super::{
    App, Endpoint, HttpError, PostBody, error_response, from_service, idempotency_key,
    json_body_within, request_deadline,
};
use crate::handler::{ErrorType, MAX_BODY_BYTES};

/// How long a stream may go without an event before it sends a comment line, so
/// no proxy on the way takes it for idle.
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// What the round's task hands on: an event, then its outcome.
enum Piece {
    Event(RoundEvent),
    End(Result<AskOutcome, AskError>),
}

/// The round's listener: each event onto the channel (a send that finds the
/// stream gone is dropped; the round goes on).
struct ToChannel(mpsc::UnboundedSender<Piece>);

impl RoundEvents for ToChannel {
    fn event(&self, event: RoundEvent) {
        let _ = self.0.send(Piece::Event(event));
    }
}

/// A streamed answer: its status and headers, and its body's pieces as they come.
pub struct Streamed {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body, piece by piece; it ends with the answer.
    pub body: Chunks,
}

/// The body of a [`Streamed`] answer.
pub struct Chunks(mpsc::UnboundedReceiver<String>);

impl futures_core::Stream for Chunks {
    type Item = Result<String, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|piece| piece.map(Ok))
    }
}

impl Chunks {
    /// The whole body, once it ended (the JSON function's answer on this route).
    pub async fn collect(mut self) -> String {
        let mut whole = String::new();
        while let Some(piece) = self.0.recv().await {
            whole.push_str(&piece);
        }
        whole
    }
}

impl Streamed {
    /// An answer of one piece: a JSON error, or a body known at once.
    fn whole(response: Response<Body>) -> Streamed {
        let (parts, body) = response.into_parts();
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(String::from_utf8_lossy(body.as_ref()).into_owned());
        Streamed {
            status: parts.status,
            headers: parts.headers,
            body: Chunks(rx),
        }
    }

    /// The same answer, as the JSON function returns it: the body whole.
    pub async fn buffered(self) -> Response<Body> {
        let body = self.body.collect().await;
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }

    /// The same answer, as Lambda's response streaming sends it.
    pub fn into_lambda(self) -> StreamResponse<Chunks> {
        StreamResponse {
            metadata_prelude: MetadataPrelude {
                status_code: self.status,
                headers: self.headers,
                ..MetadataPrelude::default()
            },
            stream: self.body,
        }
    }
}

/// The one origin a browser page may call the streaming function from
/// (`CORS_ALLOWED_ORIGIN`): its answers to that origin carry
/// `Access-Control-Allow-Origin`, as a proxy integration's answers must (API
/// Gateway's REST API answers the preflight itself; see `template.yaml`).
#[derive(Debug, Clone, Default)]
pub struct Cors {
    /// The origin, as a browser sends it (`https://chat.example.com`).
    pub allowed_origin: Option<String>,
}

impl Cors {
    /// The CORS headers of an answer to `request`, when it comes from the origin.
    fn apply(&self, request: &Request, headers: &mut HeaderMap) {
        let Some(allowed) = &self.allowed_origin else {
            return;
        };
        let from = request
            .headers()
            .get("origin")
            .and_then(|o| o.to_str().ok());
        headers.insert("vary", HeaderValue::from_static("origin"));
        if from != Some(allowed.as_str()) {
            return;
        }
        if let Ok(origin) = HeaderValue::from_str(allowed) {
            headers.insert("access-control-allow-origin", origin);
            headers.insert(
                "access-control-expose-headers",
                HeaderValue::from_static("idempotent-replayed, retry-after"),
            );
        }
    }
}

/// One invocation of the streaming function: an API Gateway proxy event (REST API
/// or HTTP API, or a function URL's), answered by [`answer`], with `cors`'s
/// headers. Anything else is acknowledged with an empty answer and logged: API
/// Gateway's response streaming may invoke the function once more after a response
/// with an event that is not a request, and that must not count as a function
/// error.
pub async fn invocation(
    app: Arc<App>,
    cors: &Cors,
    event: LambdaEvent<Value>,
) -> Result<StreamResponse<Chunks>, Infallible> {
    let LambdaEvent { payload, context } = event;
    let request: Request = match serde_json::from_value::<LambdaRequest>(payload) {
        Ok(request) => request.into(),
        Err(_) => {
            info!("an event that is not an HTTP request: acknowledged, nothing done");
            let (_, rx) = mpsc::unbounded_channel();
            return Ok(Streamed {
                status: StatusCode::OK,
                headers: HeaderMap::new(),
                body: Chunks(rx),
            }
            .into_lambda());
        }
    };
    let request = request.with_lambda_context(context);
    let deadline = request_deadline(app.ask_timeout, request.lambda_context_ref());
    let mut streamed = answer(&app, &request, deadline).await;
    cors.apply(&request, &mut streamed.headers);
    Ok(streamed.into_lambda())
}

/// Answers the streaming route, or the JSON error of a request that is not one
/// (another path or method is 404 or 405, as on the JSON API).
pub async fn answer(app: &App, request: &Request, deadline: Deadline) -> Streamed {
    match start(app, request, deadline).await {
        Ok(streamed) => streamed,
        Err(error) => Streamed::whole(error_response(error)),
    }
}

async fn start(app: &App, request: &Request, deadline: Deadline) -> Result<Streamed, HttpError> {
    let path = super::request_path(request);
    let matched = super::parse_route(path).filter(|m| m.spec.endpoint == Endpoint::MessageStream);
    let Some(matched) = matched else {
        return Err(HttpError::new(
            ErrorType::NotFound,
            format!(
                "no route for {} {path} on the streaming API",
                request.method()
            ),
        ));
    };
    if request.method().as_str() != "POST" {
        return Err(HttpError::new(
            ErrorType::MethodNotAllowed,
            format!("{} is not allowed here; use POST", request.method()),
        ));
    }
    let tenant = super::auth::tenant(&app.auth, request)?;
    let contact = super::contact_id(matched.contact.unwrap_or_default())?;
    let key = degrau::store::ContactKey { tenant, contact };
    let bytes = json_body_within(request, MAX_BODY_BYTES)?;
    let body: PostBody = serde_json::from_slice(bytes).map_err(|e| {
        HttpError::invalid(format!(
            "the body must be a JSON object {{\"text\": \"...\"}}: {e}"
        ))
    })?;
    let idempotency = idempotency_key(request)?;

    let (pieces, mut received) = mpsc::unbounded_channel();
    let service = app.converse.clone();
    tokio::spawn(async move {
        let listener = ToChannel(pieces.clone());
        let outcome = service
            .ask_streamed(&key, &body.text, idempotency.as_ref(), deadline, &listener)
            .await;
        let _ = pieces.send(Piece::End(outcome));
    });

    let first = received.recv().await.ok_or_else(|| {
        HttpError::new(
            ErrorType::InternalError,
            "the round ended without an outcome",
        )
    })?;
    let mut headers = HeaderMap::new();
    headers.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    let first = match first {
        Piece::End(Err(error)) => return Err(from_service(error)),
        Piece::End(Ok(AskOutcome::Replayed(_))) => {
            headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
            first
        }
        other => other,
    };
    let (chunks, body) = mpsc::unbounded_channel();
    tokio::spawn(forward(first, received, chunks));
    Ok(Streamed {
        status: StatusCode::OK,
        headers,
        body: Chunks(body),
    })
}

/// Writes the round's pieces as events, from `first` until its outcome, with a
/// comment line whenever [`KEEP_ALIVE`] passes without one.
async fn forward(
    first: Piece,
    mut received: mpsc::UnboundedReceiver<Piece>,
    chunks: mpsc::UnboundedSender<String>,
) {
    let mut next = Some(first);
    loop {
        let piece = match next.take() {
            Some(piece) => piece,
            None => match tokio::time::timeout(KEEP_ALIVE, received.recv()).await {
                Err(_) => {
                    let _ = chunks.send(": keep-alive\n\n".to_owned());
                    continue;
                }
                Ok(Some(piece)) => piece,
                Ok(None) => return,
            },
        };
        let (name, data) = match piece {
            Piece::Event(event) => event_data(event),
            Piece::End(outcome) => {
                let _ = chunks.send(outcome_event(outcome));
                return;
            }
        };
        let _ = chunks.send(sse(name, &data));
    }
}

/// An event's name and its data: the event without its tag.
fn event_data(event: RoundEvent) -> (&'static str, Value) {
    let name = match &event {
        RoundEvent::Delta { .. } => "delta",
        RoundEvent::ToolStarted { .. } => "tool_started",
        RoundEvent::ToolFinished { .. } => "tool_finished",
        RoundEvent::Restart { .. } => "restart",
    };
    let mut data = serde_json::to_value(&event).unwrap_or(Value::Null);
    if let Some(object) = data.as_object_mut() {
        object.remove("event");
    }
    (name, data)
}

/// The last event: `done` with the JSON route's body, byte for byte (a replay's
/// is the stored one), or `error` with the status and the error envelope the JSON
/// route would have answered.
fn outcome_event(outcome: Result<AskOutcome, AskError>) -> String {
    let body = match outcome {
        Ok(AskOutcome::Answered(response)) => serde_json::to_string(&response),
        // Stored compact: one line, as an event's data must be.
        Ok(AskOutcome::Replayed(body)) if !body.contains('\n') => Ok(body),
        Ok(AskOutcome::Replayed(body)) => {
            serde_json::from_str::<Value>(&body).map(|value| value.to_string())
        }
        Err(error) => {
            let error = from_service(error);
            return sse(
                "error",
                &json!({
                    "status": error.status,
                    "error": {"type": error.kind, "message": error.message},
                }),
            );
        }
    };
    match body {
        Ok(body) => format!("event: done\ndata: {body}\n\n"),
        Err(error) => sse(
            "error",
            &json!({
                "status": 500,
                "error": {"type": "internal_error", "message": format!("the answer does not serialize: {error}")},
            }),
        ),
    }
}

/// One Server-Sent Event: its name and one line of JSON data.
fn sse(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_its_name_and_one_line_of_json_without_the_tag() {
        let (name, data) = event_data(RoundEvent::Delta {
            text: "line one\nline two".into(),
            call: 1,
        });
        let line = sse(name, &data);
        assert_eq!(
            line,
            "event: delta\ndata: {\"call\":1,\"text\":\"line one\\nline two\"}\n\n"
        );
        let (name, data) = event_data(RoundEvent::ToolStarted {
            id: "toolu_1".into(),
            name: "book_slot".into(),
            input: None,
        });
        assert_eq!(name, "tool_started");
        assert_eq!(data, json!({"id": "toolu_1", "name": "book_slot"}));
    }

    #[test]
    fn a_failed_round_ends_with_the_json_routes_status_and_error() {
        let line = outcome_event(Err(AskError::Conflict("raced".into())));
        assert_eq!(
            line,
            "event: error\ndata: {\"error\":{\"message\":\"raced\",\"type\":\"conflict\"},\"status\":409}\n\n"
        );
    }
}
