//! Streamed answers through degrau's own model adapters, both wires: the Messages
//! API's Server-Sent Events (`AnthropicModel`) and Bedrock's event-stream frames
//! read by the AWS SDK's decoder (`BedrockModel`). For the same answer `stream()`
//! returns exactly what `create()` returns; a fault before the first piece is
//! retried, one after it is not; pieces reach the caller before the call returns.

use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use degrau::deadline::Deadline;
use degrau::domain::{ContentBlock, Message};
use degrau::model::{Model, ModelDelta, ModelError, ModelResponse};
use degrau::plan::request::{ModelRequest, RequestParts, build_request};
use degrau_adapters::anthropic::{AnthropicConfig, AnthropicModel};
use degrau_adapters::bedrock::BedrockModel;
use degrau_adapters::retry::RetryPolicy;
use serde_json::{Value, json};

use crate::helpers::{TestStandIn, demo_tools, long_instructions, start};

/// Which of degrau's adapters calls the stand-in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Via {
    Anthropic,
    Bedrock,
}

pub(crate) const BOTH: [Via; 2] = [Via::Anthropic, Via::Bedrock];

impl Via {
    pub(crate) fn model(self, standin: &TestStandIn) -> Box<dyn Model> {
        let url = standin.running.url();
        let policy = RetryPolicy {
            request_timeout: Duration::from_secs(20),
            backoff_base: Duration::from_millis(1),
            backoff_max: Duration::from_millis(5),
            ..RetryPolicy::default()
        };
        match self {
            Via::Anthropic => Box::new(
                AnthropicModel::new(AnthropicConfig {
                    base_url: url.to_owned(),
                    api_key: "test-key".into(),
                    request_timeout: policy.request_timeout,
                    backoff_base: policy.backoff_base,
                    backoff_max: policy.backoff_max,
                    ..AnthropicConfig::default()
                })
                .expect("client builds"),
            ),
            Via::Bedrock => {
                let config = aws_sdk_bedrockruntime::Config::builder()
                    .behavior_version(BehaviorVersion::latest())
                    .endpoint_url(url)
                    .region(Region::new("us-east-1"))
                    .credentials_provider(Credentials::new("testing", "secret", None, None, "test"))
                    .build();
                Box::new(BedrockModel::new(config, policy))
            }
        }
    }

    /// The error an `overloaded_error` mid-stream is: Anthropic's 529; Bedrock
    /// ends its stream with a `serviceUnavailableException` (its 503 for a 529).
    pub(crate) fn overloaded(self) -> ModelError {
        match self {
            Via::Anthropic => ModelError::Unavailable { status: 529 },
            Via::Bedrock => ModelError::Unavailable { status: 503 },
        }
    }
}

pub(crate) fn minute() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

pub(crate) fn request(text: &str, thinking: Option<u32>) -> ModelRequest {
    build_request(&RequestParts {
        model: "claude-sonnet-5",
        max_tokens: 4096,
        thinking,
        tools: &demo_tools(),
        instructions: &long_instructions(),
        facts: &[],
        summary: None,
        last_session: None,
        window: &[],
        round: &[Message::user_text(text)],
        lifetimes: degrau::plan::request::Lifetimes::FiveMinutes,
    })
    .expect("a valid request")
}

/// Streams `request`; the outcome and the pieces handed over.
pub(crate) async fn stream(
    model: &dyn Model,
    request: &ModelRequest,
) -> (Result<ModelResponse, ModelError>, Vec<ModelDelta>) {
    let seen = Mutex::new(Vec::new());
    let outcome = model
        .stream(request, minute(), &|delta| {
            seen.lock().expect("not poisoned").push(delta);
        })
        .await;
    (outcome, seen.into_inner().expect("not poisoned"))
}

/// The text of block `index` as its pieces tell it.
pub(crate) fn pieces_of(deltas: &[ModelDelta], block: usize) -> String {
    deltas
        .iter()
        .filter_map(|delta| match delta {
            ModelDelta::Text { index, text } | ModelDelta::Thinking { index, text }
                if *index == block =>
            {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect()
}

/// `(status, streamed, dropped)` of every call the stand-in logged.
async fn calls(standin: &TestStandIn) -> Vec<(u64, bool, bool)> {
    standin
        .logged()
        .await
        .iter()
        .map(|call| {
            (
                call["status"].as_u64().unwrap_or_default(),
                call["streamed"].as_bool().unwrap_or_default(),
                call["dropped"].as_bool().unwrap_or_default(),
            )
        })
        .collect()
}

async fn faults(standin: &TestStandIn, faults: Value) {
    let reply = standin.control("/stand-in/faults", &faults).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test]
async fn a_streamed_answer_is_exactly_the_whole_answer_for_text_tool_calls_and_thinking() {
    for via in BOTH {
        for (text, thinking) in [
            ("hello", None),
            ("free slots on 2026-12-03?", None),
            ("any free slots on 2026-12-03?", Some(1024)),
        ] {
            let standin = start().await;
            let model = via.model(&standin);
            let request = request(text, thinking);
            let whole = model.create(&request, minute()).await.expect("an answer");
            // The same cache state for the second call: the same usage.
            standin.running.standin().reset();
            let (streamed, deltas) = stream(model.as_ref(), &request).await;
            let streamed = streamed.expect("a streamed answer");
            let case = format!("{via:?} {text:?}");
            assert_eq!(streamed.content, whole.content, "{case}");
            assert_eq!(streamed.stop_reason, whole.stop_reason, "{case}");
            assert_eq!(streamed.usage, whole.usage, "{case}");
            assert_eq!(streamed.model, whole.model, "{case}");
            assert!(streamed.usage.cache_creation_input_tokens > 1024, "{case}");

            for (index, block) in streamed.content.iter().enumerate() {
                match block {
                    ContentBlock::Text { text } | ContentBlock::Thinking { thinking: text, .. } => {
                        assert_eq!(&pieces_of(&deltas, index), text, "{case} block {index}");
                    }
                    ContentBlock::ToolUse { id, name, .. } => assert!(
                        deltas.contains(&ModelDelta::ToolUse {
                            index,
                            id: id.clone(),
                            name: name.clone()
                        }),
                        "{case}"
                    ),
                    _ => {}
                }
            }
            assert!(
                deltas.len() > streamed.content.len(),
                "{case}: cut into pieces"
            );
            let kinds: Vec<&str> = streamed
                .content
                .iter()
                .map(|b| match b {
                    ContentBlock::Text { .. } => "text",
                    ContentBlock::ToolUse { .. } => "tool_use",
                    ContentBlock::Thinking { .. } => "thinking",
                    ContentBlock::RedactedThinking { .. } => "redacted_thinking",
                    ContentBlock::ToolResult { .. } => "tool_result",
                })
                .collect();
            match (text, thinking) {
                ("hello", _) => assert_eq!(kinds, ["text"], "{case}"),
                (_, None) => assert!(kinds.contains(&"tool_use"), "{case}: {kinds:?}"),
                (_, Some(_)) => assert!(
                    kinds.starts_with(&["thinking"]) && kinds.contains(&"tool_use"),
                    "{case}: {kinds:?}"
                ),
            }
            assert_eq!(calls(&standin).await, [(200, true, false)], "{case}");
        }
    }
}

#[tokio::test]
async fn an_overload_before_the_stream_is_retried_and_then_streams() {
    for via in BOTH {
        let standin = start().await;
        faults(&standin, json!([{"status": 529}])).await;
        let (outcome, deltas) = stream(via.model(&standin).as_ref(), &request("hello", None)).await;
        assert!(outcome.is_ok(), "{via:?}: {outcome:?}");
        assert!(!deltas.is_empty());
        let ModelError::Unavailable { status } = via.overloaded() else {
            unreachable!()
        };
        assert_eq!(
            calls(&standin).await,
            [(u64::from(status), true, false), (200, true, false)],
            "{via:?}"
        );
    }
}

#[tokio::test]
async fn an_error_event_after_the_first_piece_ends_the_call_without_a_retry() {
    for via in BOTH {
        let standin = start().await;
        // message_start, content_block_start, ping, one text_delta; then the error.
        faults(&standin, json!([{"stream_error_after": 4}])).await;
        let (outcome, deltas) = stream(via.model(&standin).as_ref(), &request("hello", None)).await;
        assert_eq!(outcome.unwrap_err(), via.overloaded(), "{via:?}");
        assert_eq!(
            deltas.len(),
            1,
            "{via:?}: the piece before the error went out"
        );
        assert_eq!(calls(&standin).await.len(), 1, "{via:?}: not retried");
    }
}

#[tokio::test]
async fn an_error_event_before_any_piece_is_retried() {
    for via in BOTH {
        let standin = start().await;
        faults(
            &standin,
            json!([{"stream_error_after": 2, "type": "api_error"},
                   {"stream_error_after": 0, "type": "rate_limit_error"}]),
        )
        .await;
        let (outcome, deltas) = stream(via.model(&standin).as_ref(), &request("hello", None)).await;
        let answer = outcome.expect("answered on the third attempt");
        assert_eq!(pieces_of(&deltas, 0), answer.message().text(), "{via:?}");
        assert_eq!(calls(&standin).await.len(), 3, "{via:?}");
    }
}

#[tokio::test]
async fn an_error_event_that_waiting_cannot_cure_is_not_retried() {
    for via in BOTH {
        let standin = start().await;
        faults(
            &standin,
            json!([{"stream_error_after": 1, "type": "invalid_request_error", "message": "no"}]),
        )
        .await;
        let (outcome, _) = stream(via.model(&standin).as_ref(), &request("hello", None)).await;
        assert_eq!(
            outcome.unwrap_err(),
            ModelError::InvalidRequest {
                message: "no".into()
            },
            "{via:?}"
        );
        assert_eq!(calls(&standin).await.len(), 1, "{via:?}");
    }
}

#[tokio::test]
async fn a_drop_after_a_piece_is_a_connection_error_and_before_any_is_retried() {
    for via in BOTH {
        let standin = start().await;
        faults(&standin, json!([{"stream_drop_after": 5}])).await;
        let (outcome, deltas) = stream(via.model(&standin).as_ref(), &request("hello", None)).await;
        assert!(
            matches!(outcome, Err(ModelError::Connection(_))),
            "{via:?}: {outcome:?}"
        );
        assert_eq!(deltas.len(), 2, "{via:?}");
        assert_eq!(calls(&standin).await, [(200, true, true)], "{via:?}");

        let standin = start().await;
        faults(&standin, json!([{"stream_drop_after": 2}])).await;
        let (outcome, _) = stream(via.model(&standin).as_ref(), &request("hello", None)).await;
        assert!(outcome.is_ok(), "{via:?}: {outcome:?}");
        assert_eq!(
            calls(&standin).await,
            [(200, true, true), (200, true, false)],
            "{via:?}"
        );
    }
}

#[tokio::test]
async fn pieces_reach_the_caller_while_the_answer_is_still_being_written() {
    for via in BOTH {
        let standin = start().await;
        let paced = standin
            .control("/stand-in/stream", &json!({"delta_ms": 40}))
            .await;
        assert_eq!(paced.body, json!({"delta_ms": 40}));
        let model = via.model(&standin);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let call = tokio::spawn(async move {
            let sink = move |delta| {
                let _ = tx.send(delta);
            };
            model.stream(&request("hello", None), minute(), &sink).await
        });
        let first = rx.recv().await.expect("a first piece");
        assert!(matches!(first, ModelDelta::Text { index: 0, .. }));
        // Several events (each 40 ms after the one before) are still to come.
        assert!(
            !call.is_finished(),
            "{via:?}: the first piece came before the end"
        );
        let answer = call.await.expect("joins").expect("an answer");
        let mut text = pieces_of(&[first], 0);
        while let Ok(delta) = rx.try_recv() {
            text.push_str(&pieces_of(&[delta], 0));
        }
        assert_eq!(text, answer.message().text(), "{via:?}");
    }
}

#[tokio::test]
async fn the_messages_route_streams_server_sent_events_in_the_api_s_order() {
    let standin = start().await;
    let body = json!({
        "model": "claude-sonnet-5", "max_tokens": 256, "stream": true,
        "messages": [{"role": "user", "content": "hello"}],
    });
    let response = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("x-api-key", "test-key")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .expect("stand-in answers");
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(response.headers()["cache-control"], "no-cache");
    let text = response.text().await.expect("a body");
    let names: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .collect();
    assert_eq!(
        names[..4],
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta"
        ]
    );
    assert_eq!(
        names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    assert!(
        names
            .iter()
            .filter(|n| **n == "content_block_delta")
            .count()
            > 1
    );
    let log = standin.logged().await;
    assert_eq!(log[0]["body"], body, "the body as sent");
    assert_eq!(log[0]["streamed"], true);

    // A mid-stream fault on a call that does not stream breaks it like `drop`.
    faults(&standin, json!([{"stream_error_after": 3}])).await;
    let mut plain = body.clone();
    plain["stream"] = json!(false);
    let broken = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("x-api-key", "test-key")
        .header("anthropic-version", "2023-06-01")
        .json(&plain)
        .send()
        .await
        .expect("headers arrive");
    assert!(broken.bytes().await.is_err(), "the body breaks");
    assert_eq!(standin.logged().await[1]["dropped"], true);

    // The pace is a control the reset clears.
    standin
        .control("/stand-in/stream", &json!({"delta_ms": 5}))
        .await;
    assert_eq!(standin.running.standin().delta_ms(), 5);
    standin.control("/stand-in/reset", &json!({})).await;
    assert_eq!(standin.running.standin().delta_ms(), 0);
    let refused = standin
        .control("/stand-in/stream", &json!({"delta": 5}))
        .await;
    assert_eq!(refused.status, 400);
    let refused = standin
        .control(
            "/stand-in/faults",
            &json!([{"status": 529, "stream_drop_after": 1}]),
        )
        .await;
    assert_eq!(refused.status, 400);
}

#[tokio::test]
async fn a_pre_stream_error_is_the_same_json_error_as_without_stream() {
    for via in BOTH {
        let standin = start().await;
        faults(
            &standin,
            json!([{"status": 400, "message": "prompt is too long: 3 tokens > 2 maximum"}]),
        )
        .await;
        let (outcome, deltas) = stream(via.model(&standin).as_ref(), &request("hello", None)).await;
        assert!(
            matches!(outcome, Err(ModelError::PromptTooLong { .. })),
            "{via:?}: {outcome:?}"
        );
        assert!(deltas.is_empty());
    }
}

#[tokio::test]
async fn a_slow_stream_ends_at_the_deadline_with_a_timeout() {
    for via in BOTH {
        let standin = start().await;
        standin.running.standin().set_delta_ms(600);
        let deadline = Deadline::after(Duration::from_millis(2_500));
        let call = via.model(&standin);
        let outcome = tokio::time::timeout(
            Duration::from_secs(20),
            call.stream(&request("hello", None), deadline, &|_| {}),
        )
        .await
        .expect("the streamed call ran past its deadline");
        assert_eq!(outcome.unwrap_err(), ModelError::Timeout, "{via:?}");
        assert_eq!(calls(&standin).await.len(), 1, "{via:?}");
    }
}

#[tokio::test]
async fn a_paced_whole_answer_waits_as_long_as_its_stream_would() {
    // A lower bound only (a sleep never ends early): nothing here depends on how
    // fast the machine is.
    let standin = start().await;
    standin.running.standin().set_delta_ms(30);
    let model = Via::Anthropic.model(&standin);
    let started = std::time::Instant::now();
    let answer = model
        .create(&request("hello", None), minute())
        .await
        .expect("an answer");
    // message_start, block start, ping, the text's deltas, block stop,
    // message_delta, message_stop.
    let events = 6 + answer.message().text().chars().count().div_ceil(12);
    assert!(
        started.elapsed() >= Duration::from_millis(30 * (events as u64 - 1)),
        "answered after {:?}",
        started.elapsed()
    );
}
