//! A recorded round that reports no usage (a framework dropped it) still makes
//! compaction happen: the real `ask` estimates the context from what it holds and
//! says so (`usage_estimated`). The "client" here calls the stand-in itself with
//! the context it read, as an agent's own loop does, so the estimate is measured
//! against the stand-in's own count of the same requests.

use degrau_tests::stack::FullStack;
use serde_json::{Value, json};

use crate::helpers;

const TENANT: &str = "recorded-usage";
const THRESHOLD: u64 = 1_500;
const TURNS: usize = 24;

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

/// The client's own model call on the context: the stand-in's answer and its usage.
async fn model_call(stack: &FullStack, view: &Value, user: &Value) -> (Value, Value) {
    let mut messages = view["messages"].as_array().unwrap().clone();
    messages.push(user.clone());
    let body = json!({
        "model": "claude-sonnet-5", "max_tokens": 256,
        "system": view["system"], "messages": messages,
    });
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/v1/messages", stack.standin.url))
        .header("x-api-key", "offline")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (answer["content"].clone(), answer["usage"].clone())
}

fn context_of(usage: &Value) -> u64 {
    [
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ]
    .iter()
    .map(|field| usage[field].as_u64().unwrap_or(0))
    .sum()
}

#[tokio::test]
async fn rounds_without_usage_are_estimated_within_a_few_percent_and_still_step_down() {
    let stack = FullStack::start(&[]).await;
    stack
        .configure(TENANT, &helpers::compacting(&["name"], THRESHOLD, 4))
        .await;
    let mut worst = 0.0_f64;
    let mut windows = Vec::new();
    for i in 0..TURNS {
        let view = context(&stack, "eva").await;
        windows.push(view["messages"].as_array().unwrap().len());
        let text = format!(
            "turn {i}: tell me about the shop's history, {}",
            "nothing urgent ".repeat(8)
        );
        let user = json!({"role": "user", "content": [{"type": "text", "text": text}]});
        let (content, measured) = model_call(&stack, &view, &user).await;
        // Every other round without `usage` at all, the others with zeros.
        let mut body = json!({
            "head": view["head"],
            "messages": [user, {"role": "assistant", "content": content}],
        });
        if i % 2 == 1 {
            body["usage"] = json!({"input_tokens": 0, "output_tokens": 0});
        }
        let reply = stack
            .call(
                "POST",
                "/v1/contacts/eva/rounds",
                TENANT,
                Some(&body.to_string()),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        assert_eq!(reply.body["usage_estimated"], true);
        let estimated = reply.body["usage"]["context_tokens"].as_u64().unwrap();
        let actual = context_of(&measured);
        let error = (estimated as f64 - actual as f64) / actual as f64;
        worst = worst.max(error.abs());
        stack.drain().await;
    }
    println!(
        "the estimate's largest error against the stand-in's count: {:.2} %",
        100.0 * worst
    );
    assert!(worst < 0.05, "{worst}");
    let memory = stack.memory(TENANT, "eva").await;
    assert!(
        memory["session"]["steps"].as_u64().unwrap() >= 2,
        "{memory}"
    );
    // Bounded: once the first step landed, the window never grows back past where
    // it stood when that step was due.
    let first_step = (1..windows.len())
        .find(|&i| windows[i] < windows[i - 1])
        .expect("a step landed");
    let peak = windows[first_step - 1];
    assert!(
        windows[first_step..].iter().all(|&w| w <= peak),
        "the window stays bounded: {windows:?}"
    );
    // A round with its usage measured is not estimated.
    let view = context(&stack, "eva").await;
    let user = json!({"role": "user", "content": "and now?"});
    let (content, measured) = model_call(&stack, &view, &user).await;
    let body = json!({"head": view["head"], "messages": [user, {"role": "assistant", "content": content}], "usage": measured});
    let reply = stack
        .call(
            "POST",
            "/v1/contacts/eva/rounds",
            TENANT,
            Some(&body.to_string()),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["usage_estimated"], false);
    assert_eq!(reply.body["usage"]["context_tokens"], context_of(&measured));
}
