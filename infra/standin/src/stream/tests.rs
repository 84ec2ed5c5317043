//! How an answer is cut into events: for any answer the pieces are non-empty, they
//! add up to the whole, the input pieces parse to the input, and the events come in
//! the API's order; and the event-stream framing's checksums and encodings.

use super::*;

use proptest::prelude::*;

use crate::wire::{CacheCreation, StopReason, Usage};

fn answer(content: Vec<ResponseBlock>) -> MessagesResponse {
    MessagesResponse {
        id: "msg_standin_1".into(),
        kind: "message",
        role: "assistant",
        model: "claude-sonnet-5".into(),
        content,
        stop_reason: StopReason::ToolUse,
        stop_sequence: None,
        usage: Usage {
            input_tokens: 12,
            cache_creation_input_tokens: 3000,
            cache_read_input_tokens: 500,
            output_tokens: 40,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: 3000,
                ephemeral_1h_input_tokens: 0,
            },
        },
    }
}

/// Checks the events of `response` against it; `Err` says what is wrong.
fn check(response: &MessagesResponse) -> Result<(), TestCaseError> {
    let events = events(response);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    prop_assert_eq!(kinds[0], "message_start");
    prop_assert_eq!(&events[0]["message"]["content"], &json!([]));
    prop_assert_eq!(&events[0]["message"]["stop_reason"], &Value::Null);
    let start_usage = &events[0]["message"]["usage"];
    prop_assert_eq!(&start_usage["input_tokens"], &json!(12));
    prop_assert_eq!(&start_usage["cache_creation_input_tokens"], &json!(3000));
    prop_assert_eq!(&start_usage["cache_read_input_tokens"], &json!(500));
    prop_assert!(start_usage["output_tokens"].as_u64().unwrap() <= 1);
    prop_assert_eq!(kinds[kinds.len() - 1], "message_stop");
    let last = &events[events.len() - 2];
    prop_assert_eq!(last["type"].as_str(), Some("message_delta"));
    prop_assert_eq!(&last["delta"]["stop_reason"], &json!("tool_use"));
    prop_assert_eq!(&last["usage"]["output_tokens"], &json!(40));

    let mut at = 1;
    for (index, block) in response.content.iter().enumerate() {
        prop_assert_eq!(kinds[at], "content_block_start");
        prop_assert_eq!(&events[at]["index"], &json!(index));
        let start = &events[at]["content_block"];
        at += 1;
        if index == 0 {
            prop_assert_eq!(kinds[at], "ping");
            at += 1;
        }
        let mut deltas = Vec::new();
        while kinds[at] == "content_block_delta" {
            prop_assert_eq!(&events[at]["index"], &json!(index));
            deltas.push(events[at]["delta"].clone());
            at += 1;
        }
        prop_assert_eq!(kinds[at], "content_block_stop");
        prop_assert_eq!(&events[at]["index"], &json!(index));
        at += 1;
        let joined = |kind: &str, field: &str| -> Result<String, TestCaseError> {
            let mut whole = String::new();
            for delta in deltas.iter().filter(|d| d["type"] == kind) {
                let piece = delta[field].as_str().unwrap();
                prop_assert!(!piece.is_empty(), "an empty {}", kind);
                whole.push_str(piece);
            }
            Ok(whole)
        };
        match block {
            ResponseBlock::Text { text } => {
                prop_assert_eq!(start, &json!({"type": "text", "text": ""}));
                prop_assert_eq!(&joined("text_delta", "text")?, text);
                prop_assert!(deltas.iter().all(|d| d["type"] == "text_delta"));
                prop_assert!(text.chars().count() <= TEXT_PIECE || deltas.len() > 1);
            }
            ResponseBlock::ToolUse { id, name, input } => {
                prop_assert_eq!(
                    start,
                    &json!({"type": "tool_use", "id": id, "name": name, "input": {}})
                );
                prop_assert!(deltas.iter().all(|d| d["type"] == "input_json_delta"));
                let json = joined("input_json_delta", "partial_json")?;
                let read: Value = if json.is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&json).unwrap()
                };
                prop_assert_eq!(&read, input);
            }
            ResponseBlock::Thinking {
                thinking,
                signature,
            } => {
                prop_assert_eq!(
                    start,
                    &json!({"type": "thinking", "thinking": "", "signature": ""})
                );
                prop_assert_eq!(&joined("thinking_delta", "thinking")?, thinking);
                prop_assert_eq!(&joined("signature_delta", "signature")?, signature);
                let signatures = deltas.iter().filter(|d| d["type"] == "signature_delta");
                prop_assert_eq!(signatures.count(), 1);
                prop_assert_eq!(
                    deltas.last().map(|d| d["type"].clone()),
                    Some(json!("signature_delta")),
                    "the signature comes last"
                );
            }
            ResponseBlock::RedactedThinking { data } => {
                prop_assert_eq!(start, &json!({"type": "redacted_thinking", "data": data}));
                prop_assert!(deltas.is_empty());
            }
        }
    }
    prop_assert_eq!(
        at,
        events.len() - 2,
        "nothing between the blocks and the end"
    );
    Ok(())
}

fn input() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map(
        "[a-z_]{1,8}",
        prop_oneof![
            any::<String>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
        ],
        0..5,
    )
    .prop_map(|map| Value::Object(map.into_iter().collect()))
}

fn block() -> impl Strategy<Value = ResponseBlock> {
    prop_oneof![
        ".{1,80}".prop_map(ResponseBlock::text),
        ("toolu_[a-z0-9]{4}", "[a-z_]{1,12}", input())
            .prop_map(|(id, name, input)| ResponseBlock::tool_use(id, name, input)),
        (".{1,120}", "[A-Za-z0-9+/=]{8,40}").prop_map(|(thinking, signature)| {
            ResponseBlock::Thinking {
                thinking,
                signature,
            }
        }),
        "[A-Za-z0-9+/=]{4,40}".prop_map(|data| ResponseBlock::RedactedThinking { data }),
    ]
}

proptest! {
    #[test]
    fn any_answer_is_cut_into_non_empty_pieces_that_add_up_in_the_api_s_order(
        content in proptest::collection::vec(block(), 0..6),
    ) {
        check(&answer(content))?;
    }

    #[test]
    fn pieces_never_split_a_character_and_add_up(text in any::<String>(), size in 1usize..20) {
        let cut = pieces(&text, size);
        prop_assert_eq!(cut.concat(), text.clone());
        prop_assert!(cut.iter().all(|p| !p.is_empty() && p.chars().count() <= size));
    }
}

#[test]
fn an_answer_with_every_block_type_streams_in_several_deltas() {
    let response = answer(vec![
        ResponseBlock::Thinking {
            thinking: "The contact wants Friday; list the free slots first.".into(),
            signature: "c2lnbmVk".into(),
        },
        ResponseBlock::text("[offline stand-in] Let me check Friday for you."),
        ResponseBlock::tool_use("toolu_1", "list_free_slots", json!({"day": "2026-12-04"})),
        ResponseBlock::tool_use("toolu_2", "now", json!({})),
    ]);
    check(&response).unwrap();
    let events = events(&response);
    let count = |kind: &str| events.iter().filter(|e| e["delta"]["type"] == kind).count();
    assert!(count("text_delta") > 1);
    assert!(count("thinking_delta") > 1);
    assert!(count("input_json_delta") > 1);
    assert_eq!(count("signature_delta"), 1);
}

#[test]
fn sse_writes_the_event_name_and_one_data_line() {
    let text = sse(&json!({"type": "ping"}));
    assert_eq!(&text[..], b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
}

#[test]
fn crc32_and_base64_match_their_reference_vectors() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(plain.as_bytes()), encoded);
    }
}

#[test]
fn a_frame_carries_its_lengths_and_checksums() {
    let frame = frame(&[(":message-type", "event")], b"{}");
    let u32_at = |i: usize| u32::from_be_bytes(frame[i..i + 4].try_into().unwrap());
    assert_eq!(u32_at(0) as usize, frame.len());
    let headers = 1 + ":message-type".len() + 1 + 2 + "event".len();
    assert_eq!(u32_at(4) as usize, headers);
    assert_eq!(u32_at(8), crc32(&frame[..8]));
    assert_eq!(&frame[12 + headers..frame.len() - 4], b"{}");
    assert_eq!(u32_at(frame.len() - 4), crc32(&frame[..frame.len() - 4]));
}

#[test]
fn a_mid_stream_error_is_bedrock_s_exception_for_its_type() {
    let name = |kind: &str| {
        let frame = exception_frame(kind, "m");
        let text = String::from_utf8_lossy(&frame).into_owned();
        [
            "throttlingException",
            "serviceUnavailableException",
            "internalServerException",
            "modelStreamErrorException",
        ]
        .into_iter()
        .find(|name| text.contains(name))
        .unwrap_or("none")
        .to_owned()
    };
    assert_eq!(name("rate_limit_error"), "throttlingException");
    assert_eq!(name("overloaded_error"), "serviceUnavailableException");
    assert_eq!(name("api_error"), "internalServerException");
    assert_eq!(name("permission_error"), "modelStreamErrorException");
    let frame = exception_frame("permission_error", "no");
    assert!(String::from_utf8_lossy(&frame).contains("\"originalStatusCode\":403"));
}
