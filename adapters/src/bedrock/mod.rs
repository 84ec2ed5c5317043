//! The `Model` port on Claude through Amazon Bedrock: Bedrock Runtime's
//! `InvokeModel` (`POST /model/{modelId}/invoke`) through `aws-sdk-bedrockruntime`,
//! signed with the function's IAM role (SigV4, by the SDK). No API key.
//!
//! **The body** is the Messages API's, less `model` (the model id or inference
//! profile goes in the path) and plus `"anthropic_version": "bedrock-2023-05-31"`
//! ([`invoke_body`]); `cache_control`, tools, thinking and the rest are unchanged.
//! The answer is the Messages API's response, read by the same type: usage with its
//! cache fields, and the stop reason.
//!
//! **Retries and the deadline** are the Anthropic adapter's: the shared loop of
//! [`crate::retry`] decides, with the SDK's own retries turned off (they would
//! spend the budget unseen), and each attempt is cut at the timeout the loop gives
//! it. Bedrock's errors map onto the same [`ModelError`] variants ([`classify`]):
//! throttling, a model not ready, a model timeout, an internal error or an
//! unavailable service are retried; a validation error ("prompt is too long" or
//! Bedrock's "Input is too long" is [`ModelError::PromptTooLong`]), denied access, an
//! unknown model or an exceeded quota are not. Bedrock sends no `retry-after`, so
//! the wait is always the backoff.
//!
//! Logs carry only status, attempt, the request id and latency (the loop's), never
//! the request or Bedrock's error text.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_bedrockruntime::config::http::HttpResponse;
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::RequestId;
use aws_sdk_bedrockruntime::operation::invoke_model::InvokeModelError;
use aws_sdk_bedrockruntime::primitives::Blob;
use serde_json::Value;

use degrau::deadline::Deadline;
use degrau::model::{Model, ModelError, ModelResponse};
use degrau::request::ModelRequest;

use crate::retry::{Answered, Failure, RetryPolicy, with_retries};

/// The `anthropic_version` Claude models on Bedrock take in the body.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// Longest wait for a TCP/TLS connection to Bedrock Runtime.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Claude through Bedrock Runtime. Build it once per process and share it.
#[derive(Debug, Clone)]
pub struct BedrockModel {
    client: aws_sdk_bedrockruntime::Client,
    policy: RetryPolicy,
}

impl BedrockModel {
    /// A model on a client built from `config` (endpoint, region, credentials), with
    /// the SDK's retries turned off and a connect timeout set: the `policy` decides
    /// every retry and every attempt's time.
    pub fn new(config: aws_sdk_bedrockruntime::Config, policy: RetryPolicy) -> Self {
        let config = config
            .to_builder()
            .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_sdk_bedrockruntime::config::timeout::TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .build(),
            )
            .build();
        BedrockModel {
            client: aws_sdk_bedrockruntime::Client::from_conf(config),
            policy,
        }
    }

    /// One attempt within `timeout`.
    async fn attempt(
        &self,
        model: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Answered<ModelResponse>, Failure> {
        let call = self
            .client
            .invoke_model()
            .model_id(model)
            .content_type("application/json")
            .accept("application/json")
            .body(Blob::new(body))
            .send();
        let output = match tokio::time::timeout(timeout, call).await {
            Err(_) => return Err(failure(ModelError::Timeout, true, None, None)),
            Ok(Err(error)) => return Err(classify(error)),
            Ok(Ok(output)) => output,
        };
        let request_id = output.request_id().map(str::to_owned);
        match serde_json::from_slice::<ModelResponse>(output.body().as_ref()) {
            Ok(value) => Ok(Answered {
                value,
                status: 200,
                request_id,
            }),
            Err(e) => Err(failure(
                ModelError::Protocol(format!(
                    "a 200 answer is not a Messages API response: {} at line {} column {}",
                    json_error_kind(&e),
                    e.line(),
                    e.column()
                )),
                false,
                Some(200),
                request_id,
            )),
        }
    }
}

#[async_trait]
impl Model for BedrockModel {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        let body = invoke_body(request)?;
        with_retries(&self.policy, deadline, |timeout| {
            self.attempt(&request.model, body.clone(), timeout)
        })
        .await
    }
}

/// The `InvokeModel` body of a request: its Messages API JSON less `model`, plus
/// `"anthropic_version": "bedrock-2023-05-31"`; everything else unchanged.
pub fn invoke_body(request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
    let encoding = |e: serde_json::Error| ModelError::InvalidRequest {
        message: format!(
            "the request cannot be encoded as JSON: {}",
            json_error_kind(&e)
        ),
    };
    let mut value = serde_json::to_value(request).map_err(encoding)?;
    let Some(object) = value.as_object_mut() else {
        return Err(ModelError::InvalidRequest {
            message: "the request is not a JSON object".to_owned(),
        });
    };
    object.remove("model");
    object.insert(
        "anthropic_version".to_owned(),
        Value::String(BEDROCK_ANTHROPIC_VERSION.to_owned()),
    );
    serde_json::to_vec(&value).map_err(encoding)
}

/// Whether a validation error's text says the prompt does not fit the model: the
/// Messages API's "prompt is too long", or Bedrock's own "Input is too long".
fn is_too_long(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("prompt is too long") || lower.contains("input is too long")
}

fn failure(
    error: ModelError,
    retry: bool,
    status: Option<u16>,
    request_id: Option<String>,
) -> Failure {
    Failure {
        error,
        retry,
        retry_after: None,
        status,
        request_id,
    }
}

/// A failed `InvokeModel` as a [`ModelError`], and whether another attempt may
/// succeed.
pub fn classify(error: SdkError<InvokeModelError, HttpResponse>) -> Failure {
    match error {
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            let error = context.into_err();
            let request_id = error.request_id().map(str::to_owned);
            let message = error.message().unwrap_or_default().to_owned();
            let (error, retry) = service_error(&error, status, message);
            failure(error, retry, Some(status), request_id)
        }
        other => without_answer(&other),
    }
}

/// A failure without a complete answer from Bedrock. The SDK's text of it holds no
/// request content.
fn without_answer(error: &SdkError<InvokeModelError, HttpResponse>) -> Failure {
    let text = || DisplayErrorContext(error).to_string();
    match error {
        SdkError::TimeoutError(_) => failure(ModelError::Timeout, true, None, None),
        SdkError::DispatchFailure(dispatch) if dispatch.is_timeout() => {
            failure(ModelError::Timeout, true, None, None)
        }
        // A request the SDK could not send (no credentials, say) will not be sent
        // next time either; a refused or reset connection may.
        SdkError::DispatchFailure(dispatch) => failure(
            ModelError::Connection(text()),
            !dispatch.is_user(),
            None,
            None,
        ),
        // An answer cut off or unreadable: a fresh connection may do better.
        SdkError::ResponseError(response) => {
            let status = response.raw().status().as_u16();
            failure(ModelError::Connection(text()), true, Some(status), None)
        }
        _ => failure(ModelError::Connection(text()), false, None, None),
    }
}

/// Bedrock's modelled exceptions, and the others by their status.
fn service_error(error: &InvokeModelError, status: u16, message: String) -> (ModelError, bool) {
    use InvokeModelError as E;
    match error {
        E::ValidationException(_) if is_too_long(&message) => {
            (ModelError::PromptTooLong { message }, false)
        }
        E::ValidationException(_) | E::ResourceNotFoundException(_) => {
            (ModelError::InvalidRequest { message }, false)
        }
        E::AccessDeniedException(_) => (ModelError::Authentication { status }, false),
        E::ThrottlingException(_) => (ModelError::RateLimited { retry_after: None }, true),
        // A quota is not cured by waiting a few seconds (as a spend limit is not).
        E::ServiceQuotaExceededException(_) => {
            (ModelError::RateLimited { retry_after: None }, false)
        }
        E::ModelTimeoutException(_) => (ModelError::Timeout, true),
        E::ModelNotReadyException(_)
        | E::ServiceUnavailableException(_)
        | E::InternalServerException(_) => (ModelError::Unavailable { status }, true),
        // The model failed on this request (424): the same request fails again.
        E::ModelErrorException(_) => (ModelError::Unavailable { status }, false),
        _ => match status {
            401 | 403 => (ModelError::Authentication { status }, false),
            408 => (ModelError::Timeout, true),
            429 => (ModelError::RateLimited { retry_after: None }, true),
            500.. => (ModelError::Unavailable { status }, true),
            400..=499 => (ModelError::InvalidRequest { message }, false),
            _ => (
                ModelError::Protocol(format!("status {status}: {message}")),
                false,
            ),
        },
    }
}

/// The class of a JSON error, without its text (which may quote the body).
fn json_error_kind(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "an I/O error",
        serde_json::error::Category::Syntax => "a syntax error",
        serde_json::error::Category::Data => "a missing or mistyped field",
        serde_json::error::Category::Eof => "an early end",
    }
}

#[cfg(test)]
mod tests {
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
        let outcome =
            tokio::time::timeout(Duration::from_secs(20), call.create(&request(), deadline))
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
}
