//! Tests of the Messages API's request rules, each refusal with the API's own text.

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

fn thinking_request(budget: u32, max_tokens: u32, messages: Vec<RequestMessage>) -> ModelRequest {
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
