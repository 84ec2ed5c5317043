//! The platform's limits, end to end: the real `ask` binary under the local Runtime
//! API (which advertises the invocation deadline the test chooses), DynamoDB on moto
//! and the stand-in as the model. One time budget per request, the stop reasons and
//! thinking blocks, the HTTP edge; and `template.yaml` sized so that each function
//! fits its budget.
//!
//! Every test asserts statuses, stored items and call counts, never how long
//! something took.

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use degrau_tests::stack::{FullStack, StackOptions, model_calls};
use degrau_tests::{HttpReply, api_event};
use serde_json::{Value, json};

const TENANT: &str = "limits";

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn assert_error(reply: &HttpReply, status: u16, kind: &str) {
    assert_eq!(
        (reply.status, reply.error_type()),
        (status, Some(kind)),
        "{}",
        reply.raw
    );
}

/// A `POST .../messages` event for `contact`, with extra headers.
fn post_event(contact: &str, text: &str, headers: &[(&str, &str)]) -> Value {
    let mut all = vec![
        ("content-type", "application/json"),
        ("x-tenant-id", TENANT),
    ];
    all.extend_from_slice(headers);
    let body = json!({ "text": text }).to_string();
    api_event(
        "POST",
        &format!("/v1/contacts/{contact}/messages"),
        "",
        &all,
        Some(&body),
        None,
    )
}

/// The texts of the user messages that open a round, in order, and checks that the
/// transcript is whole rounds only (dense, alternating, ending with the assistant).
async fn rounds(stack: &FullStack, contact: &str) -> Vec<String> {
    let messages = stack.stored_messages(TENANT, contact).await;
    for (i, message) in messages.iter().enumerate() {
        assert_eq!(message.seq, i as u64 + 1, "dense: {messages:?}");
    }
    if let Some(last) = messages.last() {
        assert_eq!(last.role, "assistant", "whole rounds: {messages:?}");
    }
    messages
        .iter()
        .filter(|m| m.is_user_text())
        .map(|m| m.text())
        .collect()
}

// ---------------------------------------------------------------------------------
// 1. One time budget per request
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn the_invocation_deadline_cuts_a_hung_model_to_504_with_nothing_stored_and_the_key_freed() {
    // ASK_TIMEOUT_SECONDS and MODEL_TIMEOUT_SECONDS keep their defaults (25 s, 60 s):
    // only the deadline the Runtime API advertises (6 s) can end this round early.
    let stack = FullStack::start(&[]).await;
    assert_eq!(stack.post(TENANT, "ana", "a first round").await.status, 200);
    let before = stack.contact_items(TENANT, "ana").await;

    stack.standin.faults(json!([{"hang_ms": 20_000}])).await;
    let event = post_event("ana", "are you there?", &[("idempotency-key", "ask-1")]);
    let reply = stack
        .ask
        .invoke_within(event.clone(), Duration::from_secs(6))
        .await
        .expect("the function answered before its deadline");
    let reply = HttpReply::from_lambda(&reply);
    assert_error(&reply, 504, "model_timeout");
    assert_eq!(
        stack.contact_items(TENANT, "ana").await,
        before,
        "nothing written, and the idempotency claim is gone"
    );

    // The client's retry with the same key runs (the key is free) and stores once.
    let again = HttpReply::from_lambda(&stack.ask.invoke(event).await.unwrap());
    assert_eq!(again.status, 200, "{}", again.raw);
    assert_eq!(
        rounds(&stack, "ana").await,
        ["a first round", "are you there?"]
    );
}

#[tokio::test]
async fn a_tool_round_that_outlasts_ask_timeout_answers_504_and_a_retry_stores_one_round() {
    // A 5 s budget leaves 3 s for the model and the tools. The first call answers
    // after 1.5 s with a tool call; the one that reads the result hangs for 5 s.
    let stack = FullStack::start_with(&StackOptions {
        env: env(&[("ASK_TIMEOUT_SECONDS", "5")]),
        ..StackOptions::default()
    })
    .await;
    stack
        .standin
        .faults(json!([{"hang_ms": 1_500}, {"hang_ms": 5_000}]))
        .await;
    let text = "any free slots on 2026-12-03?";
    let reply = stack.post(TENANT, "bia", text).await;
    assert_error(&reply, 504, "model_timeout");
    assert!(
        stack.contact_items(TENANT, "bia").await.is_empty(),
        "nothing written"
    );

    // Without an Idempotency-Key the client sends it again: one round is stored.
    let again = stack.post(TENANT, "bia", text).await;
    assert_eq!(again.status, 200, "{}", again.raw);
    assert_eq!(rounds(&stack, "bia").await, [text]);
}

// ---------------------------------------------------------------------------------
// The template fits the budgets
// ---------------------------------------------------------------------------------

/// `template.yaml` as JSON, read by the local provisioning's own loader (it knows the
/// CloudFormation short tags).
fn template() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = "import json, sys; from pathlib import Path; sys.path.insert(0, 'infra'); \
                  import provision; print(json.dumps(provision.load_template(Path('template.yaml'))))";
    let output = Command::new(root.join(".venv/bin/python"))
        .current_dir(&root)
        .args(["-c", script])
        .output()
        .expect("run the repo's python (./dev.sh test sets up .venv)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A function environment variable: the function's own, else the global one.
fn variable(template: &Value, function: &str, name: &str) -> Option<u64> {
    let own = &template["Resources"][function]["Properties"]["Environment"]["Variables"][name];
    let global = &template["Globals"]["Function"]["Environment"]["Variables"][name];
    [own, global]
        .iter()
        .find_map(|v| v.as_str().and_then(|s| s.parse().ok()).or(v.as_u64()))
}

fn seconds(value: &Value) -> u64 {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

#[test]
fn the_template_sizes_each_function_to_fit_its_time_budget() {
    let template = template();
    let resources = &template["Resources"];

    // ask: its budget ends before the function's timeout, which ends before API
    // Gateway gives up on the client (29 s).
    let ask = &resources["AskFunction"]["Properties"];
    let ask_timeout = seconds(&ask["Timeout"]);
    let budget = variable(&template, "AskFunction", "ASK_TIMEOUT_SECONDS")
        .unwrap_or(degrau::config::DEFAULT_ASK_TIMEOUT_SECONDS);
    assert!(
        budget < ask_timeout && ask_timeout < 29,
        "ASK_TIMEOUT_SECONDS {budget} < Timeout {ask_timeout} < 29"
    );

    // compactor: a batch of jobs, each within its budget, fits the function timeout,
    // and the queue hides a batch for at least six timeouts, as AWS advises.
    let compactor = &resources["CompactorFunction"]["Properties"];
    let compactor_timeout = seconds(&compactor["Timeout"]);
    let model_timeout = variable(&template, "CompactorFunction", "MODEL_TIMEOUT_SECONDS")
        .expect("the compactor's MODEL_TIMEOUT_SECONDS is set in the template");
    let batch = seconds(&compactor["Events"]["Jobs"]["Properties"]["BatchSize"]);
    let job = compactor::handler::job_budget(Duration::from_secs(model_timeout)).as_secs();
    assert!(
        batch * job <= compactor_timeout,
        "BatchSize {batch} x job budget {job} s <= Timeout {compactor_timeout}"
    );
    let visibility = seconds(&resources["JobsQueue"]["Properties"]["VisibilityTimeout"]);
    assert!(
        visibility >= 6 * compactor_timeout,
        "VisibilityTimeout {visibility} >= 6 x {compactor_timeout}"
    );
}

#[test]
fn every_route_api_gateway_receives_reaches_the_ask_function() {
    // A `$default` route (an HttpApi event without Path and Method) sends unknown
    // routes and methods to the function, which answers them with the error envelope.
    let template = template();
    let events = template["Resources"]["AskFunction"]["Properties"]["Events"]
        .as_object()
        .unwrap();
    let default = events.values().find(|event| {
        event["Type"] == "HttpApi"
            && event["Properties"].get("Path").is_none()
            && event["Properties"].get("Method").is_none()
    });
    assert!(default.is_some(), "no $default route: {events:?}");
}

#[tokio::test]
async fn an_unknown_route_or_method_gets_the_error_envelope_from_the_function() {
    let stack = FullStack::start(&[]).await;
    for (method, path, status, kind) in [
        ("GET", "/v2/anything", 404, "not_found"),
        ("GET", "/", 404, "not_found"),
        (
            "PUT",
            "/v1/contacts/ana/messages",
            405,
            "method_not_allowed",
        ),
        ("POST", "/v1/contacts/ana/memory", 405, "method_not_allowed"),
    ] {
        let reply = stack.call(method, path, TENANT, None).await;
        assert_error(&reply, status, kind);
    }
    let log = stack.standin.requests().await;
    assert!(model_calls(&log).is_empty());
}
