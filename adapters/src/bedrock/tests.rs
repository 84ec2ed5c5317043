//! The Bedrock adapter against a scripted server on loopback that answers as
//! Bedrock Runtime does (its exceptions in `x-amzn-errortype`), called with dummy
//! credentials as the e2e stack's; and the `Model` contract on that wire
//! (`contract::…`). What the contract covers is not repeated here.

use super::*;
use degrau::domain::{ContentBlock, Role};
use degrau::plan::request::{CacheControl, RequestBlock, RequestMessage, SystemBlock};

use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use serde_json::json;

use crate::model_contract::{Canned, Fault, Wire, minute, serve};

/// The dummy secret access key the requests are signed with.
const SECRET_KEY: &str = "bedrock-test-secret-0123456789";

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

/// A client of `url` with dummy credentials, as the e2e stack's.
fn model_at(url: &str, policy: RetryPolicy) -> BedrockModel {
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(url)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", SECRET_KEY, None, None, "test"))
        .build();
    BedrockModel::new(config, policy)
}

/// Retries at once.
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
async fn a_call_is_signed_and_goes_to_the_models_path_with_the_bedrock_body() {
    let (url, script) = serve(vec![ok()]).await;
    let response = model_at(&url, fast()).create(&request(), minute()).await;
    assert!(response.is_ok(), "{response:?}");
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

/// Bedrock's exceptions beyond the contract's faults: each maps to its
/// `ModelError`, retried only when another attempt may succeed.
#[tokio::test]
async fn bedrocks_other_exceptions_map_to_the_model_errors_and_retry_only_when_worth_it() {
    let cases = [
        (
            408,
            "ModelTimeoutException",
            "Model timed out",
            ModelError::Timeout,
            3,
        ),
        (
            503,
            "ServiceUnavailableException",
            "Unavailable",
            ModelError::Unavailable { status: 503 },
            3,
        ),
        (
            429,
            "ModelNotReadyException",
            "Not ready",
            ModelError::Unavailable { status: 429 },
            3,
        ),
        (
            400,
            "ValidationException",
            "Input is too long for requested model.",
            ModelError::PromptTooLong {
                message: "Input is too long for requested model.".into(),
            },
            1,
        ),
        (
            403,
            "UnrecognizedClientException",
            "bad token",
            ModelError::Authentication { status: 403 },
            1,
        ),
        (
            404,
            "ResourceNotFoundException",
            "no such model",
            ModelError::InvalidRequest {
                message: "no such model".into(),
            },
            1,
        ),
        (
            400,
            "ServiceQuotaExceededException",
            "quota",
            ModelError::RateLimited { retry_after: None },
            1,
        ),
        (
            424,
            "ModelErrorException",
            "model failed",
            ModelError::Unavailable { status: 424 },
            1,
        ),
    ];
    for (status, name, message, expected, attempts) in cases {
        let (url, script) = serve(vec![exception(status, name, message)]).await;
        let error = model_at(&url, fast())
            .create(&request(), minute())
            .await
            .unwrap_err();
        assert_eq!(error, expected, "{name}");
        assert_eq!(script.requests(), attempts, "{name}");
    }
}

/// A 200 answer, as Bedrock sends it: the Messages API's response.
fn ok() -> Canned {
    Bedrock::answer(json!({
        "id": "msg_bdrk_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [{"type": "text", "text": "Hi."}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 40}
    }))
}

/// Bedrock's error answer: the exception's name in `x-amzn-errortype`, its text
/// in the body.
fn exception(status: u16, name: &str, message: &str) -> Canned {
    Canned {
        status,
        headers: vec![
            ("x-amzn-requestid", "req-bdrk".to_owned()),
            (
                "x-amzn-errortype",
                format!("{name}:http://internal.amazon.com/"),
            ),
        ],
        body: json!({ "message": message }).to_string(),
    }
}

/// Bedrock Runtime's wire, for the `Model` contract.
struct Bedrock;

impl Wire for Bedrock {
    type M = BedrockModel;
    const CREDENTIAL: &'static str = SECRET_KEY;

    fn answer(body: Value) -> Canned {
        Canned {
            status: 200,
            headers: vec![("x-amzn-requestid", "req-bdrk".to_owned())],
            body: body.to_string(),
        }
    }

    fn fault(fault: Fault, message: &str) -> Canned {
        match fault {
            Fault::Throttled => exception(429, "ThrottlingException", message),
            Fault::ServerError => exception(500, "InternalServerException", message),
            Fault::InvalidRequest => exception(400, "ValidationException", message),
            Fault::Denied => exception(403, "AccessDeniedException", message),
        }
    }

    fn model(url: &str, policy: RetryPolicy) -> BedrockModel {
        model_at(url, policy)
    }
}

mod contract {
    crate::model_contract::model_contract!(super::Bedrock);
}

#[tokio::test]
async fn a_stream_goes_to_the_streaming_path_signed_with_the_same_body() {
    let (url, script) = serve(vec![Canned {
        status: 400,
        headers: vec![(
            "x-amzn-errortype",
            "ValidationException:http://internal".into(),
        )],
        body: json!({"message": "no"}).to_string(),
    }])
    .await;
    let outcome = model_at(&url, fast())
        .stream(&request(), minute(), &|_| {})
        .await;
    assert_eq!(
        outcome.unwrap_err(),
        ModelError::InvalidRequest {
            message: "no".into()
        }
    );
    let seen = script.seen.lock().unwrap();
    assert_eq!(
        seen[0].path,
        "/model/us.anthropic.claude-sonnet-5-v1%3A0/invoke-with-response-stream"
    );
    assert!(
        seen[0].headers["authorization"]
            .to_str()
            .unwrap()
            .starts_with("AWS4-HMAC-SHA256 ")
    );
    assert_eq!(seen[0].body, invoke_body(&request()).unwrap());
}
