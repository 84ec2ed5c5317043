//! The session sweep end to end: the real `compactor` binary invoked with the
//! scheduled rule's input, DynamoDB's sweep index and SQS FIFO on moto, the bridge
//! delivering the facts job, and the stand-in answering the extraction.

use degrau::domain::FactKey;
use degrau::tenant::TenantConfig;
use degrau_tests::stack::{FullStack, is_compactor_call, model_calls};
use serde_json::{Value, json};

const TENANT: &str = "barber";
const DAY: i64 = 86_400;

fn with_facts() -> TenantConfig {
    TenantConfig {
        allowed_fact_keys: Some(
            ["name", "preferred_time"]
                .iter()
                .map(|k| FactKey::parse(k).unwrap())
                .collect(),
        ),
        ..TenantConfig::default()
    }
}

async fn sweep(stack: &FullStack) -> Value {
    stack
        .compactor
        .invoke(json!({"sweep": true}))
        .await
        .expect("the sweep answered")
}

/// The fact extractions the stand-in was asked for (the compactor's other calls,
/// a closed session's search summary among them, aside).
async fn compactor_calls(stack: &FullStack) -> usize {
    let log = stack.standin.requests().await;
    model_calls(&log)
        .into_iter()
        .filter(|entry| is_compactor_call(entry))
        .filter(|entry| {
            entry["body"]["system"][0]["text"]
                .as_str()
                .is_some_and(|text| text.starts_with(degrau::compaction::FACTS_INSTRUCTIONS))
        })
        .count()
}

#[tokio::test]
async fn a_session_whose_contact_never_writes_again_gets_its_facts_from_the_sweep() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &with_facts()).await;
    let reply = stack
        .post(TENANT, "elis", "Hi, I'm Elis and I prefer evenings")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);

    assert_eq!(
        sweep(&stack).await,
        json!({"found": 0, "enqueued": 0, "skipped": 0, "failed": 0, "buckets_failed": 0, "folds": 0}),
        "an open session is not swept"
    );

    stack.age_indexed_contact(TENANT, "elis", 2 * DAY).await;
    assert_eq!(
        sweep(&stack).await,
        json!({"found": 1, "enqueued": 1, "skipped": 0, "failed": 0, "buckets_failed": 0, "folds": 0})
    );
    let proposal = json!({"facts": [
        {"key": "name", "value": "Elis", "seq": 1},
        {"key": "preferred_time", "value": "evenings", "seq": 1}
    ]});
    stack
        .standin
        .script(json!([{"content": [{"type": "tool_use", "id": "toolu_sweep", "name": "record_facts", "input": proposal}], "stop_reason": "tool_use"}]))
        .await;
    stack.drain().await;

    let memory = stack.memory(TENANT, "elis").await;
    let facts: Vec<(&str, &str, &Value)> = memory["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["key"].as_str().unwrap(),
                f["value"].as_str().unwrap(),
                &f["source"],
            )
        })
        .collect();
    let source = json!({"session": 1, "seq": 1});
    assert_eq!(
        facts,
        vec![
            ("name", "Elis", &source),
            ("preferred_time", "evenings", &source)
        ]
    );
    assert_eq!(compactor_calls(&stack).await, 1, "one extraction");

    // Swept once: the next sweep finds nothing.
    assert_eq!(sweep(&stack).await["found"], 0);

    // The contact comes back: a new session, and no second extraction of session 1.
    let reply = stack.post(TENANT, "elis", "Hello again").await;
    assert_eq!(reply.body["session"], 2, "{}", reply.raw);
    stack.drain().await;
    assert_eq!(
        compactor_calls(&stack).await,
        1,
        "the next message did not request session 1's facts again"
    );
}
