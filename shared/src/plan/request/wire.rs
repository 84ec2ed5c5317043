//! The request's wire shape: the body of `POST /v1/messages` and its parts (tool
//! definitions, system blocks, messages, breakpoints, thinking), serialised field
//! by field in declaration order.

use serde::{Deserialize, Serialize};

use super::CacheTtl;
use crate::domain::{ContentBlock, Role};

/// A tool the model may call, as the API expects it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// `^[a-zA-Z0-9_-]{1,64}$`, unique in a request.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's input.
    pub input_schema: serde_json::Value,
}

/// A prompt-caching breakpoint: `{"type": "ephemeral"}` (five minutes), or
/// `{"type": "ephemeral", "ttl": "1h"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheControl {
    /// Always `ephemeral`.
    #[serde(rename = "type")]
    pub kind: CacheKind,
    /// The entry's lifetime; omitted for five minutes (the API's default), so a
    /// five-minute request is byte for byte what it was before `ttl` existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<CacheTtl>,
}

/// The only cache type the API has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheKind {
    /// Short-lived cache entry.
    Ephemeral,
}

impl CacheControl {
    /// The default 5-minute breakpoint.
    pub const EPHEMERAL: CacheControl = CacheControl {
        kind: CacheKind::Ephemeral,
        ttl: None,
    };

    /// A one-hour breakpoint.
    pub const ONE_HOUR: CacheControl = CacheControl {
        kind: CacheKind::Ephemeral,
        ttl: Some(CacheTtl::OneHour),
    };

    /// A breakpoint with lifetime `ttl` (five minutes without a `ttl` field).
    pub fn with_ttl(ttl: CacheTtl) -> CacheControl {
        match ttl {
            CacheTtl::FiveMinutes => CacheControl::EPHEMERAL,
            CacheTtl::OneHour => CacheControl::ONE_HOUR,
        }
    }

    /// The entry's lifetime.
    pub fn lifetime(&self) -> CacheTtl {
        self.ttl.unwrap_or_default()
    }
}

/// A block of the `system` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemBlock {
    /// Always `text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text.
    pub text: String,
    /// Breakpoint, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// A content block of a request, with its breakpoint if it carries one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestBlock {
    /// The block itself.
    #[serde(flatten)]
    pub block: ContentBlock,
    /// Breakpoint, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// A message of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestMessage {
    /// Author.
    pub role: Role,
    /// Blocks.
    pub content: Vec<RequestBlock>,
}

/// Extended thinking: `{"type": "enabled", "budget_tokens": N}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Thinking {
    /// The model thinks first, using up to `budget_tokens` of `max_tokens`.
    Enabled {
        /// At least 1,024, and less than `max_tokens`.
        budget_tokens: u32,
    },
    /// No thinking (the same as leaving the field out).
    Disabled,
}

impl Thinking {
    /// The budget, when thinking is on.
    pub fn budget(&self) -> Option<u32> {
        match self {
            Thinking::Enabled { budget_tokens } => Some(*budget_tokens),
            Thinking::Disabled => None,
        }
    }
}

/// The body of `POST /v1/messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// Model id.
    pub model: String,
    /// Output token budget (thinking included).
    pub max_tokens: u32,
    /// Extended thinking; omitted when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// Tool definitions; omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef>,
    /// How the model must use the tools (`{"type": "tool", "name": ...}` forces one:
    /// the structured-output style the facts job uses); omitted when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<serde_json::Value>,
    /// System blocks.
    #[serde(default)]
    pub system: Vec<SystemBlock>,
    /// The conversation, ending with a user message.
    pub messages: Vec<RequestMessage>,
}

impl ModelRequest {
    /// Number of blocks carrying `cache_control`.
    pub fn breakpoints(&self) -> usize {
        let system = self
            .system
            .iter()
            .filter(|b| b.cache_control.is_some())
            .count();
        let messages = self
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter(|b| b.cache_control.is_some())
            .count();
        system + messages
    }
}
