//! The Bedrock adapter against a scripted server on loopback that answers as
//! Bedrock Runtime does (its exceptions in `x-amzn-errortype`), called with dummy
//! credentials as the e2e stack's.

use super::*;
use degrau::domain::{ContentBlock, Role};
use degrau::model::StopReason;
use degrau::request::{CacheControl, RequestBlock, RequestMessage, SystemBlock};

use std::sync::{Arc, Mutex};

use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::net::TcpListener;

fn minute() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "us.anthropic.claude-sonnet-5-v1:0".into(),
        max_tokens: 256,
        thinking: None,
        tools: Vec::new(),
        tool_choice: None,
        system: vec![SystemBlock {
            kind: "text".into(),
            text: "be brief".into(),
            cache_control: Some(CacheControl::EPHEMERAL),
        }],
        messages: vec![RequestMessage {
            role: Role::User,
            content: vec![RequestBlock {
                block: ContentBlock::text("hello"),
                cache_control: None,
            }],
        }],
    }
}

/// A canned answer: status, exception name (for errors) and body.
#[derive(Clone)]
struct Reply {
    status: u16,
    exception: Option<&'static str>,
    body: String,
}

impl Reply {
    fn ok() -> Self {
        Reply {
            status: 200,
            exception: None,
            body: json!({
                "id": "msg_bdrk_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5",
                "content": [{"type": "text", "text": "Hi."}],
                "stop_reason": "end_turn",
                "stop_sequence": null,
                "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3000,
                          "cache_read_input_tokens": 500, "output_tokens": 40}
            })
            .to_string(),
        }
    }

    fn error(status: u16, exception: &'static str, message: &str) -> Self {
        Reply {
            status,
            exception: Some(exception),
            body: json!({ "message": message }).to_string(),
        }
    }
}

struct Seen {
    path: String,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

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
    headers.insert("x-amzn-requestid", HeaderValue::from_static("req-bdrk"));
    if let Some(exception) = reply.exception {
        headers.insert(
            "x-amzn-errortype",
            HeaderValue::from_str(&format!("{exception}:http://internal.amazon.com/")).unwrap(),
        );
    }
    let status = axum::http::StatusCode::from_u16(reply.status).unwrap();
    (status, headers, reply.body.clone()).into_response()
}

async fn serve(replies: Vec<Reply>) -> (String, Arc<Script>) {
    let script = Arc::new(Script {
        replies,
        seen: Mutex::new(Vec::new()),
    });
    let app = axum::Router::new()
        .fallback(answer)
        .with_state(script.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, script)
}

/// A client of `url` with dummy credentials, as the e2e stack's.
fn model_at(url: &str, policy: RetryPolicy) -> BedrockModel {
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(url)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .build();
    BedrockModel::new(config, policy)
}

fn fast() -> RetryPolicy {
    RetryPolicy {
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
        ..RetryPolicy::default()
    }
}

#[test]
fn the_body_is_the_messages_body_less_model_plus_the_bedrock_version() {
    let request = request();
    let messages: Value = serde_json::to_value(&request).unwrap();
    let bedrock: Value = serde_json::from_slice(&invoke_body(&request).unwrap()).unwrap();
    let mut expected = messages.as_object().unwrap().clone();
    expected.remove("model");
    expected.insert("anthropic_version".into(), json!("bedrock-2023-05-31"));
    assert_eq!(bedrock, Value::Object(expected));
    assert_eq!(
        bedrock["system"][0]["cache_control"],
        json!({"type": "ephemeral"}),
        "cache_control goes through unchanged"
    );
    assert!(bedrock.get("model").is_none());
}

#[tokio::test]
async fn an_answer_is_read_with_its_usage_and_stop_reason_from_a_signed_call() {
    let (url, script) = serve(vec![Reply::ok()]).await;
    let response = model_at(&url, fast())
        .create(&request(), minute())
        .await
        .unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(response.usage.input_tokens, 12);
    assert_eq!(response.usage.cache_creation_input_tokens, 3000);
    assert_eq!(response.usage.cache_read_input_tokens, 500);
    assert_eq!(response.usage.output_tokens, 40);
    let seen = script.seen.lock().unwrap();
    assert_eq!(
        seen[0].path,
        "/model/us.anthropic.claude-sonnet-5-v1%3A0/invoke"
    );
    let auth = seen[0].headers["authorization"].to_str().unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=testing/"),
        "{auth}"
    );
    assert!(seen[0].headers.get("x-api-key").is_none());
    let body: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(body["anthropic_version"], "bedrock-2023-05-31");
}

#[tokio::test]
async fn bedrocks_errors_map_to_the_model_errors_and_retry_only_when_worth_it() {
    let cases = [
        (
            Reply::error(429, "ThrottlingException", "Too many requests"),
            ModelError::RateLimited { retry_after: None },
            3,
        ),
        (
            Reply::error(408, "ModelTimeoutException", "Model timed out"),
            ModelError::Timeout,
            3,
        ),
        (
            Reply::error(503, "ServiceUnavailableException", "Unavailable"),
            ModelError::Unavailable { status: 503 },
            3,
        ),
        (
            Reply::error(429, "ModelNotReadyException", "Not ready"),
            ModelError::Unavailable { status: 429 },
            3,
        ),
        (
            Reply::error(500, "InternalServerException", "Internal"),
            ModelError::Unavailable { status: 500 },
            3,
        ),
        (
            Reply::error(400, "ValidationException", "messages.0: bad"),
            ModelError::InvalidRequest {
                message: "messages.0: bad".into(),
            },
            1,
        ),
        (
            Reply::error(
                400,
                "ValidationException",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
            ModelError::PromptTooLong {
                message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
            },
            1,
        ),
        (
            Reply::error(
                400,
                "ValidationException",
                "Input is too long for requested model.",
            ),
            ModelError::PromptTooLong {
                message: "Input is too long for requested model.".into(),
            },
            1,
        ),
        (
            Reply::error(403, "AccessDeniedException", "not authorized"),
            ModelError::Authentication { status: 403 },
            1,
        ),
        (
            Reply::error(403, "UnrecognizedClientException", "bad token"),
            ModelError::Authentication { status: 403 },
            1,
        ),
        (
            Reply::error(404, "ResourceNotFoundException", "no such model"),
            ModelError::InvalidRequest {
                message: "no such model".into(),
            },
            1,
        ),
        (
            Reply::error(400, "ServiceQuotaExceededException", "quota"),
            ModelError::RateLimited { retry_after: None },
            1,
        ),
        (
            Reply::error(424, "ModelErrorException", "model failed"),
            ModelError::Unavailable { status: 424 },
            1,
        ),
    ];
    for (reply, expected, attempts) in cases {
        let name = reply.exception.unwrap_or_default();
        let (url, script) = serve(vec![reply]).await;
        let error = model_at(&url, fast())
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(error, expected, "{name}");
        assert_eq!(script.requests(), attempts, "{name}");
    }
}

#[tokio::test]
async fn a_throttled_call_then_an_answer_succeeds_on_the_retry() {
    let (url, script) = serve(vec![
        Reply::error(429, "ThrottlingException", "slow down"),
        Reply::ok(),
    ])
    .await;
    let response = model_at(&url, fast()).create(&request(), minute()).await;
    assert!(response.is_ok());
    assert_eq!(script.requests(), 2, "one retry, by the loop, not the SDK");
}

#[tokio::test]
async fn a_2xx_that_is_not_a_messages_response_is_a_protocol_error_without_retry() {
    let reply = Reply {
        status: 200,
        exception: None,
        body: json!({"id": "x", "content": "secret words"}).to_string(),
    };
    let (url, script) = serve(vec![reply]).await;
    let error = model_at(&url, fast())
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
async fn a_hung_model_gets_one_attempt_cut_at_the_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    let call = model_at(&url, RetryPolicy::default());
    let deadline = Deadline::after(Duration::from_millis(1_500));
    let outcome = tokio::time::timeout(Duration::from_secs(20), call.create(&request(), deadline))
        .await
        .expect("the model call ran past its deadline");
    assert_eq!(outcome.unwrap_err(), ModelError::Timeout);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error_after_the_retries() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let error = model_at(&url, fast())
        .create(&request(), minute())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ModelError::Connection(_)),
        "expected a connection error, got {error:?}"
    );
}
