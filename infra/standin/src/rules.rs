//! The Messages API's rules over a request of the right shape, with the texts the
//! real API answers (`NOTES-ANTHROPIC.md`), checked in the order the API checks
//! them: the first one broken is the one answered. Written for the stand-in from
//! the API's documentation, not shared with degrau's own validator, so that the
//! two can disagree and a test catch it.
//!
//! Like the API, consecutive messages of one role are merged before the message
//! rules (so indices in their texts are those of merged messages).
//!
//! The rules on empty and blank text are the ones another project measured
//! against the real API in 2026-07 (github.com/experientiallabs/experiential,
//! pull request #804), texts included:
//!
//! - an empty text block is always refused, in any role, beside anything
//!   (`messages: text content blocks must be non-empty`; `system: …` in `system`);
//! - a whitespace-only text block is refused only when its message holds nothing
//!   but whitespace-only text (`messages: text content blocks must contain
//!   non-whitespace text`): `[{text:" "},{text:"ok"}]` and `[{text:"\n\n"},
//!   tool_use]` are accepted. A `tool_use`, `tool_result` or thinking block counts
//!   as something else; thinking beside whitespace-only text alone is unmeasured;
//! - an assistant message may be empty anywhere (first, last, mid-conversation,
//!   two in a row); a user message may not (`messages.N: user messages must have
//!   non-empty content`);
//! - a `tool_result`'s content is not checked (`""`, `[]`, `" "` and
//!   `[{text:""}]` are all accepted).

use std::collections::{BTreeSet, HashSet};

use crate::error::ApiError;
use crate::wire::{Block, Content, MessagesRequest, Role, ToolChoice, Ttl};

/// Most blocks with `cache_control` in one request.
pub const MAX_BREAKPOINTS: usize = 4;

/// Least `thinking.budget_tokens` the API accepts.
pub const MIN_THINKING_BUDGET: u64 = 1_024;

/// Checks a request; the error is the 400 the API would answer.
pub fn check(request: &MessagesRequest) -> Result<(), ApiError> {
    thinking_budget(request)?;
    tools(request)?;
    breakpoints(request)?;
    // `system` is read as one message of text blocks. Measured: `""` (a string: no
    // block) accepted, `"  "` refused, `[{text:""}]` and `[{text:"a"},{text:""}]`
    // refused as empty; a blank block beside a non-blank one is unmeasured, and
    // accepted as in messages.
    let system: Vec<Option<&str>> = request
        .system
        .iter()
        .map(|block| Some(block.text.as_str()))
        .collect();
    if let Some(problem) = text_problem(&system) {
        return Err(ApiError::invalid(format!("system: {problem}")));
    }
    let merged = merge_roles(request);
    text_rules(&merged)?;
    // An empty final assistant message is accepted (measured), so it prefills
    // nothing: only one with content is refused.
    if merged
        .last()
        .is_some_and(|(role, blocks)| *role == Role::Assistant && !blocks.is_empty())
    {
        return Err(ApiError::invalid(
            "This model does not support assistant message prefill. The conversation must end \
             with a user message.",
        ));
    }
    tool_pairs(&merged)?;
    if request.thinking_budget().is_some() {
        thinking_leads_the_tool_loop(&merged)?;
    }
    let uses_tools = merged.iter().flat_map(|(_, blocks)| blocks).any(|b| {
        matches!(
            b.content,
            Content::ToolUse { .. } | Content::ToolResult { .. }
        )
    });
    if uses_tools && request.tools.is_empty() {
        // Not a quoted API text: the notes only say such a request must define tools.
        return Err(ApiError::invalid(
            "messages: requests containing `tool_use` or `tool_result` blocks must define `tools`",
        ));
    }
    Ok(())
}

fn thinking_budget(request: &MessagesRequest) -> Result<(), ApiError> {
    let Some(budget) = request.thinking_budget() else {
        return Ok(());
    };
    if budget < MIN_THINKING_BUDGET {
        return Err(ApiError::invalid(format!(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}"
        )));
    }
    if request.max_tokens <= budget {
        return Err(ApiError::invalid(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our \
             documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
        ));
    }
    Ok(())
}

/// Tool names match `^[a-zA-Z0-9_-]{1,64}$` and are unique; a forced tool is
/// defined.
fn tools(request: &MessagesRequest) -> Result<(), ApiError> {
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
    // Not quoted API texts: the notes give neither.
    match &request.tool_choice {
        ToolChoice::Tool(name) if !seen.contains(name.as_str()) => Err(ApiError::invalid(format!(
            "tool_choice: tool `{name}` is not defined in `tools`"
        ))),
        ToolChoice::Any if request.tools.is_empty() => Err(ApiError::invalid(
            "tool_choice: `any` requires at least one tool in `tools`",
        )),
        _ => Ok(()),
    }
}

/// At most [`MAX_BREAKPOINTS`], and no one-hour breakpoint after a five-minute
/// one in the order tools → system → messages (paths are the request's own,
/// before any merge).
fn breakpoints(request: &MessagesRequest) -> Result<(), ApiError> {
    let tools = request
        .tools
        .iter()
        .enumerate()
        .map(|(index, tool)| (format!("tools.{index}"), tool.cache_control));
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
    let marked: Vec<(String, Ttl)> = tools
        .chain(system)
        .chain(messages)
        .filter_map(|(path, ttl)| ttl.map(|ttl| (path, ttl)))
        .collect();
    if marked.len() > MAX_BREAKPOINTS {
        return Err(ApiError::invalid(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {}.",
            marked.len()
        )));
    }
    let mut five_minutes_seen = false;
    for (path, ttl) in marked {
        match ttl {
            Ttl::FiveMinutes => five_minutes_seen = true,
            Ttl::OneHour if five_minutes_seen => {
                return Err(ApiError::invalid(format!(
                    "{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after \
                     a ttl='5m' cache_control block. Note that blocks are processed in the \
                     following order: `tools`, `system`, `messages`."
                )));
            }
            Ttl::OneHour => {}
        }
    }
    Ok(())
}

/// Messages merged by role, as the API merges them.
type Merged<'a> = Vec<(Role, Vec<&'a Block>)>;

fn merge_roles(request: &MessagesRequest) -> Merged<'_> {
    let mut merged: Merged<'_> = Vec::new();
    for message in &request.messages {
        match merged.last_mut() {
            Some((role, blocks)) if *role == message.role => blocks.extend(&message.content),
            _ => merged.push((message.role, message.content.iter().collect())),
        }
    }
    merged
}

/// At least one message; no empty user message; no empty text block; no message
/// whose blocks are all whitespace-only text (the measured rules of the module's
/// docs).
///
/// The checks run on merged messages, as the API's other message rules do: a user
/// message `""` followed by a user message `"hi"` is one non-empty message (that
/// case is unmeasured). The first message broken is the one answered.
fn text_rules(merged: &Merged<'_>) -> Result<(), ApiError> {
    if merged.is_empty() {
        return Err(ApiError::invalid(
            "messages: at least one message is required",
        ));
    }
    for (index, (role, blocks)) in merged.iter().enumerate() {
        if blocks.is_empty() && *role == Role::User {
            return Err(ApiError::invalid(format!(
                "messages.{index}: user messages must have non-empty content"
            )));
        }
        let texts: Vec<Option<&str>> = blocks
            .iter()
            .map(|block| match &block.content {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if let Some(problem) = text_problem(&texts) {
            return Err(ApiError::invalid(format!("messages: {problem}")));
        }
    }
    Ok(())
}

/// What is wrong with the text of one message's blocks (`None` for a block that is
/// not text), if anything: an empty text block, or nothing but whitespace-only
/// text. No blocks at all is not this rule's business.
fn text_problem(blocks: &[Option<&str>]) -> Option<&'static str> {
    if blocks.iter().flatten().any(|text| text.is_empty()) {
        return Some("text content blocks must be non-empty");
    }
    let blank = |block: &Option<&str>| block.is_some_and(|text| text.trim().is_empty());
    (!blocks.is_empty() && blocks.iter().all(blank))
        .then_some("text content blocks must contain non-whitespace text")
}

fn tool_use_ids<'a>(blocks: &[&'a Block]) -> Vec<&'a str> {
    blocks
        .iter()
        .filter_map(|b| match &b.content {
            Content::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect()
}

/// The ids a user turn answers: only its leading run of `tool_result` blocks
/// counts (results go first).
fn leading_results<'a>(blocks: &[&'a Block]) -> BTreeSet<&'a str> {
    blocks
        .iter()
        .map_while(|b| match &b.content {
            Content::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect()
}

/// Every `tool_use` id unique and answered first thing in the next message; every
/// `tool_result` answering a `tool_use` of the message before.
fn tool_pairs(merged: &Merged<'_>) -> Result<(), ApiError> {
    let mut seen_ids = HashSet::new();
    for (index, (role, blocks)) in merged.iter().enumerate() {
        let uses = tool_use_ids(blocks);
        if uses.iter().any(|id| !seen_ids.insert(*id)) {
            return Err(ApiError::invalid("`tool_use` ids must be unique"));
        }
        let has_results = blocks
            .iter()
            .any(|b| matches!(b.content, Content::ToolResult { .. }));
        if *role == Role::User && has_results {
            let previous: BTreeSet<&str> = match index.checked_sub(1).map(|i| &merged[i]) {
                Some((Role::Assistant, blocks)) => tool_use_ids(blocks).into_iter().collect(),
                _ => BTreeSet::new(),
            };
            if previous.is_empty() {
                return Err(ApiError::invalid(format!(
                    "messages.{index}: `tool_result` block(s) provided when previous message does not contain any `tool_use` blocks"
                )));
            }
            for (position, block) in blocks.iter().enumerate() {
                if let Content::ToolResult { tool_use_id, .. } = &block.content
                    && !previous.contains(tool_use_id.as_str())
                {
                    return Err(ApiError::invalid(format!(
                        "messages.{index}.content.{position}: unexpected `tool_use_id` found in `tool_result` blocks: {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    )));
                }
            }
        }
        if *role == Role::Assistant && !uses.is_empty() {
            let answered = merged
                .get(index + 1)
                .map(|(_, next)| leading_results(next))
                .unwrap_or_default();
            let missing: Vec<&str> = uses
                .into_iter()
                .filter(|id| !answered.contains(id))
                .collect();
            if !missing.is_empty() {
                return Err(ApiError::invalid(format!(
                    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    missing.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// With thinking on, the assistant turn of a running tool loop (the one before a
/// final user message of tool results) must start with its thinking.
fn thinking_leads_the_tool_loop(merged: &Merged<'_>) -> Result<(), ApiError> {
    let Some(((Role::User, last), before)) = merged.split_last() else {
        return Ok(());
    };
    if !last
        .iter()
        .any(|b| matches!(b.content, Content::ToolResult { .. }))
    {
        return Ok(());
    }
    let index = before.len().saturating_sub(1);
    let Some((Role::Assistant, turn)) = before.last() else {
        return Ok(());
    };
    match turn.first().map(|b| &b.content) {
        Some(block) if block.is_thinking() => Ok(()),
        first => Err(ApiError::invalid(format!(
            "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. \
             When `thinking` is enabled, a final `assistant` message must start with a thinking block \
             (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you \
             include thinking blocks from previous turns. To avoid this requirement, disable \
             `thinking`. Please consult our documentation at \
             https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
            first.map_or("nothing", Content::kind)
        ))),
    }
}

#[cfg(test)]
mod tests;
