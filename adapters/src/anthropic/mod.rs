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
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url};
use serde::Deserialize;

use degrau::deadline::Deadline;
use degrau::model::{Model, ModelError, ModelResponse};
use degrau::request::ModelRequest;

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
mod tests {
    use super::*;
    use degrau::domain::{ContentBlock, Role};
    use degrau::model::StopReason;
    use degrau::request::{RequestBlock, RequestMessage};
    use degrau::usage::Usage;

    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::Uri;
    use axum::response::{IntoResponse, Response};
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    const KEY: &str = "sk-ant-test-0123456789";

    /// A deadline no test here reaches unless it says so.
    fn minute() -> Deadline {
        Deadline::after(Duration::from_secs(60))
    }

    /// A canned answer of the scripted server.
    #[derive(Clone)]
    struct Reply {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    }

    impl Reply {
        fn ok() -> Self {
            Reply {
                status: 200,
                headers: vec![("request-id", "req_ok".to_owned())],
                body: json!({
                    "id": "msg_01",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5",
                    "content": [
                        {"type": "text", "text": "Let me check Friday."},
                        {"type": "tool_use", "id": "toolu_1", "name": "list_free_slots",
                         "input": {"day": "fri"}}
                    ],
                    "stop_reason": "tool_use",
                    "stop_sequence": null,
                    "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3000,
                              "cache_read_input_tokens": 500, "output_tokens": 40}
                })
                .to_string(),
            }
        }

        fn error(status: u16, kind: &str, message: &str) -> Self {
            Reply {
                status,
                headers: vec![("request-id", format!("req_{status}"))],
                body: json!({
                    "type": "error",
                    "error": {"type": kind, "message": message},
                    "request_id": format!("req_{status}")
                })
                .to_string(),
            }
        }

        fn header(mut self, name: &'static str, value: &str) -> Self {
            self.headers.push((name, value.to_owned()));
            self
        }
    }

    /// What the scripted server received.
    struct Seen {
        path: String,
        headers: axum::http::HeaderMap,
        body: Vec<u8>,
    }

    /// Answers the n-th request with the n-th reply (the last one repeats).
    struct Script {
        replies: Vec<Reply>,
        seen: Mutex<Vec<Seen>>,
    }

    impl Script {
        fn requests(&self) -> usize {
            self.seen.lock().unwrap().len()
        }
    }

    async fn answer(
        State(script): State<Arc<Script>>,
        uri: Uri,
        headers: axum::http::HeaderMap,
        body: Bytes,
    ) -> Response {
        let index = {
            let mut seen = script.seen.lock().unwrap();
            seen.push(Seen {
                path: uri.path().to_owned(),
                headers,
                body: body.to_vec(),
            });
            seen.len() - 1
        };
        let reply = &script.replies[index.min(script.replies.len() - 1)];
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, value) in &reply.headers {
            headers.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        let status = axum::http::StatusCode::from_u16(reply.status).unwrap();
        (status, headers, reply.body.clone()).into_response()
    }

    /// Starts the scripted server; returns its base URL.
    async fn serve(replies: Vec<Reply>) -> (String, Arc<Script>) {
        let script = Arc::new(Script {
            replies,
            seen: Mutex::new(Vec::new()),
        });
        let router = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&script));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (base_url, script)
    }

    /// Starts a raw TCP server that hands each connection to `handle`; returns its base
    /// URL and a count of accepted connections.
    async fn serve_raw<F, Fut>(handle: F) -> (String, Arc<AtomicUsize>)
    where
        F: Fn(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(handle(stream));
            }
        });
        (base_url, accepted)
    }

    /// Reads one HTTP/1.1 request (head and `content-length` body) off the stream.
    async fn read_request(stream: &mut TcpStream) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = stream.read(&mut chunk).await.unwrap();
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return;
            }
        }
    }

    fn config(base_url: String) -> AnthropicConfig {
        AnthropicConfig {
            base_url,
            api_key: KEY.to_owned(),
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(5),
            max_retries: 2,
            backoff_base: Duration::from_millis(1),
            backoff_max: Duration::from_millis(4),
            max_retry_after: Duration::from_secs(60),
            min_attempt: Duration::from_secs(1),
        }
    }

    fn model(base_url: String) -> AnthropicModel {
        AnthropicModel::new(config(base_url)).unwrap()
    }

    fn request() -> ModelRequest {
        ModelRequest {
            model: "claude-sonnet-5".to_owned(),
            max_tokens: 256,
            thinking: None,
            tools: Vec::new(),
            tool_choice: None,
            system: Vec::new(),
            messages: vec![RequestMessage {
                role: Role::User,
                content: vec![RequestBlock {
                    block: ContentBlock::text("A slot on Friday?"),
                    cache_control: None,
                }],
            }],
        }
    }

    #[tokio::test]
    async fn a_success_is_parsed_and_the_request_carries_the_headers_and_exact_body() {
        let (base_url, script) = serve(vec![Reply::ok()]).await;
        let response = model(base_url).create(&request(), minute()).await.unwrap();

        assert_eq!(response.id, "msg_01");
        assert_eq!(response.model, "claude-sonnet-5");
        assert_eq!(response.role, Role::Assistant);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::text("Let me check Friday."),
                ContentBlock::tool_use("toolu_1", "list_free_slots", json!({"day": "fri"})),
            ]
        );
        assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 12,
                cache_creation_input_tokens: 3000,
                cache_read_input_tokens: 500,
                output_tokens: 40,
                cache_creation: None,
            }
        );

        let seen = script.seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].path, "/v1/messages");
        assert_eq!(seen[0].headers["x-api-key"], KEY);
        assert_eq!(seen[0].headers["anthropic-version"], "2023-06-01");
        assert_eq!(seen[0].headers["content-type"], "application/json");
        assert_eq!(seen[0].body, serde_json::to_vec(&request()).unwrap());
    }

    #[tokio::test]
    async fn an_overloaded_529_is_retried_once_and_then_succeeds() {
        let (base_url, script) = serve(vec![
            Reply::error(529, "overloaded_error", "Overloaded"),
            Reply::ok(),
        ])
        .await;
        let response = model(base_url).create(&request(), minute()).await.unwrap();
        assert_eq!(response.id, "msg_01");
        assert_eq!(script.requests(), 2);
    }

    #[tokio::test]
    async fn a_429_with_retry_after_zero_is_retried_and_then_succeeds() {
        let (base_url, script) = serve(vec![
            Reply::error(429, "rate_limit_error", "Rate limited").header("retry-after", "0"),
            Reply::ok(),
        ])
        .await;
        assert!(model(base_url).create(&request(), minute()).await.is_ok());
        assert_eq!(script.requests(), 2);
    }

    #[tokio::test]
    async fn a_429_that_persists_is_rate_limited_with_the_wait_the_api_asked_for() {
        let (base_url, script) = serve(vec![
            Reply::error(429, "rate_limit_error", "Rate limited").header("retry-after", "0"),
        ])
        .await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(
            error,
            ModelError::RateLimited {
                retry_after: Some(0)
            }
        );
        assert_eq!(script.requests(), 3);
    }

    #[tokio::test]
    async fn a_retry_after_beyond_the_cap_falls_back_to_the_backoff() {
        let (base_url, script) = serve(vec![
            Reply::error(429, "rate_limit_error", "Rate limited").header("retry-after", "3600"),
            Reply::ok(),
        ])
        .await;
        let call = model(base_url);
        // A guard against hanging for an hour, not a timing assertion.
        let outcome =
            tokio::time::timeout(Duration::from_secs(30), call.create(&request(), minute()))
                .await
                .expect("the hour-long retry-after was honoured");
        assert!(outcome.is_ok());
        assert_eq!(script.requests(), 2);
    }

    #[tokio::test]
    async fn three_500s_are_unavailable_after_exactly_three_attempts() {
        let (base_url, script) = serve(vec![Reply::error(500, "api_error", "Internal")]).await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(error, ModelError::Unavailable { status: 500 });
        assert_eq!(script.requests(), 3);
    }

    #[tokio::test]
    async fn x_should_retry_false_stops_the_retry_of_a_500() {
        let (base_url, script) = serve(vec![
            Reply::error(500, "api_error", "Internal").header("x-should-retry", "false"),
        ])
        .await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(error, ModelError::Unavailable { status: 500 });
        assert_eq!(script.requests(), 1);
    }

    #[tokio::test]
    async fn x_should_retry_true_retries_even_a_400() {
        let (base_url, script) = serve(vec![
            Reply::error(400, "invalid_request_error", "try again")
                .header("x-should-retry", "true"),
            Reply::ok(),
        ])
        .await;
        assert!(model(base_url).create(&request(), minute()).await.is_ok());
        assert_eq!(script.requests(), 2);
    }

    #[tokio::test]
    async fn an_invalid_request_keeps_the_api_text_and_is_not_retried() {
        let text = "messages.1: `tool_use` ids were found without `tool_result` blocks \
                    immediately after: toolu_1.";
        let (base_url, script) =
            serve(vec![Reply::error(400, "invalid_request_error", text)]).await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(
            error,
            ModelError::InvalidRequest {
                message: text.to_owned()
            }
        );
        assert_eq!(script.requests(), 1);
    }

    #[tokio::test]
    async fn a_prompt_that_is_too_long_is_reported_as_such() {
        let text = "prompt is too long: 210000 tokens > 200000 maximum";
        let (base_url, script) =
            serve(vec![Reply::error(400, "invalid_request_error", text)]).await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(
            error,
            ModelError::PromptTooLong {
                message: text.to_owned()
            }
        );
        assert_eq!(script.requests(), 1);
    }

    #[tokio::test]
    async fn a_retired_model_404_is_an_invalid_request() {
        let (base_url, _) = serve(vec![Reply::error(
            404,
            "not_found_error",
            "model: claude-2.1",
        )])
        .await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(
            error,
            ModelError::InvalidRequest {
                message: "model: claude-2.1".to_owned()
            }
        );
    }

    #[tokio::test]
    async fn a_401_is_an_authentication_error_and_is_not_retried() {
        let (base_url, script) = serve(vec![Reply::error(
            401,
            "authentication_error",
            "invalid x-api-key",
        )])
        .await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(error, ModelError::Authentication { status: 401 });
        assert_eq!(script.requests(), 1);
    }

    #[tokio::test]
    async fn a_spend_limit_429_is_not_retried() {
        let body = json!({
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "You have reached your specified API usage limits.",
                "details": {"error_code": "enforced_spend_limit_reached"}
            }
        });
        let reply = Reply {
            status: 429,
            headers: vec![("retry-after", "0".to_owned())],
            body: body.to_string(),
        };
        let (base_url, script) = serve(vec![reply]).await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(
            error,
            ModelError::RateLimited {
                retry_after: Some(0)
            }
        );
        assert_eq!(script.requests(), 1);
    }

    #[tokio::test]
    async fn a_non_json_502_from_a_proxy_is_unavailable_after_retries() {
        let reply = Reply {
            status: 502,
            headers: Vec::new(),
            body: "<html>Bad Gateway</html>".to_owned(),
        };
        let (base_url, script) = serve(vec![reply]).await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(error, ModelError::Unavailable { status: 502 });
        assert_eq!(script.requests(), 3);
    }

    #[tokio::test]
    async fn a_2xx_that_is_not_a_messages_response_is_a_protocol_error_without_retry() {
        let reply = Reply {
            status: 200,
            headers: Vec::new(),
            body: json!({"id": "msg_01", "content": "secret words"}).to_string(),
        };
        let (base_url, script) = serve(vec![reply]).await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        let ModelError::Protocol(text) = error else {
            panic!("expected a protocol error, got {error:?}");
        };
        assert!(!text.contains("secret words"), "{text}");
        assert_eq!(script.requests(), 1);
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out_after_the_retries() {
        let (base_url, accepted) = serve_raw(|mut stream| async move {
            read_request(&mut stream).await;
            // Hold the connection open without answering.
            std::future::pending::<()>().await;
            drop(stream);
        })
        .await;
        let mut config = config(base_url);
        config.request_timeout = Duration::from_millis(200);
        let error = AnthropicModel::new(config)
            .unwrap()
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(error, ModelError::Timeout);
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_body_cut_off_mid_response_is_a_connection_error_after_the_retries() {
        let (base_url, accepted) = serve_raw(|mut stream| async move {
            read_request(&mut stream).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                        content-length: 400\r\n\r\n{\"id\":\"msg_01\",\"content\":[";
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.shutdown().await.unwrap();
        })
        .await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert!(
            matches!(error, ModelError::Connection(_)),
            "expected a connection error, got {error:?}"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_truncated_body_without_a_length_is_a_protocol_error_without_retry() {
        let (base_url, accepted) = serve_raw(|mut stream| async move {
            read_request(&mut stream).await;
            // Without a length the close is the end of the body: the bytes arrive
            // "complete" and only the JSON shows they are not.
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                        connection: close\r\n\r\n{\"id\":\"msg_01\",\"content\":[";
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.shutdown().await.unwrap();
        })
        .await;
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert!(
            matches!(error, ModelError::Protocol(_)),
            "expected a protocol error, got {error:?}"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connection_error_without_the_key() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let error = model(base_url)
            .create(&request(), minute())
            .await
            .unwrap_err();
        let ModelError::Connection(text) = error else {
            panic!("expected a connection error, got {error:?}");
        };
        assert!(!text.contains(KEY));
    }

    #[tokio::test]
    async fn a_base_url_with_a_trailing_slash_reaches_the_same_endpoint() {
        let (base_url, script) = serve(vec![Reply::ok()]).await;
        let response = model(format!("{base_url}/"))
            .create(&request(), minute())
            .await;
        assert!(response.is_ok());
        assert_eq!(script.seen.lock().unwrap()[0].path, "/v1/messages");
    }

    // The time budget: the deadline bounds every attempt, retry and wait. The outer
    // `tokio::time::timeout`s guard against a test hanging for minutes; they assert
    // nothing about time.

    #[tokio::test]
    async fn a_hung_model_gets_one_attempt_cut_at_the_deadline_and_no_retry() {
        let (base_url, accepted) = serve_raw(|mut stream| async move {
            read_request(&mut stream).await;
            std::future::pending::<()>().await;
            drop(stream);
        })
        .await;
        let mut config = config(base_url);
        config.request_timeout = Duration::from_secs(60);
        let call = AnthropicModel::new(config).unwrap();
        let deadline = Deadline::after(Duration::from_millis(1_500));
        let outcome =
            tokio::time::timeout(Duration::from_secs(20), call.create(&request(), deadline))
                .await
                .expect("the model call ran past its deadline");
        assert_eq!(outcome.unwrap_err(), ModelError::Timeout);
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "no retry once the time is up"
        );
    }

    #[tokio::test]
    async fn a_retry_after_longer_than_the_time_left_is_not_waited_for() {
        let (base_url, script) = serve(vec![
            Reply::error(429, "rate_limit_error", "Rate limited").header("retry-after", "30"),
            Reply::ok(),
        ])
        .await;
        let call = model(base_url);
        let deadline = Deadline::after(Duration::from_secs(10));
        let outcome =
            tokio::time::timeout(Duration::from_secs(20), call.create(&request(), deadline))
                .await
                .expect("the retry-after was waited for past the deadline");
        assert_eq!(
            outcome.unwrap_err(),
            ModelError::RateLimited {
                retry_after: Some(30)
            },
            "the last attempt's error"
        );
        assert_eq!(script.requests(), 1);
    }

    #[tokio::test]
    async fn a_backoff_that_does_not_fit_ends_with_the_last_attempts_error() {
        let (base_url, script) =
            serve(vec![Reply::error(529, "overloaded_error", "Overloaded")]).await;
        let mut config = config(base_url);
        config.backoff_base = Duration::from_secs(5);
        config.backoff_max = Duration::from_secs(10);
        let call = AnthropicModel::new(config).unwrap();
        let deadline = Deadline::after(Duration::from_secs(3));
        let outcome =
            tokio::time::timeout(Duration::from_secs(30), call.create(&request(), deadline))
                .await
                .expect("the model call ran past its deadline");
        assert_eq!(
            outcome.unwrap_err(),
            ModelError::Unavailable { status: 529 }
        );
        assert_eq!(script.requests(), 1);
    }

    #[tokio::test]
    async fn no_attempt_starts_with_less_than_the_floor_left() {
        let (base_url, script) = serve(vec![Reply::ok()]).await;
        let deadline = Deadline::after(Duration::from_millis(100));
        let error = model(base_url)
            .create(&request(), deadline)
            .await
            .unwrap_err();
        assert_eq!(error, ModelError::Timeout);
        assert_eq!(
            script.requests(),
            0,
            "an attempt that could not finish was not made"
        );
    }

    #[test]
    fn retry_after_ms_wins_over_retry_after_and_junk_is_ignored() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        let mut junk = HeaderMap::new();
        junk.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2026 07:28:00 GMT"),
        );
        junk.insert("retry-after-ms", HeaderValue::from_static("-5"));
        assert_eq!(retry_after(&junk), None);
    }

    #[test]
    fn the_debug_output_of_the_model_hides_the_key() {
        let model = model("http://127.0.0.1:1".to_owned());
        let printed = format!("{model:?}");
        assert!(!printed.contains(KEY));
        assert!(printed.contains("<redacted>"));
    }

    #[test]
    fn a_key_or_base_url_that_cannot_be_sent_is_refused_when_building() {
        let mut bad_key = config("http://127.0.0.1:1".to_owned());
        bad_key.api_key = "sk-ant\nInjected: yes".to_owned();
        assert!(matches!(
            AnthropicModel::new(bad_key),
            Err(ModelError::InvalidRequest { .. })
        ));
        assert!(matches!(
            AnthropicModel::new(config("not a url".to_owned())),
            Err(ModelError::InvalidRequest { .. })
        ));
    }

    #[test]
    fn the_defaults_follow_the_official_sdks() {
        let config = AnthropicConfig::default();
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert!(config.api_key.is_empty());
        assert_eq!(config.max_retries, 2);
        assert_eq!(config.backoff_base, Duration::from_millis(500));
        assert_eq!(config.backoff_max, Duration::from_secs(8));
        assert_eq!(config.max_retry_after, Duration::from_secs(60));
        assert_eq!(config.min_attempt, Duration::from_secs(1));
    }
}
