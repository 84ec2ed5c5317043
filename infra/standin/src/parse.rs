//! Reading a `POST /v1/messages` body the way the real API does: JSON, then every
//! object checked against the documented shape — required fields, types, and no
//! field the API does not know ("Extra inputs are not permitted") — into the
//! stand-in's own types ([`crate::wire`]); then the API's rules ([`crate::rules`])
//! and the signatures of thinking blocks sent back ([`crate::thinking::verify`]).
//! Every refusal is a 400 `invalid_request_error` whose message starts with the
//! JSON path, as the API's do.
//!
//! The API's shorthands are read too: `system` and a message's `content` as a
//! string, `tool_result.content` as a string or text blocks (or absent), a tool
//! without `description`. Bedrock's `InvokeModel` body is read by
//! [`from_bedrock`] first.

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::wire::{
    Block, Content, Message, MessagesRequest, Role, SystemBlock, Thinking, Tool, ToolChoice,
    ToolResultContent, Ttl, request::TextBlock,
};

/// A request that passed every check.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRequest {
    /// The request.
    pub request: MessagesRequest,
    /// Canonical JSON of the options that invalidate the cached messages part when
    /// they change (`tool_choice`, `output_config`, `thinking`), as sent.
    pub prelude: String,
}

/// The top-level fields the Messages API accepts.
const REQUEST_FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_k",
    "top_p",
    "service_tier",
];

/// The block types the stand-in reads, in the order its error lists them.
const BLOCK_TYPES: &[&str] = &[
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
];

/// Parses and checks a body; the error is the 400 the API would answer.
pub fn parse_request(body: &[u8]) -> Result<ParsedRequest, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid(format!(
            "There was an error parsing the body of your request as JSON: {e}"
        ))
    })?;
    parse_value(&value)
}

/// Checks a body already read as JSON (Bedrock's, once made a Messages body).
pub fn parse_value(value: &Value) -> Result<ParsedRequest, ApiError> {
    let Value::Object(object) = value else {
        return Err(ApiError::invalid(
            "body: Input should be a valid dictionary",
        ));
    };
    let at = Path::root();
    for field in ["model", "max_tokens", "messages"] {
        at.required(object, field)?;
    }
    at.only(object, REQUEST_FIELDS)?;
    check_options(object)?;
    let max_tokens = &object["max_tokens"];
    if max_tokens.as_i64().is_some_and(|n| n < 1) {
        return Err(ApiError::invalid(
            "max_tokens: Input should be greater than or equal to 1",
        ));
    }
    let request = MessagesRequest {
        model: at.field("model").string(&object["model"])?.to_owned(),
        max_tokens: at.field("max_tokens").integer(max_tokens)?,
        system: optional(object, "system", system)?.unwrap_or_default(),
        messages: messages(&object["messages"])?,
        tools: optional(object, "tools", tools)?.unwrap_or_default(),
        tool_choice: optional(object, "tool_choice", tool_choice)?.unwrap_or_default(),
        thinking: optional(object, "thinking", thinking)?,
    };
    let prelude = json!({
        "tool_choice": object.get("tool_choice"),
        "output_config": object.get("output_config"),
        "thinking": object.get("thinking"),
    })
    .to_string();
    crate::rules::check(&request)?;
    crate::thinking::verify(&request)?;
    Ok(ParsedRequest { request, prelude })
}

/// A field that may be absent (or null), read by `read` when present.
fn optional<T>(
    object: &Map<String, Value>,
    field: &str,
    read: impl FnOnce(&Value) -> Result<T, ApiError>,
) -> Result<Option<T>, ApiError> {
    object
        .get(field)
        .filter(|v| !v.is_null())
        .map(read)
        .transpose()
}

/// The options the stand-in does not act on, checked for their type only.
fn check_options(object: &Map<String, Value>) -> Result<(), ApiError> {
    let at = Path::root();
    for (field, value) in object.iter().filter(|(_, v)| !v.is_null()) {
        let at = at.field(field);
        match field.as_str() {
            "temperature" | "top_p" if !value.is_number() => {
                return Err(at.invalid("Input should be a valid number"));
            }
            "top_k" => {
                at.integer(value)?;
            }
            "stream" => {
                at.boolean(value)?;
            }
            "stop_sequences" => {
                for (index, sequence) in at.array(value)?.iter().enumerate() {
                    at.index(index).string(sequence)?;
                }
            }
            "service_tier" if !matches!(value.as_str(), Some("auto" | "standard_only")) => {
                return Err(at.invalid("Input should be 'auto' or 'standard_only'"));
            }
            "metadata" => {
                let metadata = at.object(value)?;
                at.only(metadata, &["user_id"])?;
            }
            "output_config" => {
                let config = at.object(value)?;
                at.only(config, &["format", "effort"])?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn system(value: &Value) -> Result<Vec<SystemBlock>, ApiError> {
    if let Value::String(text) = value {
        return Ok(if text.is_empty() {
            Vec::new()
        } else {
            vec![SystemBlock::text(text.clone())]
        });
    }
    let blocks = text_blocks(&Path::root().field("system"), value)?;
    Ok(blocks
        .into_iter()
        .map(|(text, cache_control)| SystemBlock {
            cache_control,
            ..SystemBlock::text(text)
        })
        .collect())
}

/// A list of `{"type": "text", "text", "cache_control"?}` blocks (`system`, a
/// `tool_result`'s `content`), as (text, breakpoint) pairs. The API takes images
/// in a `tool_result` too; degrau sends none, so the stand-in reads text only.
fn text_blocks(at: &Path, value: &Value) -> Result<Vec<(String, Option<Ttl>)>, ApiError> {
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

fn messages(value: &Value) -> Result<Vec<Message>, ApiError> {
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
    let (fields, required): (&[&str], &[&str]) = match kind {
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
    };
    for field in required {
        at.required(object, field)?;
    }
    at.only(object, fields)?;
    if let Some(caller) = object.get("caller").filter(|v| !v.is_null()) {
        let at = at.field("caller");
        at.required(at.object(caller)?, "type")?;
    }
    let text = |field: &str| -> Result<String, ApiError> {
        Ok(at.field(field).string(&object[field])?.to_owned())
    };
    let content = match kind {
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
    };
    Ok(Block {
        content,
        cache_control: at.cache_control(object)?,
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

fn tools(value: &Value) -> Result<Vec<Tool>, ApiError> {
    let at = Path::root().field("tools");
    let mut tools = Vec::new();
    for (index, tool) in at.array(value)?.iter().enumerate() {
        let at = at.index(index);
        let object = at.fields(
            tool,
            &["name", "input_schema"],
            &["type", "description", "cache_control"],
        )?;
        if let Some(kind) = object.get("type").filter(|v| !v.is_null())
            && kind.as_str() != Some("custom")
        {
            // Not a quoted API text: server tools exist, but degrau uses none.
            return Err(at
                .field("type")
                .invalid("Input should be 'custom' (the offline stand-in runs no server tools)"));
        }
        at.field("input_schema").object(&object["input_schema"])?;
        tools.push(Tool {
            name: at.field("name").string(&object["name"])?.to_owned(),
            description: optional(object, "description", |v| {
                at.field("description").string(v).map(str::to_owned)
            })?
            .unwrap_or_default(),
            input_schema: object["input_schema"].clone(),
            cache_control: at.cache_control(object)?,
        });
    }
    Ok(tools)
}

fn tool_choice(value: &Value) -> Result<ToolChoice, ApiError> {
    let at = Path::root().field("tool_choice");
    let object = at.object(value)?;
    at.required(object, "type")?;
    let parallel = "disable_parallel_tool_use";
    let choice = match object["type"].as_str() {
        Some("auto") => {
            at.field("auto").only(object, &["type", parallel])?;
            ToolChoice::Auto
        }
        Some("any") => {
            at.field("any").only(object, &["type", parallel])?;
            ToolChoice::Any
        }
        Some("none") => {
            at.field("none").only(object, &["type"])?;
            ToolChoice::None
        }
        Some("tool") => {
            let at = at.field("tool");
            at.required(object, "name")?;
            at.only(object, &["type", "name", parallel])?;
            ToolChoice::Tool(at.field("name").string(&object["name"])?.to_owned())
        }
        _ => {
            return Err(at
                .field("type")
                .invalid("Input should be 'auto', 'any', 'tool' or 'none'"));
        }
    };
    if let Some(flag) = object.get(parallel).filter(|v| !v.is_null()) {
        at.field(parallel).boolean(flag)?;
    }
    Ok(choice)
}

fn thinking(value: &Value) -> Result<Thinking, ApiError> {
    let at = Path::root().field("thinking");
    let object = at.object(value)?;
    at.required(object, "type")?;
    match object["type"].as_str() {
        Some("enabled") => {
            let at = at.field("enabled");
            at.required(object, "budget_tokens")?;
            at.only(object, &["type", "budget_tokens"])?;
            Ok(Thinking::Enabled {
                budget_tokens: at
                    .field("budget_tokens")
                    .integer(&object["budget_tokens"])?,
            })
        }
        Some("disabled") => {
            at.field("disabled").only(object, &["type"])?;
            Ok(Thinking::Disabled)
        }
        _ => Err(at
            .field("type")
            .invalid("Input should be 'enabled' or 'disabled'")),
    }
}

/// A JSON path, as the API's messages start (`messages.2.content.0`), and the
/// checks that name it.
#[derive(Debug, Clone)]
struct Path(String);

impl Path {
    fn root() -> Self {
        Path(String::new())
    }

    fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_owned())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    fn index(&self, index: usize) -> Self {
        self.field(&index.to_string())
    }

    fn invalid(&self, problem: &str) -> ApiError {
        ApiError::invalid(format!("{}: {problem}", self.0))
    }

    /// Refuses an absent field.
    fn required(&self, object: &Map<String, Value>, field: &str) -> Result<(), ApiError> {
        if object.contains_key(field) {
            Ok(())
        } else {
            Err(self.field(field).invalid("Field required"))
        }
    }

    /// Refuses a field the API does not know (the first, in key order).
    fn only(&self, object: &Map<String, Value>, known: &[&str]) -> Result<(), ApiError> {
        match object.keys().find(|key| !known.contains(&key.as_str())) {
            Some(extra) => Err(self.field(extra).invalid("Extra inputs are not permitted")),
            None => Ok(()),
        }
    }

    /// `value` as an object holding every `required` field and nothing outside
    /// `required` and `optional`.
    fn fields<'a>(
        &self,
        value: &'a Value,
        required: &[&str],
        optional: &[&str],
    ) -> Result<&'a Map<String, Value>, ApiError> {
        let object = self.object(value)?;
        for field in required {
            self.required(object, field)?;
        }
        let known: Vec<&str> = required.iter().chain(optional).copied().collect();
        self.only(object, &known)?;
        Ok(object)
    }

    fn object<'a>(&self, value: &'a Value) -> Result<&'a Map<String, Value>, ApiError> {
        value
            .as_object()
            .ok_or_else(|| self.invalid("Input should be a valid dictionary"))
    }

    fn array<'a>(&self, value: &'a Value) -> Result<&'a Vec<Value>, ApiError> {
        value
            .as_array()
            .ok_or_else(|| self.invalid("Input should be a valid list"))
    }

    fn string<'a>(&self, value: &'a Value) -> Result<&'a str, ApiError> {
        value
            .as_str()
            .ok_or_else(|| self.invalid("Input should be a valid string"))
    }

    fn integer(&self, value: &Value) -> Result<u64, ApiError> {
        if value.as_i64().is_some_and(|n| n < 0) {
            return Err(self.invalid("Input should be greater than or equal to 0"));
        }
        value
            .as_u64()
            .ok_or_else(|| self.invalid("Input should be a valid integer"))
    }

    fn boolean(&self, value: &Value) -> Result<bool, ApiError> {
        value
            .as_bool()
            .ok_or_else(|| self.invalid("Input should be a valid boolean"))
    }

    /// A block's `cache_control`, by its lifetime: `{"type": "ephemeral", "ttl"?}`
    /// with `ttl` `"5m"` (the default) or `"1h"`.
    fn cache_control(&self, object: &Map<String, Value>) -> Result<Option<Ttl>, ApiError> {
        let Some(value) = object.get("cache_control").filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let at = self.field("cache_control");
        let control = at.fields(value, &["type"], &["ttl"])?;
        if control["type"].as_str() != Some("ephemeral") {
            return Err(at.field("type").invalid("Input should be 'ephemeral'"));
        }
        match control.get("ttl") {
            None | Some(Value::Null) => Ok(Some(Ttl::FiveMinutes)),
            Some(ttl) => ttl
                .as_str()
                .and_then(Ttl::parse)
                .map(Some)
                .ok_or_else(|| at.field("ttl").invalid("Input should be '5m' or '1h'")),
        }
    }
}

/// The `anthropic_version` Bedrock's Claude models take in the body.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The fields of an `InvokeModel` body for Claude: the Messages API's, with
/// `anthropic_version` (and `anthropic_beta`) instead of `model`, and neither
/// `stream` (a separate operation) nor the first-party-only `service_tier` and
/// `metadata`.
const BEDROCK_FIELDS: &[&str] = &[
    "anthropic_version",
    "anthropic_beta",
    "max_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "stop_sequences",
    "temperature",
    "top_k",
    "top_p",
];

/// An `InvokeModel` body made a Messages API body, the way Bedrock reads it:
/// `anthropic_version` required and `bedrock-2023-05-31`, no field Bedrock does not
/// know (`model` among them: the path names it), then the model from the path put
/// in. The rest is checked by [`parse_value`] as for the Messages API. The errors
/// are Bedrock's `ValidationException` texts.
pub fn from_bedrock(body: &[u8], model: &str) -> Result<Value, ApiError> {
    let malformed = |detail: &str| {
        ApiError::invalid(format!(
            "Malformed input request: {detail}, please reformat your input and try again."
        ))
    };
    let value: Value =
        serde_json::from_slice(body).map_err(|_| malformed("#: expected a JSON object"))?;
    let Value::Object(mut object) = value else {
        return Err(malformed("#: expected type: JSONObject"));
    };
    if let Some(extra) = object
        .keys()
        .find(|key| !BEDROCK_FIELDS.contains(&key.as_str()))
    {
        return Err(malformed(&format!(
            "#: extraneous key [{extra}] is not permitted"
        )));
    }
    match object.remove("anthropic_version") {
        None => return Err(malformed("#: required key [anthropic_version] not found")),
        Some(Value::String(version)) if version == BEDROCK_ANTHROPIC_VERSION => {}
        Some(_) => {
            return Err(malformed(&format!(
                "#/anthropic_version: expected {BEDROCK_ANTHROPIC_VERSION}"
            )));
        }
    }
    object.remove("anthropic_beta");
    object.insert("model".to_owned(), Value::String(model.to_owned()));
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests;
