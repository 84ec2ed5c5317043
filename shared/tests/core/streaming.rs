//! Streamed rounds (`Converse::ask_streamed`): what a listener is shown while a
//! round runs — text as the model writes it, tool calls as they run, a restart when
//! what was shown no longer holds — and that what is stored is exactly what a round
//! that is not streamed stores: the whole round, or nothing.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use degrau::converse::{AskError, Converse, RoundEvent, RoundEvents, shown_reply};
use degrau::deadline::Deadline;
use degrau::domain::{ContentBlock, Role};
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::{ScriptedModel, response};
use degrau::model::{DeltaSink, Model, ModelDelta, ModelError, ModelResponse, StopReason};
use degrau::plan::request::ModelRequest;
use degrau::store::{RecordStore, SessionFilter};
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{answered, ask_service, key, minute, test_clock};

/// Everything a listener was shown, in order.
#[derive(Default)]
struct Recorder(Mutex<Vec<RoundEvent>>);

impl RoundEvents for Recorder {
    fn event(&self, event: RoundEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Recorder {
    fn events(&self) -> Vec<RoundEvent> {
        self.0.lock().unwrap().clone()
    }

    /// The reply the stream showed since the last restart.
    fn text_after_last_restart(&self) -> String {
        shown_reply(&self.events())
    }
}

/// The scripted model, streamed word by word the way an adapter hands over a real
/// stream; `fail_after_text` makes the next stream fail once its text was shown.
struct WordByWord {
    inner: Arc<ScriptedModel>,
    fail_after_text: Mutex<Option<ModelError>>,
    streamed: AtomicI64,
}

#[async_trait]
impl Model for WordByWord {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        self.inner.create(request, deadline).await
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        self.streamed.fetch_add(1, Ordering::SeqCst);
        let answer = self.inner.create(request, deadline).await?;
        for (index, block) in answer.content.iter().enumerate() {
            match block {
                ContentBlock::Text { text } => {
                    for word in text.split_inclusive(' ') {
                        on_delta(ModelDelta::Text {
                            index,
                            text: word.to_owned(),
                        });
                    }
                }
                ContentBlock::ToolUse { id, name, .. } => on_delta(ModelDelta::ToolUse {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                }),
                _ => {}
            }
        }
        if let Some(error) = self.fail_after_text.lock().unwrap().take() {
            return Err(error);
        }
        Ok(answer)
    }
}

struct Harness {
    store: Arc<MemoryStore>,
    script: Arc<ScriptedModel>,
    model: Arc<WordByWord>,
    service: Converse,
}

fn usage(input: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: 12,
        ..Usage::default()
    }
}

async fn harness(config: Option<serde_json::Value>) -> Harness {
    let store = Arc::new(MemoryStore::new());
    if let Some(config) = config {
        let config: TenantConfig = serde_json::from_value(config).unwrap();
        store
            .put_tenant_config(&key().tenant, &config)
            .await
            .unwrap();
    }
    let script = Arc::new(ScriptedModel::default());
    let model = Arc::new(WordByWord {
        inner: script.clone(),
        fail_after_text: Mutex::default(),
        streamed: AtomicI64::new(0),
    });
    let (_, clock) = test_clock();
    let service = ask_service(
        &store,
        model.clone(),
        Arc::new(ToolDispatch::built_in_only()),
        Arc::new(NoJobs),
        Defaults::default(),
        clock,
    );
    Harness {
        store,
        script,
        model,
        service,
    }
}

/// A tool round: the model lists the free slots, then answers.
fn push_tool_round(script: &ScriptedModel) {
    script.push(ScriptedModel::tool_call(
        "1",
        "list_free_slots",
        json!({"day": "2026-12-01"}),
        usage(200),
    ));
    script.push(ScriptedModel::text(
        "There is a slot at ten on the first.",
        usage(400),
    ));
}

async fn transcript(h: &Harness) -> Vec<(u64, Role, Vec<ContentBlock>)> {
    let page = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    page.messages
        .into_iter()
        .map(|m| (m.seq, m.role, m.content))
        .collect()
}

#[tokio::test]
async fn a_tool_round_streams_across_both_model_calls_and_stores_what_a_round_not_streamed_stores()
{
    let streamed = harness(None).await;
    push_tool_round(&streamed.script);
    let shown = Recorder::default();
    let answer = answered(
        streamed
            .service
            .ask_streamed(&key(), "Any slot on the 1st?", None, minute(), &shown)
            .await
            .unwrap(),
    );

    let events = shown.events();
    assert_eq!(
        events[..2],
        [
            RoundEvent::ToolStarted {
                id: "toolu_1".into(),
                name: "list_free_slots".into(),
                input: None,
            },
            RoundEvent::ToolFinished {
                id: "toolu_1".into(),
                name: "list_free_slots".into(),
                is_error: false,
            },
        ],
        "the tool call is shown as it runs, without its input"
    );
    assert!(
        events[2..]
            .iter()
            .all(|e| matches!(e, RoundEvent::Delta { call: 1, .. })),
        "the second call's text, word by word: {events:?}"
    );
    assert!(events.len() > 3, "the text came in pieces");
    assert_eq!(shown.text_after_last_restart(), answer.reply.text);
    assert_eq!(streamed.model.streamed.load(Ordering::SeqCst), 2);

    let plain = harness(None).await;
    push_tool_round(&plain.script);
    let plain_answer = answered(
        plain
            .service
            .ask(&key(), "Any slot on the 1st?", None, minute())
            .await
            .unwrap(),
    );
    assert_eq!(answer, plain_answer, "the same answer as the JSON route");
    assert_eq!(transcript(&streamed).await, transcript(&plain).await);
    assert_eq!(
        plain.model.streamed.load(Ordering::SeqCst),
        0,
        "a round that is not streamed never streams its model calls"
    );
}

#[tokio::test]
async fn a_tool_calls_input_is_shown_only_when_the_tenant_allows_it() {
    let h = harness(Some(json!({ "stream_tool_input": true }))).await;
    push_tool_round(&h.script);
    let shown = Recorder::default();
    h.service
        .ask_streamed(&key(), "Any slot?", None, minute(), &shown)
        .await
        .unwrap();
    assert_eq!(
        shown.events()[0],
        RoundEvent::ToolStarted {
            id: "toolu_1".into(),
            name: "list_free_slots".into(),
            input: Some(json!({"day": "2026-12-01"})),
        }
    );
}

#[tokio::test]
async fn a_failure_after_text_was_shown_stores_nothing() {
    let h = harness(None).await;
    h.script
        .push(ScriptedModel::text("Half of an answer", usage(100)));
    *h.model.fail_after_text.lock().unwrap() = Some(ModelError::Unavailable { status: 529 });
    let shown = Recorder::default();
    let result = h
        .service
        .ask_streamed(&key(), "Hello", None, minute(), &shown)
        .await;
    assert!(matches!(
        result,
        Err(AskError::Model(ModelError::Unavailable { status: 529 }))
    ));
    assert_eq!(shown.text_after_last_restart(), "Half of an answer");
    assert!(transcript(&h).await.is_empty(), "nothing was stored");
}

#[tokio::test]
async fn a_cut_off_tool_call_asked_again_restarts_what_was_shown() {
    let h = harness(None).await;
    // The first answer's tool call is cut off at max_tokens: never run, asked again.
    h.script.push(Ok(response(
        vec![
            ContentBlock::text("Let me look that up"),
            ContentBlock::tool_use("toolu_cut", "list_free_slots", json!({})),
        ],
        StopReason::MaxTokens,
        usage(200),
    )));
    push_tool_round(&h.script);
    let shown = Recorder::default();
    let answer = answered(
        h.service
            .ask_streamed(&key(), "Any slot?", None, minute(), &shown)
            .await
            .unwrap(),
    );
    let events = shown.events();
    let restart = events
        .iter()
        .position(|e| matches!(e, RoundEvent::Restart { .. }))
        .expect("a restart");
    assert!(
        events[..restart]
            .iter()
            .all(|e| matches!(e, RoundEvent::Delta { call: 0, .. })),
        "before it, only the cut-off answer's text: {events:?}"
    );
    assert!(
        !events[restart..]
            .iter()
            .any(|e| matches!(e, RoundEvent::ToolStarted { id, .. } if id == "toolu_cut")),
        "the cut-off call never ran"
    );
    assert_eq!(shown.text_after_last_restart(), answer.reply.text);
}

/// The scripted model, holding its first two calls until both arrived, so two
/// rounds read the same head and race at the commit.
struct Rendezvous {
    inner: Arc<WordByWord>,
    barrier: tokio::sync::Barrier,
    calls: AtomicI64,
}

#[async_trait]
impl Model for Rendezvous {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        self.inner.create(request, deadline).await
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < 2 {
            self.barrier.wait().await;
        }
        self.inner.stream(request, deadline, on_delta).await
    }
}

#[tokio::test]
async fn the_loser_of_a_commit_race_restarts_and_shows_the_answer_it_stored() {
    let h = harness(None).await;
    let model = Arc::new(Rendezvous {
        inner: h.model.clone(),
        barrier: tokio::sync::Barrier::new(2),
        calls: AtomicI64::new(0),
    });
    let (_, clock) = test_clock();
    let service = ask_service(
        &h.store,
        model,
        Arc::new(ToolDispatch::built_in_only()),
        Arc::new(NoJobs),
        Defaults::default(),
        clock,
    );
    for text in ["one answer", "another answer", "the answer again"] {
        h.script.push(ScriptedModel::text(text, usage(10)));
    }
    let (first, second) = (Recorder::default(), Recorder::default());
    let k = key();
    let (one, two) = tokio::join!(
        service.ask_streamed(&k, "first", None, minute(), &first),
        service.ask_streamed(&k, "second", None, minute(), &second)
    );
    let (one, two) = (answered(one.unwrap()), answered(two.unwrap()));
    let restarted = |shown: &Recorder| {
        shown
            .events()
            .iter()
            .any(|e| matches!(e, RoundEvent::Restart { .. }))
    };
    assert_ne!(
        restarted(&first),
        restarted(&second),
        "exactly the loser restarted"
    );
    assert_eq!(first.text_after_last_restart(), one.reply.text);
    assert_eq!(second.text_after_last_restart(), two.reply.text);
    assert_eq!(transcript(&h).await.len(), 4);
}

#[tokio::test]
async fn a_reply_of_two_text_blocks_streams_as_the_reply_joins_them() {
    let h = harness(None).await;
    h.script.push(Ok(response(
        vec![
            ContentBlock::text("First part."),
            ContentBlock::text("Second part."),
        ],
        StopReason::EndTurn,
        usage(100),
    )));
    let shown = Recorder::default();
    let answer = answered(
        h.service
            .ask_streamed(&key(), "Hello", None, minute(), &shown)
            .await
            .unwrap(),
    );
    assert_eq!(answer.reply.text, "First part.\nSecond part.");
    assert_eq!(shown.text_after_last_restart(), answer.reply.text);
}
