//! The quirks that change an answer's blocks or its stop reason: what a client
//! assembles, streamed or not.

use serde_json::{Map, Value};

use super::Quirk;
use crate::answer::{Answer, MARKER};
use crate::thinking::{redacted_data, thinking_block};
use crate::wire::{ResponseBlock, StopReason};

/// The text `text_after_tool_use` puts after the calls.
pub const TEXT_AFTER_TOOL_USE: &str = "[offline stand-in] I will read the result next.";

pub(super) fn apply(quirk: Quirk, answer: Answer) -> Answer {
    match quirk {
        Quirk::EmptyTextBeforeToolUse => lead_tool_use(answer, ""),
        Quirk::NewlinesBeforeToolUse => lead_tool_use(answer, "\n\n"),
        Quirk::WhitespaceFinalText => {
            let mut answer = answer;
            answer
                .content
                .retain(|b| !matches!(b, ResponseBlock::Text { .. }));
            answer.content.push(ResponseBlock::text(" "));
            answer
        }
        Quirk::TextAfterToolUse => {
            let mut answer = answer;
            if let Some(last) = answer.content.iter().rposition(is_tool_use) {
                let text = ResponseBlock::text(TEXT_AFTER_TOOL_USE);
                answer.content.insert(last + 1, text);
            }
            answer
        }
        Quirk::ToolUseEmptyInput => {
            let mut answer = answer;
            if let Some(ResponseBlock::ToolUse { input, .. }) =
                answer.content.iter_mut().find(|b| is_tool_use(b))
            {
                *input = Value::Object(Map::new());
            }
            answer
        }
        Quirk::MaxTokensInToolInput => cut_in_tool_input(answer),
        Quirk::MaxTokensInText => cut_in_text(answer, StopReason::MaxTokens),
        Quirk::RefusalAfterText => {
            let mut answer = cut_in_text(answer, StopReason::Refusal);
            answer.content.retain(|b| !is_tool_use(b));
            answer
        }
        Quirk::ThinkingBlocks => with_both_thinking_kinds(answer),
        Quirk::NullCitations
        | Quirk::UnknownFields
        | Quirk::PingMidStream
        | Quirk::ErrorEventMidStream => answer,
    }
}

fn is_tool_use(block: &ResponseBlock) -> bool {
    matches!(block, ResponseBlock::ToolUse { .. })
}

/// The model wrote nothing before its first call but `lead`: the text blocks
/// before the first `tool_use` become one block of `lead` (thinking stays).
fn lead_tool_use(mut answer: Answer, lead: &str) -> Answer {
    let Some(first) = answer.content.iter().position(is_tool_use) else {
        return answer;
    };
    let rest = answer.content.split_off(first);
    answer
        .content
        .retain(|b| !matches!(b, ResponseBlock::Text { .. }));
    answer.content.push(ResponseBlock::text(lead));
    answer.content.extend(rest);
    answer
}

/// The first half of `text` (in characters), when it still shows something: a
/// text cut there is a text the API accepts back.
pub fn half_text(text: &str) -> Option<String> {
    let count = text.chars().count();
    let kept: String = text.chars().take(count / 2).collect();
    (!kept.trim().is_empty()).then_some(kept)
}

/// The index and the half of the first text block that can be cut.
pub(super) fn first_cut_text(content: &[ResponseBlock]) -> Option<(usize, String)> {
    content
        .iter()
        .enumerate()
        .find_map(|(index, block)| match block {
            ResponseBlock::Text { text } => half_text(text).map(|half| (index, half)),
            _ => None,
        })
}

/// The answer stopped (`stop`) half-way through its first text that can be cut:
/// the blocks before it, and its first half.
fn cut_in_text(mut answer: Answer, stop: StopReason) -> Answer {
    let Some((index, half)) = first_cut_text(&answer.content) else {
        return answer;
    };
    answer.content.truncate(index);
    answer.content.push(ResponseBlock::text(half));
    answer.stop_reason = stop;
    answer
}

/// A tool input cut half-way through its JSON (compact, as `Value::to_string`
/// writes it): the text streamed before the cut, never valid JSON (at least the
/// closing brace is missing), and the fields complete in it, as an object.
pub fn cut_input(input: &Value) -> (String, Value) {
    let json = input.to_string();
    let count = json.chars().count();
    let keep = (count / 2).max(1).min(count.saturating_sub(1));
    let streamed: String = json.chars().take(keep).collect();
    let mut complete = Map::new();
    if let Value::Object(fields) = input {
        // `{` then, per field, `,` (but the first), the key as JSON, `:`, the value.
        let mut end = 1;
        for (position, (key, value)) in fields.iter().enumerate() {
            let key_json = Value::String(key.clone()).to_string();
            end += usize::from(position > 0)
                + key_json.chars().count()
                + 1
                + value.to_string().chars().count();
            if end > keep {
                break;
            }
            complete.insert(key.clone(), value.clone());
        }
    }
    (streamed, Value::Object(complete))
}

/// The answer stopped inside its first tool's input: the blocks up to that call,
/// its input holding the fields complete at the cut.
fn cut_in_tool_input(mut answer: Answer) -> Answer {
    let Some(first) = answer.content.iter().position(is_tool_use) else {
        return answer;
    };
    answer.content.truncate(first + 1);
    if let Some(ResponseBlock::ToolUse { input, .. }) = answer.content.last_mut() {
        *input = cut_input(input).1;
    }
    answer.stop_reason = StopReason::MaxTokens;
    answer
}

pub(super) fn has_both_thinking_kinds(content: &[ResponseBlock]) -> bool {
    content
        .iter()
        .any(|b| matches!(b, ResponseBlock::Thinking { .. }))
        && content
            .iter()
            .any(|b| matches!(b, ResponseBlock::RedactedThinking { .. }))
}

/// A signed `thinking` block first (unless there is one), then a sealed
/// `redacted_thinking` block after the leading thinking (unless there is one):
/// both are accepted when they come back ([`crate::thinking::verify`]).
fn with_both_thinking_kinds(mut answer: Answer) -> Answer {
    let seed = serde_json::to_string(&answer.content).unwrap_or_default();
    if !answer
        .content
        .iter()
        .any(|b| matches!(b, ResponseBlock::Thinking { .. }))
    {
        let thought = thinking_block(format!("{MARKER} thinking it over."));
        answer.content.insert(0, thought);
    }
    if !answer
        .content
        .iter()
        .any(|b| matches!(b, ResponseBlock::RedactedThinking { .. }))
    {
        let leading = answer
            .content
            .iter()
            .take_while(|b| b.is_thinking())
            .count();
        let data = redacted_data(&format!("quirk:{seed}"));
        answer
            .content
            .insert(leading, ResponseBlock::RedactedThinking { data });
    }
    answer
}
