//! How an answer goes out: a JSON body with the route's request-id header, a
//! stream of events (Server-Sent Events or Bedrock's event-stream frames) cut short
//! as a fault says, or a body whose connection breaks halfway.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::route::Route;
use crate::control::Fault;
use crate::stream::{self, End, Plan};

/// How long a dropped response waits between its partial body and the break, so
/// the client really receives the headers and the first bytes.
const DROP_PAUSE: Duration = Duration::from_millis(50);

pub(super) fn json_response(route: &Route, request_id: &str, bytes: Vec<u8>) -> Response {
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
pub(super) fn dropped_response(route: &Route, request_id: &str, bytes: Vec<u8>) -> Response {
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
pub(super) fn streamed_response(
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
/// The proxy has the same small stream (`infra/awsproxy/src/answers.rs`), on purpose:
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
