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
//!
//! # Layout
//!
//! This file: the request's top-level fields, `system`, `tools`, `tool_choice`
//! and `thinking`. `parse/messages.rs` reads the messages and their blocks,
//! `parse/path.rs` holds the JSON path and its checks, `parse/bedrock.rs` Bedrock's
//! body.

use serde_json::{Map, Value, json};

mod bedrock;
mod messages;
mod path;

use crate::error::ApiError;
use crate::wire::{MessagesRequest, SystemBlock, Thinking, Tool, ToolChoice};
use messages::{messages, text_blocks};
use path::{Path, optional};

pub use bedrock::{BEDROCK_ANTHROPIC_VERSION, from_bedrock};

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

#[cfg(test)]
mod tests;
