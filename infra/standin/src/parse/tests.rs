use super::*;
use crate::wire::{Content, ToolResultContent, Ttl};

fn parse(body: &Value) -> Result<ParsedRequest, ApiError> {
    parse_request(body.to_string().as_bytes())
}

fn error(body: Value) -> String {
    parse(&body).unwrap_err().message
}

/// A valid body with `messages`, and the top-level fields of `extra` merged in.
fn body(messages: Value, extra: Value) -> Value {
    let mut body = json!({
        "model": "m", "max_tokens": 5,
        "tools": [{"name": "t", "description": "", "input_schema": {"type": "object"}}],
        "messages": messages,
    });
    if let (Some(object), Value::Object(extra)) = (body.as_object_mut(), extra) {
        object.extend(extra);
    }
    body
}

fn hi() -> Value {
    json!([{"role": "user", "content": "hi"}])
}

/// One user message holding `block`.
fn with_block(block: Value) -> Value {
    body(json!([{"role": "user", "content": [block]}]), json!({}))
}

/// A tool loop: an assistant `tool_use` (`input`), then the user's `result`.
fn tool_loop(input: Value, result: Value) -> Value {
    body(
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": input}]},
            {"role": "user", "content": [result]}
        ]),
        json!({}),
    )
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
    let parsed = parse(&json!({
        "model": "m", "max_tokens": 5, "system": "be nice",
        "tools": [{"name": "t", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
        "tool_choice": {"type": "none"},
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}]}
        ]
    }))
    .unwrap();
    let request = parsed.request;
    assert_eq!(request.system[0].text, "be nice");
    assert_eq!(request.tools[0].description, "");
    assert_eq!(request.tools[0].cache_control, Some(Ttl::FiveMinutes));
    assert_eq!(
        request.messages[0].content[0].content,
        Content::Text { text: "hi".into() }
    );
    let Content::ToolResult { content, .. } = &request.messages[2].content[0].content else {
        panic!("expected a tool_result");
    };
    assert_eq!(
        content.as_ref().map(ToolResultContent::text),
        Some("one\ntwo".to_owned())
    );
    assert_eq!(request.tool_choice, ToolChoice::None);
    assert!(parsed.prelude.contains("none"));
}

#[test]
fn accepts_the_documented_options_it_does_not_act_on() {
    let options = json!({
        "metadata": {"user_id": "u-1"}, "stop_sequences": ["END"], "stream": false,
        "temperature": 0.2, "top_k": 5, "top_p": 0.9, "service_tier": "auto",
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
        "thinking": {"type": "disabled"},
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
    });
    assert!(parse(&body(hi(), options)).is_ok());
    assert!(parse(&body(hi(), json!({"stream": true}))).is_ok());
    assert_eq!(
        error(body(hi(), json!({"stream": "yes"}))),
        "stream: Input should be a valid boolean"
    );
    assert_eq!(
        error(body(hi(), json!({"temperature": "warm"}))),
        "temperature: Input should be a valid number"
    );
}

/// A field degrau's own types would have ignored on the way back in (none of them
/// refuses unknown fields) is refused here, as the API refuses it.
#[test]
fn refuses_fields_the_api_does_not_know_wherever_they_are() {
    assert_eq!(
        error(body(hi(), json!({"tool_choise": {"type": "auto"}}))),
        "tool_choise: Extra inputs are not permitted"
    );
    assert_eq!(
        error(with_block(
            json!({"type": "text", "text": "x", "cache_contol": {"type": "ephemeral"}})
        )),
        "messages.0.content.0.cache_contol: Extra inputs are not permitted"
    );
    assert_eq!(
        error(body(
            json!([{"role": "user", "content": "hi", "name": "ana"}]),
            json!({})
        )),
        "messages.0.name: Extra inputs are not permitted"
    );
    assert_eq!(
        error(json!({"model": "m", "max_tokens": 5, "messages": hi(),
            "system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "scope": "org"}}]})),
        "system.0.cache_control.scope: Extra inputs are not permitted"
    );
    // An OpenAI-style tool next to the right field.
    assert_eq!(
        error(body(
            hi(),
            json!({"tools": [{"name": "t", "input_schema": {"type": "object"},
            "parameters": {"type": "object"}}]})
        )),
        "tools.0.parameters: Extra inputs are not permitted"
    );
    assert_eq!(
        error(tool_loop(
            json!({}),
            json!({"type": "tool_result", "tool_use_id": "a", "content": "ok", "id": "a"})
        )),
        "messages.2.content.0.id: Extra inputs are not permitted"
    );
    assert_eq!(
        error(body(
            hi(),
            json!({"tool_choice": {"type": "tool", "name": "t", "force": true}})
        )),
        "tool_choice.tool.force: Extra inputs are not permitted"
    );
}

/// Values of the wrong type that a `serde_json::Value` field would have taken.
#[test]
fn refuses_values_of_the_wrong_shape() {
    // A tool input serialised twice is a string, not an object.
    assert_eq!(
        error(tool_loop(
            json!("{}"),
            json!({"type": "tool_result", "tool_use_id": "a", "content": "ok"})
        )),
        "messages.1.content.0.input: Input should be a valid dictionary"
    );
    assert_eq!(
        error(body(
            hi(),
            json!({"tools": [{"name": "t", "input_schema": "{\"type\":\"object\"}"}]})
        )),
        "tools.0.input_schema: Input should be a valid dictionary"
    );
    assert_eq!(
        error(body(
            json!([{"role": "system", "content": "hi"}]),
            json!({})
        )),
        "messages.0.role: Input should be 'user' or 'assistant'"
    );
    assert_eq!(
        error(with_block(json!({"type": "image", "source": {}}))),
        "messages.0.content.0: Input tag 'image' found using 'type' does not match any of the \
         expected tags: 'text', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'"
    );
    assert_eq!(
        error(tool_loop(
            json!({}),
            json!({"type": "tool_result", "tool_use_id": "a", "is_error": "yes"})
        )),
        "messages.2.content.0.is_error: Input should be a valid boolean"
    );
    assert_eq!(
        error(with_block(
            json!({"type": "tool_use", "id": "a", "name": "t"})
        )),
        "messages.0.content.0.input: Field required"
    );
    assert_eq!(
        error(body(hi(), json!({"max_tokens": -1}))),
        "max_tokens: Input should be greater than or equal to 1"
    );
    assert_eq!(
        error(body(hi(), json!({"max_tokens": 2.5}))),
        "max_tokens: Input should be a valid integer"
    );
    assert_eq!(
        error(body(hi(), json!({"max_tokens": 0}))),
        "max_tokens: Input should be greater than or equal to 1"
    );
    assert_eq!(
        error(json!({"model": "m", "max_tokens": 5, "messages": hi(),
            "system": [{"type": "image", "text": "a"}]})),
        "system.0.type: Input should be 'text'"
    );
}

#[test]
fn reads_cache_control_and_refuses_a_bad_one() {
    let marked =
        |control: Value| with_block(json!({"type": "text", "text": "x", "cache_control": control}));
    let ttl_of = |control: Value| {
        parse(&marked(control)).unwrap().request.messages[0].content[0].cache_control
    };
    assert_eq!(ttl_of(json!({"type": "ephemeral"})), Some(Ttl::FiveMinutes));
    assert_eq!(
        ttl_of(json!({"type": "ephemeral", "ttl": "5m"})),
        Some(Ttl::FiveMinutes)
    );
    assert_eq!(
        ttl_of(json!({"type": "ephemeral", "ttl": "1h"})),
        Some(Ttl::OneHour)
    );
    assert_eq!(ttl_of(Value::Null), None);
    for ttl in [json!("10m"), json!("1hour"), json!(3600)] {
        assert_eq!(
            error(marked(json!({"type": "ephemeral", "ttl": ttl}))),
            "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"
        );
    }
    assert_eq!(
        error(marked(json!({"type": "persistent"}))),
        "messages.0.content.0.cache_control.type: Input should be 'ephemeral'"
    );
    assert_eq!(
        error(marked(json!({"ttl": "1h"}))),
        "messages.0.content.0.cache_control.type: Field required"
    );
}

#[test]
fn reads_tool_choice_and_thinking() {
    let choice = |value: Value| {
        parse(&body(hi(), json!({"tool_choice": value}))).map(|p| p.request.tool_choice)
    };
    assert_eq!(
        choice(json!({"type": "tool", "name": "t"})).unwrap(),
        ToolChoice::Tool("t".into())
    );
    assert_eq!(choice(json!({"type": "any"})).unwrap(), ToolChoice::Any);
    assert_eq!(choice(Value::Null).unwrap(), ToolChoice::Auto);
    assert_eq!(
        choice(json!({"type": "tool"})).unwrap_err().message,
        "tool_choice.tool.name: Field required"
    );
    assert_eq!(
        choice(json!({"type": "sometimes"})).unwrap_err().message,
        "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
    );
    let thinking =
        json!({"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048}});
    assert_eq!(
        parse(&body(hi(), thinking))
            .unwrap()
            .request
            .thinking_budget(),
        Some(2048)
    );
    assert_eq!(
        error(body(hi(), json!({"thinking": {"type": "enabled"}}))),
        "thinking.enabled.budget_tokens: Field required"
    );
}

#[test]
fn a_bedrock_body_names_no_model_carries_its_version_and_nothing_else() {
    let invoke =
        |body: Value| from_bedrock(body.to_string().as_bytes(), "anthropic.claude-sonnet-5");
    let good =
        json!({"anthropic_version": BEDROCK_ANTHROPIC_VERSION, "max_tokens": 5, "messages": hi()});
    let value = invoke(good.clone()).unwrap();
    assert_eq!(value["model"], "anthropic.claude-sonnet-5");
    assert!(value.get("anthropic_version").is_none());
    assert!(parse_value(&value).is_ok());

    let refused = |extra: Value| {
        let mut body = good.clone();
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        invoke(body).unwrap_err().message
    };
    assert_eq!(
        refused(json!({"model": "m"})),
        "Malformed input request: #: extraneous key [model] is not permitted, please reformat \
         your input and try again."
    );
    assert!(refused(json!({"stream": true})).contains("extraneous key [stream]"));
    assert!(
        refused(json!({"anthropic_version": "2023-06-01"}))
            .contains("#/anthropic_version: expected bedrock-2023-05-31")
    );
    let mut missing = good;
    missing.as_object_mut().unwrap().remove("anthropic_version");
    assert!(
        invoke(missing)
            .unwrap_err()
            .message
            .contains("required key [anthropic_version] not found")
    );
}

#[test]
fn takes_back_what_an_answer_carries_beside_a_block_s_own_fields() {
    // `citations: null` on text, `caller` on a tool call: what the API answers.
    assert!(
        parse(&with_block(
            json!({"type": "text", "text": "x", "citations": null})
        ))
        .is_ok()
    );
    let mut called = tool_loop(
        json!({}),
        json!({"type": "tool_result", "tool_use_id": "a", "content": "ok"}),
    );
    called["messages"][1]["content"][0]["caller"] = json!({"type": "direct"});
    assert!(parse(&called).is_ok());
    called["messages"][1]["content"][0]["caller"] = json!("direct");
    assert_eq!(
        error(called.clone()),
        "messages.1.content.0.caller: Input should be a valid dictionary"
    );
    called["messages"][1]["content"][0]["caller"] = json!({});
    assert_eq!(
        error(called),
        "messages.1.content.0.caller.type: Field required"
    );
}
