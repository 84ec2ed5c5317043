//! Closing a contact's session on request (`POST /v1/contacts/{contact}/sessions`,
//! what a chat framework's "clear" means) through the real `ask` and `compactor`
//! binaries: the session closes as the idle timeout would close it (its archive and
//! record written, its facts requested), the facts stay, and the next round opens
//! session 2 on an empty window.

use degrau_tests::HttpReply;
use degrau_tests::stack::{FullStack, is_compactor_call, model_calls};
use serde_json::{Value, json};

use crate::helpers::{self, assert_error};

const TENANT: &str = "session-close";

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

async fn commit(stack: &FullStack, contact: &str, head: &Value, text: &str) -> HttpReply {
    let body = json!({
        "head": head,
        "messages": [
            {"role": "user", "content": text},
            {"role": "assistant", "content": [{"type": "text", "text": format!("Noted: {text}")}]}
        ],
        "usage": {"input_tokens": 120, "output_tokens": 8}
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

async fn close(stack: &FullStack, contact: &str) -> HttpReply {
    stack
        .call(
            "POST",
            &format!("/v1/contacts/{contact}/sessions"),
            TENANT,
            None,
        )
        .await
}

#[tokio::test]
async fn a_closed_session_keeps_the_facts_and_the_next_round_opens_session_2() {
    let stack = FullStack::start(&[]).await;
    stack
        .configure(TENANT, &helpers::compacting(&["name"], 8_000, 6))
        .await;
    for text in ["hello, I am Dia", "book me a haircut on Friday BK-4471"] {
        let view = context(&stack, "dia").await;
        let reply = commit(&stack, "dia", &view["head"], text).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
    }
    let fact = stack
        .call_with(
            "PUT",
            "/v1/contacts/dia/facts/name",
            "",
            TENANT,
            &[("x-scopes", "memory:write")],
            Some(r#"{"value": "Dia"}"#),
        )
        .await;
    assert_eq!(fact.status, 200, "{}", fact.raw);
    let read_before = context(&stack, "dia").await;
    let calls_before = model_calls(&stack.standin.requests().await).len();

    let closed = close(&stack, "dia").await;
    assert_eq!(closed.status, 200, "{}", closed.raw);
    assert_eq!(closed.body, json!({"session": 2, "closed_session": 1}));
    let items = stack.contact_items(TENANT, "dia").await;
    // Closing again closes nothing: the new session holds no message.
    let again = close(&stack, "dia").await;
    assert_eq!(again.body, json!({"session": 2, "closed_session": null}));
    assert_eq!(stack.contact_items(TENANT, "dia").await, items);

    // The closed session's facts were requested, as at an idle timeout.
    stack.drain().await;
    let log = stack.standin.requests().await;
    assert!(
        model_calls(&log)[calls_before..]
            .iter()
            .any(|call| is_compactor_call(call)),
        "a facts job ran for session 1"
    );
    let memory = stack.memory(TENANT, "dia").await;
    assert_eq!(memory["session"]["number"], 2, "{memory}");
    assert_eq!(memory["session"]["last_seq"], 0);
    assert_eq!(memory["facts"][0]["value"], "Dia", "facts kept: {memory}");
    let sessions = stack
        .call("GET", "/v1/contacts/dia/sessions", TENANT, None)
        .await;
    assert_eq!(
        sessions.body["sessions"][0]["session"], 1,
        "{}",
        sessions.raw
    );
    assert!(
        sessions.raw.contains("BK-4471"),
        "the closed session's record: {}",
        sessions.raw
    );

    // The next context: session 2, the facts, no window; a round read before the
    // close is stale.
    let view = context(&stack, "dia").await;
    assert_eq!(view["session"], 2);
    assert_eq!(view["opens_session"], false);
    assert_eq!(view["messages"], json!([]));
    assert!(view["system"][1]["text"].as_str().unwrap().contains("Dia"));
    assert_error(
        &commit(&stack, "dia", &read_before["head"], "late").await,
        409,
        "conflict",
    );
    let reply = commit(&stack, "dia", &view["head"], "a new chat").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["session"], 2);
    assert_eq!(reply.body["round"]["first_seq"], 1);
    let memory = stack.memory(TENANT, "dia").await;
    assert_eq!(memory["facts"][0]["value"], "Dia");
    assert_eq!(memory["session"]["last_seq"], 2);
}

#[tokio::test]
async fn closing_a_contact_never_seen_changes_nothing() {
    let stack = FullStack::start(&[]).await;
    let closed = close(&stack, "nobody").await;
    assert_eq!(closed.status, 200, "{}", closed.raw);
    assert_eq!(closed.body, json!({"session": 1, "closed_session": null}));
    assert!(stack.contact_items(TENANT, "nobody").await.is_empty());
}
