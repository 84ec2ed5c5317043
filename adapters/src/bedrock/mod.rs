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
//! **Streaming** ([`Model::stream`]) goes through `InvokeModelWithResponseStream`
//! (`POST /model/{modelId}/invoke-with-response-stream`), with the same body: each
//! `chunk` event carries one Messages API event's JSON, read by the assembler the
//! Anthropic adapter uses ([`crate::model_stream`]). Retried like `InvokeModel`,
//! but only while no piece has reached the caller; an exception in the stream
//! (`throttlingException`, `serviceUnavailableException`, `internalServerException`,
//! `modelTimeoutException`, `validationException`, `modelStreamErrorException` with
//! the model's own status) maps as the same exception before the stream does.
//!
//! Logs carry only status, attempt, the request id and latency (the loop's), never
//! the request or Bedrock's error text.

use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_bedrockruntime::config::http::HttpResponse;
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::RequestId;
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::ResponseStream;
use aws_sdk_bedrockruntime::types::error::ResponseStreamError;
use serde_json::Value;

use degrau::deadline::Deadline;
use degrau::model::{DeltaSink, Model, ModelError, ModelResponse};
use degrau::plan::request::ModelRequest;

use crate::model_stream::{Assembler, Step};
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

    /// One streamed attempt within `timeout`: each chunk's event read as it
    /// arrives, each piece handed to `on_delta` (noted in `delivered`: the attempt
    /// is then never retried).
    async fn stream_attempt(
        &self,
        model: &str,
        body: Vec<u8>,
        timeout: Duration,
        on_delta: DeltaSink<'_>,
        delivered: &AtomicBool,
    ) -> Result<Answered<ModelResponse>, Failure> {
        let work = async {
            let mut output = self
                .client
                .invoke_model_with_response_stream()
                .model_id(model)
                .content_type("application/json")
                .accept("application/json")
                .body(Blob::new(body))
                .send()
                .await
                .map_err(classify)?;
            let request_id = output.request_id().map(str::to_owned);
            let mut assembler = Assembler::default();
            loop {
                let event = match output.body.recv().await {
                    Ok(Some(ResponseStream::Chunk(part))) => part.bytes,
                    Ok(Some(_)) => continue,
                    Ok(None) => {
                        let early = "the stream ended before its message_stop".to_owned();
                        return Err(failure(
                            ModelError::Connection(early),
                            true,
                            Some(200),
                            request_id,
                        ));
                    }
                    Err(error) => return Err(classify_in_stream(error, request_id)),
                };
                let Some(event) = event else { continue };
                match assembler.event(event.as_ref()) {
                    Ok(Step::Nothing) => {}
                    Ok(Step::Delta(delta)) => {
                        delivered.store(true, Ordering::SeqCst);
                        on_delta(delta);
                    }
                    Ok(Step::Done(value)) => {
                        return Ok(Answered {
                            value: *value,
                            status: 200,
                            request_id,
                        });
                    }
                    Err(error) => {
                        let retry = retryable(&error);
                        return Err(failure(error, retry, Some(200), request_id));
                    }
                }
            }
        };
        let outcome = match tokio::time::timeout(timeout, work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(failure(ModelError::Timeout, true, None, None)),
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

    async fn stream(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let body = invoke_body(request)?;
        let delivered = AtomicBool::new(false);
        with_retries(&self.policy, deadline, |timeout| {
            self.stream_attempt(&request.model, body.clone(), timeout, on_delta, &delivered)
        })
        .await
    }
}

/// Whether another attempt may cure an error met inside a stream.
fn retryable(error: &ModelError) -> bool {
    matches!(
        error,
        ModelError::Unavailable { .. }
            | ModelError::RateLimited { .. }
            | ModelError::Timeout
            | ModelError::Connection(_)
    )
}

/// An exception frame in the stream (or a stream that could not be read) as a
/// [`ModelError`], mapped as the same exception before the stream is; a
/// `modelStreamErrorException` by the model's own status when it says one.
fn classify_in_stream<R>(
    error: SdkError<ResponseStreamError, R>,
    request_id: Option<String>,
) -> Failure
where
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match error {
        SdkError::ServiceError(context) => {
            let error = context.into_err();
            let message = error.message().unwrap_or_default().to_owned();
            let status = match &error {
                ResponseStreamError::ThrottlingException(_) => 429,
                ResponseStreamError::ServiceUnavailableException(_) => 503,
                ResponseStreamError::ModelTimeoutException(_) => 408,
                ResponseStreamError::ValidationException(_) => 400,
                ResponseStreamError::ModelStreamErrorException(e) => e
                    .original_status_code()
                    .and_then(|code| u16::try_from(code).ok())
                    .unwrap_or(500),
                _ => 500,
            };
            let (error, retry) = service_error(error.code(), status, message);
            failure(error, retry, Some(200), request_id)
        }
        SdkError::TimeoutError(_) => failure(ModelError::Timeout, true, None, request_id),
        // A frame that does not decode, or a connection that broke mid-stream.
        other => {
            let text = DisplayErrorContext(&other).to_string();
            failure(ModelError::Connection(text), true, Some(200), request_id)
        }
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

/// A failed `InvokeModel` (or `InvokeModelWithResponseStream`, before its stream)
/// as a [`ModelError`], and whether another attempt may succeed.
pub fn classify<E>(error: SdkError<E, HttpResponse>) -> Failure
where
    E: ProvideErrorMetadata + RequestId + Error + Send + Sync + 'static,
{
    match error {
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            let error = context.into_err();
            let request_id = error.request_id().map(str::to_owned);
            let message = error.message().unwrap_or_default().to_owned();
            let (error, retry) = service_error(error.code(), status, message);
            failure(error, retry, Some(status), request_id)
        }
        other => without_answer(&other),
    }
}

/// A failure without a complete answer from Bedrock. The SDK's text of it holds no
/// request content.
fn without_answer<E>(error: &SdkError<E, HttpResponse>) -> Failure
where
    E: Error + Send + Sync + 'static,
{
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

/// Bedrock's modelled exceptions by their code (the SDK reads it from
/// `x-amzn-ErrorType`, or from an exception frame's `:exception-type`), and the
/// others (a `modelStreamErrorException` too) by their status.
fn service_error(code: Option<&str>, status: u16, message: String) -> (ModelError, bool) {
    match code.unwrap_or_default() {
        "ValidationException" if is_too_long(&message) => {
            (ModelError::PromptTooLong { message }, false)
        }
        "ValidationException" | "ResourceNotFoundException" => {
            (ModelError::InvalidRequest { message }, false)
        }
        "AccessDeniedException" => (ModelError::Authentication { status }, false),
        "ThrottlingException" => (ModelError::RateLimited { retry_after: None }, true),
        // A quota is not cured by waiting a few seconds (as a spend limit is not).
        "ServiceQuotaExceededException" => (ModelError::RateLimited { retry_after: None }, false),
        "ModelTimeoutException" => (ModelError::Timeout, true),
        "ModelNotReadyException" | "ServiceUnavailableException" | "InternalServerException" => {
            (ModelError::Unavailable { status }, true)
        }
        // The model failed on this request (424): the same request fails again.
        "ModelErrorException" => (ModelError::Unavailable { status }, false),
        _ => match status {
            401 | 403 => (ModelError::Authentication { status }, false),
            408 => (ModelError::Timeout, true),
            429 => (ModelError::RateLimited { retry_after: None }, true),
            500.. => (ModelError::Unavailable { status }, true),
            400 if is_too_long(&message) => (ModelError::PromptTooLong { message }, false),
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
mod tests;
