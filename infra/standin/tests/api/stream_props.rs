//! For any answer, the stand-in's stream read by degrau's own stream reader
//! (`degrau_adapters::model_stream`), cut into chunks anywhere, is exactly the
//! answer the same call without `stream` reads as.

use degrau::model::{ModelDelta, ModelResponse};
use degrau_adapters::model_stream::{Assembler, SseParser, Step};
use degrau_standin::stream::{events, sse};
use degrau_standin::wire::{CacheCreation, MessagesResponse, ResponseBlock, StopReason, Usage};
use proptest::prelude::*;
use serde_json::Value;

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

fn response(content: Vec<ResponseBlock>, output_tokens: u64) -> MessagesResponse {
    MessagesResponse {
        id: "msg_standin_7".into(),
        kind: "message",
        role: "assistant",
        model: "claude-sonnet-5".into(),
        content,
        stop_reason: StopReason::EndTurn,
        stop_sequence: None,
        usage: Usage {
            input_tokens: 12,
            cache_creation_input_tokens: 3000,
            cache_read_input_tokens: 500,
            output_tokens,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: 1000,
                ephemeral_1h_input_tokens: 2000,
            },
        },
    }
}

/// Reads a body cut at `cuts` the way the Anthropic adapter does.
fn read(body: &[u8], mut cuts: Vec<usize>) -> (Vec<ModelDelta>, Option<ModelResponse>) {
    cuts.retain(|i| *i < body.len());
    cuts.sort_unstable();
    let mut parser = SseParser::default();
    let mut assembler = Assembler::default();
    let mut deltas = Vec::new();
    let mut from = 0;
    for to in cuts.into_iter().chain([body.len()]) {
        for event in parser.push(&body[from..to.max(from)]) {
            match assembler
                .event(event.data.as_bytes())
                .expect("a valid event")
            {
                Step::Nothing => {}
                Step::Delta(delta) => deltas.push(delta),
                Step::Done(answer) => return (deltas, Some(*answer)),
            }
        }
        from = to.max(from);
    }
    (deltas, None)
}

proptest! {
    #[test]
    fn any_streamed_answer_reads_as_the_whole_answer_however_it_is_chunked(
        content in proptest::collection::vec(block(), 0..5),
        output_tokens in 1u64..5000,
        cuts in proptest::collection::vec(0usize..6000, 0..30),
    ) {
        let response = response(content, output_tokens);
        let body: Vec<u8> = events(&response).iter().flat_map(|e| sse(e).to_vec()).collect();
        let (deltas, streamed) = read(&body, cuts);
        let whole: ModelResponse =
            serde_json::from_value(serde_json::to_value(&response).unwrap()).unwrap();
        prop_assert_eq!(streamed.as_ref(), Some(&whole));
        let pieces = deltas.iter().filter(|d| !matches!(d, ModelDelta::ToolUse { .. })).count();
        let tools = deltas.len() - pieces;
        prop_assert_eq!(
            tools,
            whole.content.iter().filter(|b| matches!(b, degrau::domain::ContentBlock::ToolUse { .. })).count()
        );
    }
}
