//! For any answer the quirks corpus can make, read by degrau's own clients (the
//! whole JSON body, or the stream through degrau's stream reader), kept as
//! degrau keeps an answer (`degrau::plan::sendable`) and sent back as history in the
//! next request degrau builds, that request passes the stand-in's own rules,
//! which are written apart from the core's: what degrau stores of a real answer
//! never wedges its contact (issue 38).

use degrau::domain::{ContentBlock, Message, Role, StoredMessage};
use degrau::model::{ModelResponse, StopReason as CoreStop};
use degrau::plan::request::{Lifetimes, RequestParts, ToolDef, build_request};
use degrau::plan::sendable::{readable, sendable};
use degrau_adapters::model_stream::{Assembler, SseParser, Step};
use degrau_standin::answer::Answer;
use degrau_standin::quirks::Quirk;
use degrau_standin::stream::sse;
use degrau_standin::wire::{CacheCreation, MessagesResponse, ResponseBlock, StopReason, Usage};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Text of every kind a model writes: words, whitespace alone, nothing.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z ,.!?]{1,60}",
        1 => Just(String::new()),
        1 => "[ \n\t]{1,4}",
    ]
}

/// An answer's blocks: text and tool calls (distinct ids, names of the tools the
/// request defines).
fn blocks() -> impl Strategy<Value = Vec<ResponseBlock>> {
    proptest::collection::vec(
        prop_oneof![
            text().prop_map(ResponseBlock::text),
            (0usize..2, "[a-z]{0,6}")
                .prop_map(|(tool, day)| (tool, day))
                .prop_map(|(tool, day)| ResponseBlock::tool_use(
                    "toolu_placeholder",
                    TOOLS[tool],
                    json!({"day": day, "time": "10:30"})
                )),
        ],
        0..5,
    )
    .prop_map(|mut blocks| {
        let mut n = 0;
        for block in &mut blocks {
            if let ResponseBlock::ToolUse { id, .. } = block {
                n += 1;
                *id = format!("toolu_{n:03}");
            }
        }
        blocks
    })
}

const TOOLS: [&str; 2] = ["list_free_slots", "book_slot"];

fn response(content: Vec<ResponseBlock>) -> MessagesResponse {
    let calls = content
        .iter()
        .any(|b| matches!(b, ResponseBlock::ToolUse { .. }));
    MessagesResponse {
        id: "msg_standin_props".into(),
        kind: "message",
        role: "assistant",
        model: "claude-sonnet-5".into(),
        content,
        stop_reason: if calls {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        },
        stop_sequence: None,
        usage: Usage {
            input_tokens: 12,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
            output_tokens: 40,
            cache_creation: CacheCreation::default(),
        },
    }
}

/// What degrau's client reads of `response` with `quirk` applied: the whole
/// body, or the stream through degrau's reader; `None` when the stream ends in
/// an error (nothing is kept of it).
fn read(quirk: Quirk, response: &MessagesResponse, streamed: bool) -> Option<ModelResponse> {
    if !streamed {
        return Some(serde_json::from_value(quirk.body(response)).expect("a Messages body"));
    }
    let mut parser = SseParser::default();
    let mut assembler = Assembler::default();
    for event in quirk.events(response) {
        for sse_event in parser.push(&sse(&event)) {
            match assembler.event(sse_event.data.as_bytes()) {
                Ok(Step::Done(answer)) => return Some(*answer),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
    None
}

fn stored(seq: u64, role: Role, content: Vec<ContentBlock>) -> StoredMessage {
    degrau::testing::stored(seq, Message { role, content })
}

/// The conversation degrau stores around a kept answer: the question, the
/// answer, its tool results and a closing answer when it called tools.
fn conversation(answer: Vec<ContentBlock>) -> Vec<StoredMessage> {
    let ids: Vec<String> = answer
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    let mut window = vec![
        stored(1, Role::User, vec![ContentBlock::text("book friday")]),
        stored(2, Role::Assistant, answer),
    ];
    if !ids.is_empty() {
        let results = ids
            .iter()
            .map(|id| ContentBlock::tool_result(id.clone(), "ok"))
            .collect();
        window.push(stored(3, Role::User, results));
        window.push(stored(
            4,
            Role::Assistant,
            vec![ContentBlock::text("Done.")],
        ));
    }
    window
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn any_answer_the_corpus_makes_is_kept_so_that_the_next_request_passes_the_standins_rules(
        content in blocks(),
        quirk in proptest::sample::select(Quirk::ALL.to_vec()),
        streamed in any::<bool>(),
    ) {
        let tidy = response(content);
        let answer = Answer { content: tidy.content.clone(), stop_reason: tidy.stop_reason };
        // Thinking only where the quirk brings it, signed by the stand-in.
        let thinking = quirk == Quirk::ThinkingBlocks;
        let quirk = if quirk.applies(&answer, streamed, thinking) { quirk } else { Quirk::UnknownFields };
        let Some(read) = read(quirk, &tidy, streamed) else {
            return Ok(());
        };
        // What degrau keeps: a refusal and a cut tool call are never kept, and an
        // answer with nothing to read is the empty answer.
        let cut_call = read.stop_reason == Some(CoreStop::MaxTokens)
            && read.content.iter().any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        if read.stop_reason == Some(CoreStop::Refusal) || cut_call {
            return Ok(());
        }
        let kept = sendable(read.content);
        if !readable(&kept) {
            return Ok(());
        }
        let window = conversation(kept);
        let tools: Vec<ToolDef> = TOOLS
            .iter()
            .map(|name| ToolDef {
                name: (*name).into(),
                description: "a demo tool".into(),
                input_schema: json!({"type": "object"}),
            })
            .collect();
        let round = [Message::user_text("and saturday?")];
        let request = build_request(&RequestParts {
            model: "claude-sonnet-5",
            max_tokens: 4096,
            thinking: thinking.then_some(2048),
            tools: &tools,
            instructions: "You book haircuts.",
            facts: &[],
            summary: None,
            last_session: None,
            window: &window,
            round: &round,
            lifetimes: Lifetimes::FiveMinutes,
        })
        .expect("degrau builds it");
        let body: Value = serde_json::to_value(&request).unwrap();
        let judged = degrau_standin::parse::parse_value(&body);
        prop_assert!(judged.is_ok(), "{quirk} streamed={streamed}: {:?}\n{body}", judged.err());
    }
}
