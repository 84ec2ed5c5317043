//! The `messages` list: each message's role, and its content blocks read by
//! their `type`, each with its own fields.

use serde_json::{Map, Value};

use super::path::{Path, optional};
use crate::error::ApiError;
use crate::wire::{Block, Content, Message, Role, ToolResultContent, Ttl, request::TextBlock};

/// The block types the stand-in reads, in the order its error lists them.
const BLOCK_TYPES: &[&str] = &[
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
];

/// The `messages` list: each message's role and its content (a string, or blocks).
pub(super) fn messages(value: &Value) -> Result<Vec<Message>, ApiError> {
    let at = Path::root().field("messages");
    let mut messages = Vec::new();
    for (number, message) in at.array(value)?.iter().enumerate() {
        let at = at.index(number);
        let object = at.fields(message, &["role", "content"], &[])?;
        let role = match object["role"].as_str() {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => {
                return Err(at
                    .field("role")
                    .invalid("Input should be 'user' or 'assistant'"));
            }
        };
        let at = at.field("content");
        let content = match &object["content"] {
            Value::String(text) if text.is_empty() => Vec::new(),
            Value::String(text) => vec![Block {
                content: Content::Text { text: text.clone() },
                cache_control: None,
            }],
            value => at
                .array(value)?
                .iter()
                .enumerate()
                .map(|(index, block)| content_block(&at.index(index), block))
                .collect::<Result<_, _>>()?,
        };
        messages.push(Message { role, content });
    }
    Ok(messages)
}

/// One content block, by its `type`, each with its own fields.
fn content_block(at: &Path, value: &Value) -> Result<Block, ApiError> {
    let object = at.object(value)?;
    at.required(object, "type")?;
    let kind = at.field("type").string(&object["type"])?;
    let (fields, required) = block_fields(at, kind)?;
    for field in required {
        at.required(object, field)?;
    }
    at.only(object, fields)?;
    if let Some(caller) = object.get("caller").filter(|v| !v.is_null()) {
        let at = at.field("caller");
        at.required(at.object(caller)?, "type")?;
    }
    Ok(Block {
        content: block_content(at, kind, object)?,
        cache_control: at.cache_control(object)?,
    })
}

/// The fields a block of type `kind` may have, and those it must have.
type BlockFields = (&'static [&'static str], &'static [&'static str]);

/// The fields each block type takes (every one, then the required ones); an
/// unknown type is refused with the list of known ones.
fn block_fields(at: &Path, kind: &str) -> Result<BlockFields, ApiError> {
    Ok(match kind {
        "text" => (&["type", "text", "cache_control", "citations"], &["text"]),
        // `caller` is on every `tool_use` the API answers now (`{"type": "direct"}`,
        // the official SDKs' types), and taken back.
        "tool_use" => (
            &["type", "id", "name", "input", "cache_control", "caller"],
            &["id", "name", "input"],
        ),
        "tool_result" => (
            &[
                "type",
                "tool_use_id",
                "content",
                "is_error",
                "cache_control",
            ],
            &["tool_use_id"],
        ),
        "thinking" => (
            &["type", "thinking", "signature"],
            &["thinking", "signature"],
        ),
        "redacted_thinking" => (&["type", "data"], &["data"]),
        other => {
            let expected = BLOCK_TYPES
                .iter()
                .map(|t| format!("'{t}'"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(at.invalid(&format!(
                "Input tag '{other}' found using 'type' does not match any of the expected tags: {expected}"
            )));
        }
    })
}

/// A block's content, read by its type (`kind`, already checked).
fn block_content(at: &Path, kind: &str, object: &Map<String, Value>) -> Result<Content, ApiError> {
    let text = |field: &str| -> Result<String, ApiError> {
        Ok(at.field(field).string(&object[field])?.to_owned())
    };
    Ok(match kind {
        "text" => Content::Text {
            text: text("text")?,
        },
        "tool_use" => Content::ToolUse {
            id: text("id")?,
            name: text("name")?,
            input: {
                at.field("input").object(&object["input"])?;
                object["input"].clone()
            },
        },
        "tool_result" => Content::ToolResult {
            tool_use_id: text("tool_use_id")?,
            content: optional(object, "content", |v| {
                tool_result_content(&at.field("content"), v)
            })?,
            is_error: optional(object, "is_error", |v| at.field("is_error").boolean(v))?
                .unwrap_or(false),
        },
        "thinking" => Content::Thinking {
            thinking: text("thinking")?,
            signature: text("signature")?,
        },
        _ => Content::RedactedThinking {
            data: text("data")?,
        },
    })
}

/// `tool_result.content`: a string, or a list of text blocks.
fn tool_result_content(at: &Path, value: &Value) -> Result<ToolResultContent, ApiError> {
    if let Value::String(text) = value {
        return Ok(ToolResultContent::Text(text.clone()));
    }
    let blocks = text_blocks(at, value)?;
    Ok(ToolResultContent::Blocks(
        blocks
            .into_iter()
            // A breakpoint inside a result is read but not simulated.
            .map(|(text, _)| TextBlock { kind: "text", text })
            .collect(),
    ))
}

/// A list of `{"type": "text", "text", "cache_control"?}` blocks (`system`, a
/// `tool_result`'s `content`), as (text, breakpoint) pairs. The API takes images
/// in a `tool_result` too; degrau sends none, so the stand-in reads text only.
pub(super) fn text_blocks(
    at: &Path,
    value: &Value,
) -> Result<Vec<(String, Option<Ttl>)>, ApiError> {
    let mut blocks = Vec::new();
    for (index, block) in at.array(value)?.iter().enumerate() {
        let at = at.index(index);
        let object = at.fields(block, &["type", "text"], &["cache_control"])?;
        if object["type"].as_str() != Some("text") {
            return Err(at.field("type").invalid("Input should be 'text'"));
        }
        let text = at.field("text").string(&object["text"])?.to_owned();
        blocks.push((text, at.cache_control(object)?));
    }
    Ok(blocks)
}
