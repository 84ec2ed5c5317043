//! Extended thinking: with `thinking` enabled the stand-in answers with a signed
//! thinking block first, and, like the real API, refuses a request whose thinking
//! blocks were altered, forged, or dropped from a running tool loop's turn.

use serde_json::{Value, json};

use crate::helpers::{demo_tools, start};

fn assert_invalid(reply: &crate::helpers::Reply, message: &str) {
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["type"], "invalid_request_error");
    assert_eq!(reply.body["error"]["message"], message, "{}", reply.body);
}

/// A request with thinking on (budget 1,024) and the demo tools.
fn thinking_body(messages: Value) -> Value {
    json!({
        "model": "claude-sonnet-5",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": serde_json::to_value(demo_tools()).expect("tools serialise"),
        "system": [{"type": "text", "text": "You schedule haircuts."}],
        "messages": messages,
    })
}

fn blocks(body: &Value) -> Vec<Value> {
    body["content"].as_array().cloned().unwrap_or_default()
}

/// The stand-in's answer to a question about free slots (thinking, a redacted block,
/// text and a tool call), and the request that continues the tool loop with it.
async fn tool_loop(standin: &crate::helpers::TestStandIn) -> (Vec<Value>, Value) {
    let question = json!({"role": "user", "content": "any free slots on 2026-12-03?"});
    let reply = standin.messages(&thinking_body(json!([question]))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let turn = blocks(&reply.body);
    let id = turn
        .iter()
        .find(|b| b["type"] == "tool_use")
        .map(|b| b["id"].clone())
        .expect("a tool call");
    let next = json!([
        question,
        {"role": "assistant", "content": turn},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "[]"}]},
    ]);
    (turn, next)
}

#[tokio::test]
async fn a_thinking_request_is_answered_with_signed_thinking_first() {
    let standin = start().await;
    let reply = standin
        .messages(&thinking_body(
            json!([{"role": "user", "content": "hello"}]),
        ))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let content = blocks(&reply.body);
    assert_eq!(content[0]["type"], "thinking");
    assert!(
        !content[0]["thinking"]
            .as_str()
            .expect("a string")
            .is_empty()
    );
    assert!(
        !content[0]["signature"]
            .as_str()
            .expect("a string")
            .is_empty()
    );
    assert_eq!(content[1]["type"], "text");

    let plain = standin
        .messages(&json!({"model": "m", "max_tokens": 256,
            "messages": [{"role": "user", "content": "hello"}]}))
        .await;
    assert!(
        blocks(&plain.body).iter().all(|b| b["type"] == "text"),
        "no thinking unless asked"
    );
}

#[tokio::test]
async fn a_tool_loop_that_sends_its_thinking_back_unchanged_is_answered() {
    let standin = start().await;
    let (turn, next) = tool_loop(&standin).await;
    assert_eq!(turn[0]["type"], "thinking");
    assert_eq!(turn[1]["type"], "redacted_thinking");
    let reply = standin.messages(&thinking_body(next)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["stop_reason"], "end_turn");
}

#[tokio::test]
async fn an_altered_thinking_block_is_refused_with_the_api_text() {
    let standin = start().await;
    let (_, mut next) = tool_loop(&standin).await;
    next[1]["content"][0]["thinking"] = json!("I changed my mind about what I thought.");
    let reply = standin.messages(&thinking_body(next)).await;
    assert_invalid(
        &reply,
        "messages.1.content.0: Invalid `signature` in `thinking` block",
    );
}

#[tokio::test]
async fn a_forged_redacted_thinking_block_is_refused() {
    let standin = start().await;
    let (_, mut next) = tool_loop(&standin).await;
    next[1]["content"][1]["data"] = json!("Zm9yZ2Vk");
    let reply = standin.messages(&thinking_body(next)).await;
    assert_invalid(
        &reply,
        "messages.1.content.1: Invalid `data` in `redacted_thinking` block",
    );
}

#[tokio::test]
async fn a_tool_loop_turn_without_its_thinking_is_refused_with_the_api_text() {
    let standin = start().await;
    let (_, mut next) = tool_loop(&standin).await;
    let kept: Vec<Value> = next[1]["content"]
        .as_array()
        .expect("present")
        .iter()
        .filter(|b| b["type"] != "thinking" && b["type"] != "redacted_thinking")
        .cloned()
        .collect();
    next[1]["content"] = Value::Array(kept);
    let reply = standin.messages(&thinking_body(next)).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .expect("present")
            .starts_with(
                "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`."
            ),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn thinking_parameters_are_checked_like_the_api() {
    let standin = start().await;
    let hello = json!([{"role": "user", "content": "hello"}]);
    let mut small = thinking_body(hello.clone());
    small["thinking"]["budget_tokens"] = json!(512);
    assert_invalid(
        &standin.messages(&small).await,
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
    );
    let mut tight = thinking_body(hello);
    tight["max_tokens"] = json!(1024);
    let reply = standin.messages(&tight).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .expect("present")
            .starts_with("`max_tokens` must be greater than `thinking.budget_tokens`.")
    );
}

#[tokio::test]
async fn a_scripted_thinking_block_is_signed_so_it_can_come_back() {
    let standin = start().await;
    let script = json!([{"content": [
        {"type": "thinking", "thinking": "scripted thought", "signature": ""},
        {"type": "redacted_thinking", "data": ""},
        {"type": "tool_use", "id": "toolu_s1", "name": "list_free_slots", "input": {"day": "2026-12-03"}}
    ]}]);
    standin.control("/stand-in/script", &script).await;
    let (turn, next) = tool_loop(&standin).await;
    assert_eq!(turn[0]["thinking"], "scripted thought");
    assert_ne!(turn[0]["signature"], "");
    assert_ne!(turn[1]["data"], "");
    let reply = standin.messages(&thinking_body(next)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}
