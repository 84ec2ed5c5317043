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
/// Long on purpose: one rule after another in the order the API checks them (the
/// first violation is the one answered, with the API's own text), so the list reads
/// against the API's documentation; each rule is a few lines.
pub fn validate_request(request: &ModelRequest) -> Result<(), ApiRuleViolation> {
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
    let breakpoints = request.breakpoints();
    if breakpoints > MAX_BREAKPOINTS {
        return violation(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    one_hour_before_five_minutes(request)?;
    // The system blocks, by the same measured rule: an empty block is refused, a
    // blank one when every block is blank (a blank beside a written one is
    // unmeasured, and taken as in messages).
    let system: Vec<ContentBlock> = request
        .system
        .iter()
        .map(|block| ContentBlock::text(block.text.clone()))
        .collect();
    if let Some((_, refusal)) = refused_text(&system) {
        return violation(format!("system: {}", refusal.api_text()));
    }

    let merged = merge_roles(request);
    if merged.is_empty() {
        return violation("messages: at least one message is required".into());
    }
    // Text blocks as measured against the API (`crate::plan::sendable`): an empty one is
    // always refused, a whitespace-only one when its message holds nothing else; an
    // assistant message may be empty anywhere, a user message may not.
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
        thinking_leads_the_tool_loop(&merged)?;
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
mod tests {
    use super::*;
    use crate::plan::request::{CacheControl, RequestMessage, SystemBlock, Thinking, ToolDef};
    use serde_json::json;

    fn block(b: ContentBlock) -> RequestBlock {
        RequestBlock {
            block: b,
            cache_control: None,
        }
    }

    fn message(role: Role, blocks: Vec<ContentBlock>) -> RequestMessage {
        RequestMessage {
            role,
            content: blocks.into_iter().map(block).collect(),
        }
    }

    fn request(messages: Vec<RequestMessage>) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            max_tokens: 10,
            thinking: None,
            tools: vec![ToolDef {
                name: "t".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            }],
            tool_choice: None,
            system: vec![SystemBlock {
                kind: "text".into(),
                text: "be nice".into(),
                cache_control: None,
            }],
            messages,
        }
    }

    fn error(messages: Vec<RequestMessage>) -> String {
        validate_request(&request(messages)).unwrap_err().message
    }

    use ContentBlock as B;

    #[test]
    fn accepts_a_complete_tool_round() {
        let ok = request(vec![
            message(Role::User, vec![B::text("hi")]),
            message(
                Role::Assistant,
                vec![
                    B::text("checking"),
                    B::tool_use("a", "t", json!({})),
                    B::tool_use("b", "t", json!({})),
                ],
            ),
            message(
                Role::User,
                vec![
                    B::tool_result("b", "1"),
                    B::tool_result("a", "2"),
                    B::text("thanks"),
                ],
            ),
        ]);
        assert_eq!(validate_request(&ok), Ok(()));
    }

    #[test]
    fn refuses_a_tool_use_answered_twice() {
        let text = error(vec![
            message(Role::User, vec![B::text("hi")]),
            message(Role::Assistant, vec![B::tool_use("a", "t", json!({}))]),
            message(
                Role::User,
                vec![B::tool_result("a", "1"), B::tool_result("a", "2")],
            ),
        ]);
        assert_eq!(
            text,
            "messages.2.content.1: `tool_use` id a is answered by more than one `tool_result` block"
        );
    }

    #[test]
    fn refuses_an_orphan_tool_result_with_the_api_text() {
        let text = error(vec![
            message(Role::User, vec![B::text("hi")]),
            message(Role::Assistant, vec![B::tool_use("a", "t", json!({}))]),
            message(
                Role::User,
                vec![B::tool_result("a", "1"), B::tool_result("zz", "2")],
            ),
        ]);
        assert_eq!(
            text,
            "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: zz. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
        );
        let text = error(vec![message(Role::User, vec![B::tool_result("a", "1")])]);
        assert_eq!(
            text,
            "messages.0: `tool_result` block(s) provided when previous message does not contain any `tool_use` blocks"
        );
    }

    #[test]
    fn refuses_a_tool_use_without_results_first_in_the_next_message() {
        let text = error(vec![
            message(Role::User, vec![B::text("hi")]),
            message(Role::Assistant, vec![B::tool_use("a", "t", json!({}))]),
            message(Role::User, vec![B::text("first"), B::tool_result("a", "1")]),
        ]);
        assert_eq!(
            text,
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: a. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
        );
    }

    #[test]
    fn refuses_a_final_assistant_message() {
        let text = error(vec![
            message(Role::User, vec![B::text("hi")]),
            message(Role::Assistant, vec![B::text("Sure")]),
        ]);
        assert!(text.starts_with("This model does not support assistant message prefill."));
        let empty_last = request(vec![
            message(Role::User, vec![B::text("hi")]),
            message(Role::Assistant, vec![]),
        ]);
        assert_eq!(validate_request(&empty_last), Ok(()), "measured: accepted");
    }

    #[test]
    fn system_blocks_are_judged_by_the_measured_rule() {
        let mut blank = request(vec![message(Role::User, vec![B::text("hi")])]);
        blank.system[0].text = "  ".into();
        assert_eq!(
            validate_request(&blank).unwrap_err().message,
            "system: text content blocks must contain non-whitespace text"
        );
        blank.system[0].text = String::new();
        assert_eq!(
            validate_request(&blank).unwrap_err().message,
            "system: text content blocks must be non-empty"
        );
    }

    #[test]
    fn refuses_more_than_four_breakpoints() {
        let mut req = request(vec![message(
            Role::User,
            vec![B::text("a"), B::text("b"), B::text("c"), B::text("d")],
        )]);
        req.system[0].cache_control = Some(CacheControl::EPHEMERAL);
        for b in &mut req.messages[0].content {
            b.cache_control = Some(CacheControl::EPHEMERAL);
        }
        assert_eq!(
            validate_request(&req).unwrap_err().message,
            "A maximum of 4 blocks with cache_control may be provided. Found 5."
        );
    }

    #[test]
    fn refuses_a_one_hour_breakpoint_after_a_five_minute_one_with_the_apis_text() {
        let two = || request(vec![message(Role::User, vec![B::text("a"), B::text("b")])]);
        let mut ok = two();
        ok.system[0].cache_control = Some(CacheControl::ONE_HOUR);
        ok.messages[0].content[0].cache_control = Some(CacheControl::ONE_HOUR);
        ok.messages[0].content[1].cache_control = Some(CacheControl::EPHEMERAL);
        assert_eq!(validate_request(&ok), Ok(()));
        let mut late = two();
        late.system[0].cache_control = Some(CacheControl::EPHEMERAL);
        late.messages[0].content[1].cache_control = Some(CacheControl::ONE_HOUR);
        assert_eq!(
            validate_request(&late).unwrap_err().message,
            "messages.0.content.1.cache_control.ttl: a ttl='1h' cache_control block must not \
             come after a ttl='5m' cache_control block. Note that blocks are processed in the \
             following order: `tools`, `system`, `messages`."
        );
    }

    #[test]
    fn refuses_empty_and_blank_text_and_duplicate_ids() {
        assert!(
            error(vec![message(Role::User, vec![B::text("")])])
                .ends_with("text content blocks must be non-empty")
        );
        assert!(
            error(vec![message(Role::User, vec![B::text(" \n")])])
                .ends_with("must contain non-whitespace text")
        );
        assert_eq!(
            error(vec![message(Role::User, vec![])]),
            "messages.0: user messages must have non-empty content"
        );
        let text = error(vec![
            message(Role::User, vec![B::text("hi")]),
            message(
                Role::Assistant,
                vec![
                    B::tool_use("a", "t", json!({})),
                    B::tool_use("a", "t", json!({})),
                ],
            ),
            message(Role::User, vec![B::tool_result("a", "1")]),
        ]);
        assert_eq!(text, "`tool_use` ids must be unique");
    }

    #[test]
    fn text_blocks_are_judged_as_the_api_was_measured_to_judge_them() {
        // experientiallabs/experiential#804 (2026-07), and docs/model-answers.md.
        let hi = || message(Role::User, vec![B::text("hi")]);
        let call = || B::tool_use("toolu_1", "t", json!({}));
        let result = || message(Role::User, vec![B::tool_result("toolu_1", "ok")]);
        let assistant = |blocks| message(Role::Assistant, blocks);
        let accepted = [
            vec![hi(), assistant(vec![B::text("\n\n"), call()]), result()],
            vec![hi(), assistant(vec![B::text(" "), B::text("ok")]), hi()],
            vec![hi(), assistant(vec![]), hi()],
            vec![assistant(vec![]), hi()],
            vec![message(Role::User, vec![B::text("hi"), B::text(" ")])],
            vec![
                hi(),
                assistant(vec![call()]),
                message(Role::User, vec![B::tool_result("toolu_1", "")]),
            ],
        ];
        for messages in accepted {
            assert_eq!(
                validate_request(&request(messages.clone())),
                Ok(()),
                "{messages:?}"
            );
        }
        let refused = [
            (
                vec![hi(), assistant(vec![B::text(""), call()]), result()],
                "messages: text content blocks must be non-empty",
            ),
            (
                vec![hi(), assistant(vec![B::text(" ")]), hi()],
                "messages: text content blocks must contain non-whitespace text",
            ),
            (
                vec![hi(), assistant(vec![B::text("")]), hi()],
                "messages: text content blocks must be non-empty",
            ),
            (
                vec![message(Role::User, vec![B::text("\n")])],
                "messages: text content blocks must contain non-whitespace text",
            ),
            (
                vec![message(Role::User, vec![B::text(""), B::text("x")])],
                "messages: text content blocks must be non-empty",
            ),
        ];
        for (messages, text) in refused {
            assert_eq!(error(messages), text);
        }
    }

    #[test]
    fn merges_consecutive_messages_of_one_role_like_the_api() {
        let ok = request(vec![
            message(Role::User, vec![B::text("a")]),
            message(Role::User, vec![B::text("b")]),
        ]);
        assert_eq!(validate_request(&ok), Ok(()));
    }

    fn thinking_request(
        budget: u32,
        max_tokens: u32,
        messages: Vec<RequestMessage>,
    ) -> ModelRequest {
        ModelRequest {
            max_tokens,
            thinking: Some(Thinking::Enabled {
                budget_tokens: budget,
            }),
            ..request(messages)
        }
    }

    fn signed(text: &str) -> ContentBlock {
        B::Thinking {
            thinking: text.into(),
            signature: "sig".into(),
        }
    }

    #[test]
    fn thinking_needs_a_budget_of_1024_below_max_tokens() {
        let hi = || vec![message(Role::User, vec![B::text("hi")])];
        assert_eq!(
            validate_request(&thinking_request(1000, 4000, hi()))
                .unwrap_err()
                .message,
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        );
        assert!(
            validate_request(&thinking_request(2048, 2048, hi()))
                .unwrap_err()
                .message
                .starts_with("`max_tokens` must be greater than `thinking.budget_tokens`.")
        );
        assert_eq!(
            validate_request(&thinking_request(2048, 3072, hi())),
            Ok(())
        );
    }

    #[test]
    fn a_tool_loop_turn_must_start_with_its_thinking_when_thinking_is_on() {
        let loop_with = |assistant: Vec<ContentBlock>| {
            thinking_request(
                1024,
                2048,
                vec![
                    message(Role::User, vec![B::text("slots?")]),
                    message(Role::Assistant, assistant),
                    message(Role::User, vec![B::tool_result("a", "[]")]),
                ],
            )
        };
        let kept = loop_with(vec![
            signed("check"),
            B::text("checking"),
            B::tool_use("a", "t", json!({})),
        ]);
        assert_eq!(validate_request(&kept), Ok(()));
        let redacted = loop_with(vec![
            B::RedactedThinking { data: "x".into() },
            B::tool_use("a", "t", json!({})),
        ]);
        assert_eq!(validate_request(&redacted), Ok(()));
        let dropped = loop_with(vec![B::text("checking"), B::tool_use("a", "t", json!({}))]);
        assert_eq!(
            validate_request(&dropped).unwrap_err().message,
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. \
             When `thinking` is enabled, a final `assistant` message must start with a thinking block \
             (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you \
             include thinking blocks from previous turns. To avoid this requirement, disable \
             `thinking`. Please consult our documentation at \
             https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        );
        // Earlier turns may drop theirs (the API strips them), and without thinking
        // nothing is required.
        let earlier = thinking_request(
            1024,
            2048,
            vec![
                message(Role::User, vec![B::text("hi")]),
                message(Role::Assistant, vec![B::text("hello")]),
                message(Role::User, vec![B::text("slots?")]),
            ],
        );
        assert_eq!(validate_request(&earlier), Ok(()));
        let mut off = loop_with(vec![B::tool_use("a", "t", json!({}))]);
        off.thinking = None;
        assert_eq!(validate_request(&off), Ok(()));
    }

    #[test]
    fn tool_blocks_need_tool_definitions() {
        let mut req = request(vec![
            message(Role::User, vec![B::text("hi")]),
            message(Role::Assistant, vec![B::tool_use("a", "t", json!({}))]),
            message(Role::User, vec![B::tool_result("a", "1")]),
        ]);
        req.tools.clear();
        assert!(
            validate_request(&req)
                .unwrap_err()
                .message
                .contains("must define `tools`")
        );
    }
}
