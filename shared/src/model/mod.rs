//! The `Model` port: one call to the Messages API. Its adapter (crate
//! `degrau-adapters`, `anthropic/`) speaks HTTP to the real API, or to the offline
//! stand-in through `ANTHROPIC_BASE_URL`; `scripted` (behind the `test-util`
//! feature) plays a script in unit tests and refuses what the real API refuses.

#[cfg(any(test, feature = "test-util"))]
pub mod scripted;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Message, Role};
use crate::plan::request::ModelRequest;
use crate::usage::Usage;

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A final answer.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output budget ran out.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// A long server-side turn paused; send it back to continue.
    PauseTurn,
    /// The model declined.
    Refusal,
    /// The context window filled up during generation.
    ModelContextWindowExceeded,
    /// A reason this version does not know.
    #[serde(other)]
    Other,
}

/// A Messages API response (the fields degrau uses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// Response id.
    pub id: String,
    /// The model that answered.
    pub model: String,
    /// Always `assistant`.
    pub role: Role,
    /// The answer's blocks.
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    pub stop_reason: Option<StopReason>,
    /// Token usage, with prompt-caching fields.
    pub usage: Usage,
}

impl ModelResponse {
    /// The answer as a message to append to the conversation.
    pub fn message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self.content.clone(),
        }
    }
}

/// A failed model call, by what the caller should do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// 400 `invalid_request_error` other than an overflow: a bug in the request; the
    /// API's text is kept for the logs.
    #[error("the model API refused the request: {message}")]
    InvalidRequest {
        /// The API's error text.
        message: String,
    },
    /// 400 "prompt is too long": the caller may cut the window once and retry.
    #[error("the prompt is too long for the model: {message}")]
    PromptTooLong {
        /// The API's error text.
        message: String,
    },
    /// 401/403: the key is wrong or lacks permission.
    #[error("the model API refused the credentials ({status})")]
    Authentication {
        /// HTTP status.
        status: u16,
    },
    /// 429 after the retries.
    #[error("the model API is rate limiting")]
    RateLimited {
        /// Seconds the API asked to wait, when it said.
        retry_after: Option<u64>,
    },
    /// 529, 500 or another 5xx after the retries.
    #[error("the model API is unavailable ({status})")]
    Unavailable {
        /// HTTP status.
        status: u16,
    },
    /// No complete answer within the timeout.
    #[error("the model API did not answer in time")]
    Timeout,
    /// Connection refused, reset or dropped mid-response, after the retries.
    #[error("could not reach the model API: {0}")]
    Connection(String),
    /// A 2xx answer that is not a Messages API response, or another status.
    #[error("unexpected answer from the model API: {0}")]
    Protocol(String),
}

/// By how many tokens a prompt the API refused as too long was over, from its text
/// (`prompt is too long: 210000 tokens > 200000 maximum`); `None` when the text says
/// no numbers (Bedrock's "Input is too long", say).
pub fn prompt_over_by(message: &str) -> Option<u64> {
    let (_, sizes) = message.split_once("too long:")?;
    let (size, rest) = sizes.trim().split_once(" tokens > ")?;
    let maximum = rest.split_whitespace().next()?;
    let (size, maximum): (u64, u64) = (size.trim().parse().ok()?, maximum.parse().ok()?);
    size.checked_sub(maximum)
}

impl ModelError {
    /// A short, stable name of the error's kind, for metrics and for logs that must
    /// not carry its text (the API's text may quote the request).
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::InvalidRequest { .. } => "invalid_request",
            ModelError::PromptTooLong { .. } => "prompt_too_long",
            ModelError::Authentication { .. } => "authentication",
            ModelError::RateLimited { .. } => "rate_limited",
            ModelError::Unavailable { .. } => "unavailable",
            ModelError::Timeout => "timeout",
            ModelError::Connection(_) => "connection",
            ModelError::Protocol(_) => "protocol",
        }
    }
}

/// A piece of a streamed answer, as the model writes it (the Messages API's
/// `content_block_start` and `content_block_delta` events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelDelta {
    /// Text appended to the answer's text block `index`.
    Text {
        /// The block's position in the answer.
        index: usize,
        /// The new text.
        text: String,
    },
    /// The answer's block `index` is a tool call. Its input arrives in pieces the
    /// adapter assembles: the call is whole only in the returned response.
    ToolUse {
        /// The block's position in the answer.
        index: usize,
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// Thinking text appended to block `index` (never shown to a contact).
    Thinking {
        /// The block's position in the answer.
        index: usize,
        /// The new thinking text.
        text: String,
    },
}

/// Where a streamed call hands its pieces, as they arrive.
pub type DeltaSink<'a> = &'a (dyn Fn(ModelDelta) + Send + Sync);

/// The pieces of a whole answer, one per block: what a model that cannot stream
/// hands over once it has answered.
pub fn deltas_of(response: &ModelResponse) -> Vec<ModelDelta> {
    response
        .content
        .iter()
        .enumerate()
        .filter_map(|(index, block)| match block {
            ContentBlock::Text { text } => Some(ModelDelta::Text {
                index,
                text: text.clone(),
            }),
            ContentBlock::ToolUse { id, name, .. } => Some(ModelDelta::ToolUse {
                index,
                id: id.clone(),
                name: name.clone(),
            }),
            ContentBlock::Thinking { thinking, .. } => Some(ModelDelta::Thinking {
                index,
                text: thinking.clone(),
            }),
            ContentBlock::RedactedThinking { .. } | ContentBlock::ToolResult { .. } => None,
        })
        .collect()
}

/// One call to the model.
#[async_trait]
pub trait Model: Send + Sync {
    /// Sends one request and returns the model's answer, within `deadline`: every
    /// attempt, retry and wait of the call ends by then.
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError>;

    /// Sends one request as a stream: `on_delta` gets the answer's pieces as they
    /// arrive, and the whole answer is returned as [`Model::create`] returns it,
    /// with the streamed usage. The call is retried only before its first piece
    /// reached `on_delta`; after that, a failure (an `error` event, a dropped
    /// connection) is returned as it is, never retried.
    ///
    /// This default, for a model that cannot stream, answers with `create` and
    /// hands over the answer's blocks whole.
    async fn stream(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let response = self.create(request, deadline).await?;
        for delta in deltas_of(&response) {
            on_delta(delta);
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overflow_is_read_from_the_apis_text_when_it_says_it() {
        assert_eq!(
            prompt_over_by("prompt is too long: 210000 tokens > 200000 maximum"),
            Some(10_000)
        );
        assert_eq!(
            prompt_over_by("Input is too long for requested model."),
            None
        );
        assert_eq!(
            prompt_over_by("prompt is too long: many tokens > 5 maximum"),
            None
        );
    }
}
