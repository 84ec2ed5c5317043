//! The HTTP adapter of the `Model` port: `POST {base_url}/v1/messages` with one shared
//! `reqwest` client, the official SDKs' retry policy and a mapping of the API's errors
//! onto [`ModelError`].
//!
//! Retried (at most `max_retries` extra attempts): connection failures (including a body
//! cut off mid-response), timeouts, 408, 409, 429 and every status ≥ 500. An
//! `x-should-retry` header overrides that choice; a 429 for a spend limit never retries.
//! The wait is the server's `retry-after-ms`/`retry-after` when it is within
//! `max_retry_after`, else an exponential backoff with jitter.
//!
//! **The deadline** is kept by the retry loop both model adapters share
//! ([`crate::retry`]): every attempt, retry and wait ends by the deadline the call
//! is given. Logs carry only status, attempt, the API's request id and latency:
//! never the key, the request or the API's error text (which may quote the request).
//!
//! (`docs/DESIGN.md`: "The time budget".)

use std::error::Error as _;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url};
use serde::Deserialize;

use degrau::deadline::Deadline;
use degrau::model::{DeltaSink, Model, ModelError, ModelResponse};
use degrau::plan::request::ModelRequest;

use crate::model_stream::{Assembler, SseParser, Step};
use crate::retry::{Answered, Failure, RetryPolicy, with_retries};

/// Where the real API lives.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header degrau speaks.
pub const API_VERSION: &str = "2023-06-01";

/// The error code of a 429 that waiting will not cure.
const SPEND_LIMIT: &str = "enforced_spend_limit_reached";

/// Longest piece of a non-JSON error body kept in an error.
const MAX_RAW_ERROR_CHARS: usize = 300;

/// How to reach the API and how patiently.
#[derive(Clone, PartialEq, Eq)]
pub struct AnthropicConfig {
    /// Scheme and host, without `/v1` (a trailing slash is ignored).
    pub base_url: String,
    /// Sent as `x-api-key`; never logged or printed.
    pub api_key: String,
    /// Longest wait for a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Longest one attempt may take, from connecting to the last byte of the body.
    pub request_timeout: Duration,
    /// Extra attempts after the first one.
    pub max_retries: u32,
    /// Backoff before the first retry; doubles with each retry.
    pub backoff_base: Duration,
    /// Longest backoff.
    pub backoff_max: Duration,
    /// Longest server-requested wait honoured; a longer one falls back to the backoff.
    pub max_retry_after: Duration,
    /// Least time left for an attempt to start: one with less could not finish.
    pub min_attempt: Duration,
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        let retry = RetryPolicy::default();
        AnthropicConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: String::new(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: retry.request_timeout,
            max_retries: retry.max_retries,
            backoff_base: retry.backoff_base,
            backoff_max: retry.backoff_max,
            max_retry_after: retry.max_retry_after,
            min_attempt: retry.min_attempt,
        }
    }
}

impl AnthropicConfig {
    /// The retry loop's budget and patience.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            request_timeout: self.request_timeout,
            max_retries: self.max_retries,
            backoff_base: self.backoff_base,
            backoff_max: self.backoff_max,
            max_retry_after: self.max_retry_after,
            min_attempt: self.min_attempt,
        }
    }
}

// Written by hand so that `{:?}` of a config (or of the model) cannot leak the key.
impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = if self.api_key.is_empty() {
            "<empty>"
        } else {
            "<redacted>"
        };
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &key)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("max_retry_after", &self.max_retry_after)
            .field("min_attempt", &self.min_attempt)
            .finish()
    }
}

/// The Messages API over HTTP. Build it once per process and share it.
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    client: reqwest::Client,
    config: AnthropicConfig,
    /// `{base_url}/v1/messages`, checked once in `new`.
    endpoint: Url,
}

impl AnthropicModel {
    /// Builds the client. Fails with `InvalidRequest` when `base_url` is not a URL or the
    /// key cannot be an HTTP header value, and with `Connection` when the TLS stack cannot
    /// start.
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let endpoint = Url::parse(&format!(
            "{}/v1/messages",
            config.base_url.trim_end_matches('/')
        ))
        .map_err(|e| ModelError::InvalidRequest {
            message: format!("the model API base URL is not a valid URL: {e}"),
        })?;

        let mut key =
            HeaderValue::from_str(&config.api_key).map_err(|_| ModelError::InvalidRequest {
                message: "the model API key is not a valid HTTP header value".to_owned(),
            })?;
        key.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static("x-api-key"), key);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));

        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.connect_timeout)
            // A redirect would carry `x-api-key` (not a header reqwest strips) to
            // wherever it points; the API never redirects, so refuse them.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                ModelError::Connection(format!("could not build the HTTP client: {}", describe(e)))
            })?;

        Ok(AnthropicModel {
            client,
            config,
            endpoint,
        })
    }

    /// One attempt within `timeout`: send, read the whole body, classify.
    async fn attempt(
        &self,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Answered<ModelResponse>, Failure> {
        let response = self
            .client
            .post(self.endpoint.clone())
            .timeout(timeout)
            .body(body)
            .send()
            .await
            .map_err(|e| transport_failure(e, None, None))?;

        let status = response.status();
        let headers = response.headers().clone();
        let request_id = header_str(&headers, "request-id").map(str::to_owned);
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transport_failure(e, Some(status), request_id.clone()))?;

        if status.is_success() {
            return match serde_json::from_slice::<ModelResponse>(&bytes) {
                Ok(response) => Ok(Answered {
                    value: response,
                    status: status.as_u16(),
                    request_id,
                }),
                Err(e) => Err(Failure {
                    error: ModelError::Protocol(format!(
                        "a {} answer is not a Messages API response: {}",
                        status.as_u16(),
                        describe_json_error(&e)
                    )),
                    retry: false,
                    retry_after: None,
                    status: Some(status.as_u16()),
                    request_id,
                }),
            };
        }
        Err(status_failure(status, &headers, &bytes, request_id))
    }

    /// One streamed attempt within `timeout`: send, then read the events as they
    /// arrive, handing each piece to `on_delta` (and noting in `delivered` that one
    /// went out: the attempt is then never retried).
    async fn stream_attempt(
        &self,
        body: Vec<u8>,
        timeout: Duration,
        on_delta: DeltaSink<'_>,
        delivered: &AtomicBool,
    ) -> Result<Answered<ModelResponse>, Failure> {
        let work = async {
            let mut response = self
                .client
                .post(self.endpoint.clone())
                .timeout(timeout)
                .body(body)
                .send()
                .await
                .map_err(|e| transport_failure(e, None, None))?;
            let status = response.status();
            let headers = response.headers().clone();
            let request_id = header_str(&headers, "request-id").map(str::to_owned);
            if !status.is_success() {
                let bytes = response
                    .bytes()
                    .await
                    .map_err(|e| transport_failure(e, Some(status), request_id.clone()))?;
                return Err(status_failure(status, &headers, &bytes, request_id));
            }
            let content_type = header_str(&headers, "content-type").unwrap_or_default();
            if !content_type.starts_with("text/event-stream") {
                return Err(Failure {
                    error: ModelError::Protocol(format!(
                        "a {} answer to a streamed call is not an event stream",
                        status.as_u16()
                    )),
                    retry: false,
                    retry_after: None,
                    status: Some(status.as_u16()),
                    request_id,
                });
            }
            let mut parser = SseParser::default();
            let mut assembler = Assembler::default();
            loop {
                let chunk = response
                    .chunk()
                    .await
                    .map_err(|e| transport_failure(e, Some(status), request_id.clone()))?;
                let Some(chunk) = chunk else {
                    return Err(stream_failure(
                        ModelError::Connection(
                            "the stream ended before its message_stop".to_owned(),
                        ),
                        status,
                        request_id,
                    ));
                };
                for event in parser.push(&chunk) {
                    match assembler.event(event.data.as_bytes()) {
                        Ok(Step::Nothing) => {}
                        Ok(Step::Delta(delta)) => {
                            delivered.store(true, Ordering::SeqCst);
                            on_delta(delta);
                        }
                        Ok(Step::Done(value)) => {
                            return Ok(Answered {
                                value: *value,
                                status: status.as_u16(),
                                request_id,
                            });
                        }
                        Err(error) => return Err(stream_failure(error, status, request_id)),
                    }
                }
            }
        };
        let outcome = match tokio::time::timeout(timeout, work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure {
                error: ModelError::Timeout,
                retry: true,
                retry_after: None,
                status: None,
                request_id: None,
            }),
        };
        // Once a piece went out, the caller has shown it: a retry would show it twice.
        outcome.map_err(|mut failure| {
            if delivered.load(Ordering::SeqCst) {
                failure.retry = false;
            }
            failure
        })
    }
}

#[async_trait]
impl Model for AnthropicModel {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        let body = encode(request)?;
        with_retries(&self.config.retry_policy(), deadline, |timeout| {
            self.attempt(body.clone(), timeout)
        })
        .await
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let body = encode_stream(request)?;
        let delivered = AtomicBool::new(false);
        with_retries(&self.config.retry_policy(), deadline, |timeout| {
            self.stream_attempt(body.clone(), timeout, on_delta, &delivered)
        })
        .await
    }
}

/// A failure inside a streamed answer (an `error` event, an early end, a broken
/// event): retried as the same failure answered with a status would be.
fn stream_failure(error: ModelError, status: StatusCode, request_id: Option<String>) -> Failure {
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

/// The streamed request's body: its JSON with `"stream": true`.
fn encode_stream(request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
    let encoding = |e: serde_json::Error| ModelError::InvalidRequest {
        message: format!(
            "the request cannot be encoded as JSON: {}",
            describe_json_error(&e)
        ),
    };
    let mut value = serde_json::to_value(request).map_err(encoding)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("stream".to_owned(), serde_json::Value::Bool(true));
    }
    serde_json::to_vec(&value).map_err(encoding)
}

/// The request's body: its JSON.
fn encode(request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
    serde_json::to_vec(request).map_err(|e| ModelError::InvalidRequest {
        message: format!(
            "the request cannot be encoded as JSON: {}",
            describe_json_error(&e)
        ),
    })
}

/// No complete answer arrived: a timeout, or a connection refused, reset or dropped
/// before the last byte of the body. Each may succeed on a fresh connection.
fn transport_failure(
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
fn status_failure(
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
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = |name: &str, scale: f64| {
        header_str(headers, name)
            .and_then(|value| value.trim().parse::<f64>().ok())
            .and_then(|value| Duration::try_from_secs_f64(value / scale).ok())
    };
    seconds("retry-after-ms", 1000.0).or_else(|| seconds("retry-after", 1.0))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
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
fn describe(e: reqwest::Error) -> String {
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
fn describe_json_error(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "could not be read",
        serde_json::error::Category::Syntax => "is not valid JSON",
        serde_json::error::Category::Data => "does not have the expected shape",
        serde_json::error::Category::Eof => "ends before the JSON does",
    };
    format!("the body {what} (line {}, column {})", e.line(), e.column())
}

#[cfg(test)]
mod tests;
