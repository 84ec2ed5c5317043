//! The storage lifecycle end to end: erasure racing queued jobs, retention that
//! never breaks an open window, the compactor's bounded work, the sweep, and
//! transient DynamoDB conflicts. The real `ask` and `compactor` binaries run on
//! moto and the stand-in; time passing is simulated by moving stored times back
//! (moto never deletes TTL-expired items: the tests delete what DynamoDB's TTL
//! would).

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

use std::time::Duration;

use degrau::domain::FactKey;
use degrau::tenant::TenantConfig;
use degrau_awsproxy::{Fault as ProxyFault, Running};
use degrau_tests::moto;
use degrau_tests::stack::{FullStack, StackOptions, is_compactor_call, model_calls};
use serde_json::{Value, json};

const TENANT: &str = "life";

fn compacting(threshold: u64, keep: usize) -> TenantConfig {
    TenantConfig {
        allowed_fact_keys: Some(
            ["name", "preferred_time"]
                .iter()
                .map(|k| FactKey::parse(k).unwrap())
                .collect(),
        ),
        compaction_threshold_tokens: Some(threshold),
        window_keep_messages: Some(keep),
        ..TenantConfig::default()
    }
}

/// Turn `i` of a scheduling conversation (slot lists, bookings, small talk).
fn turn(i: usize) -> String {
    let day = 1 + i % 9;
    match i % 3 {
        0 => format!("turn {i:03}: any free slots on 2026-12-0{day}?"),
        1 => format!("turn {i:03}: please book 10:30 on 2026-12-0{day}"),
        _ => format!("turn {i:03}: thanks, that works for me"),
    }
}

fn round_of(reply: &degrau_tests::HttpReply) -> (u64, u64) {
    (
        reply.body["round"]["first_seq"].as_u64().unwrap_or(0),
        reply.body["round"]["last_seq"].as_u64().unwrap_or(0),
    )
}

/// A stack whose functions reach DynamoDB through a fresh fault-injecting proxy.
async fn stack_behind_proxy() -> (FullStack, Running) {
    let proxy = degrau_awsproxy::spawn(moto::endpoint()).await;
    let stack = FullStack::start_with(&StackOptions {
        dynamodb_endpoint: Some(proxy.url().to_owned()),
        ..StackOptions::default()
    })
    .await;
    (stack, proxy)
}

/// DynamoDB's answer to a transaction that lost to another one in flight on the
/// same item: cancelled, with a `TransactionConflict` reason.
fn transaction_conflict(body_contains: Option<&str>) -> Vec<ProxyFault> {
    let mut fault = json!({"service": "dynamodb", "operation": "TransactWriteItems",
        "status": 400, "type": "TransactionCanceledException",
        "message": "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]"});
    if let Some(needle) = body_contains {
        fault["body_contains"] = Value::String(needle.to_owned());
    }
    serde_json::from_value(json!([fault])).unwrap()
}

// ---------------------------------------------------------------------------------
// Transient transaction conflicts
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_commit_cancelled_by_a_transaction_conflict_is_retried_and_the_round_is_stored_once() {
    let (stack, proxy) = stack_behind_proxy().await;
    assert_eq!(
        stack.post(TENANT, "rita", "a first round").await.status,
        200
    );
    proxy.faults(transaction_conflict(None)).unwrap();
    let reply = stack.post(TENANT, "rita", "a second round").await;
    assert_eq!(
        (reply.status, round_of(&reply)),
        (200, (3, 4)),
        "{}",
        reply.raw
    );
    assert!(proxy.pending_faults().is_empty(), "the conflict was hit");
    let texts: Vec<String> = stack
        .stored_messages(TENANT, "rita")
        .await
        .iter()
        .filter(|m| m.is_user_text())
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["a first round", "a second round"]);
}

#[tokio::test]
async fn a_step_cancelled_by_a_transaction_conflict_is_retried_within_the_same_delivery() {
    let (stack, proxy) = stack_behind_proxy().await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let mut queued = false;
    for i in 0..8 {
        let reply = stack.post(TENANT, "saulo", &turn(i)).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        queued |= reply.body["compaction_queued"] == true;
    }
    assert!(queued, "a step was requested");
    // Only the step's transaction holds the `:seen` condition value.
    proxy.faults(transaction_conflict(Some(":seen"))).unwrap();
    let reports = stack.drain().await;
    assert!(proxy.pending_faults().is_empty(), "the conflict was hit");
    assert!(
        reports
            .iter()
            .all(|r| r.failed == 0 && r.invoke_error.is_none()),
        "no delivery failed: {reports:?}"
    );
    let memory = stack.memory(TENANT, "saulo").await;
    assert!(
        memory["session"]["steps"].as_u64().unwrap() >= 1,
        "{memory}"
    );
}

/// How many faults the stand-in still holds (an empty push answers the count).
async fn faults_queued(stack: &FullStack) -> u64 {
    reqwest::Client::new()
        .post(format!("{}/stand-in/faults", stack.standin.url))
        .json(&json!([]))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["queued"]
        .as_u64()
        .unwrap()
}

/// Waits until the stand-in took every queued fault: the model call that took the
/// last one is in flight (a `hang_ms` fault holds it there).
async fn until_the_faults_are_taken(stack: &FullStack) {
    for _ in 0..3_000 {
        if faults_queued(stack).await == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no model call took the queued faults");
}

/// Every text a contact's items hold (messages, summaries, facts), raw.
async fn stored_texts(stack: &FullStack, contact: &str) -> String {
    stack
        .contact_items(TENANT, contact)
        .await
        .iter()
        .map(|item| format!("{item:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The bodies of every message waiting in a queue (received, so held invisible
/// for the queue's visibility timeout: call it last).
async fn queue_bodies(stack: &FullStack, url: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    for _ in 0..5 {
        let received = stack
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        if received.messages().is_empty() {
            break;
        }
        bodies.extend(
            received
                .messages()
                .iter()
                .filter_map(|m| m.body().map(str::to_owned)),
        );
    }
    bodies
}

// ---------------------------------------------------------------------------------
// Erasure racing a late job
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_step_job_in_flight_across_an_erase_and_a_new_message_writes_nothing_back() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let contact = "+5511977776666";
    let mut queued = false;
    for i in 0..8 {
        let reply = stack.post(TENANT, contact, &turn(i)).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        queued |= reply.body["compaction_queued"] == true;
    }
    assert!(queued, "a step was requested");

    // The step's summary call hangs; meanwhile the contact is erased and writes
    // again as a new conversation. Then the summary comes back.
    stack.standin.faults(json!([{"hang_ms": 5_000}])).await;
    let path = format!("/v1/contacts/{contact}");
    let (_, fresh) = tokio::join!(stack.drain(), async {
        until_the_faults_are_taken(&stack).await;
        let erased = stack.call("DELETE", &path, TENANT, None).await;
        assert_eq!(erased.status, 200, "{}", erased.raw);
        for i in 0..3 {
            let reply = stack.post(TENANT, contact, &format!("hello {i}")).await;
            assert_eq!(reply.status, 200, "{}", reply.raw);
        }
        stack.memory(TENANT, contact).await
    });
    let log = stack.standin.requests().await;
    assert!(
        model_calls(&log).iter().any(|c| is_compactor_call(c)),
        "the step reached the model"
    );

    let memory = stack.memory(TENANT, contact).await;
    assert_eq!(memory, fresh, "the new conversation is intact");
    assert_eq!(
        (
            &memory["session"]["summary"],
            &memory["session"]["summarized_until"],
            &memory["session"]["steps"]
        ),
        (&Value::Null, &json!(0), &json!(0)),
        "{memory}"
    );
    let texts = stored_texts(&stack, contact).await;
    assert!(
        !texts.contains("turn 00"),
        "the erased conversation came back"
    );
    let messages = stack.stored_messages(TENANT, contact).await;
    assert_eq!(messages.len(), 6, "{messages:?}");
}

#[tokio::test]
async fn no_job_in_the_queue_or_the_dead_letter_queue_names_the_contact() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let contact = "+5511966665555";
    assert_eq!(
        stack.post(TENANT, contact, "Hi, I'm Tereza").await.status,
        200
    );
    stack.age_contact(TENANT, contact, 2 * 86_400).await;
    // A new session: its facts job for session 1 fails every time (an answer the
    // compactor cannot read) and ends in the dead-letter queue.
    assert_eq!(stack.post(TENANT, contact, "hello again").await.status, 200);
    let unreadable = json!({"content": [{"type": "text", "text": "no idea"}]});
    stack
        .standin
        .script(json!([unreadable, unreadable, unreadable]))
        .await;
    stack.drain().await;
    // A step job waits in the queue.
    let mut queued = false;
    for i in 0..8 {
        let reply = stack.post(TENANT, contact, &turn(i)).await;
        queued |= reply.body["compaction_queued"] == true;
    }
    assert!(queued, "a step is in the queue");
    let erased = stack
        .call("DELETE", &format!("/v1/contacts/{contact}"), TENANT, None)
        .await;
    assert_eq!(erased.status, 200);

    let waiting = queue_bodies(&stack, &stack.queue.queue_url).await;
    let dead = queue_bodies(&stack, &stack.dlq_url).await;
    assert!(
        !waiting.is_empty() && !dead.is_empty(),
        "{waiting:?} {dead:?}"
    );
    for body in waiting.iter().chain(&dead) {
        assert!(
            !body.contains("5511966665555"),
            "a job names the contact: {body}"
        );
        let job: Value = serde_json::from_str(body).unwrap();
        assert_eq!(job["tenant"], TENANT, "{body}");
    }
}
