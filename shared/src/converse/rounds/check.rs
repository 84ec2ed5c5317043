//! A recorded round's shape checked: the rules of a round `ask` itself stores
//! (the module documentation of `rounds` lists them), and its `tool_use` ids new to
//! the session's window.

use std::collections::HashSet;

use super::super::{AskError, validate_text};
use crate::domain::{ContentBlock, Message, Role, StoredMessage};
use crate::plan::pairing::{self, Unpaired};
use crate::plan::sendable::refused_text;
use crate::tools::{MAX_RESULTS_CHARS_PER_MESSAGE, MAX_TOOL_RESULT_CHARS};

use super::invalid;

/// The rules of a round's shape, in the order a reader checks them: the first
/// message, alternation, what each message may hold, the pairing of tool calls and
/// results, the end, and the limits `ask` keeps.
pub(super) fn check_round(messages: &[Message]) -> Result<(), AskError> {
    let first = &messages[0];
    if !first.is_user_text_only() {
        return Err(invalid(
            "messages.0: a round starts with the contact's message: a user message of text \
             blocks only",
        ));
    }
    if let Some(index) = (1..messages.len()).find(|&i| messages[i].role == messages[i - 1].role) {
        let role = match messages[index].role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        return Err(invalid(format!(
            "messages.{index}: two {role} messages in a row; roles must alternate (user, \
             assistant, user, ...)"
        )));
    }
    for (index, message) in messages.iter().enumerate() {
        check_blocks(index, message)?;
    }
    check_pairs(messages)?;
    let last = messages.len() - 1;
    if messages[last].role != Role::Assistant {
        return Err(invalid(format!(
            "messages.{last}: a round ends with the assistant's answer"
        )));
    }
    if !messages[last]
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::Text { text } if !text.trim().is_empty()))
    {
        return Err(invalid(format!(
            "messages.{last}: the answer that ends the round holds no text"
        )));
    }
    validate_text(&first.text())?;
    check_results_size(messages)
}

/// What each message may hold: the first only text, later user messages only tool
/// results, assistant messages text, tool calls and thinking; text as the API
/// accepts it (never empty; whitespace only beside something else); tool names and
/// ids as the API writes them; tool inputs JSON objects.
pub(super) fn check_blocks(index: usize, message: &Message) -> Result<(), AskError> {
    if message.content.is_empty() {
        return Err(invalid(format!(
            "messages.{index}.content: holds no text and no block the API accepts back (an \
             empty or whitespace-only answer)"
        )));
    }
    if let Some((position, refusal)) = refused_text(&message.content) {
        return Err(invalid(format!(
            "messages.{index}.content.{position}.text: {}",
            refusal.api_text()
        )));
    }
    for (position, block) in message.content.iter().enumerate() {
        let at = format!("messages.{index}.content.{position}");
        match (message.role, block) {
            (Role::User, ContentBlock::Text { .. }) if index == 0 => {}
            (Role::User, ContentBlock::ToolResult { .. }) if index > 0 => {}
            (Role::User, _) if index > 0 => {
                return Err(invalid(format!(
                    "{at}: a user message after the first holds only the `tool_result` blocks \
                     answering the previous message's `tool_use`"
                )));
            }
            (Role::Assistant, ContentBlock::ToolResult { .. }) => {
                return Err(invalid(format!(
                    "{at}: `tool_result` blocks belong in user messages"
                )));
            }
            (Role::Assistant, ContentBlock::ToolUse { id, name, input }) => {
                if !is_api_name(id, usize::MAX) {
                    return Err(invalid(format!(
                        "{at}.id: a `tool_use` id is made of letters, digits, `_` and `-`"
                    )));
                }
                if !is_api_name(name, 64) {
                    return Err(invalid(format!(
                        "{at}.name: a tool name is 1 to 64 letters, digits, `_` and `-`"
                    )));
                }
                if !input.is_object() {
                    return Err(invalid(format!(
                        "{at}.input: a tool's input is a JSON object"
                    )));
                }
            }
            (Role::Assistant, _) => {}
            (Role::User, _) => {
                return Err(invalid(format!(
                    "{at}: the round's first message is the contact's text only"
                )));
            }
        }
    }
    Ok(())
}

pub(super) fn is_api_name(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.chars().count() <= max
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Every `tool_use` answered by exactly one `tool_result` in the next message, and
/// every `tool_result` answering one of the previous message; ids unique
/// ([`crate::plan::pairing`], worded for a recorded round).
pub(super) fn check_pairs(messages: &[Message]) -> Result<(), AskError> {
    let pairs: Vec<(Role, Vec<&ContentBlock>)> = messages
        .iter()
        .map(|message| (message.role, message.content.iter().collect()))
        .collect();
    let Err(unpaired) = pairing::check_pairs(&pairs) else {
        return Ok(());
    };
    Err(invalid(match unpaired {
        Unpaired::DuplicateUse { index, id } => {
            format!("messages.{index}: `tool_use` id {id} is used twice; ids must be unique")
        }
        Unpaired::ResultsWithoutUses {
            index,
            position,
            id,
        }
        | Unpaired::Unexpected {
            index,
            position,
            id,
        } => format!(
            "messages.{index}.content.{position}: `tool_result` answers {id}, which no \
             `tool_use` of messages.{} holds",
            index.saturating_sub(1)
        ),
        Unpaired::AnsweredTwice {
            index,
            position,
            id,
        } => format!("messages.{index}.content.{position}: {id} is answered twice"),
        Unpaired::Unanswered {
            index,
            ids,
            last: true,
        } => format!(
            "messages.{index}: the round ends with `tool_use` ids that have no \
             `tool_result`: {}; run the tools and send their results, then the answer",
            ids.join(", ")
        ),
        Unpaired::Unanswered {
            index,
            ids,
            last: false,
        } => format!(
            "messages.{index}: `tool_use` ids were found without `tool_result` blocks \
             immediately after: {}",
            ids.join(", ")
        ),
    }))
}

/// Tool results within the caps `ask` keeps ([`MAX_TOOL_RESULT_CHARS`] each,
/// [`MAX_RESULTS_CHARS_PER_MESSAGE`] a message): refused, not cut, since the model
/// already read them whole.
pub(super) fn check_results_size(messages: &[Message]) -> Result<(), AskError> {
    for (index, message) in messages.iter().enumerate() {
        let mut total = 0;
        for (position, block) in message.content.iter().enumerate() {
            if let ContentBlock::ToolResult { content, .. } = block {
                let chars = content.chars().count();
                if chars > MAX_TOOL_RESULT_CHARS {
                    return Err(AskError::TooLarge(format!(
                        "messages.{index}.content.{position}: the tool result has {chars} \
                         characters; the limit is {MAX_TOOL_RESULT_CHARS}"
                    )));
                }
                total += chars;
            }
        }
        if total > MAX_RESULTS_CHARS_PER_MESSAGE {
            return Err(AskError::TooLarge(format!(
                "messages.{index}: its tool results have {total} characters in all; the limit \
                 is {MAX_RESULTS_CHARS_PER_MESSAGE} a message"
            )));
        }
    }
    Ok(())
}

/// A `tool_use` id of the round that the session's window already holds: the next
/// request would repeat it, and the API refuses that.
pub(super) fn reused_tool_id(window: &[StoredMessage], round: &[Message]) -> Option<String> {
    let stored: HashSet<&str> = window
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    round
        .iter()
        .flat_map(Message::tool_use_ids)
        .find(|id| stored.contains(id))
        .map(str::to_owned)
}
