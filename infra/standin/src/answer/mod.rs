//! The stand-in's answers: deterministic heuristics, no model. Every text reply
//! starts with [`MARKER`] so nobody mistakes it for Claude — except the answer to a
//! fact-extraction request, which must be bare JSON for its parser.
//!
//! In order of precedence (a forced `tool_choice` comes first, see [`answer`]):
//! 1. `system[0]` holds `degrau:summarize` (or `degrau:search-summary`, a closed
//!    session's index card) → a third-person summary of the conversation handed in
//!    the last user message, every identifier kept;
//! 2. `system[0]` holds `degrau:extract-facts` → `{"facts": []}`;
//! 3. the last user turn holds `tool_result` blocks → a short summary of them;
//! 4. "what did I say first?" → the first user text the request shows (proof that
//!    the conversation was rebuilt from storage);
//! 5. degrau's `recall` tool is defined and the text points back in time → a
//!    `recall` call with the text as its query (`recall.rs`);
//! 6. the demo tools are defined and the text asks about availability or a
//!    booking → `tool_use` (two dates → two parallel calls);
//! 7. otherwise an echo, naming what degrau remembers in `system[1]` (never
//!    quoting it: the reply's length does not grow with the memory).
//!
//! `demo.rs` holds the scheduling demo's heuristics (which tools a text asks for),
//! `summary.rs` the conversation summary; this file the precedence and the rest.

mod demo;
mod recall;
mod summary;

use std::collections::HashMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use self::demo::demo_tool_calls;
pub use self::demo::{
    AVAILABILITY_WORDS, BOOK_SLOT, BOOKING_WORDS, DEFAULT_DAY, LIST_FREE_SLOTS, asks_for_tools,
    find_dates, find_time,
};
use self::summary::tokens;
pub use self::summary::{MAX_SUMMARY_CHARS, identifiers, summarize_conversation};
use crate::thinking::{redacted_data, thinking_block};
use crate::wire::{
    Content, MessagesRequest, ResponseBlock, Role, StopReason, ToolChoice, ToolResultContent,
};

/// Opening of every text reply.
pub const MARKER: &str = "[offline stand-in]";
/// Marker in `system[0]` of a summary request.
pub const SUMMARIZE_MARKER: &str = "degrau:summarize";
/// Marker in `system[0]` of a search-summary request (a closed session's index
/// card, for recall): answered as a summary is.
pub const SEARCH_SUMMARY_MARKER: &str = "degrau:search-summary";
/// Marker in `system[0]` of a fact-extraction request.
pub const EXTRACT_FACTS_MARKER: &str = "degrau:extract-facts";
/// Longest summary of tool results.
pub const MAX_RESULTS_REPLY_CHARS: usize = 300;
const FIRST_MESSAGE_QUESTIONS: &[&str] = &[
    "what did i say first",
    "what was my first message",
    "o que eu disse primeiro",
    "qual foi minha primeira mensagem",
];

/// What the stand-in answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The reply's blocks.
    pub content: Vec<ResponseBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
}

impl Answer {
    fn text(text: String) -> Self {
        Answer {
            content: vec![ResponseBlock::text(text)],
            stop_reason: StopReason::EndTurn,
        }
    }
}

/// Answers a validated request. `id_seed` makes the invented `tool_use` ids
/// deterministic per request yet distinct across the turns of a conversation.
///
/// A forced `tool_choice` (`any`, or `tool` with a name) gets only `tool_use`
/// blocks, like the real API: `{"facts": []}` as the input of a fact-extraction
/// call, `{"summary": …}` for a summary, the demo heuristics' input when they
/// apply, else `{}`.
///
/// With `thinking` enabled the answer starts with a signed `thinking` block, and an
/// answer that calls tools carries a sealed `redacted_thinking` block after it, so a
/// tool loop sends both kinds back ([`crate::thinking`]).
pub fn answer(request: &MessagesRequest, id_seed: &str) -> Answer {
    let mut answer = plain_answer(request, id_seed);
    if request.thinking_budget().is_some() {
        let mut thoughts = vec![thinking_block(format!(
            "{MARKER} thinking about: «{}»",
            clip(&last_user_text(request), 80)
        ))];
        if answer.stop_reason == StopReason::ToolUse {
            thoughts.push(ResponseBlock::RedactedThinking {
                data: redacted_data(id_seed),
            });
        }
        answer.content.splice(0..0, thoughts);
    }
    answer
}

/// The text of the last user turn (tool results aside).
fn last_user_text(request: &MessagesRequest) -> String {
    last_user_turn(request)
        .iter()
        .filter_map(|b| match b {
            Content::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The heuristic answer: a forced tool, a summary, a fact extraction, a tool loop's
/// closing summary, a first-message quote, a tool call (recall, the demo tools), or
/// an echo, in that order of precedence: it reads top to bottom.
fn plain_answer(request: &MessagesRequest, id_seed: &str) -> Answer {
    let system0 = request.system.first().map_or("", |b| b.text.as_str());
    let last_turn = last_user_turn(request);
    let text = last_turn
        .iter()
        .filter_map(|b| match b {
            Content::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");

    let demo_tools = [LIST_FREE_SLOTS, BOOK_SLOT]
        .iter()
        .all(|name| request.tools.iter().any(|t| t.name == *name));
    let demo_calls = if demo_tools {
        demo_tool_calls(&text)
    } else {
        None
    };
    if let Some(name) = forced_tool(request, demo_calls.as_deref()) {
        return forced_answer(name, system0, &text, demo_calls, id_seed);
    }
    if system0.contains(SUMMARIZE_MARKER) || system0.contains(SEARCH_SUMMARY_MARKER) {
        return Answer::text(summarize_conversation(&text));
    }
    if system0.contains(EXTRACT_FACTS_MARKER) {
        return Answer::text(r#"{"facts": []}"#.to_owned());
    }
    if last_turn
        .iter()
        .any(|b| matches!(b, Content::ToolResult { .. }))
    {
        return Answer::text(summarize_results(request, &last_turn));
    }
    let lower = text.to_lowercase();
    if FIRST_MESSAGE_QUESTIONS.iter().any(|q| lower.contains(q)) {
        let first = first_user_text(request).unwrap_or("");
        return Answer::text(format!(
            "{MARKER} The first thing you said was: «{}». {}",
            clip(first, 200),
            seen_and_remembered(request)
        ));
    }
    if let Some(answer) = tool_calls(request, &text, demo_calls, id_seed) {
        return answer;
    }
    Answer::text(format!(
        "{MARKER} You said: «{}». {}",
        clip(&text, 120),
        seen_and_remembered(request)
    ))
}

/// The tool a forced `tool_choice` names: `tool`'s name, or for `any` the demo
/// heuristics' first call, else the first tool defined.
fn forced_tool<'a>(
    request: &'a MessagesRequest,
    demo_calls: Option<&[(&'static str, Value)]>,
) -> Option<&'a str> {
    match &request.tool_choice {
        ToolChoice::Tool(name) => Some(name.as_str()),
        ToolChoice::Any => Some(
            demo_calls
                .and_then(|calls| calls.first())
                .map(|(name, _)| *name)
                .or_else(|| request.tools.first().map(|t| t.name.as_str()))
                .unwrap_or_default(),
        ),
        ToolChoice::Auto | ToolChoice::None => None,
    }
}

/// A forced call of `name`, alone: `{"facts": []}` for a fact extraction,
/// `{"summary": …}` for a summary, the demo heuristics' input for that tool, else
/// `{}`.
fn forced_answer(
    name: &str,
    system0: &str,
    text: &str,
    demo_calls: Option<Vec<(&'static str, Value)>>,
    id_seed: &str,
) -> Answer {
    let input = if system0.contains(EXTRACT_FACTS_MARKER) {
        json!({"facts": []})
    } else if system0.contains(SUMMARIZE_MARKER) {
        json!({"summary": summarize_conversation(text)})
    } else {
        demo_calls
            .into_iter()
            .flatten()
            .find(|(called, _)| *called == name)
            .map_or_else(|| json!({}), |(_, input)| input)
    };
    Answer {
        content: vec![ResponseBlock::tool_use(
            tool_use_id(id_seed, 0),
            name,
            input,
        )],
        stop_reason: StopReason::ToolUse,
    }
}

/// Unless tools are off (`tool_choice` `none`): a `recall` call when the text
/// points back in time and the tool is defined, else the demo tools' calls.
fn tool_calls(
    request: &MessagesRequest,
    text: &str,
    demo_calls: Option<Vec<(&'static str, Value)>>,
    id_seed: &str,
) -> Option<Answer> {
    let choice = &request.tool_choice;
    if *choice != ToolChoice::None
        && request.tools.iter().any(|t| t.name == recall::RECALL)
        && let Some(input) = recall::recall_call(text)
    {
        return Some(Answer {
            content: vec![
                ResponseBlock::text(format!(
                    "{MARKER} Let me look at our earlier conversations."
                )),
                ResponseBlock::tool_use(tool_use_id(id_seed, 0), recall::RECALL, input),
            ],
            stop_reason: StopReason::ToolUse,
        });
    }
    if *choice != ToolChoice::None
        && let Some(calls) = demo_calls
    {
        let mut content = vec![ResponseBlock::text(format!("{MARKER} Let me check."))];
        for (index, (name, input)) in calls.into_iter().enumerate() {
            content.push(ResponseBlock::tool_use(
                tool_use_id(id_seed, index),
                name,
                input,
            ));
        }
        return Some(Answer {
            content,
            stop_reason: StopReason::ToolUse,
        });
    }
    None
}

/// `toolu_standin_` and 16 hex digits of a hash of the request and the call's place:
/// deterministic, and unique across a conversation because each request extends
/// the one before (a counter would restart with the process and clash with ids
/// already stored).
fn tool_use_id(seed: &str, index: usize) -> String {
    let digest = Sha256::digest(format!("{seed}:{index}").as_bytes());
    format!("toolu_standin_{}", &hex::encode(digest)[..16])
}

/// The blocks of the trailing user messages (the API merges them into one). An
/// empty assistant message, which the API accepts anywhere, ends no user turn.
fn last_user_turn(request: &MessagesRequest) -> Vec<&Content> {
    let start = request
        .messages
        .iter()
        .rposition(|m| m.role != Role::User && !m.content.is_empty())
        .map_or(0, |i| i + 1);
    request.messages[start..]
        .iter()
        .flat_map(|m| m.content.iter().map(|b| &b.content))
        .collect()
}

fn first_user_text(request: &MessagesRequest) -> Option<&str> {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .find_map(|b| match &b.content {
            Content::Text { text } => Some(text.as_str()),
            _ => None,
        })
}

/// "I can see N earlier messages[, and what degrau remembers (summary, facts)]."
///
/// It names what the request carries but never quotes it: a reply as long as
/// the memory it was given would bill a strategy that remembers more for longer
/// answers, which a model's answer to the same message would not be (the
/// strategies benchmark compares the same script's answers).
fn seen_and_remembered(request: &MessagesRequest) -> String {
    let earlier = request.messages.len().saturating_sub(1);
    let plural = if earlier == 1 { "" } else { "s" };
    let mut out = format!("I can see {earlier} earlier message{plural}");
    if let Some(memory) = request.system.get(1).and_then(|b| remembered(&b.text)) {
        out.push_str(&format!(", and what degrau remembers ({memory})"));
    }
    out.push('.');
    out
}

/// Which of the facts and the summary the `<contact_context>` block holds
/// (`facts`, `summary` or `summary, facts`), when it holds any (the placeholders
/// for "nothing" do not count).
fn remembered(context: &str) -> Option<String> {
    let facts: Vec<&str> = between(context, "<facts>", "</facts>")
        .map(|inner| {
            inner
                .lines()
                .filter_map(|l| l.trim().strip_prefix("- "))
                .collect()
        })
        .unwrap_or_default();
    let summary = between(context, "<summary>", "</summary>")
        .map(str::trim)
        .filter(|s| !is_placeholder(s));
    let mut parts = Vec::new();
    if summary.is_some() {
        parts.push("summary");
    }
    if !facts.is_empty() {
        parts.push("facts");
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// Empty, or degrau's "(nothing …)" text in parentheses.
fn is_placeholder(text: &str) -> bool {
    text.is_empty() || (text.starts_with('(') && text.ends_with(')'))
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = start + text[start..].find(close)?;
    Some(&text[start..end])
}

/// The first `max` characters, with "…" when something was cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// "[offline stand-in] list_free_slots returned 37 items; book_slot confirmed
/// booking BK-1234."
fn summarize_results(request: &MessagesRequest, turn: &[&Content]) -> String {
    let names: HashMap<&str, &str> = request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match &b.content {
            Content::ToolUse { id, name, .. } => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    let parts: Vec<String> = turn
        .iter()
        .filter_map(|b| match b {
            Content::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let name = names.get(tool_use_id.as_str()).copied().unwrap_or("a tool");
                let content = content.as_ref().map(ToolResultContent::text);
                Some(describe_result(
                    name,
                    &content.unwrap_or_default(),
                    *is_error,
                ))
            }
            _ => None,
        })
        .collect();
    clip(
        &format!("{MARKER} {}.", parts.join("; ")),
        MAX_RESULTS_REPLY_CHARS,
    )
}

fn describe_result(name: &str, content: &str, is_error: bool) -> String {
    if is_error {
        return format!("{name} failed: «{}»", clip(content, 60));
    }
    if name == recall::RECALL
        && let Some(found) = recall::describe(content)
    {
        return found;
    }
    let parsed: Option<Value> = serde_json::from_str(content).ok();
    if let Some(id) = parsed
        .as_ref()
        .and_then(confirmation_in_json)
        .or_else(|| booking_reference(content))
    {
        return format!("{name} confirmed booking {id}");
    }
    match parsed {
        Some(Value::Array(items)) => format!("{name} returned {} items", items.len()),
        Some(Value::Object(fields)) => {
            if let Some(Value::String(error)) = fields.get("error") {
                format!("{name} reported an error: «{}»", clip(error, 60))
            } else if let Some(items) = fields.values().find_map(Value::as_array) {
                format!("{name} returned {} items", items.len())
            } else {
                format!("{name} returned {} fields", fields.len())
            }
        }
        Some(Value::String(text)) => format!("{name} returned «{}»", clip(&text, 60)),
        _ => format!("{name} returned «{}»", clip(content, 60)),
    }
}

/// A confirmation id in a JSON result: a field named like one, or a `BK-…` value.
fn confirmation_in_json(value: &Value) -> Option<String> {
    let Value::Object(fields) = value else {
        return None;
    };
    for (key, field) in fields {
        let key = key.to_lowercase();
        if (key.contains("confirmation") || key == "booking_id")
            && let Some(id) = field.as_str()
        {
            return Some(id.to_owned());
        }
        if let Some(text) = field.as_str()
            && text.starts_with("BK-")
        {
            return Some(text.to_owned());
        }
        if field.is_object()
            && let Some(id) = confirmation_in_json(field)
        {
            return Some(id);
        }
    }
    None
}

fn booking_reference(text: &str) -> Option<String> {
    tokens(text).into_iter().find(|t| t.starts_with("BK-"))
}

#[cfg(test)]
mod tests;
