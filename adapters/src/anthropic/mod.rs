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

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url};

use degrau::deadline::Deadline;
use degrau::model::{DeltaSink, Model, ModelError, ModelResponse};
use degrau::plan::request::ModelRequest;

mod failure;

use failure::{
    describe, describe_json_error, header_str, status_failure, stream_failure, transport_failure,
};

use crate::model_stream::{Assembler, SseParser, Step};
use crate::retry::{Answered, Failure, RetryPolicy, with_retries};

/// Where the real API lives.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header degrau speaks.
pub const API_VERSION: &str = "2023-06-01";

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
            let (response, status, request_id) = self.open_stream(body, timeout).await?;
            read_stream(response, status, request_id, on_delta, delivered).await
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

    /// Sends a streamed call: its answer when it is a 2xx event stream, with its
    /// status and request id; else the failure it tells.
    async fn open_stream(
        &self,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<(reqwest::Response, StatusCode, Option<String>), Failure> {
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
        Ok((response, status, request_id))
    }
}

/// Reads an event stream's chunks as they arrive up to its `message_stop`, handing
/// each piece to `on_delta` and noting in `delivered` that one went out.
async fn read_stream(
    mut response: reqwest::Response,
    status: StatusCode,
    request_id: Option<String>,
    on_delta: DeltaSink<'_>,
    delivered: &AtomicBool,
) -> Result<Answered<ModelResponse>, Failure> {
    let mut parser = SseParser::default();
    let mut assembler = Assembler::default();
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| transport_failure(e, Some(status), request_id.clone()))?;
        let Some(chunk) = chunk else {
            return Err(stream_failure(
                ModelError::Connection("the stream ended before its message_stop".to_owned()),
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

#[cfg(test)]
mod tests;
