//! The test controls: faults, scripts, the call log, reset.

use std::time::{Duration, Instant};

use degrau_standin::control::Fault;
use serde_json::json;

use crate::helpers::{body_with, first_text, start};

fn hello() -> serde_json::Value {
    body_with(json!([{"role": "user", "content": "hello"}]))
}

#[tokio::test]
async fn faults_are_consumed_in_order_then_answers_are_normal() {
    let standin = start().await;
    let queued = standin
        .control(
            "/stand-in/faults",
            &json!([{"status": 529}, {"status": 429, "retry_after": 1}]),
        )
        .await;
    assert_eq!(queued.body["queued"], 2);

    let reply = standin.messages(&hello()).await;
    assert_eq!(reply.status, 529);
    assert_eq!(reply.body["error"]["type"], "overloaded_error");
    assert_eq!(reply.body["error"]["message"], "Overloaded");

    let reply = standin.messages(&hello()).await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.body["error"]["type"], "rate_limit_error");
    assert_eq!(reply.headers["retry-after"], "1");

    let reply = standin.messages(&hello()).await;
    assert_eq!(reply.status, 200);
    assert!(first_text(&reply.body).starts_with("[offline stand-in]"));
}

#[tokio::test]
async fn a_fault_can_set_type_message_and_retry_headers() {
    let standin = start().await;
    standin.running.standin().push_faults([Fault {
        status: Some(429),
        message: Some("spend limit".into()),
        error_code: Some("enforced_spend_limit_reached".into()),
        should_retry: Some(false),
        ..Fault::default()
    }]);
    standin
        .control(
            "/stand-in/faults",
            &json!([{"status": 400, "type": "invalid_request_error", "message": "custom"}]),
        )
        .await;
    let reply = standin.messages(&hello()).await;
    assert_eq!(
        reply.body["error"]["details"]["error_code"],
        "enforced_spend_limit_reached"
    );
    assert_eq!(reply.headers["x-should-retry"], "false");
    let reply = standin.messages(&hello()).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["error"]["message"], "custom");
}

#[tokio::test]
async fn a_hang_delays_a_normal_answer() {
    let standin = start().await;
    standin
        .control("/stand-in/faults", &json!([{"hang_ms": 300}]))
        .await;
    let started = Instant::now();
    let reply = standin.messages(&hello()).await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn a_drop_sends_headers_and_part_of_the_body_then_breaks() {
    let standin = start().await;
    standin
        .control("/stand-in/faults", &json!([{"drop": true}]))
        .await;
    let response = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("x-api-key", "k")
        .header("anthropic-version", "2023-06-01")
        .json(&hello())
        .send()
        .await
        .expect("headers arrive");
    assert_eq!(response.status().as_u16(), 200);
    assert!(response.text().await.is_err(), "the body breaks off");
    let log = standin.logged().await;
    assert_eq!(log[0]["dropped"], true);
    // The next call is answered normally.
    assert_eq!(standin.messages(&hello()).await.status, 200);
}

#[tokio::test]
async fn bad_faults_are_refused() {
    let standin = start().await;
    let reply = standin
        .control(
            "/stand-in/faults",
            &json!([{"status": 529}, {"status": 200}]),
        )
        .await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("1: ")
    );
    let reply = standin
        .control("/stand-in/faults", &json!([{"statuss": 500}]))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        standin.messages(&hello()).await.status,
        200,
        "nothing queued"
    );
}

#[tokio::test]
async fn scripted_answers_replace_the_heuristics_in_order() {
    let standin = start().await;
    standin
        .control(
            "/stand-in/script",
            &json!([
                {"content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"x": 1}}],
                 "stop_reason": "tool_use"},
                {"content": [{"type": "text", "text": "scripted"}]}
            ]),
        )
        .await;
    // A refused request does not consume the script.
    let refused = standin
        .messages(&body_with(json!([{"role": "assistant", "content": "x"}])))
        .await;
    assert_eq!(refused.status, 400);

    let reply = standin.messages(&hello()).await;
    assert_eq!(reply.body["stop_reason"], "tool_use");
    assert_eq!(reply.body["content"][0]["name"], "t");
    assert!(reply.body["usage"]["output_tokens"].as_u64().unwrap() > 0);

    let reply = standin.messages(&hello()).await;
    assert_eq!(reply.body["stop_reason"], "end_turn");
    assert_eq!(first_text(&reply.body), "scripted");

    let reply = standin.messages(&hello()).await;
    assert!(first_text(&reply.body).starts_with("[offline stand-in]"));
}

#[tokio::test]
async fn the_log_lists_calls_in_order_and_reset_clears_everything() {
    let standin = start().await;
    standin
        .control("/stand-in/faults", &json!([{"status": 500}]))
        .await;
    standin.messages(&hello()).await;
    standin.messages(&hello()).await;
    let log = standin.logged().await;
    assert_eq!(log.len(), 2);
    assert_eq!(log[0]["status"], 500);
    assert_eq!(log[0]["usage"], serde_json::Value::Null);
    assert_eq!(log[1]["status"], 200);
    assert_eq!(log[1]["body"], hello());
    assert_eq!(log[1]["response"]["type"], "message");
    assert!(log[1]["usage"]["input_tokens"].as_u64().unwrap() > 0);

    standin
        .control("/stand-in/faults", &json!([{"status": 500}]))
        .await;
    standin
        .control("/stand-in/script", &json!([{"content": []}]))
        .await;
    let reset = standin.control("/stand-in/reset", &json!({})).await;
    assert_eq!(reset.status, 200);
    assert!(standin.logged().await.is_empty());
    let reply = standin.messages(&hello()).await;
    assert_eq!(reply.status, 200, "the fault was cleared");
    assert!(
        first_text(&reply.body).starts_with("[offline stand-in]"),
        "the script too"
    );
}

#[tokio::test]
async fn unknown_paths_get_a_not_found_envelope() {
    let standin = start().await;
    let response = standin
        .client
        .get(standin.url("/v1/nothing"))
        .send()
        .await
        .unwrap();
    let reply = crate::helpers::reply(response).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.body["error"]["type"], "not_found_error");
    let health = standin
        .client
        .get(standin.url("/stand-in/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
}
