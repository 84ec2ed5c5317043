use serde_json::{Value, json};

use super::*;
use crate::stream::events as tidy_events;
use crate::wire::{CacheCreation, Usage};

fn tool_answer() -> Answer {
    Answer {
        content: vec![
            ResponseBlock::text("[offline stand-in] Let me check."),
            ResponseBlock::tool_use(
                "toolu_1",
                "book_slot",
                json!({"day": "2026-12-03", "service": "beard trim and haircut"}),
            ),
        ],
        stop_reason: StopReason::ToolUse,
    }
}

fn text_answer() -> Answer {
    Answer {
        content: vec![ResponseBlock::text("[offline stand-in] Hello there.")],
        stop_reason: StopReason::EndTurn,
    }
}

fn response(answer: Answer) -> MessagesResponse {
    MessagesResponse {
        id: "msg_standin_1".into(),
        kind: "message",
        role: "assistant",
        model: "claude-sonnet-5".into(),
        content: answer.content,
        stop_reason: answer.stop_reason,
        stop_sequence: None,
        usage: Usage {
            input_tokens: 10,
            cache_creation_input_tokens: 20,
            cache_read_input_tokens: 30,
            output_tokens: 40,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: 20,
                ephemeral_1h_input_tokens: 0,
            },
        },
    }
}

fn blocks(answer: &Answer) -> Value {
    serde_json::to_value(&answer.content).unwrap()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The concatenated `partial_json` of block `index`.
fn input_json(events: &[Value], index: usize) -> Option<String> {
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "content_block_delta" && e["index"] == index)
        .filter_map(|e| e["delta"]["partial_json"].as_str())
        .collect();
    (!deltas.is_empty()).then(|| deltas.concat())
}

#[test]
fn every_quirk_reads_back_from_its_wire_name() {
    for quirk in Quirk::ALL {
        assert_eq!(quirk.name().parse::<Quirk>(), Ok(quirk));
        assert_eq!(serde_json::to_value(quirk).unwrap(), json!(quirk.name()));
        assert_eq!(quirk.to_string(), quirk.name());
    }
    let names: std::collections::HashSet<&str> = Quirk::ALL.iter().map(|q| q.name()).collect();
    assert_eq!(names.len(), 13);
    assert!(
        "hiccup"
            .parse::<Quirk>()
            .unwrap_err()
            .contains("ping_mid_stream")
    );
}

#[test]
fn each_quirk_applies_only_to_an_answer_it_can_change() {
    let applicable = |answer: &Answer, streamed: bool, thinking: bool| -> Vec<Quirk> {
        Quirk::ALL
            .into_iter()
            .filter(|q| q.applies(answer, streamed, thinking))
            .collect()
    };
    use Quirk::*;
    assert_eq!(
        applicable(&tool_answer(), false, false),
        [
            EmptyTextBeforeToolUse,
            NewlinesBeforeToolUse,
            TextAfterToolUse,
            ToolUseEmptyInput,
            MaxTokensInToolInput,
            RefusalAfterText,
            NullCitations,
            UnknownFields
        ]
    );
    assert_eq!(
        applicable(&text_answer(), true, true),
        [
            WhitespaceFinalText,
            MaxTokensInText,
            RefusalAfterText,
            ThinkingBlocks,
            NullCitations,
            UnknownFields,
            PingMidStream,
            ErrorEventMidStream
        ]
    );
    // A forced tool call has no text to cut or cite.
    let forced = Answer {
        content: vec![ResponseBlock::tool_use("toolu_1", "t", json!({}))],
        stop_reason: StopReason::ToolUse,
    };
    assert!(!RefusalAfterText.applies(&forced, false, false));
    assert!(!NullCitations.applies(&forced, false, false));
    // One character cannot be cut in half and still show something.
    let short = Answer {
        content: vec![ResponseBlock::text("k")],
        stop_reason: StopReason::EndTurn,
    };
    assert!(!MaxTokensInText.applies(&short, false, false));
    // Thinking and redacted thinking already there: nothing to add.
    let thought = ThinkingBlocks.apply(text_answer());
    assert!(!ThinkingBlocks.applies(&thought, false, true));
}

#[test]
fn the_tool_use_quirks_give_the_blocks_the_real_api_sends() {
    let call = json!({"type": "tool_use", "id": "toolu_1", "name": "book_slot",
        "input": {"day": "2026-12-03", "service": "beard trim and haircut"}});
    let with = |quirk: Quirk| {
        let answer = quirk.apply(tool_answer());
        (blocks(&answer), answer.stop_reason)
    };
    assert_eq!(
        with(Quirk::EmptyTextBeforeToolUse),
        (
            json!([{"type": "text", "text": ""}, call]),
            StopReason::ToolUse
        )
    );
    assert_eq!(
        with(Quirk::NewlinesBeforeToolUse),
        (
            json!([{"type": "text", "text": "\n\n"}, call]),
            StopReason::ToolUse
        )
    );
    let (after, stop) = with(Quirk::TextAfterToolUse);
    assert_eq!(after[1], call);
    assert_eq!(
        after[2],
        json!({"type": "text", "text": answer::TEXT_AFTER_TOOL_USE})
    );
    assert_eq!(stop, StopReason::ToolUse);
    let (empty, _) = with(Quirk::ToolUseEmptyInput);
    assert_eq!(empty[1]["input"], json!({}));
    // Cut after `{"day":"2026-12-03","servic`: only `day` is whole.
    let (cut, stop) = with(Quirk::MaxTokensInToolInput);
    assert_eq!(cut[1]["input"], json!({"day": "2026-12-03"}));
    assert_eq!(stop, StopReason::MaxTokens);
}

#[test]
fn the_text_quirks_cut_replace_or_refuse_the_text() {
    let with = |quirk: Quirk, answer: Answer| {
        let answer = quirk.apply(answer);
        (blocks(&answer), answer.stop_reason)
    };
    assert_eq!(
        with(Quirk::WhitespaceFinalText, text_answer()),
        (json!([{"type": "text", "text": " "}]), StopReason::EndTurn)
    );
    assert_eq!(
        with(Quirk::MaxTokensInText, text_answer()),
        (
            json!([{"type": "text", "text": "[offline stand-"}]),
            StopReason::MaxTokens
        )
    );
    // The text before the call is shown, the call never comes.
    assert_eq!(
        with(Quirk::RefusalAfterText, tool_answer()),
        (
            json!([{"type": "text", "text": "[offline stand-i"}]),
            StopReason::Refusal
        )
    );
    let body = Quirk::RefusalAfterText.body(&response(tool_answer()));
    assert_eq!(body["stop_reason"], "refusal");
    assert_eq!(
        body["stop_details"],
        json!({"type": "refusal", "category": null, "explanation": null})
    );
}

#[test]
fn thinking_blocks_are_signed_and_sealed_so_they_are_accepted_back() {
    let answer = Quirk::ThinkingBlocks.apply(tool_answer());
    let kinds: Vec<&str> = answer
        .content
        .iter()
        .map(|b| match b {
            ResponseBlock::Text { .. } => "text",
            ResponseBlock::ToolUse { .. } => "tool_use",
            ResponseBlock::Thinking { .. } => "thinking",
            ResponseBlock::RedactedThinking { .. } => "redacted_thinking",
        })
        .collect();
    assert_eq!(kinds, ["thinking", "redacted_thinking", "text", "tool_use"]);
    let turn = serde_json::to_value(&answer.content).unwrap();
    let request = json!({"model": "m", "max_tokens": 2048,
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "tools": [{"name": "book_slot", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "book it"},
        {"role": "assistant", "content": turn},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
    ]});
    let parsed = crate::parse::parse_request(request.to_string().as_bytes());
    assert!(parsed.is_ok(), "{parsed:?}");
}

#[test]
fn a_tool_input_is_cut_mid_json_with_the_fields_complete_so_far() {
    let (streamed, complete) =
        cut_input(&json!({"day": "2026-12-03", "service": "beard trim and haircut"}));
    assert_eq!(streamed, r#"{"day":"2026-12-03","servic"#);
    assert_eq!(complete, json!({"day": "2026-12-03"}));
    assert_eq!(cut_input(&json!({})), ("{".to_owned(), json!({})));
    let (streamed, complete) = cut_input(&json!({"query": "what did we say in May"}));
    assert!(serde_json::from_str::<Value>(&streamed).is_err());
    assert_eq!(complete, json!({}));
}

#[test]
fn a_streamed_cut_stops_the_input_json_mid_way_and_says_max_tokens() {
    let events = Quirk::MaxTokensInToolInput.events(&response(tool_answer()));
    let json = input_json(&events, 1).expect("input deltas");
    assert_eq!(json, r#"{"day":"2026-12-03","servic"#);
    assert!(serde_json::from_str::<Value>(&json).is_err());
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    assert_eq!(
        types(&events)[events.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
}

#[test]
fn an_empty_input_streams_as_one_empty_input_json_delta() {
    let events = Quirk::ToolUseEmptyInput.events(&response(tool_answer()));
    let start = events
        .iter()
        .find(|e| e["type"] == "content_block_start" && e["index"] == 1)
        .unwrap();
    assert_eq!(start["content_block"]["input"], json!({}));
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "content_block_delta" && e["index"] == 1)
        .collect();
    assert_eq!(
        deltas,
        [&json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": ""}})]
    );
}

#[test]
fn pings_and_an_error_come_between_content_events() {
    let tidy = tidy_events(&response(tool_answer()));
    let pinged = Quirk::PingMidStream.events(&response(tool_answer()));
    assert!(pinged.len() > tidy.len() + 2, "several pings");
    let without: Vec<&Value> = pinged
        .iter()
        .enumerate()
        .filter(|(i, e)| *i == 2 || e["type"] != "ping")
        .map(|(_, e)| e)
        .collect();
    assert_eq!(without, tidy.iter().collect::<Vec<_>>());
    for (i, event) in pinged.iter().enumerate().skip(3) {
        if event["type"] == "ping" {
            assert!(
                pinged[i - 1]["type"]
                    .as_str()
                    .unwrap()
                    .starts_with("content_block_")
            );
            assert!(
                pinged[i + 1]["type"]
                    .as_str()
                    .unwrap()
                    .starts_with("content_block_")
            );
        }
    }

    let broken = Quirk::ErrorEventMidStream.events(&response(tool_answer()));
    assert_eq!(
        types(&broken),
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "error"
        ]
    );
    assert_eq!(
        broken[4],
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}

#[test]
fn citations_and_unknown_fields_are_on_the_body_and_the_events() {
    let cited = Quirk::NullCitations.body(&response(tool_answer()));
    assert_eq!(cited["content"][0]["citations"], Value::Null);
    assert!(
        cited["content"][0]
            .as_object()
            .unwrap()
            .contains_key("citations")
    );
    assert!(
        !cited["content"][1]
            .as_object()
            .unwrap()
            .contains_key("citations")
    );
    let events = Quirk::NullCitations.events(&response(tool_answer()));
    assert_eq!(
        events[1]["content_block"],
        json!({"type": "text", "text": "", "citations": null})
    );

    let body = Quirk::UnknownFields.body(&response(tool_answer()));
    for field in ["container", "stop_details", "stop_sequence"] {
        assert_eq!(body[field], Value::Null, "{field}");
        assert!(body.as_object().unwrap().contains_key(field), "{field}");
    }
    assert_eq!(body["usage"]["service_tier"], "standard");
    assert_eq!(
        body["usage"]["server_tool_use"],
        json!({"web_search_requests": 0})
    );
    assert_eq!(body["content"][1]["caller"], json!({"type": "direct"}));
    let events = Quirk::UnknownFields.events(&response(tool_answer()));
    assert_eq!(events[0]["message"]["usage"]["service_tier"], "standard");
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(
        delta["usage"],
        json!({"output_tokens": 40, "input_tokens": 10, "cache_creation_input_tokens": 20,
            "cache_read_input_tokens": 30,
            "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 0},
            "server_tool_use": {"web_search_requests": 0}})
    );
    assert_eq!(delta["delta"]["stop_details"], Value::Null);
}

#[test]
fn a_quirk_that_changes_nothing_sends_the_tidy_body_and_events() {
    let tidy = response(text_answer());
    for quirk in [Quirk::PingMidStream, Quirk::ErrorEventMidStream] {
        assert_eq!(quirk.body(&tidy), serde_json::to_value(&tidy).unwrap());
    }
    assert_eq!(
        Quirk::ThinkingBlocks.apply(tool_answer()).stop_reason,
        StopReason::ToolUse
    );
}

#[test]
fn draws_are_the_same_for_a_seed_and_only_among_quirks_that_apply() {
    let run = |seed: u64, per_mille: u16| -> Vec<Option<Quirk>> {
        let mut rng = Rng::new(seed);
        (0..200)
            .map(|i| {
                let answer = if i % 2 == 0 {
                    tool_answer()
                } else {
                    text_answer()
                };
                draw(&mut rng, per_mille, &answer, i % 3 == 0, false)
            })
            .collect()
    };
    assert_eq!(run(7, 250), run(7, 250));
    assert_ne!(run(7, 250), run(8, 250));
    let drawn = run(7, 250).iter().flatten().count();
    assert!((25..=75).contains(&drawn), "about a quarter: {drawn}");
    assert!(run(7, 0).iter().all(Option::is_none));
    for (i, quirk) in run(7, 1000).into_iter().enumerate() {
        let answer = if i % 2 == 0 {
            tool_answer()
        } else {
            text_answer()
        };
        let quirk = quirk.expect("always one");
        assert!(quirk.applies(&answer, i % 3 == 0, false), "{i}: {quirk}");
    }
    // Which answers get one depends on the seed and the rank only.
    let mut rng = Rng::new(7);
    let nothing_applies = Answer {
        content: vec![],
        stop_reason: StopReason::ToolUse,
    };
    let first = draw(&mut rng, 1000, &nothing_applies, false, false);
    assert_eq!(first, Some(Quirk::UnknownFields));
    assert_eq!(
        draw(&mut rng, 1000, &tool_answer(), false, false).is_some(),
        run(7, 1000)[1].is_some()
    );
}
