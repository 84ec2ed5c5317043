//! The storage lifecycle end to end: erasure racing queued jobs, retention that
//! never breaks an open window, the compactor's bounded work, the sweep, and
//! transient DynamoDB conflicts. The real `ask` and `compactor` binaries run on
//! moto and the stand-in; time passing is simulated by moving stored times back
//! (moto never deletes TTL-expired items: the tests delete what DynamoDB's TTL
//! would).

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

use degrau::domain::FactKey;
use degrau::tenant::TenantConfig;
use degrau_awsproxy::{Fault as ProxyFault, Running};
use degrau_tests::moto;
use degrau_tests::stack::{FullStack, StackOptions};
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
