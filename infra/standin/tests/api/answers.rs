//! Deterministic answers: the stand-in marker, the demo tool calls, tool result
//! summaries, and quoting the first message to prove the conversation was rebuilt.

use degrau::domain::{ContentBlock, Message, Role};
use degrau::model::{ModelResponse, StopReason};
use serde_json::{Value, json};

use crate::helpers::{body_with, degrau_request, demo_tools, first_text, start};

fn tool_uses(body: &Value) -> Vec<(String, String, Value)> {
    body["content"]
        .as_array()
        .expect("content is a list")
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            (
                b["id"].as_str().expect("an id").to_owned(),
                b["name"].as_str().expect("a name").to_owned(),
                b["input"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_valid_request_gets_a_marked_message_in_the_api_shape() {
    let standin = start().await;
    let reply = standin
        .messages(&body_with(
            json!([{"role": "user", "content": "Hello there"}]),
        ))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = &reply.body;
    assert!(body["id"].as_str().unwrap().starts_with("msg_standin_"));
    assert_eq!(body["type"], "message");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["model"], "claude-sonnet-5");
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["stop_sequence"], Value::Null);
    assert_eq!(
        first_text(body),
        "[offline stand-in] You said: «Hello there». I can see 0 earlier messages."
    );
    let text_chars = first_text(body).chars().count() as u64;
    assert_eq!(body["usage"]["output_tokens"], text_chars.div_ceil(4));
    assert!(
        reply.headers["request-id"]
            .to_str()
            .unwrap()
            .starts_with("req_standin_")
    );
    let parsed: ModelResponse = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(parsed.stop_reason, Some(StopReason::EndTurn));
}

#[tokio::test]
async fn asking_about_availability_calls_list_free_slots() {
    let standin = start().await;
    let body = degrau_request(
        "You schedule haircuts.",
        &demo_tools(),
        None,
        &[],
        &[Message::user_text("Tem horário livre em 2026-12-03?")],
    );
    let reply = standin.messages(&body).await;
    assert_eq!(reply.body["stop_reason"], "tool_use");
    assert_eq!(first_text(&reply.body), "[offline stand-in] Let me check.");
    let calls = tool_uses(&reply.body);
    assert_eq!(calls.len(), 1);
    assert!(calls[0].0.starts_with("toolu_standin_"));
    assert_eq!(calls[0].1, "list_free_slots");
    assert_eq!(calls[0].2, json!({"day": "2026-12-03"}));
}

#[tokio::test]
async fn two_dates_make_two_parallel_calls() {
    let standin = start().await;
    let body = degrau_request(
        "You schedule haircuts.",
        &demo_tools(),
        None,
        &[],
        &[Message::user_text(
            "Any free slots on 2026-12-03 or 2026-12-04?",
        )],
    );
    let calls = tool_uses(&standin.messages(&body).await.body);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].2, json!({"day": "2026-12-03"}));
    assert_eq!(calls[1].2, json!({"day": "2026-12-04"}));
    assert_ne!(calls[0].0, calls[1].0);
}

#[tokio::test]
async fn a_booking_request_with_a_time_calls_book_slot() {
    let standin = start().await;
    let body = degrau_request(
        "You schedule haircuts.",
        &demo_tools(),
        None,
        &[],
        &[Message::user_text("Please book 2026-12-04 at 10:30")],
    );
    let calls = tool_uses(&standin.messages(&body).await.body);
    assert_eq!(calls[0].1, "book_slot");
    assert_eq!(
        calls[0].2,
        json!({"day": "2026-12-04", "time": "10:30", "service": "haircut"})
    );
}

/// The whole tool loop as degrau runs it: the stand-in's own ids come back in the
/// results, the request validates, and the answer summarises the results.
#[tokio::test]
async fn the_tool_loop_round_trips_and_ends_with_a_summary() {
    let standin = start().await;
    let asked = Message::user_text("Free slots on 2026-12-03?");
    let first = degrau_request(
        "You schedule haircuts.",
        &demo_tools(),
        None,
        &[],
        std::slice::from_ref(&asked),
    );
    let reply: ModelResponse = serde_json::from_value(standin.messages(&first).await.body).unwrap();
    let calls = reply.message();
    let results = Message {
        role: Role::User,
        content: calls
            .tool_use_ids()
            .map(|id| {
                let slots: Vec<String> = (0..37).map(|i| format!("slot {i}")).collect();
                ContentBlock::tool_result(
                    id,
                    json!({"day": "2026-12-03", "free": slots}).to_string(),
                )
            })
            .collect(),
    };
    let second = degrau_request(
        "You schedule haircuts.",
        &demo_tools(),
        None,
        &[],
        &[asked, calls, results],
    );
    let reply = standin.messages(&second).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["stop_reason"], "end_turn");
    assert_eq!(
        first_text(&reply.body),
        "[offline stand-in] list_free_slots returned 37 items."
    );
}

#[tokio::test]
async fn a_booking_result_echoes_its_confirmation() {
    let standin = start().await;
    let body = body_with(json!([
        {"role": "user", "content": "book it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
            "content": "{\"confirmation_id\": \"BK-7Q2X\", \"time\": \"10:30\"}"}]}
    ]));
    let text = first_text(&standin.messages(&body).await.body);
    assert_eq!(text, "[offline stand-in] t confirmed booking BK-7Q2X.");
}

#[tokio::test]
async fn what_did_i_say_first_quotes_the_first_user_message() {
    let standin = start().await;
    let body = degrau_request(
        "You schedule haircuts.",
        &[],
        Some("The customer wants a trim."),
        &[
            Message::user_text("My name is Ana and my dog is Rex."),
            Message::assistant_text("[offline stand-in] You said: «My name is Ana»."),
            Message::user_text("ok"),
            Message::assistant_text("[offline stand-in] You said: «ok»."),
        ],
        &[Message::user_text("What did I say first?")],
    );
    let text = first_text(&standin.messages(&body).await.body);
    assert_eq!(
        text,
        "[offline stand-in] The first thing you said was: «My name is Ana and my dog is Rex.». \
         I can see 4 earlier messages, and what degrau remembers (summary)."
    );
}

#[tokio::test]
async fn a_small_max_tokens_cuts_the_reply() {
    let standin = start().await;
    let mut body = body_with(json!([{"role": "user", "content": "x".repeat(500)}]));
    body["max_tokens"] = json!(5);
    let reply = standin.messages(&body).await;
    assert_eq!(reply.body["stop_reason"], "max_tokens");
    assert_eq!(first_text(&reply.body).chars().count(), 20);
    assert_eq!(reply.body["usage"]["output_tokens"], 5);
}

#[tokio::test]
async fn summary_requests_get_a_summary_that_keeps_identifiers() {
    let standin = start().await;
    let mut body = body_with(json!([{"role": "user", "content":
        "user: I want 2026-12-04 at 10:30\nassistant: [offline stand-in] Booked: BK-4821."}]));
    body["system"][0]["text"] = json!("degrau:summarize Summarise the conversation.");
    let text = first_text(&standin.messages(&body).await.body);
    assert_eq!(
        text,
        "[offline stand-in] The customer said: «I want 2026-12-04 at 10:30»; the agent said: \
         «Booked: BK-4821.». Identifiers: 2026-12-04, 10:30, BK-4821."
    );
    body["system"][0]["text"] = json!("degrau:extract-facts");
    assert_eq!(
        first_text(&standin.messages(&body).await.body),
        r#"{"facts": []}"#
    );
}
