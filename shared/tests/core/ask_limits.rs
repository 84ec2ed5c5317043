//! The ask service at the platform's limits: one time budget per request, and every
//! stop reason the Messages API can give. Time runs on tokio's paused clock: the slow
//! model and tool doubles "take" seconds without anyone waiting for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use degrau::converse::{AskError, COMMIT_MARGIN, Converse};
use degrau::deadline::Deadline;
use degrau::domain::{ContentBlock, IdempotencyKey, Role, StoredMessage};
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::{ScriptedModel, response};
use degrau::model::{Model, ModelError, ModelResponse, StopReason};
use degrau::plan::request::{ModelRequest, Thinking, ToolDef};
use degrau::store::{RecordStore, SessionFilter};
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::{CallContext, ToolDeclaration, ToolDispatch, ToolOutput, Tools};
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{answered, ask_service, key, test_clock};

/// The ask budget of the tests: the default `ASK_TIMEOUT_SECONDS`.
const BUDGET: Duration = Duration::from_secs(25);

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    service: Converse,
}

fn harness_with(
    model: Arc<dyn Model>,
    scripted: Arc<ScriptedModel>,
    tools: Arc<dyn Tools>,
) -> Harness {
    let store = Arc::new(MemoryStore::new());
    let (_, clock) = test_clock();
    let service = ask_service(
        &store,
        model,
        tools,
        Arc::new(NoJobs),
        Defaults::default(),
        clock,
    );
    Harness {
        store,
        model: scripted,
        service,
    }
}

fn harness() -> Harness {
    let model = Arc::new(ScriptedModel::default());
    harness_with(
        model.clone(),
        model,
        Arc::new(ToolDispatch::built_in_only()),
    )
}

fn usage() -> Usage {
    Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Usage::default()
    }
}

async fn stored_count(h: &Harness) -> usize {
    h.store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap()
        .messages
        .len()
}

fn slots_call(id: &str) -> degrau::model::scripted::Step {
    ScriptedModel::tool_call(id, "list_free_slots", json!({"day": "2026-12-04"}), usage())
}

/// A model that takes `per_call` to answer each request, and honours its deadline
/// the way the HTTP adapter does: when the answer would come after it, the call ends
/// at the deadline with `Timeout`.
struct SlowModel {
    inner: Arc<ScriptedModel>,
    per_call: Duration,
    calls: AtomicUsize,
}

#[async_trait]
impl Model for SlowModel {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if deadline.remaining() < self.per_call {
            tokio::time::sleep_until(deadline.instant()).await;
            return Err(ModelError::Timeout);
        }
        tokio::time::sleep(self.per_call).await;
        self.inner.create(request, deadline).await
    }
}

fn slow_harness(per_call: Duration) -> (Harness, Arc<SlowModel>) {
    let scripted = Arc::new(ScriptedModel::default());
    let slow = Arc::new(SlowModel {
        inner: scripted.clone(),
        per_call,
        calls: AtomicUsize::new(0),
    });
    (
        harness_with(
            slow.clone(),
            scripted,
            Arc::new(ToolDispatch::built_in_only()),
        ),
        slow,
    )
}

/// Demo tools that take `per_call` and ignore their deadline (a slow backend).
struct SlowTools {
    per_call: Duration,
}

#[async_trait]
impl Tools for SlowTools {
    fn definitions(&self, declared: &[ToolDeclaration]) -> Vec<ToolDef> {
        ToolDispatch::built_in_only().definitions(declared)
    }

    async fn call(
        &self,
        tool: &ToolDeclaration,
        input: &serde_json::Value,
        context: &CallContext<'_>,
    ) -> ToolOutput {
        tokio::time::sleep(self.per_call).await;
        ToolDispatch::built_in_only()
            .call(tool, input, context)
            .await
    }
}

// ---------------------------------------------------------------------------------
// One time budget per request
// ---------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn every_model_call_gets_the_request_deadline_less_the_commit_margin() {
    let h = harness();
    h.model.push(slots_call("1"));
    h.model
        .push(ScriptedModel::text("Friday at 10 is free.", usage()));
    let deadline = Deadline::after(BUDGET);
    answered(
        h.service
            .ask(&key(), "free slots on 2026-12-04?", None, deadline)
            .await
            .unwrap(),
    );
    assert_eq!(
        h.model.deadlines(),
        vec![deadline.before(COMMIT_MARGIN); 2],
        "the commit keeps its margin"
    );
}

#[tokio::test(start_paused = true)]
async fn two_16_s_model_calls_in_a_25_s_budget_end_in_504_with_nothing_stored_and_the_key_freed() {
    // The round: a tool round whose two model calls take 16 s each.
    let (h, slow) = slow_harness(Duration::from_secs(16));
    h.model.push(slots_call("1"));
    h.model
        .push(ScriptedModel::text("Friday at 10 is free.", usage()));
    let idem = IdempotencyKey::parse("order-1").unwrap();
    let error = h
        .service
        .ask(
            &key(),
            "free slots on 2026-12-04?",
            Some(&idem),
            Deadline::after(BUDGET),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, AskError::Model(ModelError::Timeout)),
        "{error:?}"
    );
    assert_eq!(slow.calls.load(Ordering::SeqCst), 2);
    assert_eq!(stored_count(&h).await, 0, "nothing written");

    // The key was released: the client's retry runs (the model's answer, still
    // queued, now comes in time).
    let retry = Deadline::after(Duration::from_secs(60));
    let retried = h.service.ask(&key(), "hello", Some(&idem), retry).await;
    assert!(
        retried.is_ok(),
        "the failed attempt still holds the key: {retried:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_round_that_outlasts_its_budget_in_a_slow_tool_answers_504_and_writes_nothing() {
    let scripted = Arc::new(ScriptedModel::default());
    let h = harness_with(
        scripted.clone(),
        scripted,
        Arc::new(SlowTools {
            per_call: Duration::from_secs(30),
        }),
    );
    h.model.push(slots_call("1"));
    h.model
        .push(ScriptedModel::text("Friday at 10 is free.", usage()));
    let idem = IdempotencyKey::parse("order-2").unwrap();
    let error = h
        .service
        .ask(
            &key(),
            "free slots on 2026-12-04?",
            Some(&idem),
            Deadline::after(BUDGET),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, AskError::Model(ModelError::Timeout)),
        "{error:?}"
    );
    assert_eq!(
        h.model.requests().len(),
        1,
        "no model call after the time ran out"
    );
    assert_eq!(stored_count(&h).await, 0, "nothing written");
    // The key was released: the retry is answered (by the answer still queued).
    let retry = h
        .service
        .ask(&key(), "hello", Some(&idem), Deadline::after(BUDGET))
        .await;
    assert!(
        retry.is_ok(),
        "the failed attempt still holds the key: {retry:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn no_model_call_starts_with_less_than_a_second_left() {
    // The first call answers 22.5 s in: 0.5 s of the 23 s of work are left, too little
    // for another call.
    let (h, slow) = slow_harness(Duration::from_millis(22_500));
    h.model.push(slots_call("1"));
    h.model
        .push(ScriptedModel::text("Friday at 10 is free.", usage()));
    let error = h
        .service
        .ask(
            &key(),
            "free slots on 2026-12-04?",
            None,
            Deadline::after(BUDGET),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, AskError::Model(ModelError::Timeout)),
        "{error:?}"
    );
    assert_eq!(slow.calls.load(Ordering::SeqCst), 1);
    assert_eq!(stored_count(&h).await, 0);
}

#[tokio::test(start_paused = true)]
async fn a_round_within_its_budget_is_stored() {
    let (h, slow) = slow_harness(Duration::from_secs(8));
    h.model.push(slots_call("1"));
    h.model
        .push(ScriptedModel::text("Friday at 10 is free.", usage()));
    let response = answered(
        h.service
            .ask(
                &key(),
                "free slots on 2026-12-04?",
                None,
                Deadline::after(BUDGET),
            )
            .await
            .unwrap(),
    );
    assert_eq!((response.round.first_seq, response.round.last_seq), (1, 4));
    assert_eq!(slow.calls.load(Ordering::SeqCst), 2);
    assert_eq!(stored_count(&h).await, 4);
}

// ---------------------------------------------------------------------------------
// Stop reasons
// ---------------------------------------------------------------------------------

/// Demo tools that record every call's input.
#[derive(Default)]
struct RecordingTools {
    inputs: std::sync::Mutex<Vec<serde_json::Value>>,
}

#[async_trait]
impl Tools for RecordingTools {
    fn definitions(&self, declared: &[ToolDeclaration]) -> Vec<ToolDef> {
        ToolDispatch::built_in_only().definitions(declared)
    }

    async fn call(
        &self,
        tool: &ToolDeclaration,
        input: &serde_json::Value,
        context: &CallContext<'_>,
    ) -> ToolOutput {
        self.inputs.lock().unwrap().push(input.clone());
        ToolDispatch::built_in_only()
            .call(tool, input, context)
            .await
    }
}

fn recording_harness() -> (Harness, Arc<RecordingTools>) {
    let model = Arc::new(ScriptedModel::default());
    let tools = Arc::new(RecordingTools::default());
    (harness_with(model.clone(), model, tools.clone()), tools)
}

fn with_stop(content: Vec<ContentBlock>, stop_reason: StopReason) -> degrau::model::scripted::Step {
    Ok(response(content, stop_reason, usage()))
}

/// A booking call whose input the output limit cut short.
fn cut_booking() -> degrau::model::scripted::Step {
    with_stop(
        vec![
            ContentBlock::text("Booking it."),
            ContentBlock::tool_use("toolu_cut", "book_slot", json!({"day": "2026-12-04"})),
        ],
        StopReason::MaxTokens,
    )
}

fn whole_booking() -> degrau::model::scripted::Step {
    ScriptedModel::tool_call(
        "whole",
        "book_slot",
        json!({"day": "2026-12-04", "time": "10:30", "service": "haircut"}),
        usage(),
    )
}

#[tokio::test]
async fn a_tool_call_cut_off_at_max_tokens_is_never_run_and_is_asked_again_with_twice_the_budget() {
    let (h, tools) = recording_harness();
    h.model.push(cut_booking());
    h.model.push(whole_booking());
    h.model.push(ScriptedModel::text("Booked: BK-1.", usage()));
    let response = answered(
        h.service
            .ask(
                &key(),
                "book 10:30 on 2026-12-04",
                None,
                Deadline::after(BUDGET),
            )
            .await
            .unwrap(),
    );
    assert_eq!(
        *tools.inputs.lock().unwrap(),
        [json!({"day": "2026-12-04", "time": "10:30", "service": "haircut"})],
        "only the whole call ran"
    );
    let requests = h.model.requests();
    assert_eq!(
        requests.iter().map(|r| r.max_tokens).collect::<Vec<_>>(),
        [1024, 2048, 2048]
    );
    assert_eq!(
        requests[0].messages, requests[1].messages,
        "the same request again"
    );
    assert_eq!((response.round.first_seq, response.round.last_seq), (1, 4));
    let stored = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    assert!(
        !serde_json::to_string(&stored.messages)
            .unwrap()
            .contains("toolu_cut"),
        "the cut-off call is not stored"
    );
}

#[tokio::test]
async fn a_tool_call_cut_off_twice_answers_502_runs_no_tool_and_writes_nothing() {
    let (h, tools) = recording_harness();
    h.model.push(cut_booking());
    h.model.push(cut_booking());
    let error = h
        .service
        .ask(
            &key(),
            "book 10:30 on 2026-12-04",
            None,
            Deadline::after(BUDGET),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, AskError::TruncatedToolCall), "{error:?}");
    assert!(tools.inputs.lock().unwrap().is_empty(), "no tool ran");
    assert_eq!(h.model.requests().len(), 2, "one retry");
    assert_eq!(stored_count(&h).await, 0);
}

#[tokio::test]
async fn a_refusal_stores_nothing_and_is_its_own_error() {
    let h = harness();
    h.model.push(with_stop(
        vec![ContentBlock::text("I can't help with that.")],
        StopReason::Refusal,
    ));
    let error = h
        .service
        .ask(&key(), "hi", None, Deadline::after(BUDGET))
        .await
        .unwrap_err();
    assert!(matches!(error, AskError::Refused), "{error:?}");
    assert_eq!(stored_count(&h).await, 0);
}

#[tokio::test]
async fn a_text_reply_cut_at_max_tokens_is_stored_as_it_is_and_marked() {
    let h = harness();
    h.model.push(with_stop(
        vec![ContentBlock::text("Our opening hours are Monday to")],
        StopReason::MaxTokens,
    ));
    let response = answered(
        h.service
            .ask(&key(), "opening hours?", None, Deadline::after(BUDGET))
            .await
            .unwrap(),
    );
    let body = serde_json::to_value(&response).unwrap();
    assert_eq!(body["reply"]["stop_reason"], "max_tokens", "{body}");
    assert_eq!(body["reply"]["text"], "Our opening hours are Monday to");
    assert_eq!(stored_count(&h).await, 2);

    h.model.push(ScriptedModel::text("Anything else?", usage()));
    let next = answered(
        h.service
            .ask(&key(), "thanks", None, Deadline::after(BUDGET))
            .await
            .unwrap(),
    );
    assert_eq!(
        serde_json::to_value(&next).unwrap()["reply"]["stop_reason"],
        "end_turn"
    );
}

#[tokio::test]
async fn model_context_window_exceeded_cuts_the_window_once_like_a_prompt_too_long() {
    let h = harness();
    for i in 0..10 {
        h.model
            .push(ScriptedModel::text(&format!("answer {i}"), usage()));
        h.service
            .ask(
                &key(),
                &format!("question {i}"),
                None,
                Deadline::after(BUDGET),
            )
            .await
            .unwrap();
    }
    h.model.push(with_stop(
        vec![ContentBlock::text("a partial")],
        StopReason::ModelContextWindowExceeded,
    ));
    h.model.push(ScriptedModel::text("a whole answer", usage()));
    let response = answered(
        h.service
            .ask(&key(), "again", None, Deadline::after(BUDGET))
            .await
            .unwrap(),
    );
    assert_eq!(response.reply.text, "a whole answer");
    let requests = h.model.requests();
    let (full, cut) = (&requests[10], &requests[11]);
    assert!(
        cut.messages.len() < full.messages.len(),
        "the window was cut: {} then {}",
        full.messages.len(),
        cut.messages.len()
    );
    assert_eq!(
        stored_count(&h).await,
        22,
        "the partial answer is not stored"
    );

    h.model.push(with_stop(
        vec![ContentBlock::text("partial")],
        StopReason::ModelContextWindowExceeded,
    ));
    h.model.push(with_stop(
        vec![ContentBlock::text("partial again")],
        StopReason::ModelContextWindowExceeded,
    ));
    let error = h
        .service
        .ask(&key(), "once more", None, Deadline::after(BUDGET))
        .await
        .unwrap_err();
    assert!(
        matches!(error, AskError::Model(ModelError::PromptTooLong { .. })),
        "{error:?}"
    );
    assert_eq!(stored_count(&h).await, 22);
}

#[tokio::test]
async fn a_pause_turn_is_a_model_error_with_nothing_stored() {
    let h = harness();
    h.model.push(with_stop(
        vec![ContentBlock::text("Let me keep searching")],
        StopReason::PauseTurn,
    ));
    let error = h
        .service
        .ask(&key(), "hi", None, Deadline::after(BUDGET))
        .await
        .unwrap_err();
    assert!(
        matches!(error, AskError::UnexpectedStop("pause_turn")),
        "{error:?}"
    );
    assert_eq!(stored_count(&h).await, 0);
}

// ---------------------------------------------------------------------------------
// Extended thinking
// ---------------------------------------------------------------------------------

fn thinking(text: &str) -> ContentBlock {
    ContentBlock::Thinking {
        thinking: text.into(),
        signature: format!("sig-{text}"),
    }
}

#[tokio::test]
async fn thinking_blocks_are_stored_and_sent_back_unchanged_through_a_tool_loop_and_later_turns() {
    let h = harness();
    h.store
        .put_tenant_config(
            &key().tenant,
            &serde_json::from_value::<TenantConfig>(json!({"thinking_budget_tokens": 2048}))
                .unwrap(),
        )
        .await
        .unwrap();
    let redacted = ContentBlock::RedactedThinking {
        data: "EmwKAhgBEgy3va3pzix".into(),
    };
    let asking = vec![
        thinking("Friday is asked; check the slots."),
        redacted.clone(),
        ContentBlock::text("Let me check."),
        ContentBlock::tool_use("toolu_1", "list_free_slots", json!({"day": "2026-12-04"})),
    ];
    h.model.push(with_stop(asking.clone(), StopReason::ToolUse));
    h.model.push(with_stop(
        vec![
            thinking("Slots came back; answer."),
            ContentBlock::text("10:00 is free."),
        ],
        StopReason::EndTurn,
    ));
    answered(
        h.service
            .ask(
                &key(),
                "free slots on 2026-12-04?",
                None,
                Deadline::after(BUDGET),
            )
            .await
            .unwrap(),
    );

    let requests = h.model.requests();
    for request in &requests {
        assert_eq!(
            request.thinking,
            Some(Thinking::Enabled {
                budget_tokens: 2048
            })
        );
        assert_eq!(request.max_tokens, 1024 + 2048, "room for the answer");
    }
    let sent: Vec<ContentBlock> = requests[1].messages[1]
        .content
        .iter()
        .map(|b| b.block.clone())
        .collect();
    assert_eq!(sent, asking, "the tool loop's turn goes back as it came");

    let stored = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    assert_eq!(stored.messages[1].content, asking);
    assert_eq!(
        stored.messages[3].content[0],
        thinking("Slots came back; answer.")
    );

    h.model
        .push(ScriptedModel::text("You're welcome.", usage()));
    answered(
        h.service
            .ask(&key(), "thanks", None, Deadline::after(BUDGET))
            .await
            .unwrap(),
    );
    let later = &h.model.requests()[2];
    let blocks: Vec<&ContentBlock> = later
        .messages
        .iter()
        .flat_map(|m| m.content.iter().map(|b| &b.block))
        .filter(|b| b.is_thinking())
        .collect();
    assert_eq!(
        blocks,
        [
            &thinking("Friday is asked; check the slots."),
            &redacted,
            &thinking("Slots came back; answer.")
        ],
        "earlier turns carry their thinking unchanged"
    );
}

#[test]
fn the_summary_prompt_leaves_thinking_out() {
    let message = StoredMessage {
        session: 1,
        seq: 2,
        role: Role::Assistant,
        content: vec![
            thinking("secret reasoning about the customer"),
            ContentBlock::RedactedThinking {
                data: "opaque".into(),
            },
            ContentBlock::text("Booked for Friday."),
        ],
        pruned: None,
        usage: None,
        created_at: 0,
        written_by_person: false,
        transcribed: false,
    };
    let request = degrau::compaction::summary_request("claude-haiku-4-5", None, &[message]);
    let text = serde_json::to_string(&request).unwrap();
    assert!(text.contains("assistant: Booked for Friday."));
    assert!(!text.contains("secret reasoning") && !text.contains("opaque"));
}
