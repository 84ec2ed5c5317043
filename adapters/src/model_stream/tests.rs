//! The SSE parser over any cut of a body, and the assembler over each block type.

use super::*;

use proptest::prelude::*;
use serde_json::json;

/// An SSE body of the given events, each `event:` + one `data:` line, `\n`-ended.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {}\n\n", e["type"].as_str().unwrap(), e))
        .collect()
}

fn start(usage: Value) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "model": "claude-sonnet-5", "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": usage}})
}

fn block_start(index: usize, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: usize, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn stop(index: usize) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_delta(stop_reason: &str, usage: Value) -> Value {
    json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
        "stop_sequence": null}, "usage": usage})
}

/// An answer with every block type: thinking (with its signature), redacted
/// thinking, text in pieces and a tool call whose input comes in pieces.
fn every_block() -> Vec<Value> {
    vec![
        start(
            json!({"input_tokens": 12, "cache_creation_input_tokens": 3000,
                     "cache_read_input_tokens": 500, "output_tokens": 1}),
        ),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        json!({"type": "ping"}),
        delta(0, json!({"type": "thinking_delta", "thinking": "Friday "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "is free."})),
        delta(0, json!({"type": "signature_delta", "signature": "sig=="})),
        stop(0),
        block_start(1, json!({"type": "redacted_thinking", "data": "sealed"})),
        stop(1),
        block_start(2, json!({"type": "text", "text": ""})),
        delta(2, json!({"type": "text_delta", "text": "Let me "})),
        delta(2, json!({"type": "text_delta", "text": "check «Friday»."})),
        stop(2),
        block_start(
            3,
            json!({"type": "tool_use", "id": "toolu_1",
                              "name": "list_free_slots", "input": {}}),
        ),
        delta(3, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(
            3,
            json!({"type": "input_json_delta", "partial_json": "{\"day\": "}),
        ),
        delta(
            3,
            json!({"type": "input_json_delta", "partial_json": "\"fri\"}"}),
        ),
        stop(3),
        message_delta("tool_use", json!({"output_tokens": 40})),
        json!({"type": "message_stop"}),
    ]
}

fn every_block_answer() -> ModelResponse {
    ModelResponse {
        id: "msg_1".into(),
        model: "claude-sonnet-5".into(),
        role: Role::Assistant,
        content: vec![
            ContentBlock::Thinking {
                thinking: "Friday is free.".into(),
                signature: "sig==".into(),
            },
            ContentBlock::RedactedThinking {
                data: "sealed".into(),
            },
            ContentBlock::text("Let me check «Friday»."),
            ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "list_free_slots".into(),
                input: json!({"day": "fri"}),
            },
        ],
        stop_reason: Some(StopReason::ToolUse),
        usage: Usage {
            input_tokens: 12,
            cache_creation_input_tokens: 3000,
            cache_read_input_tokens: 500,
            output_tokens: 40,
            cache_creation: None,
        },
    }
}

/// Feeds `chunks` to a parser and the events to an assembler: the events, the
/// deltas and the outcome.
fn run(
    chunks: &[&[u8]],
) -> (
    Vec<SseEvent>,
    Vec<ModelDelta>,
    Result<ModelResponse, ModelError>,
) {
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(parser.push(chunk));
    }
    let mut assembler = Assembler::default();
    let mut deltas = Vec::new();
    for event in &events {
        match assembler.event(event.data.as_bytes()) {
            Ok(Step::Nothing) => {}
            Ok(Step::Delta(delta)) => deltas.push(delta),
            Ok(Step::Done(response)) => return (events, deltas, Ok(*response)),
            Err(error) => return (events, deltas, Err(error)),
        }
    }
    (
        events,
        deltas,
        Err(ModelError::Connection("no message_stop".into())),
    )
}

fn assemble(events: &[Value]) -> (Vec<ModelDelta>, Result<ModelResponse, ModelError>) {
    let body = sse(events);
    let (_, deltas, outcome) = run(&[body.as_bytes()]);
    (deltas, outcome)
}

#[test]
fn every_block_type_is_assembled_as_the_whole_answer_would_read() {
    let (deltas, outcome) = assemble(&every_block());
    assert_eq!(outcome.unwrap(), every_block_answer());
    assert_eq!(
        deltas,
        vec![
            ModelDelta::Thinking {
                index: 0,
                text: "Friday ".into()
            },
            ModelDelta::Thinking {
                index: 0,
                text: "is free.".into()
            },
            ModelDelta::Text {
                index: 2,
                text: "Let me ".into()
            },
            ModelDelta::Text {
                index: 2,
                text: "check «Friday».".into()
            },
            ModelDelta::ToolUse {
                index: 3,
                id: "toolu_1".into(),
                name: "list_free_slots".into()
            },
        ]
    );
}

#[test]
fn a_tool_call_without_input_pieces_has_an_empty_object_as_input() {
    let events = vec![
        start(json!({"input_tokens": 5, "output_tokens": 1})),
        block_start(
            0,
            json!({"type": "tool_use", "id": "t", "name": "now", "input": {}}),
        ),
        delta(0, json!({"type": "input_json_delta", "partial_json": ""})),
        stop(0),
        message_delta("tool_use", json!({"output_tokens": 3})),
        json!({"type": "message_stop"}),
    ];
    let (_, outcome) = assemble(&events);
    assert_eq!(
        outcome.unwrap().content,
        vec![ContentBlock::tool_use("t", "now", json!({}))]
    );
    let mut without_delta = events.clone();
    without_delta.remove(2);
    let (_, outcome) = assemble(&without_delta);
    assert_eq!(
        outcome.unwrap().content,
        vec![ContentBlock::tool_use("t", "now", json!({}))]
    );
}

#[test]
fn a_tool_call_the_output_limit_cut_inside_its_input_is_handed_over_not_refused() {
    // Issue 38: the streamed route failed here (502) where the JSON route asked
    // again with more room and answered 200.
    let events = vec![
        start(json!({"input_tokens": 5, "output_tokens": 1})),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Booking it."})),
        stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "t", "name": "book_slot", "input": {}}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "{\"day\": \"fri"}),
        ),
        stop(1),
        message_delta("max_tokens", json!({"output_tokens": 16})),
        json!({"type": "message_stop"}),
    ];
    let answer = assemble(&events).1.unwrap();
    assert_eq!(answer.stop_reason, Some(StopReason::MaxTokens));
    assert_eq!(
        answer.content,
        vec![
            ContentBlock::text("Booking it."),
            ContentBlock::tool_use("t", "book_slot", json!({}))
        ]
    );
}

#[test]
fn message_delta_s_usage_updates_the_start_s_field_by_field() {
    let mut events = every_block();
    let at = events.len() - 2;
    events[at] = message_delta(
        "end_turn",
        json!({"output_tokens": 41, "input_tokens": 13, "cache_read_input_tokens": 501,
               "cache_creation": {"ephemeral_5m_input_tokens": 3000,
                                  "ephemeral_1h_input_tokens": 0}}),
    );
    let answer = assemble(&events).1.unwrap();
    assert_eq!(
        answer.usage,
        Usage {
            input_tokens: 13,
            cache_creation_input_tokens: 3000,
            cache_read_input_tokens: 501,
            output_tokens: 41,
            cache_creation: Some(CacheCreation {
                ephemeral_5m_input_tokens: 3000,
                ephemeral_1h_input_tokens: 0
            }),
        }
    );
    assert_eq!(answer.stop_reason, Some(StopReason::EndTurn));
}

#[test]
fn unknown_events_blocks_deltas_and_fields_are_ignored() {
    let mut events = every_block();
    events.insert(1, json!({"type": "a_future_event", "index": 0}));
    events.insert(4, delta(0, json!({"type": "a_future_delta", "text": "no"})));
    events[5]["delta"]["a_future_field"] = json!(1);
    events.insert(
        events.len() - 2,
        block_start(
            4,
            json!({"type": "server_tool_use", "id": "s", "name": "web"}),
        ),
    );
    events.insert(
        events.len() - 2,
        delta(4, json!({"type": "input_json_delta", "partial_json": "{}"})),
    );
    let (_, outcome) = assemble(&events);
    assert_eq!(outcome.unwrap(), every_block_answer());
}

#[test]
fn error_events_map_like_the_http_errors_of_their_type() {
    for (kind, message, expected) in [
        (
            "overloaded_error",
            "Overloaded",
            ModelError::Unavailable { status: 529 },
        ),
        (
            "api_error",
            "Internal",
            ModelError::Unavailable { status: 500 },
        ),
        (
            "rate_limit_error",
            "slow",
            ModelError::RateLimited { retry_after: None },
        ),
        (
            "invalid_request_error",
            "bad",
            ModelError::InvalidRequest {
                message: "bad".into(),
            },
        ),
        (
            "invalid_request_error",
            "prompt is too long: 3 tokens > 2 maximum",
            ModelError::PromptTooLong {
                message: "prompt is too long: 3 tokens > 2 maximum".into(),
            },
        ),
        (
            "authentication_error",
            "key",
            ModelError::Authentication { status: 401 },
        ),
        (
            "permission_error",
            "no",
            ModelError::Authentication { status: 403 },
        ),
        (
            "a_future_error",
            "?",
            ModelError::Unavailable { status: 500 },
        ),
    ] {
        let mut events = every_block()[..4].to_vec();
        events.push(json!({"type": "error", "error": {"type": kind, "message": message}}));
        let (deltas, outcome) = assemble(&events);
        assert_eq!(outcome.unwrap_err(), expected, "{kind}");
        assert_eq!(deltas.len(), 1, "the delta before the error went out");
    }
}

#[test]
fn a_broken_event_or_tool_input_is_a_protocol_error_quoting_nothing() {
    let mut events = every_block();
    events[16] = delta(
        3,
        json!({"type": "input_json_delta", "partial_json": "\"secret"}),
    );
    let error = assemble(&events).1.unwrap_err();
    assert!(
        matches!(&error, ModelError::Protocol(text) if !text.contains("secret")),
        "{error:?}"
    );
    let (_, _, outcome) = run(&[b"event: message_start\ndata: {\"secret\n\n"]);
    assert!(matches!(outcome, Err(ModelError::Protocol(_))));
    let (_, outcome) = assemble(&every_block()[1..]);
    assert!(
        matches!(outcome, Err(ModelError::Protocol(_))),
        "no message_start"
    );
}

#[test]
fn the_parser_reads_crlf_and_cr_line_ends_comments_and_multi_line_data() {
    let body = b": keep-alive\r\nevent: a\r\ndata: one\r\ndata:two\r\nid: 7\r\nretry: 10\r\nfuture\r\n\r\n\
                 event: b\rdata: {}\r\r\
                 data: plain\n\n\
                 event: no-data\n\n";
    let (events, _, _) = run(&[body]);
    assert_eq!(
        events,
        vec![
            SseEvent {
                event: "a".into(),
                data: "one\ntwo".into()
            },
            SseEvent {
                event: "b".into(),
                data: "{}".into()
            },
            SseEvent {
                event: "message".into(),
                data: "plain".into()
            },
        ]
    );
}

#[test]
fn an_event_not_ended_by_a_blank_line_is_not_dispatched() {
    let (events, _, _) = run(&[b"event: a\ndata: x\n"]);
    assert!(events.is_empty());
}

/// A valid body, its line ends `\n` or `\r\n`, with comments between events.
fn body(crlf: bool) -> String {
    let body = sse(&every_block()).replace("\n\nevent", "\n\n: ping\n\nevent");
    if crlf {
        body.replace('\n', "\r\n")
    } else {
        body
    }
}

/// Cuts `bytes` at the given (sorted, deduplicated) positions.
fn cut(bytes: &[u8], mut at: Vec<usize>) -> Vec<&[u8]> {
    at.retain(|i| *i > 0 && *i < bytes.len());
    at.sort_unstable();
    at.dedup();
    let mut chunks = Vec::new();
    let mut from = 0;
    for i in at {
        chunks.push(&bytes[from..i]);
        from = i;
    }
    chunks.push(&bytes[from..]);
    chunks
}

proptest! {
    #[test]
    fn any_cut_of_a_stream_yields_the_same_events_deltas_and_answer(
        crlf in any::<bool>(),
        at in proptest::collection::vec(0usize..4000, 0..40),
    ) {
        let body = body(crlf);
        let whole = run(&[body.as_bytes()]);
        let pieces = run(&cut(body.as_bytes(), at));
        prop_assert_eq!(&pieces.0, &whole.0);
        prop_assert_eq!(&pieces.1, &whole.1);
        prop_assert_eq!(pieces.2.unwrap(), every_block_answer());
    }

    #[test]
    fn a_cut_into_single_bytes_reads_the_same(crlf in any::<bool>()) {
        let body = body(crlf);
        let bytes: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
        prop_assert_eq!(run(&bytes).2.unwrap(), every_block_answer());
    }
}
