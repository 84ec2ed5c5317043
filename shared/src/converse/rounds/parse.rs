//! A recorded round's body read: its top level and the Messages API's `usage` as
//! the API returns it, each message and content block of the kinds degrau stores,
//! an answer made sendable as `ask` makes its own.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::super::AskError;
use crate::domain::{ContentBlock, Message, Role};
use crate::plan::sendable::sendable;
use crate::usage::{CacheCreation, Usage};

use super::{MAX_USAGE_TOKENS, invalid};

/// The body's top level.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Body {
    pub(super) head: String,
    pub(super) messages: Vec<Value>,
    /// Absent or `null`: the client has none (its context is then estimated).
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
}

/// `usage` as the Messages API returns it: the four counts (the two cache counts
/// optional, `null` meaning 0) and `cache_creation`'s split by entry lifetime when
/// present. Whatever else the API reports (`service_tier`, `server_tool_use`, and
/// what it adds next) is read past, not refused: a client passes the usage object
/// on as it got it.
#[derive(Deserialize)]
pub(super) struct WireUsage {
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    #[serde(default)]
    pub(super) cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_creation: Option<WireCacheCreation>,
}

/// `usage.cache_creation`: the cache writes by the lifetime of the entries written.
#[derive(Deserialize)]
pub(super) struct WireCacheCreation {
    #[serde(default)]
    pub(super) ephemeral_5m_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) ephemeral_1h_input_tokens: Option<u64>,
}

pub(super) fn usage(wire: &WireUsage) -> Result<Usage, AskError> {
    let cache_creation = wire.cache_creation.as_ref().map(|split| CacheCreation {
        ephemeral_5m_input_tokens: split.ephemeral_5m_input_tokens.unwrap_or(0),
        ephemeral_1h_input_tokens: split.ephemeral_1h_input_tokens.unwrap_or(0),
    });
    let usage = Usage {
        input_tokens: wire.input_tokens,
        output_tokens: wire.output_tokens,
        cache_read_input_tokens: wire.cache_read_input_tokens.unwrap_or(0),
        cache_creation_input_tokens: wire.cache_creation_input_tokens.unwrap_or(0),
        cache_creation,
    };
    let split = cache_creation.unwrap_or_default();
    let fields = [
        ("input_tokens", usage.input_tokens),
        ("output_tokens", usage.output_tokens),
        ("cache_read_input_tokens", usage.cache_read_input_tokens),
        (
            "cache_creation_input_tokens",
            usage.cache_creation_input_tokens,
        ),
        (
            "cache_creation.ephemeral_5m_input_tokens",
            split.ephemeral_5m_input_tokens,
        ),
        (
            "cache_creation.ephemeral_1h_input_tokens",
            split.ephemeral_1h_input_tokens,
        ),
    ];
    if let Some((name, value)) = fields.iter().find(|(_, v)| *v > MAX_USAGE_TOKENS) {
        return Err(invalid(format!(
            "usage.{name} is {value}; a usage count is at most {MAX_USAGE_TOKENS}"
        )));
    }
    // The split is of the writes the total counts: the API never reports one
    // that does not add up, so a usage that does was not the API's.
    if let Some(split) = cache_creation {
        let sum = split.ephemeral_5m_input_tokens + split.ephemeral_1h_input_tokens;
        if sum != usage.cache_creation_input_tokens {
            return Err(invalid(format!(
                "usage.cache_creation adds up to {sum} tokens but \
                 usage.cache_creation_input_tokens is {}; the split is of those writes",
                usage.cache_creation_input_tokens
            )));
        }
    }
    Ok(usage)
}

/// Reads message `index`: `{"role", "content"}`, the content a string (one text
/// block) or a list of blocks.
pub(super) fn parse_message(index: usize, value: &Value) -> Result<Message, AskError> {
    let at = format!("messages.{index}");
    let Value::Object(fields) = value else {
        return Err(invalid(format!(
            "{at}: a message is an object {{\"role\", \"content\"}}"
        )));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !["role", "content"].contains(&k.as_str()))
    {
        return Err(invalid(format!(
            "{at}: unknown field `{unknown}`; a message has `role` and `content`"
        )));
    }
    let role = match fields.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        _ => {
            return Err(invalid(format!(
                "{at}.role: must be \"user\" or \"assistant\""
            )));
        }
    };
    let content = match fields.get("content") {
        Some(Value::String(text)) => vec![ContentBlock::text(text.clone())],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .map(|(position, block)| parse_block(&format!("{at}.content.{position}"), block))
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(invalid(format!(
                "{at}.content: must be a string or a list of content blocks"
            )));
        }
    };
    if content.is_empty() {
        return Err(invalid(format!("{at}.content: a message needs a block")));
    }
    Ok(Message { role, content })
}

/// A model answer of the round as the API accepts it back ([`crate::plan::sendable`]):
/// a client records what the model sent (an empty text block beside a tool call,
/// say), and degrau stores what can be sent again, as it does for its own rounds.
pub(super) fn sendable_answer(message: Message) -> Message {
    match message.role {
        Role::Assistant => Message {
            role: Role::Assistant,
            content: sendable(message.content),
        },
        Role::User => message,
    }
}

/// The fields degrau stores of each block type besides `type`.
pub(super) fn block_fields(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "text" => &["text"],
        "tool_use" => &["id", "name", "input"],
        "tool_result" => &["tool_use_id", "content", "is_error"],
        "thinking" => &["thinking", "signature"],
        "redacted_thinking" => &["data"],
        _ => return None,
    })
}

/// Reads one block of a type degrau stores, as the Messages API and its SDKs
/// write it: the fields degrau stores are kept, the others read past (a text
/// block's `citations`, a `tool_use`'s `caller`, `cache_control`: degrau places
/// its breakpoints itself). A `null` field counts as absent, as an SDK's dump of a
/// block writes the fields it did not get. A `tool_result`'s `content` given as a
/// list of text blocks is stored as their text, one block a paragraph.
pub(super) fn parse_block(at: &str, value: &Value) -> Result<ContentBlock, AskError> {
    let Value::Object(fields) = value else {
        return Err(invalid(format!("{at}: a content block is an object")));
    };
    let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
    let stored = block_fields(kind).ok_or_else(|| {
        invalid(format!(
            "{at}.type: degrau stores `text`, `tool_use`, `tool_result`, `thinking` and \
             `redacted_thinking` blocks, not {}",
            if kind.is_empty() {
                "a block without a type".to_owned()
            } else {
                format!("`{kind}`")
            }
        ))
    })?;
    let mut kept: Map<String, Value> = fields
        .iter()
        .filter(|(name, field)| {
            (name.as_str() == "type" || stored.contains(&name.as_str())) && !field.is_null()
        })
        .map(|(name, field)| (name.clone(), field.clone()))
        .collect();
    if kind == "tool_result" {
        let text = tool_result_text(at, kept.get("content"))?;
        kept.insert("content".to_owned(), Value::String(text));
    }
    serde_json::from_value(Value::Object(kept)).map_err(|e| invalid(format!("{at}: {e}")))
}

/// A `tool_result`'s output as the text degrau stores: the string, or the text of
/// a list of text blocks joined by blank lines. Anything else (an image, a
/// document) is refused: degrau stores tool results as text.
pub(super) fn tool_result_text(at: &str, content: Option<&Value>) -> Result<String, AskError> {
    let refused = || {
        invalid(format!(
            "{at}.content: degrau stores a tool result as text: send `content` as a string \
             or a list of `text` blocks"
        ))
    };
    match content {
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|block| match (block.get("type"), block.get("text")) {
                (Some(Value::String(kind)), Some(Value::String(text))) if kind == "text" => {
                    Ok(text.as_str())
                }
                _ => Err(refused()),
            })
            .collect::<Result<Vec<&str>, _>>()
            .map(|texts| texts.join("\n\n")),
        Some(_) => Err(refused()),
    }
}
