//! What the stand-in answers to `POST /v1/messages`: `{"id", "type": "message",
//! "role": "assistant", "model", "content", "stop_reason", "stop_sequence",
//! "usage"}`, with `usage` as the API reports it, the creation split by lifetime
//! (`cache_creation`) included.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A successful answer's body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessagesResponse {
    /// `msg_…`.
    pub id: String,
    /// Always `message`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Always `assistant`.
    pub role: &'static str,
    /// The model that answered.
    pub model: String,
    /// The answer's blocks.
    pub content: Vec<ResponseBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// The stop sequence matched (the stand-in has none: always null).
    pub stop_sequence: Option<String>,
    /// Token counts.
    pub usage: Usage,
}

/// A block of an answer (also the shape of a scripted answer's blocks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ResponseBlock {
    /// `{"type": "text", "text"}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type": "tool_use", "id", "name", "input"}`.
    ToolUse {
        /// The call's id.
        id: String,
        /// The tool called.
        name: String,
        /// Its input.
        input: Value,
    },
    /// `{"type": "thinking", "thinking", "signature"}` (a scripted block may leave
    /// `signature` out: the stand-in signs it).
    Thinking {
        /// The thinking text.
        thinking: String,
        /// Its signature.
        #[serde(default)]
        signature: String,
    },
    /// `{"type": "redacted_thinking", "data"}` (a scripted block may leave `data`
    /// out: the stand-in seals one).
    RedactedThinking {
        /// The sealed thinking.
        #[serde(default)]
        data: String,
    },
}

impl ResponseBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ResponseBlock::Text { text: text.into() }
    }

    /// A `tool_use` block.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        ResponseBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }
    }

    /// True for `thinking` and `redacted_thinking` blocks.
    pub fn is_thinking(&self) -> bool {
        matches!(
            self,
            ResponseBlock::Thinking { .. } | ResponseBlock::RedactedThinking { .. }
        )
    }
}

/// `stop_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A long server-side turn paused.
    PauseTurn,
    /// The model declined.
    Refusal,
    /// The context window filled up during generation.
    ModelContextWindowExceeded,
}

/// `usage`. `input_tokens` counts only what follows the last breakpoint, so the
/// context is the three input fields added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Input tokens written to the cache.
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the cache.
    pub cache_read_input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// The writes by lifetime (always reported).
    pub cache_creation: CacheCreation,
}

impl Usage {
    /// The context: every input token, cached or not.
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }
}

/// `usage.cache_creation`: cache writes by entry lifetime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCreation {
    /// Tokens written to five-minute entries.
    pub ephemeral_5m_input_tokens: u64,
    /// Tokens written to one-hour entries.
    pub ephemeral_1h_input_tokens: u64,
}
