//! The quirks as the wire shows them: the fields they add to a whole JSON body,
//! and what they do to a stream's events.

use serde_json::{Value, json};

use super::Quirk;
use super::answer::cut_input;
use crate::answer::Answer;
use crate::stream::{INPUT_PIECE, error_event, pieces};
use crate::wire::{MessagesResponse, ResponseBlock};

/// `stop_details` of a refusal, as the API sends it beside `stop_reason:
/// "refusal"` (a category and an explanation, both null when it names none).
pub fn refusal_details() -> Value {
    json!({"type": "refusal", "category": null, "explanation": null})
}

/// `response` with the quirk's blocks and stop reason.
fn quirked(quirk: Quirk, response: &MessagesResponse) -> MessagesResponse {
    let answer = quirk.apply(Answer {
        content: response.content.clone(),
        stop_reason: response.stop_reason,
    });
    MessagesResponse {
        content: answer.content,
        stop_reason: answer.stop_reason,
        ..response.clone()
    }
}

pub(super) fn body(quirk: Quirk, response: &MessagesResponse) -> Value {
    let quirked = quirked(quirk, response);
    // Serialising these plain data types cannot fail.
    let mut body = serde_json::to_value(&quirked).unwrap_or(Value::Null);
    match quirk {
        Quirk::NullCitations => each_block(&mut body["content"], null_citations),
        Quirk::UnknownFields => {
            unknown_message_fields(&mut body);
            each_block(&mut body["content"], caller);
        }
        Quirk::RefusalAfterText => body["stop_details"] = refusal_details(),
        _ => {}
    }
    body
}

pub(super) fn events(quirk: Quirk, response: &MessagesResponse) -> Vec<Value> {
    let quirked = quirked(quirk, response);
    let mut events = crate::stream::events(&quirked);
    match quirk {
        Quirk::ToolUseEmptyInput => empty_input_deltas(&mut events, &quirked),
        Quirk::MaxTokensInToolInput => cut_input_deltas(&mut events, response),
        Quirk::NullCitations => starts(&mut events, null_citations),
        Quirk::UnknownFields => {
            starts(&mut events, caller);
            unknown_event_fields(&mut events, &quirked);
        }
        Quirk::RefusalAfterText => {
            if let Some(delta) = events.iter_mut().find(|e| e["type"] == "message_delta") {
                delta["delta"]["stop_details"] = refusal_details();
            }
        }
        Quirk::PingMidStream => events = pings_between_content(events),
        Quirk::ErrorEventMidStream => error_after_first_delta(&mut events),
        _ => {}
    }
    events
}

fn each_block(content: &mut Value, change: fn(&mut Value)) {
    if let Some(blocks) = content.as_array_mut() {
        blocks.iter_mut().for_each(change);
    }
}

/// Applies `change` to the block of every `content_block_start`.
fn starts(events: &mut [Value], change: fn(&mut Value)) {
    for event in events.iter_mut() {
        if event["type"] == "content_block_start" {
            change(&mut event["content_block"]);
        }
    }
}

fn null_citations(block: &mut Value) {
    if block["type"] == "text" {
        block["citations"] = Value::Null;
    }
}

/// `caller`, which the API now puts on every `tool_use` (a direct call).
fn caller(block: &mut Value) {
    if block["type"] == "tool_use" {
        block["caller"] = json!({"type": "direct"});
    }
}

/// The message's fields for server tools and refusals, and `usage`'s for the
/// service tier and server tools.
fn unknown_message_fields(message: &mut Value) {
    message["container"] = Value::Null;
    message["stop_details"] = Value::Null;
    message["stop_sequence"] = Value::Null;
    message["usage"]["service_tier"] = json!("standard");
    message["usage"]["server_tool_use"] = json!({"web_search_requests": 0});
}

/// `message_start`'s message as a whole body's; `message_delta`'s `delta` with the
/// same nulls, and its `usage` with the input fields (newer API versions send them
/// cumulative: the same values as `message_start`'s) and the server tools'.
fn unknown_event_fields(events: &mut [Value], response: &MessagesResponse) {
    let usage = &response.usage;
    for event in events.iter_mut() {
        if event["type"] == "message_start" {
            unknown_message_fields(&mut event["message"]);
        } else if event["type"] == "message_delta" {
            event["delta"]["container"] = Value::Null;
            event["delta"]["stop_details"] = Value::Null;
            let extra = &mut event["usage"];
            extra["input_tokens"] = json!(usage.input_tokens);
            extra["cache_creation_input_tokens"] = json!(usage.cache_creation_input_tokens);
            extra["cache_read_input_tokens"] = json!(usage.cache_read_input_tokens);
            extra["cache_creation"] = json!(usage.cache_creation);
            extra["server_tool_use"] = json!({"web_search_requests": 0});
        }
    }
}

/// The position of block `index`'s `content_block_stop`.
fn stop_of(events: &[Value], index: usize) -> Option<usize> {
    events
        .iter()
        .position(|e| e["type"] == "content_block_stop" && e["index"] == index)
}

fn input_delta(index: usize, partial_json: &str) -> Value {
    json!({"type": "content_block_delta", "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial_json}})
}

/// How the API streams an empty input: `"input": {}` in the block's start, then
/// one `input_json_delta` whose `partial_json` is `""`.
fn empty_input_deltas(events: &mut Vec<Value>, response: &MessagesResponse) {
    for (index, block) in response.content.iter().enumerate() {
        let empty = matches!(block, ResponseBlock::ToolUse { input, .. }
            if input.as_object().is_some_and(serde_json::Map::is_empty));
        if let Some(stop) = stop_of(events, index).filter(|_| empty) {
            events.insert(stop, input_delta(index, ""));
        }
    }
}

/// The cut tool's deltas replaced by the pieces of its input's JSON up to the
/// cut, taken from the whole input of `original` (the answer before the quirk).
fn cut_input_deltas(events: &mut Vec<Value>, original: &MessagesResponse) {
    let Some((index, input)) = original
        .content
        .iter()
        .enumerate()
        .find_map(|(index, block)| match block {
            ResponseBlock::ToolUse { input, .. } => Some((index, input)),
            _ => None,
        })
    else {
        return;
    };
    let (streamed, _) = cut_input(input);
    events.retain(|e| !(e["type"] == "content_block_delta" && e["index"] == index));
    if let Some(stop) = stop_of(events, index) {
        let deltas = pieces(&streamed, INPUT_PIECE)
            .into_iter()
            .map(|piece| input_delta(index, &piece));
        events.splice(stop..stop, deltas);
    }
}

fn is_content(event: &Value) -> bool {
    event["type"]
        .as_str()
        .is_some_and(|kind| kind.starts_with("content_block_"))
}

/// A `ping` after every second content event that another content event follows.
fn pings_between_content(events: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(events.len() * 3 / 2);
    let mut between = 0;
    for (position, event) in events.iter().enumerate() {
        out.push(event.clone());
        if is_content(event) && events.get(position + 1).is_some_and(is_content) {
            between += 1;
            if between % 2 == 0 {
                out.push(json!({"type": "ping"}));
            }
        }
    }
    out
}

/// The events up to the first delta (or, with none, the first block's start),
/// then an `overloaded_error` event; nothing after it.
fn error_after_first_delta(events: &mut Vec<Value>) {
    let last = events
        .iter()
        .position(|e| e["type"] == "content_block_delta")
        .or_else(|| {
            events
                .iter()
                .position(|e| e["type"] == "content_block_start")
        })
        .unwrap_or(0);
    events.truncate(last + 1);
    events.push(error_event("overloaded_error", "Overloaded"));
}
