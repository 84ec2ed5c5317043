//! The Anthropic adapter against scripted servers on loopback: an axum server that
//! answers with canned replies, and a raw TCP one for answers no HTTP server would
//! give (none, or a body cut off).

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
    let outcome = tokio::time::timeout(Duration::from_secs(30), call.create(&request(), minute()))
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
        Reply::error(400, "invalid_request_error", "try again").header("x-should-retry", "true"),
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
    let (base_url, script) = serve(vec![Reply::error(400, "invalid_request_error", text)]).await;
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
    let (base_url, script) = serve(vec![Reply::error(400, "invalid_request_error", text)]).await;
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
    let outcome = tokio::time::timeout(Duration::from_secs(20), call.create(&request(), deadline))
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
    let outcome = tokio::time::timeout(Duration::from_secs(20), call.create(&request(), deadline))
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
    let (base_url, script) = serve(vec![Reply::error(529, "overloaded_error", "Overloaded")]).await;
    let mut config = config(base_url);
    config.backoff_base = Duration::from_secs(5);
    config.backoff_max = Duration::from_secs(10);
    let call = AnthropicModel::new(config).unwrap();
    let deadline = Deadline::after(Duration::from_secs(3));
    let outcome = tokio::time::timeout(Duration::from_secs(30), call.create(&request(), deadline))
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
