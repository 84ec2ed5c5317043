//! degrau's own model adapters (`AnthropicModel`, `BedrockModel`), `create` and
//! `stream`, reading each quirky answer: what `ModelResponse` comes back. The
//! adapters pass the blocks on as they came (keeping what the API refuses back is
//! the core's business, issue 38); both calls read the same answer, but for a
//! stream cut inside a tool's input, which the adapters do not read yet.

use degrau::domain::ContentBlock;
use degrau::model::{ModelDelta, ModelError, ModelResponse, StopReason};
use degrau_standin::quirks::{Quirk, TEXT_AFTER_TOOL_USE};
use serde_json::json;

use crate::helpers::start;
use crate::quirks::TOOL_QUESTION;
use crate::stream::{BOTH, Via, minute, pieces_of, request, stream};

/// What `create` and `stream` of one request returned, `quirk` queued before
/// each on a reset stand-in (so both see the same cache), the stream's pieces,
/// and how many calls the stream made.
struct Read {
    create: Result<ModelResponse, ModelError>,
    stream: Result<ModelResponse, ModelError>,
    pieces: Vec<ModelDelta>,
    stream_calls: usize,
}

async fn read(via: Via, quirk: Quirk, text: &str, thinking: Option<u32>) -> Read {
    let standin = start().await;
    let model = via.model(&standin);
    let request = request(text, thinking);
    standin.running.standin().push_quirks([quirk]);
    let create = model.create(&request, minute()).await;
    standin.running.standin().reset();
    standin.running.standin().push_quirks([quirk]);
    let (stream, pieces) = stream(model.as_ref(), &request).await;
    let logged = standin.logged().await;
    let applied = logged
        .iter()
        .filter(|c| c["quirks"] == json!([quirk]))
        .count();
    assert_eq!(applied, 1, "{via:?} {quirk}: the stream took the quirk");
    Read {
        create,
        stream,
        pieces,
        stream_calls: logged.len(),
    }
}

impl Read {
    /// Both calls answered, the same answer; it.
    fn same(self, case: &str) -> ModelResponse {
        let create = self
            .create
            .unwrap_or_else(|e| panic!("{case}: create: {e:?}"));
        let stream = self
            .stream
            .unwrap_or_else(|e| panic!("{case}: stream: {e:?}"));
        assert_eq!(stream.content, create.content, "{case}");
        assert_eq!(stream.stop_reason, create.stop_reason, "{case}");
        assert_eq!(stream.usage, create.usage, "{case}");
        create
    }
}

fn text(text: &str) -> ContentBlock {
    ContentBlock::Text { text: text.into() }
}

fn list_free_slots(id: &str, input: serde_json::Value) -> ContentBlock {
    ContentBlock::ToolUse {
        id: id.into(),
        name: "list_free_slots".into(),
        input,
    }
}

/// The stand-in's `tool_use` id in an answer.
fn call_id(answer: &ModelResponse) -> String {
    answer
        .content
        .iter()
        .find_map(|b| match b {
            ContentBlock::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .expect("a tool call")
}

#[tokio::test]
async fn degrau_s_clients_read_the_blocks_around_a_tool_call_as_they_came() {
    for via in BOTH {
        let day = json!({"day": "2026-12-03"});
        for quirk in [
            Quirk::EmptyTextBeforeToolUse,
            Quirk::NewlinesBeforeToolUse,
            Quirk::TextAfterToolUse,
            Quirk::ToolUseEmptyInput,
        ] {
            let case = format!("{via:?} {quirk}");
            let answer = read(via, quirk, TOOL_QUESTION, None).await.same(&case);
            let id = call_id(&answer);
            let expected = match quirk {
                Quirk::EmptyTextBeforeToolUse => vec![text(""), list_free_slots(&id, day.clone())],
                Quirk::NewlinesBeforeToolUse => {
                    vec![text("\n\n"), list_free_slots(&id, day.clone())]
                }
                Quirk::TextAfterToolUse => vec![
                    text("[offline stand-in] Let me check."),
                    list_free_slots(&id, day.clone()),
                    text(TEXT_AFTER_TOOL_USE),
                ],
                _ => vec![
                    text("[offline stand-in] Let me check."),
                    list_free_slots(&id, json!({})),
                ],
            };
            assert_eq!(answer.content, expected, "{case}");
            assert_eq!(answer.stop_reason, Some(StopReason::ToolUse), "{case}");
        }
    }
}

#[tokio::test]
async fn degrau_s_clients_read_cut_blank_and_refused_answers_with_their_stop_reason() {
    for via in BOTH {
        let case = format!("{via:?}");
        let blank = read(via, Quirk::WhitespaceFinalText, "hello", None).await;
        let blank = blank.same(&case);
        assert_eq!(blank.content, [text(" ")], "{case}");
        assert_eq!(blank.stop_reason, Some(StopReason::EndTurn), "{case}");

        let cut = read(via, Quirk::MaxTokensInText, "hello", None)
            .await
            .same(&case);
        assert_eq!(cut.stop_reason, Some(StopReason::MaxTokens), "{case}");
        assert_eq!(cut.usage.output_tokens, 4096, "{case}: the whole budget");
        let [ContentBlock::Text { text: half }] = cut.content.as_slice() else {
            panic!("{case}: {:?}", cut.content)
        };
        assert!(
            half.starts_with("[offline stand-in] You said"),
            "{case}: {half}"
        );

        let refused = read(via, Quirk::RefusalAfterText, TOOL_QUESTION, None).await;
        let shown = pieces_of(&refused.pieces, 0);
        let refused = refused.same(&case);
        assert_eq!(refused.content, [text("[offline stand-i")], "{case}");
        assert_eq!(refused.stop_reason, Some(StopReason::Refusal), "{case}");
        assert_eq!(shown, "[offline stand-i", "{case}: the text was shown");
    }
}

#[tokio::test]
async fn degrau_s_clients_read_signed_and_redacted_thinking() {
    for via in BOTH {
        let case = format!("{via:?}");
        let answer = read(via, Quirk::ThinkingBlocks, "hello", Some(1024)).await;
        let answer = answer.same(&case);
        let [
            ContentBlock::Thinking { signature, .. },
            ContentBlock::RedactedThinking { data },
            ContentBlock::Text { .. },
        ] = answer.content.as_slice()
        else {
            panic!("{case}: {:?}", answer.content)
        };
        assert!(
            signature.starts_with("standin-") && !data.is_empty(),
            "{case}"
        );
    }
}

#[tokio::test]
async fn degrau_s_clients_ignore_null_citations_unknown_fields_and_pings() {
    for via in BOTH {
        let standin = start().await;
        let tidy = via
            .model(&standin)
            .create(&request(TOOL_QUESTION, None), minute())
            .await
            .expect("a tidy answer");
        for quirk in [
            Quirk::NullCitations,
            Quirk::UnknownFields,
            Quirk::PingMidStream,
        ] {
            let case = format!("{via:?} {quirk}");
            let answer = read(via, quirk, TOOL_QUESTION, None).await.same(&case);
            assert_eq!(answer.content.len(), tidy.content.len(), "{case}");
            assert_eq!(answer.content[0], tidy.content[0], "{case}");
            assert_eq!(answer.usage, tidy.usage, "{case}");
            assert_eq!(answer.stop_reason, tidy.stop_reason, "{case}");
        }
    }
}

#[tokio::test]
async fn an_error_event_after_the_first_piece_ends_the_stream_without_a_retry() {
    for via in BOTH {
        let read = read(via, Quirk::ErrorEventMidStream, "hello", None).await;
        assert!(read.create.is_ok(), "{via:?}: a whole answer has no stream");
        assert_eq!(read.stream.unwrap_err(), via.overloaded(), "{via:?}");
        assert_eq!(read.pieces.len(), 1, "{via:?}: one piece shown");
        assert_eq!(read.stream_calls, 1, "{via:?}: not retried");
    }
}

#[tokio::test]
async fn a_max_tokens_stop_inside_a_tool_input_reads_as_the_call_so_far() {
    for via in BOTH {
        let read = read(via, Quirk::MaxTokensInToolInput, TOOL_QUESTION, None).await;
        let answer = read.create.expect("an answer");
        let id = call_id(&answer);
        assert_eq!(
            answer.content,
            [
                text("[offline stand-in] Let me check."),
                list_free_slots(&id, json!({}))
            ],
            "{via:?}"
        );
        assert_eq!(answer.stop_reason, Some(StopReason::MaxTokens), "{via:?}");
    }
}

/// Today `model_stream.rs` (`finish`) refuses the cut input as a protocol error;
/// the adapter fix on main reads it as the JSON route does.
#[tokio::test]
async fn a_streamed_max_tokens_stop_inside_a_tool_input_reads_as_the_call_so_far() {
    for via in BOTH {
        let read = read(via, Quirk::MaxTokensInToolInput, TOOL_QUESTION, None).await;
        let case = format!("{via:?}");
        let answer = read.same(&case);
        let id = call_id(&answer);
        assert_eq!(
            answer.content,
            [
                text("[offline stand-in] Let me check."),
                list_free_slots(&id, json!({}))
            ],
            "{case}"
        );
        assert_eq!(answer.stop_reason, Some(StopReason::MaxTokens), "{case}");
    }
}
