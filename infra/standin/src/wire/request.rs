//! A `POST /v1/messages` body as the API documents it, after the shorthands are
//! read (`system` or a message's `content` as a string become text blocks).
//!
//! The types serialise to the *canonical* JSON the stand-in counts and hashes
//! ([`crate::prompt`]): a block's own fields in the API's order, without its
//! `cache_control`, which is kept beside it ([`Block::cache_control`]).

use serde::Serialize;
use serde_json::Value;

/// A request body that has the API's shape (its rules are [`crate::rules`]').
#[derive(Debug, Clone, PartialEq)]
pub struct MessagesRequest {
    /// `model` (on Bedrock's route, the model id of the path).
    pub model: String,
    /// `max_tokens`, at least 1.
    pub max_tokens: u64,
    /// `system`, as text blocks.
    pub system: Vec<SystemBlock>,
    /// `messages`, as sent (not merged).
    pub messages: Vec<Message>,
    /// `tools`.
    pub tools: Vec<Tool>,
    /// `tool_choice` (`auto` when absent).
    pub tool_choice: ToolChoice,
    /// `thinking`, when sent.
    pub thinking: Option<Thinking>,
}

impl MessagesRequest {
    /// The thinking budget, when thinking is on.
    pub fn thinking_budget(&self) -> Option<u64> {
        match self.thinking {
            Some(Thinking::Enabled { budget_tokens }) => Some(budget_tokens),
            _ => None,
        }
    }
}

/// A message's author.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// `user`.
    User,
    /// `assistant`.
    Assistant,
}

impl Role {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// Lifetime of a cache entry: `cache_control.ttl`, `"5m"` (the default) or `"1h"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Ttl {
    /// Five minutes; a write costs 1.25× a base input token.
    #[default]
    FiveMinutes,
    /// One hour; a write costs 2×.
    OneHour,
}

impl Ttl {
    /// The lifetime, in milliseconds.
    pub fn ms(self) -> u64 {
        match self {
            Ttl::FiveMinutes => 5 * 60 * 1000,
            Ttl::OneHour => 60 * 60 * 1000,
        }
    }

    /// Reads the API's spelling.
    pub fn parse(text: &str) -> Option<Ttl> {
        match text {
            "5m" => Some(Ttl::FiveMinutes),
            "1h" => Some(Ttl::OneHour),
            _ => None,
        }
    }
}

/// A block of `system`: `{"type": "text", "text", "cache_control"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemBlock {
    /// Always `text`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The text.
    pub text: String,
    /// Its breakpoint's lifetime, when it carries `cache_control`.
    #[serde(skip)]
    pub cache_control: Option<Ttl>,
}

impl SystemBlock {
    /// A text block without a breakpoint.
    pub fn text(text: impl Into<String>) -> Self {
        SystemBlock {
            kind: "text",
            text: text.into(),
            cache_control: None,
        }
    }
}

/// `{"role", "content"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Its author.
    pub role: Role,
    /// Its blocks.
    pub content: Vec<Block>,
}

/// A content block of a message, with its breakpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The block.
    pub content: Content,
    /// Its breakpoint's lifetime, when it carries `cache_control`.
    pub cache_control: Option<Ttl>,
}

/// The content blocks a request may carry (images and documents are not
/// modelled: degrau sends none, and the stand-in refuses them rather than
/// pretending to read them).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// `{"type": "text", "text"}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type": "tool_use", "id", "name", "input"}` (assistant).
    ToolUse {
        /// The call's id.
        id: String,
        /// The tool called.
        name: String,
        /// Its input, an object.
        input: Value,
    },
    /// `{"type": "tool_result", "tool_use_id", "content"?, "is_error"?}` (user).
    ToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// The result, a string or text blocks (absent: nothing).
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<ToolResultContent>,
        /// Whether the tool failed.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// `{"type": "thinking", "thinking", "signature"}` (assistant, sent back).
    Thinking {
        /// The thinking text.
        thinking: String,
        /// The signature the API gave it.
        signature: String,
    },
    /// `{"type": "redacted_thinking", "data"}` (assistant, sent back).
    RedactedThinking {
        /// The sealed thinking.
        data: String,
    },
}

impl Content {
    /// The API's name of the block's type.
    pub fn kind(&self) -> &'static str {
        match self {
            Content::Text { .. } => "text",
            Content::ToolUse { .. } => "tool_use",
            Content::ToolResult { .. } => "tool_result",
            Content::Thinking { .. } => "thinking",
            Content::RedactedThinking { .. } => "redacted_thinking",
        }
    }

    /// True for `thinking` and `redacted_thinking` blocks.
    pub fn is_thinking(&self) -> bool {
        matches!(
            self,
            Content::Thinking { .. } | Content::RedactedThinking { .. }
        )
    }
}

/// `tool_result.content`: a string, or a list of text blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// A string.
    Text(String),
    /// Text blocks (`{"type": "text", "text"}`), kept as their texts.
    Blocks(Vec<TextBlock>),
}

impl ToolResultContent {
    /// The result as one text (blocks joined by newlines).
    pub fn text(&self) -> String {
        match self {
            ToolResultContent::Text(text) => text.clone(),
            ToolResultContent::Blocks(blocks) => blocks
                .iter()
                .map(|b| b.text.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// `{"type": "text", "text"}` inside a `tool_result`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextBlock {
    /// Always `text`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The text.
    pub text: String,
}

/// A tool definition: `{"name", "description"?, "input_schema", "cache_control"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    /// `^[a-zA-Z0-9_-]{1,64}$`, unique.
    pub name: String,
    /// What it does (empty when absent).
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
    /// Its breakpoint's lifetime, when it carries `cache_control`.
    #[serde(skip)]
    pub cache_control: Option<Ttl>,
}

/// `tool_choice`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// `{"type": "auto"}`: the model decides (the default).
    #[default]
    Auto,
    /// `{"type": "any"}`: the model must call some tool.
    Any,
    /// `{"type": "tool", "name"}`: the model must call this tool (the older
    /// structured-output idiom).
    Tool(String),
    /// `{"type": "none"}`: the model may not call tools.
    None,
}

/// `thinking`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// `{"type": "enabled", "budget_tokens"}`.
    Enabled {
        /// Tokens the model may think with, out of `max_tokens`.
        budget_tokens: u64,
    },
    /// `{"type": "disabled"}`.
    Disabled,
}
