use serde_json::{Value, json};

use crate::parse::parse_request;

fn error(body: Value) -> String {
    parse_request(body.to_string().as_bytes())
        .unwrap_err()
        .message
}

fn accepted(body: Value) -> bool {
    parse_request(body.to_string().as_bytes()).is_ok()
}

/// A body with the tool `t` and `messages`.
fn body(messages: Value) -> Value {
    json!({"model": "m", "max_tokens": 5,
        "tools": [{"name": "t", "description": "", "input_schema": {"type": "object"}}],
        "messages": messages})
}

fn tool_use(id: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "t", "input": {}})
}

fn tool_result(id: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})
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
    assert!(accepted(body(&["a-b_C9"])));
}

#[test]
fn refuses_a_forced_tool_that_is_not_defined() {
    let forced = |choice: Value| {
        let mut body = body(json!([{"role": "user", "content": "hi"}]));
        body["tool_choice"] = choice;
        body
    };
    assert!(accepted(forced(json!({"type": "tool", "name": "t"}))));
    assert_eq!(
        error(forced(json!({"type": "tool", "name": "x"}))),
        "tool_choice: tool `x` is not defined in `tools`"
    );
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
fn refuses_a_one_hour_breakpoint_after_a_five_minute_one() {
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
    assert!(accepted(body(hour.clone(), hour.clone(), plain.clone())));
    assert!(accepted(body(hour.clone(), five.clone(), five.clone())));
    assert_eq!(
        error(body(five, hour.clone(), hour.clone())),
        "system.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a \
         ttl='5m' cache_control block. Note that blocks are processed in the following \
         order: `tools`, `system`, `messages`."
    );
    // No ttl is a five-minute breakpoint.
    assert!(
        error(body(hour.clone(), plain, hour))
            .starts_with("messages.0.content.0.cache_control.ttl: a ttl='1h'")
    );
}

#[test]
fn passes_on_the_api_rule_texts_verbatim() {
    assert_eq!(
        error(body(
            json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}])
        )),
        "This model does not support assistant message prefill. The conversation must end with a user message."
    );
    assert_eq!(
        error(body(
            json!([{"role": "user", "content": [{"type": "text", "text": " "}]}])
        )),
        "messages: text content blocks must contain non-whitespace text"
    );
    assert_eq!(
        error(body(json!([{"role": "user", "content": []}]))),
        "messages.0: user messages must have non-empty content"
    );
    assert_eq!(
        error(body(json!([]))),
        "messages: at least one message is required"
    );
}

#[test]
fn merges_consecutive_messages_of_one_role_before_the_checks() {
    assert!(accepted(body(json!([
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "again"}
    ]))));
    assert_eq!(
        error(body(json!([
            {"role": "user", "content": "hi"},
            {"role": "user", "content": [{"type": "text", "text": ""}]}
        ]))),
        "messages: text content blocks must be non-empty"
    );
    // An empty user message merged into a non-empty one is not empty (unmeasured).
    assert!(accepted(body(json!([
        {"role": "user", "content": ""},
        {"role": "user", "content": "hi"}
    ]))));
    // Indices are those of merged messages.
    assert_eq!(
        error(body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": []}
        ]))),
        "messages.2: user messages must have non-empty content"
    );
}

const EMPTY: &str = "messages: text content blocks must be non-empty";
const BLANK: &str = "messages: text content blocks must contain non-whitespace text";
const EMPTY_USER: &str = "messages.0: user messages must have non-empty content";

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// `hi`, then an assistant message with `content`, then `next`.
fn assistant(content: Value) -> Value {
    body(json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": "next"}
    ]))
}

/// `hi`, then `[text, tool_use a]` from the assistant, then the result of `a`.
fn before_tool_use(first: &str) -> Value {
    body(json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [text(first), tool_use("a")]},
        {"role": "user", "content": [tool_result("a")]}
    ]))
}

/// The rules measured against the real API (experientiallabs/experiential pull
/// request #804), one row each: `None` is a 200, else the 400's text.
#[test]
fn empty_and_blank_text_is_refused_exactly_where_the_real_api_refuses_it() {
    let user = |content: Value| body(json!([{"role": "user", "content": content}]));
    let result = |content: Value| {
        body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [tool_use("a")]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": content}]}
        ]))
    };
    let system = |system: Value| {
        let mut body = user(json!("hi"));
        body["system"] = system;
        body
    };
    let rows: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "assistant [\"\", tool_use]",
            before_tool_use(""),
            Some(EMPTY),
        ),
        (
            "assistant [\"\\n\\n\", tool_use]",
            before_tool_use("\n\n"),
            None,
        ),
        (
            "assistant [\"\"] alone",
            assistant(json!([text("")])),
            Some(EMPTY),
        ),
        (
            "assistant [\" \"] alone",
            assistant(json!([text(" ")])),
            Some(BLANK),
        ),
        (
            "assistant [\" \", \"ok\"]",
            assistant(json!([text(" "), text("ok")])),
            None,
        ),
        ("assistant [] mid-conversation", assistant(json!([])), None),
        ("assistant \"\" (a string)", assistant(json!("")), None),
        (
            "assistant [] first",
            body(json!([{"role": "assistant", "content": []}, {"role": "user", "content": "hi"}])),
            None,
        ),
        (
            "assistant [] last",
            body(json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": []}])),
            None,
        ),
        (
            "assistant [] twice in a row",
            body(json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": []},
                {"role": "assistant", "content": []},
                {"role": "user", "content": "next"}
            ])),
            None,
        ),
        ("tool_result \"\"", result(json!("")), None),
        ("tool_result []", result(json!([])), None),
        ("tool_result \" \"", result(json!(" ")), None),
        ("tool_result [\"\"]", result(json!([text("")])), None),
        ("user \"\\n\"", user(json!("\n")), Some(BLANK)),
        ("user [\" \"]", user(json!([text(" ")])), Some(BLANK)),
        ("user \"\"", user(json!("")), Some(EMPTY_USER)),
        ("user []", user(json!([])), Some(EMPTY_USER)),
        (
            "user [\"hi\", \" \"]",
            user(json!([text("hi"), text(" ")])),
            None,
        ),
        (
            "user [\"\", \"x\"]",
            user(json!([text(""), text("x")])),
            Some(EMPTY),
        ),
        ("system \"\" (a string)", system(json!("")), None),
        (
            "system \"  \"",
            system(json!("  ")),
            Some("system: text content blocks must contain non-whitespace text"),
        ),
        (
            "system [\"\"]",
            system(json!([text("")])),
            Some("system: text content blocks must be non-empty"),
        ),
        (
            "system [\"a\", \"\"]",
            system(json!([text("a"), text("")])),
            Some("system: text content blocks must be non-empty"),
        ),
    ];
    for (case, body, expected) in rows {
        let outcome = parse_request(body.to_string().as_bytes()).map_err(|e| e.message);
        match expected {
            None => assert!(outcome.is_ok(), "{case}: {outcome:?}"),
            Some(text) => assert_eq!(outcome.unwrap_err(), text, "{case}"),
        }
    }
}

#[test]
fn a_tool_or_thinking_block_is_something_beside_blank_text() {
    // Beside a tool call, blank text is accepted (measured for "\n\n").
    assert!(accepted(before_tool_use(" ")));
    // Beside thinking it is unmeasured; the stand-in accepts it the same way.
    let thought = crate::thinking::thinking_block("hm".into());
    assert!(accepted(assistant(json!([thought, text(" ")]))));
    // An empty text block is refused whatever is beside it.
    let thought = crate::thinking::thinking_block("hm".into());
    assert_eq!(
        error(assistant(json!([thought, text(""), text("ok")]))),
        EMPTY
    );
}

#[test]
fn every_tool_result_answers_a_tool_use_of_the_message_before() {
    let exchange = |uses: Vec<Value>, results: Vec<Value>| {
        body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": uses},
            {"role": "user", "content": results}
        ]))
    };
    assert!(accepted(exchange(
        vec![tool_use("a"), tool_use("b")],
        vec![
            tool_result("b"),
            tool_result("a"),
            json!({"type": "text", "text": "and?"})
        ]
    )));
    assert_eq!(
        error(exchange(
            vec![tool_use("a")],
            vec![tool_result("a"), tool_result("z")]
        )),
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: z. Each \
         `tool_result` block must have a corresponding `tool_use` block in the previous message."
    );
    // Results go first: text before them leaves the call unanswered.
    assert_eq!(
        error(exchange(
            vec![tool_use("a")],
            vec![json!({"type": "text", "text": "here"}), tool_result("a")]
        )),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: a. \
         Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    );
    assert_eq!(
        error(exchange(
            vec![tool_use("a"), tool_use("a")],
            vec![tool_result("a")]
        )),
        "`tool_use` ids must be unique"
    );
    assert_eq!(
        error(body(
            json!([{"role": "user", "content": [tool_result("a")]}])
        )),
        "messages.0: `tool_result` block(s) provided when previous message does not contain any \
         `tool_use` blocks"
    );
    let mut untooled = exchange(vec![tool_use("a")], vec![tool_result("a")]);
    untooled.as_object_mut().unwrap().remove("tools");
    assert_eq!(
        error(untooled),
        "messages: requests containing `tool_use` or `tool_result` blocks must define `tools`"
    );
}

#[test]
fn thinking_needs_a_budget_under_max_tokens_and_leads_a_running_tool_loop() {
    let thinking = |budget: u64, max_tokens: u64, messages: Value| {
        let mut body = body(messages);
        body["max_tokens"] = json!(max_tokens);
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        body
    };
    let hi = json!([{"role": "user", "content": "hi"}]);
    assert!(accepted(thinking(1024, 2048, hi.clone())));
    assert_eq!(
        error(thinking(1000, 2048, hi.clone())),
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    );
    assert!(error(thinking(2048, 2048, hi)).starts_with("`max_tokens` must be greater than"));
    let without_thoughts = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [tool_use("a")]},
        {"role": "user", "content": [tool_result("a")]}
    ]);
    assert!(
        error(thinking(1024, 2048, without_thoughts)).starts_with(
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`."
        )
    );
}
