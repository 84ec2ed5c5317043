//! The heuristics, on requests as degrau's builder writes them, read back by the
//! stand-in's own parser.

use super::*;
use degrau::domain::{ContentBlock as CoreBlock, Message, Role as CoreRole, StoredMessage};
use degrau::plan::request::{RequestParts, ToolDef, build_request};
use degrau::testing::stored;

use crate::parse::parse_request;

fn demo_tools() -> Vec<ToolDef> {
    [LIST_FREE_SLOTS, BOOK_SLOT]
        .iter()
        .map(|name| ToolDef {
            name: (*name).into(),
            description: "demo".into(),
            input_schema: json!({"type": "object"}),
        })
        .collect()
}

fn request_with(
    tools: &[ToolDef],
    summary: Option<&str>,
    window: &[StoredMessage],
    round: &[Message],
) -> MessagesRequest {
    let request = build_request(&RequestParts {
        model: "claude-sonnet-5",
        max_tokens: 1024,
        thinking: None,
        tools,
        instructions: "You schedule haircuts.",
        facts: &[],
        summary,
        last_session: None,
        window,
        round,
        lifetimes: degrau::plan::request::Lifetimes::FiveMinutes,
    })
    .unwrap();
    let body = serde_json::to_vec(&request).unwrap();
    parse_request(&body).unwrap().request
}

/// The answer to `request` under another `tool_choice`.
fn answer_with(request: &MessagesRequest, choice: ToolChoice) -> Answer {
    let mut request = request.clone();
    request.tool_choice = choice;
    answer(&request, "s")
}

fn reply(request: &MessagesRequest) -> Answer {
    answer(request, "seed")
}

fn text_of(answer: &Answer) -> String {
    match &answer.content[0] {
        ResponseBlock::Text { text } => text.clone(),
        other => panic!("expected text, got {other:?}"),
    }
}

#[test]
fn asks_for_free_slots_on_the_day_named() {
    let tools = demo_tools();
    let req = request_with(
        &tools,
        None,
        &[],
        &[Message::user_text("Any free slots on 2026-12-04?")],
    );
    let answer = reply(&req);
    assert_eq!(answer.stop_reason, StopReason::ToolUse);
    assert_eq!(
        answer.content[0],
        ResponseBlock::text("[offline stand-in] Let me check.")
    );
    let ResponseBlock::ToolUse { id, name, input } = &answer.content[1] else {
        panic!("expected a tool_use");
    };
    assert!(id.starts_with("toolu_standin_"));
    assert_eq!(name, LIST_FREE_SLOTS);
    assert_eq!(input, &json!({"day": "2026-12-04"}));
}

#[test]
fn books_when_asked_with_a_time_and_defaults_the_day() {
    let tools = demo_tools();
    let req = request_with(
        &tools,
        None,
        &[],
        &[Message::user_text("Quero marcar às 9:30, por favor")],
    );
    let answer = reply(&req);
    let ResponseBlock::ToolUse { name, input, .. } = &answer.content[1] else {
        panic!("expected a tool_use");
    };
    assert_eq!(name, BOOK_SLOT);
    assert_eq!(
        input,
        &json!({"day": DEFAULT_DAY, "time": "09:30", "service": "haircut"})
    );
}

#[test]
fn without_the_demo_tools_or_with_tool_choice_none_it_only_talks() {
    let req = request_with(&[], None, &[], &[Message::user_text("free slots?")]);
    assert_eq!(reply(&req).stop_reason, StopReason::EndTurn);
    let tools = demo_tools();
    let req = request_with(&tools, None, &[], &[Message::user_text("free slots?")]);
    assert_eq!(
        answer_with(&req, ToolChoice::None).stop_reason,
        StopReason::EndTurn
    );
}

#[test]
fn summarises_tool_results_briefly() {
    let tools = demo_tools();
    let window = [stored(1, Message::user_text("slots?"))];
    let slots: Vec<String> = (0..37).map(|i| format!("{:02}:00", i % 24)).collect();
    let round = [
        Message {
            role: CoreRole::Assistant,
            content: vec![
                CoreBlock::tool_use("a", LIST_FREE_SLOTS, json!({})),
                CoreBlock::tool_use("b", BOOK_SLOT, json!({})),
            ],
        },
        Message {
            role: CoreRole::User,
            content: vec![
                CoreBlock::tool_result(
                    "a",
                    json!({"day": "2026-12-01", "free": slots}).to_string(),
                ),
                CoreBlock::tool_result(
                    "b",
                    json!({"status": "booked", "confirmation_id": "BK-4821"}).to_string(),
                ),
            ],
        },
    ];
    let text = text_of(&reply(&request_with(&tools, None, &window, &round)));
    assert_eq!(
        text,
        "[offline stand-in] list_free_slots returned 37 items; book_slot confirmed booking BK-4821."
    );
    let long = describe_result("x", &"y".repeat(5000), false);
    assert!(long.chars().count() < 100);
}

#[test]
fn echoes_with_the_earlier_messages_and_the_memory() {
    let window = [
        stored(1, Message::user_text("Oi, sou a Ana")),
        stored(2, Message::assistant_text("Olá Ana")),
    ];
    let req = request_with(
        &[],
        Some("Ana prefers mornings."),
        &window,
        &[Message::user_text("tudo bem?")],
    );
    assert_eq!(
        text_of(&reply(&req)),
        "[offline stand-in] You said: «tudo bem?». I can see 2 earlier messages, and what degrau remembers (summary)."
    );
    let first = request_with(&[], None, &[], &[Message::user_text("hello")]);
    assert_eq!(
        text_of(&reply(&first)),
        "[offline stand-in] You said: «hello». I can see 0 earlier messages."
    );
}

#[test]
fn quotes_the_first_user_message_when_asked() {
    let window = [
        stored(1, Message::user_text("My dog is called Rex")),
        stored(2, Message::assistant_text("Nice")),
    ];
    let req = request_with(
        &[],
        None,
        &window,
        &[Message::user_text("O que eu disse primeiro?")],
    );
    assert!(
        text_of(&reply(&req)).starts_with(
            "[offline stand-in] The first thing you said was: «My dog is called Rex»."
        )
    );
}

#[test]
fn tool_ids_are_deterministic_per_request_and_differ_across_requests() {
    assert_eq!(tool_use_id("a", 0), tool_use_id("a", 0));
    assert_ne!(tool_use_id("a", 0), tool_use_id("a", 1));
    assert_ne!(tool_use_id("a", 0), tool_use_id("b", 0));
}

#[test]
fn finds_dates_and_times_without_regexes() {
    assert_eq!(
        find_dates("on 2026-12-04 or 2026-12-05, not 2026-13-01 nor 12026-12-01 nor 2026-12-04"),
        vec!["2026-12-04", "2026-12-05"]
    );
    assert_eq!(find_time("at 14:30."), Some("14:30".into()));
    assert_eq!(find_time("at 9:05"), Some("09:05".into()));
    assert_eq!(find_time("ratio 1:2 then 25:00 then 123:45"), None);
    assert_eq!(find_time("no time"), None);
}

#[test]
fn a_summary_keeps_every_identifier_and_stays_short() {
    let mut transcript = String::from(
        "user: I want a haircut on 2026-12-04 at 10:30\n\
         assistant: [offline stand-in] Booked, your code is BK-4821.\n\
         tool: {\"confirmation_id\":\"BK-4821\",\"phone\":\"+5511999990000\"}\n",
    );
    for i in 0..200 {
        transcript.push_str(&format!(
            "user: filler sentence number {i} with many words to make it long\n"
        ));
    }
    let summary = summarize_conversation(&transcript);
    assert!(summary.starts_with("[offline stand-in] The customer said: «I want a haircut"));
    assert!(summary.contains("the agent said: «Booked, your code is BK-4821.»"));
    assert!(summary.chars().count() <= MAX_SUMMARY_CHARS);
    for id in ["2026-12-04", "10:30", "BK-4821", "+5511999990000", "199"] {
        assert!(summary.contains(id), "{id} kept");
    }
    assert_eq!(summary.matches(MARKER).count(), 1);
}

#[test]
fn a_forced_tool_gets_only_a_tool_use() {
    let mut tools = demo_tools();
    tools.push(ToolDef {
        name: "record_facts".into(),
        description: "facts".into(),
        input_schema: json!({"type": "object"}),
    });
    let mut req = request_with(&tools, None, &[], &[Message::user_text("user: hi")]);
    req.system[0].text = "degrau:extract-facts".into();
    let forced = answer_with(&req, ToolChoice::Tool("record_facts".into()));
    assert_eq!(forced.stop_reason, StopReason::ToolUse);
    assert_eq!(forced.content.len(), 1);
    let ResponseBlock::ToolUse { name, input, .. } = &forced.content[0] else {
        panic!("expected a tool_use");
    };
    assert_eq!(
        (name.as_str(), input),
        ("record_facts", &json!({"facts": []}))
    );

    let req = request_with(
        &tools,
        None,
        &[],
        &[Message::user_text("free on 2026-12-09?")],
    );
    let any = answer_with(&req, ToolChoice::Any);
    let ResponseBlock::ToolUse { name, input, .. } = &any.content[0] else {
        panic!("expected a tool_use");
    };
    assert_eq!(
        (name.as_str(), input),
        (LIST_FREE_SLOTS, &json!({"day": "2026-12-09"}))
    );
}

#[test]
fn summary_and_fact_requests_get_their_own_answers() {
    let mut req = request_with(&[], None, &[], &[Message::user_text("user: hi BK-1")]);
    req.system[0].text = "degrau:summarize the conversation".into();
    let text = text_of(&reply(&req));
    assert!(text.starts_with("[offline stand-in] The customer said: «hi BK-1»"));
    assert!(text.ends_with("Identifiers: BK-1."));
    req.system[0].text = "degrau:extract-facts".into();
    assert_eq!(text_of(&reply(&req)), r#"{"facts": []}"#);
}

#[test]
fn the_echo_does_not_grow_with_the_memory_it_was_given() {
    // The same message behind a short and a long summary: the same reply, so
    // a strategy that remembers more is not billed longer answers.
    let window = [
        stored(1, Message::user_text("Oi")),
        stored(2, Message::assistant_text("Olá")),
    ];
    let short = request_with(&[], Some("Ana."), &window, &[Message::user_text("ok")]);
    let long_summary = "The customer booked BK-1234 for Friday at 10:00. ".repeat(40);
    let long = request_with(
        &[],
        Some(&long_summary),
        &window,
        &[Message::user_text("ok")],
    );
    assert_eq!(text_of(&reply(&short)), text_of(&reply(&long)));
    assert!(!text_of(&reply(&long)).contains("BK-1234"));
}
