//! The answers the proxy makes itself: an AWS JSON error (an injected fault's, or
//! the upstream's failure), and a response whose connection breaks halfway.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// How long a dropped response waits between its partial body and the break, so
/// the client really receives the headers and the first bytes.
const DROP_PAUSE: Duration = Duration::from_millis(50);

pub(crate) fn error_response(status: u16, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    headers.insert(
        HeaderName::from_static("x-amzn-requestid"),
        HeaderValue::from_static("degrau-awsproxy-injected"),
    );
    response
}

/// The status line, the headers and half of `body`; then the connection breaks
/// (the body stream fails, so hyper aborts the chunked response).
pub(crate) fn dropped_response(status: StatusCode, headers: HeaderMap, body: Bytes) -> Response {
    let half = body.slice(..body.len() / 2);
    let mut response = Body::from_stream(Truncated {
        chunk: Some(half),
        pause: Box::pin(tokio::time::sleep(DROP_PAUSE)),
    })
    .into_response();
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A body that yields one chunk, waits a moment, then fails.
///
/// The stand-in has the same small stream (`infra/standin/src/http/respond.rs`), on
/// purpose: the two local tools share no crate, and twenty lines do not make one.
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
            "connection dropped by an injected fault (degrau-awsproxy)",
        ))))
    }
}
