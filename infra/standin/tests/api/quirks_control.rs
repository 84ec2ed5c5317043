//! `POST /stand-in/quirks`: quirks queued one by one (each taken by the next answer
//! it applies to), the seeded random mode, the quirks in the call log, and what
//! the stand-in's own rules say of each quirky answer sent back.

use degrau_standin::quirks::{Quirk, Random};
use serde_json::{Value, json};

use crate::helpers::{Reply, TestStandIn, start};
use crate::quirks::{TOOL_QUESTION, request, sse_events};

async fn quirks(standin: &TestStandIn, body: Value) -> Reply {
    standin.control("/stand-in/quirks", &body).await
}

/// The quirks logged for the last call.
async fn last_quirks(standin: &TestStandIn) -> Value {
    let log = standin.logged().await;
    log.last().expect("a call")["quirks"].clone()
}

fn queued(standin: &TestStandIn) -> Vec<Quirk> {
    standin.running.standin().queued_quirks()
}

async fn streamed(standin: &TestStandIn, body: &Value) -> Vec<Value> {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let response = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("x-api-key", "test-key")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .expect("stand-in answers");
    sse_events(&response.text().await.expect("a body"))
}

#[tokio::test]
async fn a_queued_quirk_waits_for_the_first_answer_it_applies_to() {
    let standin = start().await;
    let reply = quirks(&standin, json!({"next": ["empty_text_before_tool_use"]})).await;
    assert_eq!(reply.body, json!({"queued": 1, "random": null}));

    // A text answer has no tool call to put an empty block before.
    let text = standin.messages(&request("hello", false)).await;
    assert_eq!(text.status, 200);
    assert_eq!(last_quirks(&standin).await, json!([]));
    assert_eq!(queued(&standin), [Quirk::EmptyTextBeforeToolUse]);

    let tool = standin.messages(&request(TOOL_QUESTION, false)).await;
    assert_eq!(tool.body["content"][0], json!({"type": "text", "text": ""}));
    assert_eq!(
        last_quirks(&standin).await,
        json!(["empty_text_before_tool_use"])
    );
    assert!(queued(&standin).is_empty());

    // Consumed once: the next answer is tidy again.
    let again = standin.messages(&request(TOOL_QUESTION, false)).await;
    assert_ne!(again.body["content"][0]["text"], "");
    assert_eq!(last_quirks(&standin).await, json!([]));
}

#[tokio::test]
async fn a_stream_only_quirk_waits_for_a_streamed_call() {
    let standin = start().await;
    quirks(&standin, json!({"next": ["ping_mid_stream"]})).await;
    standin.messages(&request("hello", false)).await;
    assert_eq!(last_quirks(&standin).await, json!([]));
    assert_eq!(queued(&standin), [Quirk::PingMidStream]);
    let events = streamed(&standin, &request("hello", false)).await;
    assert!(events.iter().filter(|e| e["type"] == "ping").count() > 1);
    assert_eq!(last_quirks(&standin).await, json!(["ping_mid_stream"]));
}

#[tokio::test]
async fn an_answer_takes_one_quirk_the_first_queued_that_applies() {
    let standin = start().await;
    let reply = quirks(
        &standin,
        json!({"next": ["ping_mid_stream", "null_citations", "unknown_fields"]}),
    )
    .await;
    assert_eq!(reply.body["queued"], 3);
    let answer = standin.messages(&request("hello", false)).await;
    assert_eq!(answer.body["content"][0]["citations"], Value::Null);
    assert!(answer.body.get("container").is_none(), "not unknown_fields");
    assert_eq!(last_quirks(&standin).await, json!(["null_citations"]));
    assert_eq!(
        queued(&standin),
        [Quirk::PingMidStream, Quirk::UnknownFields]
    );
}

#[tokio::test]
async fn a_scripted_answer_gets_its_quirk_too() {
    let standin = start().await;
    standin
        .control(
            "/stand-in/script",
            &json!([{"content": [
                {"type": "text", "text": "Booking it."},
                {"type": "tool_use", "id": "toolu_s1", "name": "book_slot", "input": {"day": "2026-12-03"}}
            ]}]),
        )
        .await;
    quirks(&standin, json!({"next": ["newlines_before_tool_use"]})).await;
    let reply = standin.messages(&request("book it", false)).await;
    assert_eq!(
        reply.body["content"],
        json!([{"type": "text", "text": "\n\n"},
            {"type": "tool_use", "id": "toolu_s1", "name": "book_slot", "input": {"day": "2026-12-03"}}])
    );
    assert_eq!(
        last_quirks(&standin).await,
        json!(["newlines_before_tool_use"])
    );
}

#[tokio::test]
async fn a_refused_request_takes_no_quirk() {
    let standin = start().await;
    quirks(&standin, json!({"next": ["unknown_fields"]})).await;
    let refused = standin.messages(&request("", false)).await;
    assert_eq!(refused.status, 400);
    assert_eq!(last_quirks(&standin).await, json!([]));
    assert_eq!(queued(&standin), [Quirk::UnknownFields]);
}

#[tokio::test]
async fn an_unknown_quirk_or_setting_is_a_400_that_names_it() {
    let standin = start().await;
    let unknown = quirks(&standin, json!({"next": ["ping_mid_stream", "hiccup"]})).await;
    assert_eq!(unknown.status, 400);
    let message = unknown.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "next.1: unknown quirk `hiccup`; the quirks are empty_text_before_tool_use, "
        ),
        "{message}"
    );
    assert!(
        message.ends_with("ping_mid_stream, error_event_mid_stream"),
        "{message}"
    );
    assert!(
        queued(&standin).is_empty(),
        "nothing queued from a refused body"
    );
    let too_likely = quirks(&standin, json!({"random": {"seed": 1, "per_mille": 1001}})).await;
    assert_eq!(
        too_likely.body["error"]["message"],
        "random.per_mille must be 0–1000, got 1001"
    );
    let misspelled = quirks(&standin, json!({"random": {"seed": 1, "permille": 10}})).await;
    assert_eq!(misspelled.status, 400);
    assert_eq!(standin.running.standin().random_quirks(), None);
}

/// The quirks logged for 24 calls (a text question, then a tool question, in
/// turn; every third streamed) under a random setting.
async fn random_run(random: Value) -> Vec<Value> {
    let standin = start().await;
    let reply = quirks(&standin, json!({"random": random})).await;
    assert_eq!(reply.body["random"], random);
    for call in 0..24 {
        let text = if call % 2 == 0 {
            "hello"
        } else {
            TOOL_QUESTION
        };
        if call % 3 == 0 {
            streamed(&standin, &request(text, false)).await;
        } else {
            standin.messages(&request(text, false)).await;
        }
    }
    let log = standin.logged().await;
    log.iter().map(|call| call["quirks"].clone()).collect()
}

#[tokio::test]
async fn the_random_mode_draws_the_same_for_a_seed_and_only_what_applies() {
    let seven = random_run(json!({"seed": 7, "per_mille": 500})).await;
    assert_eq!(
        seven,
        random_run(json!({"seed": 7, "per_mille": 500})).await
    );
    assert_ne!(
        seven,
        random_run(json!({"seed": 8, "per_mille": 500})).await
    );
    let drawn = seven.iter().filter(|q| q != &&json!([])).count();
    assert!((4..=20).contains(&drawn), "about half of 24: {drawn}");
    for (call, logged) in seven.iter().enumerate() {
        let Some(quirk) = logged.get(0) else { continue };
        let quirk: Quirk = serde_json::from_value(quirk.clone()).unwrap();
        let tool_only = [
            Quirk::EmptyTextBeforeToolUse,
            Quirk::NewlinesBeforeToolUse,
            Quirk::TextAfterToolUse,
            Quirk::ToolUseEmptyInput,
            Quirk::MaxTokensInToolInput,
        ];
        assert!(
            call % 2 == 1 || !tool_only.contains(&quirk),
            "{call}: {quirk}"
        );
        assert!(call % 3 == 0 || !quirk.streamed_only(), "{call}: {quirk}");
        assert_ne!(quirk, Quirk::ThinkingBlocks, "thinking is off");
    }
    assert!(
        random_run(json!({"seed": 7, "per_mille": 0}))
            .await
            .iter()
            .all(|q| q == &json!([]))
    );
}

#[tokio::test]
async fn the_random_mode_turns_off_with_null_and_with_a_reset() {
    let standin = start().await;
    let on = Random {
        seed: 3,
        per_mille: 1000,
    };
    standin.running.standin().set_random_quirks(Some(on));
    standin.messages(&request("hello", false)).await;
    assert_ne!(last_quirks(&standin).await, json!([]), "always one");
    let off = quirks(&standin, json!({"random": null})).await;
    assert_eq!(off.body, json!({"queued": 0, "random": null}));
    standin.messages(&request("hello", false)).await;
    assert_eq!(last_quirks(&standin).await, json!([]));

    quirks(
        &standin,
        json!({"next": ["unknown_fields"], "random": {"seed": 3, "per_mille": 1000}}),
    )
    .await;
    standin.control("/stand-in/reset", &json!({})).await;
    assert_eq!(standin.running.standin().random_quirks(), None);
    assert!(queued(&standin).is_empty());
    standin.messages(&request("hello", false)).await;
    assert_eq!(last_quirks(&standin).await, json!([]));
}

/// The conversation that sends `turn` back: the question, the turn as it came
/// (every field), and a result for each of its tool calls (else a thank-you).
fn sent_back(question: &Value, turn: &Value) -> Value {
    let results: Vec<Value> = turn
        .as_array()
        .expect("blocks")
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| json!({"type": "tool_result", "tool_use_id": b["id"], "content": "[]"}))
        .collect();
    let next = if results.is_empty() {
        json!("thanks")
    } else {
        json!(results)
    };
    let mut body = question.clone();
    let messages = body["messages"].as_array_mut().expect("messages");
    messages.push(json!({"role": "assistant", "content": turn}));
    messages.push(json!({"role": "user", "content": next}));
    body
}

#[tokio::test]
async fn every_quirky_answer_sent_back_as_it_came_is_accepted_but_the_two_the_api_refuses() {
    let standin = start().await;
    for quirk in Quirk::ALL.into_iter().filter(|q| !q.streamed_only()) {
        let question = match quirk {
            Quirk::WhitespaceFinalText | Quirk::MaxTokensInText => request("hello", false),
            Quirk::ThinkingBlocks => request("hello", true),
            _ => request(TOOL_QUESTION, false),
        };
        standin.running.standin().push_quirks([quirk]);
        let answer = standin.messages(&question).await;
        assert_eq!(last_quirks(&standin).await, json!([quirk]));
        let back = standin
            .messages(&sent_back(&question, &answer.body["content"]))
            .await;
        let refused = back.body["error"]["message"].as_str();
        let expected = match quirk {
            Quirk::EmptyTextBeforeToolUse => {
                Some("messages: text content blocks must be non-empty")
            }
            Quirk::WhitespaceFinalText => {
                Some("messages: text content blocks must contain non-whitespace text")
            }
            _ => None,
        };
        assert_eq!(refused, expected, "{quirk}: {}", back.body);
    }
}
