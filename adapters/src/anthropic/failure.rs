//! How an attempt's failure is told: a transport error, a non-2xx answer (the API's
//! error envelope, its `x-should-retry` and `retry-after` headers) or a broken stream,
//! each mapped onto [`ModelError`] with whether to retry, and described without the
//! URL, the key or any conversation text.

use std::error::Error as _;
use std::time::Duration;

use degrau::model::ModelError;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::Deserialize;

use crate::retry::Failure;

/// The error code of a 429 that waiting will not cure.
const SPEND_LIMIT: &str = "enforced_spend_limit_reached";

/// Longest piece of a non-JSON error body kept in an error.
const MAX_RAW_ERROR_CHARS: usize = 300;

/// A failure inside a streamed answer (an `error` event, an early end, a broken
/// event): retried as the same failure answered with a status would be.
pub(super) fn stream_failure(
    error: ModelError,
    status: StatusCode,
    request_id: Option<String>,
) -> Failure {
    let retry = matches!(
        error,
        ModelError::Unavailable { .. }
            | ModelError::RateLimited { .. }
            | ModelError::Timeout
            | ModelError::Connection(_)
    );
    Failure {
        error,
        retry,
        retry_after: None,
        status: Some(status.as_u16()),
        request_id,
    }
}

/// No complete answer arrived: a timeout, or a connection refused, reset or dropped
/// before the last byte of the body. Each may succeed on a fresh connection.
pub(super) fn transport_failure(
    e: reqwest::Error,
    status: Option<StatusCode>,
    request_id: Option<String>,
) -> Failure {
    let (error, retry) = if e.is_timeout() {
        (ModelError::Timeout, true)
    } else if e.is_builder() {
        // A request that cannot be built will not build next time either.
        (ModelError::Connection(describe(e)), false)
    } else {
        (ModelError::Connection(describe(e)), true)
    };
    Failure {
        error,
        retry,
        retry_after: None,
        status: status.map(|s| s.as_u16()),
        request_id,
    }
}

/// A complete non-2xx answer.
pub(super) fn status_failure(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    request_id: Option<String>,
) -> Failure {
    let envelope = serde_json::from_slice::<ErrorEnvelope>(body).ok();
    let spend_limit = status == StatusCode::TOO_MANY_REQUESTS
        && envelope
            .as_ref()
            .and_then(|e| e.error.details.as_ref())
            .and_then(|d| d.error_code.as_deref())
            == Some(SPEND_LIMIT);
    let message = match envelope {
        Some(envelope) => envelope.error.message,
        None => raw_message(status, body),
    };

    let code = status.as_u16();
    let retry = if spend_limit {
        false
    } else {
        match header_str(headers, "x-should-retry") {
            Some("true") => true,
            Some("false") => false,
            _ => matches!(code, 408 | 409 | 429) || code >= 500,
        }
    };
    let retry_after = retry_after(headers);

    let error = match code {
        400 if message.starts_with("prompt is too long") => ModelError::PromptTooLong { message },
        400 | 404 | 413 | 422 => ModelError::InvalidRequest { message },
        401 | 403 => ModelError::Authentication { status: code },
        408 => ModelError::Timeout,
        429 => ModelError::RateLimited {
            retry_after: retry_after.map(|wait| wait.as_secs_f64().ceil() as u64),
        },
        500.. => ModelError::Unavailable { status: code },
        _ => ModelError::Protocol(format!("status {code}: {message}")),
    };
    Failure {
        error,
        retry,
        retry_after,
        status: Some(code),
        request_id,
    }
}

/// `{"type":"error","error":{"type","message","details"?},"request_id"}`.
#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
    #[serde(default)]
    details: Option<ErrorDetails>,
}

#[derive(Deserialize)]
struct ErrorDetails {
    #[serde(default)]
    error_code: Option<String>,
}

/// The server's requested wait: `retry-after-ms` first (finer), then `retry-after` in
/// seconds. The HTTP-date form of `retry-after` is not read; the backoff applies instead.
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = |name: &str, scale: f64| {
        header_str(headers, name)
            .and_then(|value| value.trim().parse::<f64>().ok())
            .and_then(|value| Duration::try_from_secs_f64(value / scale).ok())
    };
    seconds("retry-after-ms", 1000.0).or_else(|| seconds("retry-after", 1.0))
}

/// A header's value, when it is text.
pub(super) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Text of an error body that is not the API's envelope (a proxy's page, say).
fn raw_message(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        status.to_string()
    } else {
        text.chars().take(MAX_RAW_ERROR_CHARS).collect()
    }
}

/// A transport error and its causes, without the URL.
pub(super) fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A JSON error by category and position only: serde's own text can quote a value,
/// which here could be conversation text.
pub(super) fn describe_json_error(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "could not be read",
        serde_json::error::Category::Syntax => "is not valid JSON",
        serde_json::error::Category::Data => "does not have the expected shape",
        serde_json::error::Category::Eof => "ends before the JSON does",
    };
    format!("the body {what} (line {}, column {})", e.line(), e.column())
}
