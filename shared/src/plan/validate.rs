//! The Messages API's own request rules, with the texts the real API answers.
//!
//! The request builder should never produce a request that breaks them; property
//! tests check it with this module, and the offline model stand-in refuses what the
//! real API refuses with it. Like the API, consecutive messages of one role are
//! merged before the checks (so indices in the texts are those of merged messages).
//!
//! (`docs/DESIGN.md`: invariant 3.)

use crate::domain::{ContentBlock, Role};
use crate::plan::pairing::{Unpaired, check_pairs};
use crate::plan::request::{CacheTtl, MAX_BREAKPOINTS, ModelRequest, RequestBlock};
use crate::plan::sendable::refused_text;

/// A rule the request breaks; `message` is the text the real API returns in its
/// 400 `invalid_request_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiRuleViolation {
    /// The API's error text.
    pub message: String,
}

fn violation(message: String) -> Result<(), ApiRuleViolation> {
    Err(ApiRuleViolation { message })
}

/// Least `thinking.budget_tokens` the API accepts.
pub const MIN_THINKING_BUDGET: u32 = 1_024;

/// Checks a request the way the Messages API does.
///
/// One rule after another in the order the API checks them (the first violation
/// is the one answered, with the API's own text), so the list reads against the
/// API's documentation; each step checks a few rules.
pub fn validate_request(request: &ModelRequest) -> Result<(), ApiRuleViolation> {
    thinking_budget_fits(request)?;
    breakpoints_allowed(request)?;
    system_is_sendable(request)?;
    let merged = merge_roles(request);
    messages_are_sendable(&merged)?;
    tools_are_paired(request, &merged)
}

/// The thinking budget: at least the API's least, and below `max_tokens`.
fn thinking_budget_fits(request: &ModelRequest) -> Result<(), ApiRuleViolation> {
    if let Some(budget) = request.thinking.and_then(|t| t.budget()) {
        if budget < MIN_THINKING_BUDGET {
            return violation(format!(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}"
            ));
        }
        if request.max_tokens <= budget {
            return violation(
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our \
                 documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
                    .into(),
            );
        }
    }
    Ok(())
}

/// The cache breakpoints: at most [`MAX_BREAKPOINTS`], the one-hour ones first.
fn breakpoints_allowed(request: &ModelRequest) -> Result<(), ApiRuleViolation> {
    let breakpoints = request.breakpoints();
    if breakpoints > MAX_BREAKPOINTS {
        return violation(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    one_hour_before_five_minutes(request)
}

/// The system blocks, by the same measured rule as messages' text: an empty block
/// is refused, a blank one when every block is blank (a blank beside a written one
/// is unmeasured, and taken as in messages).
fn system_is_sendable(request: &ModelRequest) -> Result<(), ApiRuleViolation> {
    let system: Vec<ContentBlock> = request
        .system
        .iter()
        .map(|block| ContentBlock::text(block.text.clone()))
        .collect();
    if let Some((_, refusal)) = refused_text(&system) {
        return violation(format!("system: {}", refusal.api_text()));
    }
    Ok(())
}

/// The merged messages: at least one; text blocks as measured against the API
/// (`crate::plan::sendable`): an empty one is always refused, a whitespace-only
/// one when its message holds nothing else; an assistant message may be empty
/// anywhere, a user message may not; and no prefill at the end.
fn messages_are_sendable(merged: &[(Role, Vec<&RequestBlock>)]) -> Result<(), ApiRuleViolation> {
    if merged.is_empty() {
        return violation("messages: at least one message is required".into());
    }
    for (index, (role, blocks)) in merged.iter().enumerate() {
        if blocks.is_empty() && *role == Role::User {
            return violation(format!(
                "messages.{index}: user messages must have non-empty content"
            ));
        }
        if let Some((_, refusal)) = refused_text(blocks.iter().map(|b| &b.block)) {
            return violation(format!("messages: {}", refusal.api_text()));
        }
    }
    // An empty final assistant message was measured to be accepted; one with
    // content is a prefill.
    if matches!(merged.last(), Some((Role::Assistant, blocks)) if !blocks.is_empty()) {
        return violation(
            "This model does not support assistant message prefill. The conversation must end with a user message."
                .into(),
        );
    }
    Ok(())
}

/// The tool blocks: every call answered in the next message, the tool loop led by
/// its thinking when thinking is on, and tools defined when any block names one.
fn tools_are_paired(
    request: &ModelRequest,
    merged: &[(Role, Vec<&RequestBlock>)],
) -> Result<(), ApiRuleViolation> {
    let uses_tools = merged.iter().any(|(_, blocks)| {
        tool_use_ids(blocks).next().is_some() || tool_result_ids(blocks).next().is_some()
    });
    let pairs: Vec<(Role, Vec<&ContentBlock>)> = merged
        .iter()
        .map(|(role, blocks)| (*role, blocks.iter().map(|b| &b.block).collect()))
        .collect();
    if let Err(unpaired) = check_pairs(&pairs) {
        return violation(pairing_text(&unpaired));
    }
    if request.thinking.and_then(|t| t.budget()).is_some() {
        thinking_leads_the_tool_loop(merged)?;
    }
    if uses_tools && request.tools.is_empty() {
        // Not a quoted API text: the notes only say such a request must define tools.
        return violation(
            "messages: requests containing `tool_use` or `tool_result` blocks must define `tools`"
                .into(),
        );
    }
    Ok(())
}

/// With thinking on, the assistant turn of a running tool loop (the one before a
/// final user message of tool results) must start with its thinking: the API
/// refuses a request that dropped it.
fn thinking_leads_the_tool_loop(
    merged: &[(Role, Vec<&RequestBlock>)],
) -> Result<(), ApiRuleViolation> {
    let Some(((Role::User, last), before)) = merged.split_last() else {
        return Ok(());
    };
    if !last
        .iter()
        .any(|b| matches!(b.block, ContentBlock::ToolResult { .. }))
    {
        return Ok(());
    }
    let index = before.len().saturating_sub(1);
    let Some((Role::Assistant, turn)) = before.last() else {
        return Ok(());
    };
    match turn.first().map(|b| &b.block) {
        Some(block) if block.is_thinking() => Ok(()),
        first => violation(format!(
            "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. \
             When `thinking` is enabled, a final `assistant` message must start with a thinking block \
             (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you \
             include thinking blocks from previous turns. To avoid this requirement, disable \
             `thinking`. Please consult our documentation at \
             https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
            first.map_or("nothing", block_type)
        )),
    }
}

/// A block's `type` as the API names it.
fn block_type(block: &ContentBlock) -> &'static str {
    match block {
        ContentBlock::Text { .. } => "text",
        ContentBlock::ToolUse { .. } => "tool_use",
        ContentBlock::ToolResult { .. } => "tool_result",
        ContentBlock::Thinking { .. } => "thinking",
        ContentBlock::RedactedThinking { .. } => "redacted_thinking",
    }
}

fn merge_roles(request: &ModelRequest) -> Vec<(Role, Vec<&RequestBlock>)> {
    let mut merged: Vec<(Role, Vec<&RequestBlock>)> = Vec::new();
    for message in &request.messages {
        match merged.last_mut() {
            Some((role, blocks)) if *role == message.role => blocks.extend(&message.content),
            _ => merged.push((message.role, message.content.iter().collect())),
        }
    }
    merged
}

/// The API's text for the first unpaired tool call or result.
fn pairing_text(unpaired: &Unpaired<'_>) -> String {
    match unpaired {
        Unpaired::DuplicateUse { .. } => "`tool_use` ids must be unique".into(),
        Unpaired::ResultsWithoutUses { index, .. } => format!(
            "messages.{index}: `tool_result` block(s) provided when previous message does not contain any `tool_use` blocks"
        ),
        Unpaired::Unexpected {
            index,
            position,
            id,
        } => format!(
            "messages.{index}.content.{position}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
        ),
        // Not a quoted API text.
        Unpaired::AnsweredTwice {
            index,
            position,
            id,
        } => format!(
            "messages.{index}.content.{position}: `tool_use` id {id} is answered by more than one `tool_result` block"
        ),
        Unpaired::Unanswered { index, ids, .. } => format!(
            "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
            ids.join(", ")
        ),
    }
}

fn tool_use_ids<'a>(blocks: &'a [&'a RequestBlock]) -> impl Iterator<Item = &'a str> {
    blocks.iter().filter_map(|b| match &b.block {
        ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
        _ => None,
    })
}

fn tool_result_ids<'a>(blocks: &'a [&'a RequestBlock]) -> impl Iterator<Item = &'a str> {
    blocks.iter().filter_map(|b| match &b.block {
        ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
        _ => None,
    })
}

/// One-hour breakpoints must come before five-minute ones, in the order tools →
/// system → messages (degrau's tools carry no breakpoint). Paths are the
/// request's own, before any merge of messages.
fn one_hour_before_five_minutes(request: &ModelRequest) -> Result<(), ApiRuleViolation> {
    let system = request
        .system
        .iter()
        .enumerate()
        .map(|(index, block)| (format!("system.{index}"), block.cache_control));
    let messages = request
        .messages
        .iter()
        .enumerate()
        .flat_map(|(n, message)| {
            message
                .content
                .iter()
                .enumerate()
                .map(move |(index, block)| {
                    (format!("messages.{n}.content.{index}"), block.cache_control)
                })
        });
    let mut five_minutes_seen = false;
    for (path, control) in system.chain(messages) {
        match control.map(|c| c.lifetime()) {
            Some(CacheTtl::FiveMinutes) => five_minutes_seen = true,
            Some(CacheTtl::OneHour) if five_minutes_seen => {
                return violation(format!(
                    "{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after \
                     a ttl='5m' cache_control block. Note that blocks are processed in the \
                     following order: `tools`, `system`, `messages`."
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
