//! degrau's own HTTP adapter (`AnthropicModel`) talks to the stand-in unchanged:
//! answers, caching usage, retries over injected faults, and error mapping.

use std::time::Duration;

use degrau::deadline::Deadline;
use degrau::domain::{ContentBlock, Message};
use degrau::model::{Model, ModelError, StopReason};
use degrau::plan::request::{ModelRequest, RequestParts, build_request};
use degrau_adapters::anthropic::{AnthropicConfig, AnthropicModel};
use degrau_standin::Config;
use serde_json::json;

use crate::helpers::{TestStandIn, demo_tools, long_instructions, start, start_with};

fn model(standin: &TestStandIn) -> AnthropicModel {
    AnthropicModel::new(AnthropicConfig {
        base_url: standin.running.url().to_owned(),
        api_key: "test-key".into(),
        request_timeout: Duration::from_millis(500),
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
        ..AnthropicConfig::default()
    })
    .expect("client builds")
}

/// A deadline no test here reaches.
fn minute() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

fn request(text: &str) -> ModelRequest {
    build_request(&RequestParts {
        model: "claude-sonnet-5",
        max_tokens: 1024,
        thinking: None,
        tools: &demo_tools(),
        instructions: &long_instructions(),
        facts: &[],
        summary: None,
        last_session: None,
        window: &[],
        round: &[Message::user_text(text)],
        lifetimes: degrau::plan::request::Lifetimes::FiveMinutes,
    })
    .expect("a valid request")
}

#[tokio::test]
async fn degrau_s_client_gets_answers_and_cache_usage() {
    let standin = start().await;
    let model = model(&standin);
    let first = model
        .create(&request("hello"), minute())
        .await
        .expect("an answer");
    assert!(
        first
            .message()
            .text()
            .starts_with("[offline stand-in] You said: «hello»")
    );
    assert_eq!(first.stop_reason, Some(StopReason::EndTurn));
    assert!(first.usage.cache_creation_input_tokens > 1024);
    let again = model
        .create(&request("hello"), minute())
        .await
        .expect("an answer");
    assert_eq!(
        again.usage.cache_read_input_tokens,
        first.usage.context_tokens()
    );

    let calls = model
        .create(&request("free slots on 2026-12-03?"), minute())
        .await
        .expect("an answer");
    assert_eq!(calls.stop_reason, Some(StopReason::ToolUse));
    assert!(
        calls
            .content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { name, .. } if name == "list_free_slots"))
    );
}

#[tokio::test]
async fn degrau_s_client_retries_over_overload_and_a_dropped_connection() {
    let standin = start().await;
    standin
        .control(
            "/stand-in/faults",
            &json!([{"status": 529}, {"drop": true}]),
        )
        .await;
    let answer = model(&standin).create(&request("hi"), minute()).await;
    assert!(answer.is_ok(), "{answer:?}");
    let statuses: Vec<(u64, bool)> = standin
        .logged()
        .await
        .iter()
        .map(|c| {
            (
                c["status"].as_u64().unwrap(),
                c["dropped"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(statuses, vec![(529, false), (200, true), (200, false)]);
}

#[tokio::test]
async fn degrau_s_client_honours_retry_after_and_the_spend_limit() {
    let standin = start().await;
    standin
        .control(
            "/stand-in/faults",
            &json!([
                {"status": 429, "retry_after_ms": 20},
                {"status": 429, "error_code": "enforced_spend_limit_reached", "message": "spend limit"}
            ]),
        )
        .await;
    let answer = model(&standin).create(&request("hi"), minute()).await;
    assert!(
        matches!(answer, Err(ModelError::RateLimited { .. })),
        "{answer:?}"
    );
    assert_eq!(
        standin.logged().await.len(),
        2,
        "the spend limit is not retried"
    );
}

#[tokio::test]
async fn degrau_s_client_sees_a_too_long_prompt_as_such() {
    let standin = start_with(Config::default().with_context_limit(100)).await;
    let answer = model(&standin).create(&request("hi"), minute()).await;
    assert!(
        matches!(&answer, Err(ModelError::PromptTooLong { message }) if message.contains("> 100 maximum")),
        "{answer:?}"
    );
}

#[tokio::test]
async fn a_hang_past_the_client_timeout_is_retried() {
    let standin = start().await;
    standin
        .control("/stand-in/faults", &json!([{"hang_ms": 2000}]))
        .await;
    let answer = model(&standin).create(&request("hi"), minute()).await;
    assert!(answer.is_ok(), "{answer:?}");
}
