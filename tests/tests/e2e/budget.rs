//! The platform's limits, end to end: the real `ask` binary under the local Runtime
//! API (which advertises the invocation deadline the test chooses), DynamoDB on moto
//! and the stand-in as the model. One time budget per request, the stop reasons and
//! thinking blocks, the HTTP edge; and `template.yaml` sized so that each function
//! fits its budget.
//!
//! Every test asserts statuses, stored items and call counts, never how long
//! something took.

use std::collections::BTreeSet;
use std::time::Duration;

use degrau_tests::stack::{FullStack, StackOptions, model_calls};
use degrau_tests::{HttpReply, api_event};
use serde_json::{Value, json};

use crate::helpers::{assert_error, env, template};

const TENANT: &str = "limits";

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
    let reply = HttpReply::from_api(&event, &reply);
    assert_error(&reply, 504, "model_timeout");
    assert_eq!(
        stack.contact_items(TENANT, "ana").await,
        before,
        "nothing written, and the idempotency claim is gone"
    );

    // The client's retry with the same key runs (the key is free) and stores once.
    let again = HttpReply::from_api(&event, &stack.ask.invoke(event.clone()).await.unwrap());
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
// 2. Stop reasons and thinking blocks
// ---------------------------------------------------------------------------------

/// The `tool_use` inputs of the stored messages, in order.
fn stored_tool_inputs(messages: &[degrau_tests::stack::RawMessage]) -> Vec<Value> {
    messages
        .iter()
        .flat_map(|m| m.content.as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["input"].clone())
        .collect()
}

#[tokio::test]
async fn a_tool_call_cut_off_at_max_tokens_is_never_run_and_is_asked_again_with_twice_the_budget() {
    let stack = FullStack::start(&[]).await;
    stack
        .standin
        .script(json!([{"content": [
            {"type": "text", "text": "Booking it."},
            {"type": "tool_use", "id": "toolu_cut", "name": "book_slot", "input": {"day": "2026-12-03"}}
        ], "stop_reason": "max_tokens"}]))
        .await;
    let reply = stack
        .post(TENANT, "caio", "please book 10:30 on 2026-12-03")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);

    let log = stack.standin.requests().await;
    let calls = model_calls(&log);
    assert_eq!(
        calls
            .iter()
            .map(|c| c["body"]["max_tokens"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1024, 2048, 2048],
        "the cut-off call, the retry, the answer to the tool's result"
    );
    let messages = stack.stored_messages(TENANT, "caio").await;
    assert_eq!(
        stored_tool_inputs(&messages),
        [json!({"day": "2026-12-03", "time": "10:30", "service": "haircut"})],
        "only the whole call was run and stored"
    );
    assert_eq!(
        rounds(&stack, "caio").await,
        ["please book 10:30 on 2026-12-03"]
    );
}

#[tokio::test]
async fn a_refusal_answers_502_model_refused_and_writes_nothing() {
    let stack = FullStack::start(&[]).await;
    stack
        .standin
        .script(
            json!([{"content": [{"type": "text", "text": "I can't help with that."}],
                        "stop_reason": "refusal"}]),
        )
        .await;
    let reply = stack.post(TENANT, "duda", "hello").await;
    assert_error(&reply, 502, "model_refused");
    assert!(stack.contact_items(TENANT, "duda").await.is_empty());
}

#[tokio::test]
async fn a_text_reply_cut_at_max_tokens_is_stored_and_marked_in_the_response() {
    let stack = FullStack::start(&[]).await;
    stack
        .standin
        .script(
            json!([{"content": [{"type": "text", "text": "We open Monday to"}],
                        "stop_reason": "max_tokens"}]),
        )
        .await;
    let reply = stack.post(TENANT, "edu", "opening hours?").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["reply"]["stop_reason"], "max_tokens");
    let messages = stack.stored_messages(TENANT, "edu").await;
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].text(), "We open Monday to");
    let next = stack.post(TENANT, "edu", "thanks").await;
    assert_eq!(
        next.body["reply"]["stop_reason"], "end_turn",
        "{}",
        next.raw
    );
}

#[tokio::test]
async fn model_context_window_exceeded_is_answered_again_on_a_cut_window() {
    let stack = FullStack::start(&[]).await;
    stack
        .standin
        .script(
            json!([{"content": [{"type": "text", "text": "a partial answ"}],
                        "stop_reason": "model_context_window_exceeded"}]),
        )
        .await;
    let reply = stack.post(TENANT, "fabi", "hello").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_ne!(reply.body["reply"]["text"], "a partial answ");
    assert_eq!(model_calls(&stack.standin.requests().await).len(), 2);
    let messages = stack.stored_messages(TENANT, "fabi").await;
    assert_eq!(messages.len(), 2);
    assert_ne!(
        messages[1].text(),
        "a partial answ",
        "the partial answer is not stored"
    );
}

#[tokio::test]
async fn thinking_blocks_are_stored_and_sent_back_exactly_through_a_tool_loop_and_later_turns() {
    let stack = FullStack::start(&[]).await;
    stack
        .configure(
            TENANT,
            &serde_json::from_value(json!({"thinking_budget_tokens": 1024})).unwrap(),
        )
        .await;
    // The stand-in checks every signature sent back and refuses a tool loop whose
    // turn lost its thinking, as the real API does: a 200 means degrau kept them.
    let reply = stack
        .post(TENANT, "gabi", "any free slots on 2026-12-03?")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["reply"]["content"][0]["type"], "thinking");
    let later = stack.post(TENANT, "gabi", "thanks, see you").await;
    assert_eq!(later.status, 200, "{}", later.raw);

    let log = stack.standin.requests().await;
    let calls = model_calls(&log);
    assert_eq!(calls.len(), 3);
    for call in &calls {
        assert_eq!(call["status"], 200);
        assert_eq!(
            call["body"]["thinking"],
            json!({"type": "enabled", "budget_tokens": 1024})
        );
        assert_eq!(call["body"]["max_tokens"], 1024 + 1024);
    }
    // What the model returned is what was stored, and what the next requests sent.
    let returned: Vec<Value> = calls[..2]
        .iter()
        .flat_map(|c| c["response"]["content"].as_array().cloned().unwrap())
        .filter(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
        .collect();
    assert_eq!(
        returned.len(),
        3,
        "thinking twice, one redacted block: {returned:?}"
    );
    let stored: Vec<Value> = stack
        .stored_messages(TENANT, "gabi")
        .await
        .iter()
        .flat_map(|m| m.content.as_array().cloned().unwrap())
        .filter(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
        .collect();
    assert_eq!(stored[..3], returned[..], "stored with their signatures");
    let sent_later: Vec<Value> = calls[2]["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap())
        .filter(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
        .collect();
    assert_eq!(sent_later, returned, "sent back unchanged in the next turn");
}

// ---------------------------------------------------------------------------------
// The template fits the budgets
// ---------------------------------------------------------------------------------

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
        .unwrap_or(degrau_adapters::config::DEFAULT_ASK_TIMEOUT_SECONDS);
    assert!(
        budget < ask_timeout && ask_timeout < 29,
        "ASK_TIMEOUT_SECONDS {budget} < Timeout {ask_timeout} < 29"
    );

    // ask-stream: its budget ends before the function's timeout, which the streaming
    // integration waits for in full (and a REST stream may run 15 minutes).
    let stream = &resources["AskStreamFunction"]["Properties"];
    let stream_timeout = seconds(&stream["Timeout"]);
    let stream_budget = variable(&template, "AskStreamFunction", "STREAM_TIMEOUT_SECONDS")
        .unwrap_or(degrau_adapters::config::DEFAULT_STREAM_TIMEOUT_SECONDS);
    let integration = &resources["StreamApi"]["Properties"]["DefinitionBody"]["paths"]["/contacts/{contact}/messages/stream"]
        ["post"]["x-amazon-apigateway-integration"];
    let waits = seconds(&integration["timeoutInMillis"]) / 1000;
    assert!(
        stream_budget < stream_timeout && stream_timeout <= waits && waits <= 900,
        "STREAM_TIMEOUT_SECONDS {stream_budget} < Timeout {stream_timeout} <= the \
         integration's {waits} s <= 900"
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

/// Every `dynamodb:` action a function's policies allow, conditional statements
/// included.
fn dynamodb_actions(template: &Value, function: &str) -> BTreeSet<String> {
    fn walk(value: &Value, out: &mut BTreeSet<String>) {
        match value {
            Value::String(action) if action.starts_with("dynamodb:") => {
                out.insert(action.clone());
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            Value::Object(fields) => fields.values().for_each(|field| walk(field, out)),
            _ => {}
        }
    }
    let mut actions = BTreeSet::new();
    walk(
        &template["Resources"][function]["Properties"]["Policies"],
        &mut actions,
    );
    actions
}

#[test]
fn every_function_allowed_transactions_may_run_their_condition_checks() {
    // The store's transactions carry ConditionCheck actions (the head's incarnation
    // when a round refreshes its window's TTL, and when facts are written), and IAM
    // asks for dynamodb:ConditionCheckItem on each, beside TransactWriteItems: without
    // it the whole transaction is denied in AWS (moto checks no IAM).
    let queries = include_str!("../../../adapters/src/dynamodb/queries/transactions.rs");
    assert!(
        queries.contains(".condition_check("),
        "the store no longer builds condition checks: revisit this test"
    );
    let template = template();
    let mut writers = Vec::new();
    for (name, resource) in template["Resources"].as_object().unwrap() {
        if resource["Type"] != "AWS::Serverless::Function" {
            continue;
        }
        let actions = dynamodb_actions(&template, name);
        if actions.contains("dynamodb:TransactWriteItems") {
            assert!(
                actions.contains("dynamodb:ConditionCheckItem"),
                "{name} may write transactions but not run their condition checks: {actions:?}"
            );
            writers.push(name.clone());
        }
    }
    for function in ["AskFunction", "CompactorFunction", "WhatsAppWorkerFunction"] {
        assert!(
            writers.iter().any(|name| name == function),
            "{function} writes transactions: {writers:?}"
        );
    }
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
