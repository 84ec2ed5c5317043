//! Reading a `POST /v1/messages` body the way the real API does: JSON, the required
//! fields, the shapes the API accepts, then degrau's own copy of the API's rules
//! ([`degrau::validate::validate_request`]) with their texts verbatim, and the
//! signatures of the thinking blocks sent back ([`crate::thinking::verify`]).
//!
//! The API accepts a few shorthands degrau's types do not model; they are rewritten
//! to the long form first: `system` as a string, message `content` as a string,
//! `tool_result.content` as a list of text blocks (or absent), a tool without
//! `description`, and `cache_control` on a tool (kept aside as a breakpoint). The
//! `ttl` of every `cache_control` is kept aside too ([`Marks`]), after checking it
//! the way the API does: `"5m"` or `"1h"`, and no one-hour breakpoint after a
//! five-minute one in the order tools → system → messages.

use std::collections::HashSet;

use degrau::request::{MAX_BREAKPOINTS, ModelRequest};
use degrau::validate::validate_request;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::prompt::{Marks, Ttl};

/// A request that passed every check.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRequest {
    /// The request, in degrau's types.
    pub request: ModelRequest,
    /// Every `cache_control` with its lifetime (tools' included).
    pub marks: Marks,
    /// Canonical JSON of the options that invalidate the cached messages part when
    /// they change (`tool_choice`, `output_config`, `thinking`).
    pub prelude: String,
    /// What `tool_choice` allows.
    pub tool_choice: ToolChoice,
}

/// The request's `tool_choice`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must call this tool (the older structured-output idiom).
    Tool(String),
    /// The model may not call tools.
    None,
}

fn tool_choice(value: Option<&Value>) -> Result<ToolChoice, ApiError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(ToolChoice::Auto);
    };
    match value.get("type").and_then(Value::as_str) {
        Some("auto") => Ok(ToolChoice::Auto),
        Some("any") => Ok(ToolChoice::Any),
        Some("none") => Ok(ToolChoice::None),
        Some("tool") => match value.get("name").and_then(Value::as_str) {
            Some(name) => Ok(ToolChoice::Tool(name.to_owned())),
            None => Err(ApiError::invalid("tool_choice.tool.name: Field required")),
        },
        _ => Err(ApiError::invalid(
            "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'",
        )),
    }
}

/// The `anthropic_version` Bedrock's Claude models take in the body.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// An `InvokeModel` body made a Messages API body, the way Bedrock reads it:
/// `anthropic_version` required and `bedrock-2023-05-31`, no `model` (the path
/// names it), then the model from the path put in. The rest is checked by
/// [`parse_request`] as for the Messages API. The errors are Bedrock's
/// `ValidationException` texts.
pub fn from_bedrock(body: &[u8], model: &str) -> Result<Vec<u8>, ApiError> {
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
    if object.contains_key("model") {
        return Err(malformed("#: extraneous key [model] is not permitted"));
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
    object.insert("model".to_owned(), Value::String(model.to_owned()));
    serde_json::to_vec(&Value::Object(object)).map_err(|e| malformed(&e.to_string()))
}

/// Parses and checks a body; the error is the 400 the API would answer.
pub fn parse_request(body: &[u8]) -> Result<ParsedRequest, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid(format!(
            "There was an error parsing the body of your request as JSON: {e}"
        ))
    })?;
    let Value::Object(mut object) = value else {
        return Err(ApiError::invalid(
            "body: Input should be a valid dictionary",
        ));
    };
    for field in ["model", "max_tokens", "messages"] {
        if !object.contains_key(field) {
            return Err(ApiError::invalid(format!("{field}: Field required")));
        }
    }
    if object.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(ApiError::invalid(
            "stream: the offline stand-in does not stream; send the request without \"stream\": true",
        ));
    }
    let marks = normalise(&mut object)?;
    let prelude = json!({
        "tool_choice": object.get("tool_choice"),
        "output_config": object.get("output_config"),
        "thinking": object.get("thinking"),
    })
    .to_string();
    let tool_choice = tool_choice(object.get("tool_choice"))?;

    let request: ModelRequest = serde_json::from_value(Value::Object(object))
        .map_err(|e| ApiError::invalid(format!("invalid request body: {e}")))?;

    if request.max_tokens == 0 {
        return Err(ApiError::invalid(
            "max_tokens: Input should be greater than or equal to 1",
        ));
    }
    for (index, block) in request.system.iter().enumerate() {
        if block.kind != "text" {
            return Err(ApiError::invalid(format!(
                "system.{index}.type: Input should be 'text'"
            )));
        }
    }
    check_tools(&request)?;
    // Not a quoted API text: the notes do not give this one.
    match &tool_choice {
        ToolChoice::Tool(name) if !request.tools.iter().any(|t| &t.name == name) => {
            return Err(ApiError::invalid(format!(
                "tool_choice: tool `{name}` is not defined in `tools`"
            )));
        }
        ToolChoice::Any if request.tools.is_empty() => {
            return Err(ApiError::invalid(
                "tool_choice: `any` requires at least one tool in `tools`",
            ));
        }
        _ => {}
    }
    let breakpoints = request.breakpoints() + marks.tool_breakpoints();
    if breakpoints > MAX_BREAKPOINTS {
        return Err(ApiError::invalid(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
        )));
    }
    validate_request(&request).map_err(|violation| ApiError::invalid(violation.message))?;
    crate::thinking::verify(&request)?;

    Ok(ParsedRequest {
        request,
        marks,
        prelude,
        tool_choice,
    })
}

/// Tool names match `^[a-zA-Z0-9_-]{1,64}$` and are unique.
fn check_tools(request: &ModelRequest) -> Result<(), ApiError> {
    let mut seen = HashSet::new();
    for (index, tool) in request.tools.iter().enumerate() {
        let name = tool.name.as_str();
        let well_formed = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !well_formed {
            return Err(ApiError::invalid(format!(
                "tools.{index}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            )));
        }
        if !seen.insert(name) {
            return Err(ApiError::invalid("tools: Tool names must be unique."));
        }
    }
    Ok(())
}

/// Rewrites the API's shorthands to the long form, and takes out the tools'
/// `cache_control` and every `ttl` into [`Marks`] (refusing a bad or misordered
/// one).
fn normalise(object: &mut Map<String, Value>) -> Result<Marks, ApiError> {
    if let Some(Value::String(text)) = object.get("system") {
        let blocks = if text.is_empty() {
            json!([])
        } else {
            json!([{"type": "text", "text": text}])
        };
        object.insert("system".into(), blocks);
    }
    let mut order = TtlOrder::default();
    let mut marks = Marks::default();
    if let Some(Value::Array(tools)) = object.get_mut("tools") {
        for (index, tool) in tools.iter_mut().enumerate() {
            let Some(tool) = tool.as_object_mut() else {
                marks.tools.push(None);
                continue;
            };
            let mark = take_ttl(tool, &format!("tools.{index}"), &mut order)?;
            // degrau's `ToolDef` has no `cache_control`: the mark keeps it.
            tool.remove("cache_control");
            marks.tools.push(mark);
            tool.entry("description")
                .or_insert_with(|| Value::String(String::new()));
        }
    }
    if let Some(Value::Array(blocks)) = object.get_mut("system") {
        for (index, block) in blocks.iter_mut().enumerate() {
            let mark = match block.as_object_mut() {
                Some(block) => take_ttl(block, &format!("system.{index}"), &mut order)?,
                None => None,
            };
            marks.system.push(mark);
        }
    }
    if let Some(Value::Array(messages)) = object.get_mut("messages") {
        for (number, message) in messages.iter_mut().enumerate() {
            let Some(message) = message.as_object_mut() else {
                marks.messages.push(Vec::new());
                continue;
            };
            if let Some(Value::String(text)) = message.get("content") {
                let blocks = if text.is_empty() {
                    json!([])
                } else {
                    json!([{"type": "text", "text": text}])
                };
                message.insert("content".into(), blocks);
            }
            let mut message_marks = Vec::new();
            if let Some(Value::Array(blocks)) = message.get_mut("content") {
                for (index, block) in blocks.iter_mut().enumerate() {
                    let Some(block) = block.as_object_mut() else {
                        message_marks.push(None);
                        continue;
                    };
                    if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                        let content = tool_result_text(block.get("content"));
                        block.insert("content".into(), Value::String(content));
                    }
                    let path = format!("messages.{number}.content.{index}");
                    message_marks.push(take_ttl(block, &path, &mut order)?);
                }
            }
            marks.messages.push(message_marks);
        }
    }
    Ok(marks)
}

/// Whether a five-minute breakpoint has been met yet, in the API's order.
#[derive(Default)]
struct TtlOrder {
    five_minutes_seen: bool,
}

/// The lifetime of a block's `cache_control` (none without one), its `ttl` taken
/// out of the JSON (degrau's `CacheControl` has none). Refuses a `ttl` that is
/// neither `5m` nor `1h` (not a quoted API text) and a one-hour breakpoint after a
/// five-minute one (the API's text, as it answers it).
fn take_ttl(
    block: &mut Map<String, Value>,
    path: &str,
    order: &mut TtlOrder,
) -> Result<Option<Ttl>, ApiError> {
    let Some(control) = block
        .get_mut("cache_control")
        .and_then(Value::as_object_mut)
    else {
        return Ok(None);
    };
    let ttl = match control.remove("ttl") {
        None | Some(Value::Null) => Some(Ttl::FiveMinutes),
        Some(Value::String(text)) => Ttl::parse(&text),
        Some(_) => None,
    }
    .ok_or_else(|| {
        ApiError::invalid(format!(
            "{path}.cache_control.ttl: Input should be '5m' or '1h'"
        ))
    })?;
    match ttl {
        Ttl::FiveMinutes => order.five_minutes_seen = true,
        Ttl::OneHour if order.five_minutes_seen => {
            return Err(ApiError::invalid(format!(
                "{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after \
                 a ttl='5m' cache_control block. Note that blocks are processed in the \
                 following order: `tools`, `system`, `messages`."
            )));
        }
        Ttl::OneHour => {}
    }
    Ok(Some(ttl))
}

/// `tool_result.content` as text: a string as is, text blocks joined by newlines.
fn tool_result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::domain::ContentBlock;

    fn error(body: Value) -> String {
        parse_request(body.to_string().as_bytes())
            .unwrap_err()
            .message
    }

    #[test]
    fn reports_missing_required_fields_like_the_api() {
        assert_eq!(
            error(json!({"max_tokens": 1, "messages": []})),
            "model: Field required"
        );
        assert_eq!(
            error(json!({"model": "m", "messages": []})),
            "max_tokens: Field required"
        );
        assert_eq!(
            error(json!({"model": "m", "max_tokens": 1})),
            "messages: Field required"
        );
        assert!(
            parse_request(b"{not json")
                .unwrap_err()
                .message
                .contains("error parsing the body")
        );
        assert_eq!(
            error(json!([1])),
            "body: Input should be a valid dictionary"
        );
    }

    #[test]
    fn accepts_the_api_shorthands() {
        let parsed = parse_request(
            json!({
                "model": "m", "max_tokens": 5, "system": "be nice",
                "tools": [{"name": "t", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
                "tool_choice": {"type": "none"},
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                        "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}]}
                ]
            })
            .to_string()
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(parsed.request.system[0].text, "be nice");
        assert_eq!(
            parsed.request.messages[0].content[0].block,
            ContentBlock::text("hi")
        );
        assert_eq!(
            parsed.request.messages[2].content[0].block,
            ContentBlock::tool_result("a", "one\ntwo")
        );
        assert_eq!(parsed.marks.tools, vec![Some(Ttl::FiveMinutes)]);
        assert_eq!(parsed.tool_choice, ToolChoice::None);
        assert!(parsed.prelude.contains("none"));
    }

    #[test]
    fn refuses_bad_and_duplicate_tool_names() {
        let body = |names: &[&str]| {
            let tools: Vec<Value> = names
                .iter()
                .map(|n| json!({"name": n, "description": "", "input_schema": {"type": "object"}}))
                .collect();
            json!({"model": "m", "max_tokens": 5, "tools": tools,
                "messages": [{"role": "user", "content": "hi"}]})
        };
        assert_eq!(
            error(body(&["ok", "bad name"])),
            "tools.1.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"
        );
        assert!(error(body(&[&"x".repeat(65)])).starts_with("tools.0.name"));
        assert_eq!(
            error(body(&["a", "a"])),
            "tools: Tool names must be unique."
        );
        assert!(parse_request(body(&["a-b_C9"]).to_string().as_bytes()).is_ok());
    }

    #[test]
    fn counts_tool_breakpoints_against_the_maximum() {
        let marked = json!({"type": "ephemeral"});
        let body = json!({"model": "m", "max_tokens": 5,
            "tools": [{"name": "t", "description": "", "input_schema": {}, "cache_control": marked}],
            "system": [
                {"type": "text", "text": "a", "cache_control": marked},
                {"type": "text", "text": "b", "cache_control": marked}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "x", "cache_control": marked},
                {"type": "text", "text": "y", "cache_control": marked}]}]});
        assert_eq!(
            error(body),
            "A maximum of 4 blocks with cache_control may be provided. Found 5."
        );
    }

    #[test]
    fn keeps_each_breakpoints_lifetime_and_refuses_one_hour_after_five_minutes() {
        let body = |tool: Value, system: Value, message: Value| {
            json!({"model": "m", "max_tokens": 5,
                "tools": [{"name": "t", "description": "", "input_schema": {}, "cache_control": tool}],
                "system": [{"type": "text", "text": "a", "cache_control": system}],
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "x", "cache_control": message},
                    {"type": "text", "text": "y"}]}]})
        };
        let hour = json!({"type": "ephemeral", "ttl": "1h"});
        let five = json!({"type": "ephemeral", "ttl": "5m"});
        let plain = json!({"type": "ephemeral"});
        let parsed = parse_request(
            body(hour.clone(), hour.clone(), plain.clone())
                .to_string()
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(parsed.marks.tools, [Some(Ttl::OneHour)]);
        assert_eq!(parsed.marks.system, [Some(Ttl::OneHour)]);
        assert_eq!(parsed.marks.messages, [vec![Some(Ttl::FiveMinutes), None]]);
        assert!(
            parsed.request.messages[0].content[0]
                .cache_control
                .is_some()
        );

        assert_eq!(
            error(body(five.clone(), hour.clone(), hour.clone())),
            "system.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a \
             ttl='5m' cache_control block. Note that blocks are processed in the following \
             order: `tools`, `system`, `messages`."
        );
        // No ttl is a five-minute breakpoint.
        assert!(
            error(body(hour.clone(), plain, hour.clone()))
                .starts_with("messages.0.content.0.cache_control.ttl: a ttl='1h'")
        );
        assert!(
            parse_request(
                body(hour.clone(), five.clone(), five)
                    .to_string()
                    .as_bytes()
            )
            .is_ok()
        );
        assert_eq!(
            error(body(
                hour.clone(),
                hour,
                json!({"type": "ephemeral", "ttl": "10m"})
            )),
            "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"
        );
    }

    #[test]
    fn reads_tool_choice_and_refuses_an_undefined_forced_tool() {
        let body = |choice: Value| {
            json!({"model": "m", "max_tokens": 5, "tool_choice": choice,
                "tools": [{"name": "t", "description": "", "input_schema": {"type": "object"}}],
                "messages": [{"role": "user", "content": "hi"}]})
        };
        let parse = |choice: Value| parse_request(body(choice).to_string().as_bytes());
        assert_eq!(
            parse(json!({"type": "tool", "name": "t"}))
                .unwrap()
                .tool_choice,
            ToolChoice::Tool("t".into())
        );
        assert_eq!(
            parse(json!({"type": "any"})).unwrap().tool_choice,
            ToolChoice::Any
        );
        assert_eq!(parse(Value::Null).unwrap().tool_choice, ToolChoice::Auto);
        assert!(
            parse(json!({"type": "tool", "name": "x"}))
                .unwrap_err()
                .message
                .contains("`x` is not defined")
        );
        assert!(parse(json!({"type": "sometimes"})).is_err());
    }

    #[test]
    fn passes_on_the_api_rule_texts_verbatim() {
        let text = error(json!({"model": "m", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]}));
        assert_eq!(
            text,
            "This model does not support assistant message prefill. The conversation must end with a user message."
        );
        assert_eq!(
            error(
                json!({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]})
            ),
            "max_tokens: Input should be greater than or equal to 1"
        );
    }
}
