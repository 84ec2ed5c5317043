//! Memory for an agent that runs its own loop, end to end: the real `ask` and
//! `compactor` binaries, DynamoDB and SQS FIFO on moto, the bridge as the event
//! source mapping. The "client" here plays its model itself; only the compactor's
//! summaries go to the stand-in.

use degrau_tests::HttpReply;
use degrau_tests::stack::FullStack;
use serde_json::{Value, json};

use crate::helpers::{self, assert_error};

const TENANT: &str = "own-loop";

async fn context(stack: &FullStack, contact: &str) -> Value {
    let reply = stack
        .call(
            "GET",
            &format!("/v1/contacts/{contact}/context"),
            TENANT,
            None,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    reply.body
}

async fn commit(stack: &FullStack, contact: &str, head: &str, i: usize, input: u64) -> HttpReply {
    let id = format!("toolu_e2e_{i}");
    let body = json!({
        "head": head,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": format!("turn {i}: any free slot on 2026-12-04?")}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": id, "name": "list_free_slots", "input": {"day": "2026-12-04"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
                "content": format!("[\"09:00\", \"10:30\"] (turn {i}) {}", "slot ".repeat(100))}]},
            {"role": "assistant", "content": [{"type": "text", "text": format!("Turn {i}: 09:00 or 10:30.")}]}
        ],
        "usage": {"input_tokens": input, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    });
    stack
        .call(
            "POST",
            &format!("/v1/contacts/{contact}/rounds"),
            TENANT,
            Some(&body.to_string()),
        )
        .await
}

#[tokio::test]
async fn recorded_rounds_are_stored_whole_step_down_and_stale_heads_conflict() {
    let stack = FullStack::start(&[]).await;
    stack
        .configure(TENANT, &helpers::compacting(&["name"], 1_000, 4))
        .await;
    let first = context(&stack, "ana").await;
    assert_eq!(first["head"], "h1.-.0.0.1");
    assert_eq!(first["messages"], json!([]));

    // Six recorded rounds, the last four past the threshold: steps are queued, and
    // the bridge runs the compactor between rounds.
    for i in 0..6 {
        let view = context(&stack, "ana").await;
        let reply = commit(
            &stack,
            "ana",
            view["head"].as_str().unwrap(),
            i,
            400 * i as u64,
        )
        .await;
        assert_eq!(reply.status, 200, "round {i}: {}", reply.raw);
        assert_eq!(reply.body["round"]["first_seq"], 1 + 4 * i as u64);
        assert_eq!(reply.body["compaction_queued"], i >= 3, "round {i}");
        stack.drain().await;
    }
    let memory = stack.memory(TENANT, "ana").await;
    assert!(
        memory["session"]["steps"].as_u64().unwrap() >= 1,
        "{memory}"
    );
    assert_eq!(memory["session"]["last_seq"], 24);
    let view = context(&stack, "ana").await;
    let system = view["system"][1]["text"].as_str().unwrap();
    assert!(
        !system.contains("(nothing earlier in this session)"),
        "{system}"
    );
    let window = view["messages"].as_array().unwrap();
    assert!(window.len() < 24, "the window starts after the summary");
    assert_eq!(window[0]["role"], "user");
    assert_eq!(window[0]["content"][0]["type"], "text", "a safe start");

    // A step landing between the read and the commit keeps the head fresh.
    let view = context(&stack, "ana").await;
    let reply = commit(&stack, "ana", view["head"].as_str().unwrap(), 6, 2_000).await;
    assert_eq!(reply.body["compaction_queued"], true, "{}", reply.raw);
    let steps = |memory: &Value| memory["session"]["steps"].as_u64().unwrap();
    let steps_before = steps(&stack.memory(TENANT, "ana").await);
    let read = context(&stack, "ana").await;
    let head = read["head"].as_str().unwrap().to_owned();
    stack.drain().await;
    assert!(
        steps(&stack.memory(TENANT, "ana").await) > steps_before,
        "a step landed"
    );
    let reply = commit(&stack, "ana", &head, 7, 10).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    // ...but the round committed since makes it stale: 409, nothing written.
    let before = stack.stored_messages(TENANT, "ana").await;
    let stale = commit(&stack, "ana", &head, 8, 10).await;
    assert_error(&stale, 409, "conflict");
    assert_eq!(
        stack.stored_messages(TENANT, "ana").await.len(),
        before.len()
    );
}

/// A round body with `messages`, on `head`.
fn round_body(head: &str, messages: Value) -> String {
    json!({
        "head": head,
        "messages": messages,
        "usage": {"input_tokens": 100, "output_tokens": 10}
    })
    .to_string()
}

#[tokio::test]
async fn bad_rounds_get_the_documented_4xx_and_change_nothing() {
    let stack = FullStack::start(&[]).await;
    let view = context(&stack, "bea").await;
    let reply = commit(&stack, "bea", view["head"].as_str().unwrap(), 0, 100).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let stale_head = view["head"].as_str().unwrap().to_owned();
    let view = context(&stack, "bea").await;
    let head = view["head"].as_str().unwrap().to_owned();

    let before = (
        stack.contact_items(TENANT, "bea").await,
        stack.memory(TENANT, "bea").await,
    );
    let user = |text: &str| json!({"role": "user", "content": [{"type": "text", "text": text}]});
    let answer = json!({"role": "assistant", "content": [{"type": "text", "text": "Sure."}]});
    let orphan = json!([
        user("hello"),
        {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nobody", "content": "42"}]},
        answer.clone()
    ]);
    let two_users = json!([user("one"), user("two"), answer.clone()]);
    let fine = json!([user("fine"), answer.clone()]);
    let huge = json!([user("big"), {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_big", "name": "list_free_slots", "input": {"day": "2026-12-04"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_big",
            "content": "x".repeat(300 * 1024)}]},
        answer.clone()]);
    let cases = [
        (
            "orphan tool result",
            round_body(&head, orphan),
            400,
            "invalid_request",
        ),
        (
            "two user messages",
            round_body(&head, two_users),
            400,
            "invalid_request",
        ),
        (
            "stale head",
            round_body(&stale_head, fine.clone()),
            409,
            "conflict",
        ),
        ("body too large", round_body(&head, huge), 413, "too_large"),
    ];
    for (name, body, status, kind) in cases {
        let reply = stack
            .call("POST", "/v1/contacts/bea/rounds", TENANT, Some(&body))
            .await;
        assert_error(&reply, status, kind);
        assert!(
            !reply.body["error"]["message"]
                .as_str()
                .unwrap_or("")
                .is_empty(),
            "{name}: a message"
        );
        let after = (
            stack.contact_items(TENANT, "bea").await,
            stack.memory(TENANT, "bea").await,
        );
        assert_eq!(after, before, "{name} changed nothing");
    }
    // The fresh head still commits.
    let reply = stack
        .call(
            "POST",
            "/v1/contacts/bea/rounds",
            TENANT,
            Some(&round_body(&head, fine)),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["round"]["first_seq"], 5);
}

/// A client passes on what the Messages API returned, as a Python SDK's
/// `model_dump()` or the TypeScript SDK's raw JSON has it: the usage object whole
/// (its 5m/1h split, `service_tier`, `server_tool_use`), text blocks with
/// `citations: null`, a tool result as text blocks. The real binary stores it
/// (before, every such round was 400: the body refused unknown fields).
#[tokio::test]
async fn a_round_as_the_api_returns_it_is_accepted_by_the_real_binary() {
    let stack = FullStack::start(&[]).await;
    let view = context(&stack, "cai").await;
    let body = json!({
        "head": view["head"],
        "messages": [
            {"role": "user", "content": "Free on Friday?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check.", "citations": null},
                {"type": "tool_use", "id": "toolu_api_1", "name": "list_free_slots",
                 "input": {"day": "2026-12-04"}, "caller": {"type": "direct"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_api_1",
                "content": [{"type": "text", "text": "09:00"}]}]},
            {"role": "assistant", "content": [{"type": "text", "text": "09:00 is free.", "citations": null}]}
        ],
        "usage": {
            "input_tokens": 25, "output_tokens": 9,
            "cache_creation_input_tokens": 1200, "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0},
            "server_tool_use": null, "service_tier": "standard"
        }
    });
    let reply = stack
        .call(
            "POST",
            "/v1/contacts/cai/rounds",
            TENANT,
            Some(&body.to_string()),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["usage"]["context_tokens"], 1225);
    let next = context(&stack, "cai").await;
    assert_eq!(
        next["messages"][1]["content"][0],
        json!({"type": "text", "text": "Let me check."}),
        "stored as degrau keeps a text block"
    );
    assert_eq!(next["messages"][2]["content"][0]["content"], "09:00");
}
