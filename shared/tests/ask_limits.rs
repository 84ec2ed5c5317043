//! The ask service at the platform's limits: one time budget per request, and every
//! stop reason the Messages API can give. Time runs on tokio's paused clock: the slow
//! model and tool doubles "take" seconds without anyone waiting for them.

#![allow(clippy::unwrap_used, missing_docs)] // a test binary: a panic is a failed test

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use degrau::ask::{AskError, AskOutcome, AskResponse, AskService, COMMIT_MARGIN};
use degrau::deadline::Deadline;
use degrau::domain::{ContactId, IdempotencyKey, TenantId};
use degrau::jobs::NoJobs;
use degrau::model::scripted::ScriptedModel;
use degrau::model::{Model, ModelError, ModelResponse};
use degrau::request::{ModelRequest, ToolDef};
use degrau::store::memory::MemoryStore;
use degrau::store::{ContactKey, SessionFilter, Store};
use degrau::tenant::Defaults;
use degrau::tools::demo::DemoTools;
use degrau::tools::{ToolOutput, Tools};
use degrau::usage::Usage;
use serde_json::json;

const START: i64 = 1_800_000_000;
/// The ask budget of the tests: the default `ASK_TIMEOUT_SECONDS`.
const BUDGET: Duration = Duration::from_secs(25);

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    service: AskService,
}

fn harness_with(
    model: Arc<dyn Model>,
    scripted: Arc<ScriptedModel>,
    tools: Arc<dyn Tools>,
) -> Harness {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(AtomicI64::new(START));
    let service = AskService {
        store: store.clone(),
        tenants: store.clone(),
        model,
        tools,
        jobs: Arc::new(NoJobs),
        defaults: Defaults::default(),
        clock: Arc::new(move || clock.load(Ordering::SeqCst)),
    };
    Harness {
        store,
        model: scripted,
        service,
    }
}

fn harness() -> Harness {
    let model = Arc::new(ScriptedModel::default());
    harness_with(model.clone(), model, Arc::new(DemoTools))
}

fn key() -> ContactKey {
    ContactKey {
        tenant: TenantId::parse("barber").unwrap(),
        contact: ContactId::parse("+5511900000000").unwrap(),
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Usage::default()
    }
}

fn answered(outcome: AskOutcome) -> AskResponse {
    match outcome {
        AskOutcome::Answered(response) => response,
        AskOutcome::Replayed(body) => panic!("unexpected replay {body}"),
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
        harness_with(slow.clone(), scripted, Arc::new(DemoTools)),
        slow,
    )
}

/// Demo tools that take `per_call` and ignore their deadline (a slow backend).
struct SlowTools {
    per_call: Duration,
}

#[async_trait]
impl Tools for SlowTools {
    fn definitions(&self, enabled: Option<&[String]>) -> Vec<ToolDef> {
        DemoTools.definitions(enabled)
    }

    async fn call(&self, name: &str, input: &serde_json::Value, deadline: Deadline) -> ToolOutput {
        tokio::time::sleep(self.per_call).await;
        DemoTools.call(name, input, deadline).await
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
