//! The Anthropic adapter against scripted servers on loopback: the contract's axum
//! server answering with canned replies, and a raw TCP one for answers no HTTP
//! server would give (a body cut off); and the `Model` contract on the Messages
//! API's wire (`contract::…`). What the contract covers is not repeated here.

use super::failure::retry_after;
use super::*;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::model_contract::{Canned, Fault, Wire, minute, request, serve};

const KEY: &str = "sk-ant-test-0123456789";

/// A 200 answer, as the API sends it.
fn ok() -> Canned {
    Canned {
        status: 200,
        headers: vec![("request-id", "req_ok".to_owned())],
        body: json!({
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5",
            "content": [{"type": "text", "text": "Friday at ten."}],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 40}
        })
        .to_string(),
    }
}

/// The API's error envelope with `status`.
fn error(status: u16, kind: &str, message: &str) -> Canned {
    Canned {
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

#[tokio::test]
async fn a_request_carries_the_key_the_version_and_the_exact_body() {
    let (base_url, script) = serve(vec![ok()]).await;
    let response = model(base_url).create(&request(), minute()).await;
    assert!(response.is_ok(), "{response:?}");

    let seen = script.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].headers["x-api-key"], KEY);
    assert_eq!(seen[0].headers["anthropic-version"], "2023-06-01");
    assert_eq!(seen[0].headers["content-type"], "application/json");
    assert_eq!(seen[0].body, serde_json::to_vec(&request()).unwrap());
}

#[tokio::test]
async fn a_429_that_persists_is_rate_limited_with_the_wait_the_api_asked_for() {
    let (base_url, script) = serve(vec![
        error(429, "rate_limit_error", "Rate limited").header("retry-after", "0"),
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
        error(429, "rate_limit_error", "Rate limited").header("retry-after", "3600"),
        ok(),
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
async fn x_should_retry_false_stops_the_retry_of_a_500() {
    let (base_url, script) = serve(vec![
        error(500, "api_error", "Internal").header("x-should-retry", "false"),
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
        error(400, "invalid_request_error", "try again").header("x-should-retry", "true"),
        ok(),
    ])
    .await;
    assert!(model(base_url).create(&request(), minute()).await.is_ok());
    assert_eq!(script.requests(), 2);
}

#[tokio::test]
async fn a_retired_model_404_is_an_invalid_request() {
    let (base_url, _) = serve(vec![error(404, "not_found_error", "model: claude-2.1")]).await;
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
async fn a_spend_limit_429_is_not_retried() {
    let body = json!({
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "You have reached your specified API usage limits.",
            "details": {"error_code": "enforced_spend_limit_reached"}
        }
    });
    let reply = Canned {
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
    let reply = Canned {
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
async fn a_base_url_with_a_trailing_slash_reaches_the_same_endpoint() {
    let (base_url, script) = serve(vec![ok()]).await;
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
async fn a_retry_after_longer_than_the_time_left_is_not_waited_for() {
    let (base_url, script) = serve(vec![
        error(429, "rate_limit_error", "Rate limited").header("retry-after", "30"),
        ok(),
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
    let (base_url, script) = serve(vec![error(529, "overloaded_error", "Overloaded")]).await;
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

/// The Messages API's wire, for the `Model` contract.
struct Anthropic;

impl Wire for Anthropic {
    type M = AnthropicModel;
    const CREDENTIAL: &'static str = KEY;

    fn answer(body: Value) -> Canned {
        Canned {
            status: 200,
            headers: vec![("request-id", "req_ok".to_owned())],
            body: body.to_string(),
        }
    }

    fn fault(fault: Fault, message: &str) -> Canned {
        match fault {
            Fault::Throttled => error(429, "rate_limit_error", message),
            Fault::ServerError => error(500, "api_error", message),
            Fault::InvalidRequest => error(400, "invalid_request_error", message),
            Fault::Denied => error(401, "authentication_error", message),
        }
    }

    fn model(url: &str, policy: RetryPolicy) -> AnthropicModel {
        AnthropicModel::new(AnthropicConfig {
            base_url: url.to_owned(),
            api_key: KEY.to_owned(),
            connect_timeout: Duration::from_secs(1),
            request_timeout: policy.request_timeout,
            max_retries: policy.max_retries,
            backoff_base: policy.backoff_base,
            backoff_max: policy.backoff_max,
            max_retry_after: policy.max_retry_after,
            min_attempt: policy.min_attempt,
        })
        .unwrap()
    }
}

mod contract {
    crate::model_contract::model_contract!(super::Anthropic);
}

/// A 200 `text/event-stream` of `events` (`\r\n` line ends, a comment first).
fn sse(events: &[Value]) -> Canned {
    let mut body = String::from(": hello\r\n\r\n");
    for event in events {
        body.push_str(&format!(
            "event: {}\r\ndata: {event}\r\n\r\n",
            event["type"].as_str().unwrap()
        ));
    }
    Canned {
        status: 200,
        headers: vec![("content-type", "text/event-stream".to_owned())],
        body,
    }
}

fn streamed_text() -> Vec<Value> {
    vec![
        json!({"type": "message_start", "message": {"id": "msg_01", "type": "message",
            "role": "assistant", "model": "claude-sonnet-5", "content": [],
            "stop_reason": null, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "Friday "}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "at ten."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
               "usage": {"output_tokens": 40}}),
        json!({"type": "message_stop"}),
    ]
}

#[tokio::test]
async fn a_stream_sends_stream_true_and_reads_the_events_into_the_answer() {
    let (base_url, script) = serve(vec![sse(&streamed_text())]).await;
    let pieces = std::sync::Mutex::new(Vec::new());
    let answer = model(base_url)
        .stream(&request(), minute(), &|delta| {
            pieces.lock().unwrap().push(delta);
        })
        .await
        .unwrap();
    assert_eq!(
        answer.content,
        vec![degrau::domain::ContentBlock::text("Friday at ten.")]
    );
    assert_eq!(answer.usage.input_tokens, 12);
    assert_eq!(answer.usage.output_tokens, 40);
    assert_eq!(pieces.lock().unwrap().len(), 2);

    let seen = script.seen.lock().unwrap();
    let mut expected = serde_json::to_value(request()).unwrap();
    expected["stream"] = json!(true);
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(sent, expected);
    assert_eq!(seen[0].headers["x-api-key"], KEY);
}

#[tokio::test]
async fn a_stream_ending_early_is_retried_only_while_no_piece_went_out() {
    let events = streamed_text();
    let (base_url, script) = serve(vec![sse(&events[..3])]).await;
    let error = model(base_url)
        .stream(&request(), minute(), &|_| {})
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::Connection(_)), "{error:?}");
    assert_eq!(script.requests(), 3, "nothing went out: retried");

    let (base_url, script) = serve(vec![sse(&events[..5]), sse(&events)]).await;
    let error = model(base_url)
        .stream(&request(), minute(), &|_| {})
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::Connection(_)), "{error:?}");
    assert_eq!(script.requests(), 1, "a piece went out: not retried");
}

#[tokio::test]
async fn a_whole_json_answer_to_a_streamed_call_is_a_protocol_error_without_retry() {
    let (base_url, script) = serve(vec![ok()]).await;
    let error = model(base_url)
        .stream(&request(), minute(), &|_| {})
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::Protocol(_)), "{error:?}");
    assert_eq!(script.requests(), 1);
}
