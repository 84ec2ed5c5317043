//! The stand-in refuses what the real API refuses, with the same texts and the
//! API's error envelope.

use serde_json::{Value, json};

use crate::helpers::{body_with, start, start_with};

fn assert_invalid(reply: &crate::helpers::Reply, message: &str) {
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["type"], "error");
    assert_eq!(reply.body["error"]["type"], "invalid_request_error");
    assert_eq!(reply.body["error"]["message"], message);
}

#[tokio::test]
async fn errors_use_the_api_envelope_with_a_request_id_header() {
    let standin = start().await;
    let reply = standin
        .messages(&json!({"max_tokens": 5, "messages": []}))
        .await;
    assert_invalid(&reply, "model: Field required");
    let id = reply.body["request_id"].as_str().unwrap();
    assert!(id.starts_with("req_standin_"));
    assert_eq!(reply.headers["request-id"], id);
    let keys: Vec<&String> = reply.body.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 3, "only type, error and request_id: {keys:?}");
}

#[tokio::test]
async fn a_missing_api_key_is_401_and_a_missing_version_is_400() {
    let standin = start().await;
    let body = body_with(json!([{"role": "user", "content": "hi"}]));
    let response = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", "")
        .json(&body)
        .send()
        .await
        .unwrap();
    let reply = crate::helpers::reply(response).await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.body["error"]["type"], "authentication_error");

    let response = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("x-api-key", "k")
        .json(&body)
        .send()
        .await
        .unwrap();
    let reply = crate::helpers::reply(response).await;
    assert_invalid(&reply, "anthropic-version: header is required");

    // A bearer token (how the Python SDK 2.x sends the key) passes too; an empty one
    // does not.
    for (token, status) in [("Bearer k", 400), ("Bearer ", 401)] {
        let response = standin
            .client
            .post(standin.url("/v1/messages"))
            .header("authorization", token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            crate::helpers::reply(response).await.status,
            status,
            "{token}"
        );
    }
}

#[tokio::test]
async fn a_body_that_is_not_json_or_lacks_fields_is_400() {
    let standin = start().await;
    let response = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("x-api-key", "k")
        .header("anthropic-version", "2023-06-01")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let reply = crate::helpers::reply(response).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["error"]["type"], "invalid_request_error");
    let reply = standin
        .messages(&json!({"model": "m", "messages": []}))
        .await;
    assert_invalid(&reply, "max_tokens: Field required");
    let reply = standin
        .messages(&json!({"model": "m", "max_tokens": 5}))
        .await;
    assert_invalid(&reply, "messages: Field required");
}

#[tokio::test]
async fn an_orphan_tool_result_is_refused_with_the_api_text() {
    let standin = start().await;
    let reply = standin
        .messages(&body_with(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                {"type": "tool_result", "tool_use_id": "zz", "content": "2"}]}
        ])))
        .await;
    assert_invalid(
        &reply,
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: zz. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
    );
    let reply = standin
        .messages(&body_with(json!([
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1"}]}
        ])))
        .await;
    assert_invalid(
        &reply,
        "messages.0: `tool_result` block(s) provided when previous message does not contain any `tool_use` blocks",
    );
}

#[tokio::test]
async fn a_tool_use_needs_its_results_first_in_the_next_message() {
    let standin = start().await;
    let reply = standin
        .messages(&body_with(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            {"role": "user", "content": [
                {"type": "text", "text": "first"},
                {"type": "tool_result", "tool_use_id": "a", "content": "1"}]}
        ])))
        .await;
    assert_invalid(
        &reply,
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: a. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    );
}

#[tokio::test]
async fn five_breakpoints_are_refused() {
    let standin = start().await;
    let marked = json!({"type": "ephemeral"});
    let mut body = body_with(json!([{"role": "user", "content": [
        {"type": "text", "text": "a", "cache_control": marked},
        {"type": "text", "text": "b", "cache_control": marked},
        {"type": "text", "text": "c", "cache_control": marked},
        {"type": "text", "text": "d", "cache_control": marked}]}]));
    body["system"][0]["cache_control"] = marked;
    let reply = standin.messages(&body).await;
    assert_invalid(
        &reply,
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    );
}

#[tokio::test]
async fn a_final_assistant_message_is_refused() {
    let standin = start().await;
    let reply = standin
        .messages(&body_with(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Sure"}
        ])))
        .await;
    assert_invalid(
        &reply,
        "This model does not support assistant message prefill. The conversation must end with a user message.",
    );
}

#[tokio::test]
async fn tool_names_must_match_the_pattern_and_be_unique() {
    let standin = start().await;
    let mut body = body_with(json!([{"role": "user", "content": "hi"}]));
    body["tools"] = json!([
        {"name": "ok", "description": "", "input_schema": {"type": "object"}},
        {"name": "ok", "description": "", "input_schema": {"type": "object"}}]);
    assert_invalid(
        &standin.messages(&body).await,
        "tools: Tool names must be unique.",
    );
    body["tools"][1]["name"] = Value::from("no spaces");
    assert_invalid(
        &standin.messages(&body).await,
        "tools.1.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'",
    );
}

#[tokio::test]
async fn a_prompt_over_the_context_limit_is_too_long() {
    let standin = start_with(degrau_standin::Config::default().with_context_limit(50)).await;
    let body = body_with(json!([{"role": "user", "content": "x".repeat(400)}]));
    let tokens = crate::helpers::prompt_tokens(&body);
    assert!(tokens > 50);
    assert_invalid(
        &standin.messages(&body).await,
        &format!("prompt is too long: {tokens} tokens > 50 maximum"),
    );
}

/// What degrau's own types would read back without a word (they ignore unknown
/// fields and take any JSON as a tool input) is refused here, as by the API.
#[tokio::test]
async fn a_wrongly_serialised_request_is_refused_as_the_api_refuses_it() {
    let standin = start().await;
    let mut misspelled = body_with(json!([{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_contol": {"type": "ephemeral"}}]}]));
    assert_invalid(
        &standin.messages(&misspelled).await,
        "messages.0.content.0.cache_contol: Extra inputs are not permitted",
    );
    misspelled["messages"][0]["content"][0] = json!({"type": "text", "text": "hi",
        "cache_control": {"type": "ephemeral", "ttl": "60m"}});
    assert_invalid(
        &standin.messages(&misspelled).await,
        "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'",
    );
    let double_encoded = body_with(json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": "{}"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1"}]}
    ]));
    assert_invalid(
        &standin.messages(&double_encoded).await,
        "messages.1.content.0.input: Input should be a valid dictionary",
    );
    let mut top_level = body_with(json!([{"role": "user", "content": "hi"}]));
    top_level["max_token"] = json!(5);
    assert_invalid(
        &standin.messages(&top_level).await,
        "max_token: Extra inputs are not permitted",
    );
    // Every one of them was logged as refused.
    assert!(
        standin
            .logged()
            .await
            .iter()
            .all(|call| call["status"] == 400)
    );
}
