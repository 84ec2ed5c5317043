//! The compactor handler against the in-memory store and the scripted model: a
//! batch's partial failures as Lambda reads them (a group held back, a malformed
//! body, the invocation's deadline, a contact not found yet), and the sweep event.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use degrau::compaction::{NOT_FOUND_RECEIVES, Wiring};
use degrau::converse::Converse;
use degrau::domain::{ContactId, Incarnation, TenantId};
use degrau::jobs::{EnqueueError, NoJobs};
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::model::{Model, ModelError, ModelResponse};
use degrau::plan::request::ModelRequest;
use degrau::plan::step_plan::CompactionPolicy;
use degrau::store::{ContactKey, RecordStore};
use degrau::tenant::Defaults;
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use lambda_runtime::Context;
use serde_json::{Value, json};

use super::*;

const NOW: i64 = 1_800_000_000;
const BUDGET: Duration = Duration::from_secs(30);

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    clock: Arc<AtomicI64>,
    compactor: Compactor,
    ask: Converse,
}

/// A queue that records the jobs it is given.
#[derive(Default)]
struct RecordingJobs(Mutex<Vec<Job>>);

#[async_trait]
impl Jobs for RecordingJobs {
    async fn enqueue(&self, job: &Job) -> Result<bool, EnqueueError> {
        self.0.lock().unwrap().push(job.clone());
        Ok(true)
    }
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let defaults = Defaults {
        compaction: CompactionPolicy {
            threshold_tokens: 1000,
            keep_messages: 2,
            ..CompactionPolicy::default()
        },
        ..Defaults::default()
    };
    let now = Arc::new(AtomicI64::new(NOW));
    let read = now.clone();
    let clock: degrau::plan::session::Clock = Arc::new(move || read.load(Ordering::SeqCst));
    Harness {
        clock: now,
        compactor: Compactor::on(
            store.clone(),
            Wiring {
                tenants: store.clone(),
                model: model.clone(),
                defaults: defaults.clone(),
                clock: clock.clone(),
                jobs: Arc::new(NoJobs),
                events: Arc::new(degrau::events::NoEvents),
            },
        ),
        ask: Converse {
            store: store.clone(),
            records: store.clone(),
            recall: store.clone(),
            usage: store.clone(),
            tenants: store.clone(),
            model: model.clone(),
            tools: Arc::new(ToolDispatch::built_in_only()),
            jobs: Arc::new(NoJobs),
            quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
            defaults,
            clock,
        },
        store,
        model,
    }
}

fn minute() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

fn key(contact: &str) -> ContactKey {
    ContactKey {
        tenant: TenantId::parse("barber").unwrap(),
        contact: ContactId::parse(contact).unwrap(),
    }
}

/// Two rounds, the last one measured over the threshold: a step is due.
async fn due_conversation(h: &Harness, contact: &str) {
    for (text, tokens) in [("hi", 100), ("thanks", 5000)] {
        let usage = Usage {
            input_tokens: tokens,
            ..Usage::default()
        };
        h.model.push(ScriptedModel::text("ok", usage));
        h.ask
            .ask(&key(contact), text, None, minute())
            .await
            .unwrap();
    }
}

/// The contact's head's incarnation (a fresh one when it has no head).
async fn incarnation(h: &Harness, contact: &str) -> Incarnation {
    let (head, _) = h.store.load_memory(&key(contact), NOW).await.unwrap();
    head.and_then(|head| head.incarnation)
        .unwrap_or_else(Incarnation::random)
}

async fn step(h: &Harness, contact: &str) -> Value {
    json!({"kind": "step", "tenant": "barber", "incarnation": incarnation(h, contact).await,
           "session": 1, "summarized_until": 0})
}

/// Records on their third receive: a job whose contact is not found is then
/// skipped as erased (on earlier receives it is left for redelivery, see
/// `a_job_for_a_contact_not_found_is_left_for_redelivery_until_its_third_receive`).
fn event(bodies: &[(&str, String)]) -> LambdaEvent<SqsEvent> {
    event_received(bodies, NOT_FOUND_RECEIVES)
}

fn event_received(bodies: &[(&str, String)], receives: u32) -> LambdaEvent<SqsEvent> {
    let records: Vec<Value> = bodies
        .iter()
        .map(|(id, body)| {
            json!({"messageId": id, "body": body, "eventSource": "aws:sqs",
                   "attributes": {"ApproximateReceiveCount": receives.to_string()}})
        })
        .collect();
    let payload = serde_json::from_value(json!({ "Records": records })).unwrap();
    LambdaEvent::new(payload, Context::default())
}

/// Records as a FIFO queue delivers them: each with its `MessageGroupId`.
fn grouped_event(records: &[(&str, &str, String)]) -> LambdaEvent<SqsEvent> {
    let records: Vec<Value> = records
        .iter()
        .map(|(id, group, body)| {
            json!({"messageId": id, "body": body, "eventSource": "aws:sqs",
                   "attributes": {"MessageGroupId": group}})
        })
        .collect();
    let payload = serde_json::from_value(json!({ "Records": records })).unwrap();
    LambdaEvent::new(payload, Context::default())
}

fn facts(contact: &str) -> Value {
    json!({"kind": "facts", "tenant": "barber", "contact": contact, "session": 1})
}

/// A summary model that takes `per_call` for each answer, honouring its deadline
/// like the HTTP adapter (an answer that would come later is a `Timeout` then).
struct SlowModel {
    inner: Arc<ScriptedModel>,
    per_call: Duration,
    calls: std::sync::atomic::AtomicUsize,
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

fn failed_ids(response: &SqsBatchResponse) -> Vec<&str> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect()
}

#[tokio::test]
async fn without_message_groups_a_failure_holds_back_every_later_record() {
    let h = harness();
    due_conversation(&h, "bruno").await;
    due_conversation(&h, "carla").await;
    let asks = h.model.requests().len();
    h.model.push(Err(ModelError::Unavailable { status: 529 }));

    let response = handle_batch(
        &h.compactor,
        BUDGET,
        event(&[
            ("1", step(&h, "ana").await.to_string()),
            ("2", step(&h, "bruno").await.to_string()),
            ("3", step(&h, "carla").await.to_string()),
        ]),
    )
    .await
    .unwrap();

    assert_eq!(failed_ids(&response), ["2", "3"]);
    assert_eq!(
        h.model.requests().len(),
        asks + 1,
        "only job 2 reached the model"
    );
    let (carla, _) = h.store.load_memory(&key("carla"), NOW).await.unwrap();
    assert_eq!(carla.unwrap().summarized_until, 0, "job 3 was not run");
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"batchItemFailures": [{"itemIdentifier": "2"}, {"itemIdentifier": "3"}]}),
        "the shape Lambda reads; any other shape counts as total success"
    );
}

#[tokio::test]
async fn a_failed_record_holds_back_only_its_own_message_group() {
    let h = harness();
    due_conversation(&h, "bruno").await;
    due_conversation(&h, "carla").await;
    let asks = h.model.requests().len();
    h.model.push(Err(ModelError::Unavailable { status: 529 }));
    h.model.push(ScriptedModel::text(
        "The customer greeted the agent.",
        Usage::default(),
    ));

    let response = handle_batch(
        &h.compactor,
        BUDGET,
        grouped_event(&[
            ("1", "g-bruno", step(&h, "bruno").await.to_string()),
            ("2", "g-carla", step(&h, "carla").await.to_string()),
            ("3", "g-bruno", facts("bruno").to_string()),
            ("4", "g-carla", step(&h, "carla").await.to_string()),
        ]),
    )
    .await
    .unwrap();

    assert_eq!(
        failed_ids(&response),
        ["1", "3"],
        "bruno's later job waits behind its failed one; carla's group goes on"
    );
    assert_eq!(
        h.model.requests().len(),
        asks + 2,
        "bruno's facts job did not run"
    );
    let (carla, _) = h.store.load_memory(&key("carla"), NOW).await.unwrap();
    assert_eq!(
        carla.unwrap().summarized_until,
        2,
        "carla's step was applied"
    );
    let (bruno, _) = h.store.load_memory(&key("bruno"), NOW).await.unwrap();
    assert_eq!(bruno.unwrap().summarized_until, 0);
}

#[tokio::test]
async fn a_malformed_record_holds_back_only_its_own_message_group() {
    let h = harness();
    due_conversation(&h, "carla").await;
    h.model.push(ScriptedModel::text(
        "The customer greeted the agent.",
        Usage::default(),
    ));
    let response = handle_batch(
        &h.compactor,
        BUDGET,
        grouped_event(&[
            ("1", "g-ana", "not a job".to_owned()),
            ("2", "g-carla", step(&h, "carla").await.to_string()),
            ("3", "g-ana", step(&h, "ana").await.to_string()),
        ]),
    )
    .await
    .unwrap();
    assert_eq!(failed_ids(&response), ["1", "3"]);
    let (carla, _) = h.store.load_memory(&key("carla"), NOW).await.unwrap();
    assert_eq!(carla.unwrap().summarized_until, 2);
}

#[tokio::test(start_paused = true)]
async fn a_record_that_cannot_fit_what_is_left_of_the_invocation_is_reported_with_the_rest() {
    let h = harness();
    for contact in ["bruno", "carla", "dora"] {
        due_conversation(&h, contact).await;
        h.model.push(ScriptedModel::text(
            "The customer greeted the agent.",
            Usage::default(),
        ));
    }
    let slow = Arc::new(SlowModel {
        inner: h.model.clone(),
        per_call: Duration::from_secs(25),
        calls: std::sync::atomic::AtomicUsize::new(0),
    });
    let compactor = Compactor::on(
        h.store.clone(),
        Wiring {
            model: slow.clone(),
            ..h.compactor.wiring.clone()
        },
    );
    // The invocation ends 50 s from now: after one 25 s job, less than one job
    // budget (30 s) is left.
    let mut event = grouped_event(&[
        ("1", "g-bruno", step(&h, "bruno").await.to_string()),
        ("2", "g-carla", step(&h, "carla").await.to_string()),
        ("3", "g-dora", step(&h, "dora").await.to_string()),
    ]);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    event.context.deadline = now_ms + 50_000;

    let response = handle_batch(&compactor, BUDGET, event).await.unwrap();

    assert_eq!(failed_ids(&response), ["2", "3"]);
    assert_eq!(
        slow.calls.load(Ordering::SeqCst),
        1,
        "only the first job ran"
    );
    let (bruno, _) = h.store.load_memory(&key("bruno"), NOW).await.unwrap();
    assert_eq!(bruno.unwrap().summarized_until, 2);
    let (carla, _) = h.store.load_memory(&key("carla"), NOW).await.unwrap();
    assert_eq!(carla.unwrap().summarized_until, 0, "job 2 was not started");
}

#[tokio::test(start_paused = true)]
async fn the_first_record_runs_even_when_the_function_timeout_is_shorter_than_a_job_budget() {
    let h = harness();
    due_conversation(&h, "bruno").await;
    due_conversation(&h, "carla").await;
    h.model.push(ScriptedModel::text(
        "The customer greeted the agent.",
        Usage::default(),
    ));
    let mut event = grouped_event(&[
        ("1", "g-bruno", step(&h, "bruno").await.to_string()),
        ("2", "g-carla", step(&h, "carla").await.to_string()),
    ]);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    event.context.deadline = now_ms + 20_000;
    let response = handle_batch(&h.compactor, BUDGET, event).await.unwrap();
    assert_eq!(failed_ids(&response), ["2"]);
    let (bruno, _) = h.store.load_memory(&key("bruno"), NOW).await.unwrap();
    assert_eq!(bruno.unwrap().summarized_until, 2, "the first job ran");
}

#[tokio::test]
async fn a_malformed_body_is_a_failure() {
    let h = harness();
    for body in [
        "not json".to_owned(),
        json!({"kind": "step", "tenant": "barber", "incarnation": "a#b", "session": 1, "summarized_until": 0})
            .to_string(),
        json!({"kind": "rebuild", "tenant": "barber", "incarnation": "ab"}).to_string(),
    ] {
        let response = handle_batch(
            &h.compactor,
            BUDGET,
            event(&[("1", step(&h, "ana").await.to_string()), ("2", body)]),
        )
        .await
        .unwrap();
        assert_eq!(failed_ids(&response), ["2"]);
    }
    assert!(h.model.requests().is_empty());
}

#[tokio::test]
async fn a_job_for_a_contact_not_found_is_left_for_redelivery_until_its_third_receive() {
    let h = harness();
    let job = step(&h, "ana").await.to_string();
    for receives in 1..NOT_FOUND_RECEIVES {
        let response = handle_batch(
            &h.compactor,
            BUDGET,
            event_received(&[("1", job.clone())], receives),
        )
        .await
        .unwrap();
        assert_eq!(failed_ids(&response), ["1"], "receive {receives}");
    }
    let response = handle_batch(
        &h.compactor,
        BUDGET,
        event_received(&[("1", job)], NOT_FOUND_RECEIVES),
    )
    .await
    .unwrap();
    assert!(response.batch_item_failures.is_empty(), "skipped as erased");
    assert!(h.model.requests().is_empty());
}

#[tokio::test]
async fn a_batch_that_succeeds_reports_no_failures() {
    let h = harness();
    due_conversation(&h, "bruno").await;
    h.model.push(ScriptedModel::text(
        "The customer greeted the agent.",
        Usage::default(),
    ));
    let facts = json!({"kind": "facts", "tenant": "barber",
                       "incarnation": incarnation(&h, "ana").await, "session": 1});
    let response = handle_batch(
        &h.compactor,
        BUDGET,
        event(&[
            ("1", step(&h, "ana").await.to_string()),
            ("2", facts.to_string()),
            ("3", step(&h, "bruno").await.to_string()),
        ]),
    )
    .await
    .unwrap();
    assert!(response.batch_item_failures.is_empty());
    let (bruno, _) = h.store.load_memory(&key("bruno"), NOW).await.unwrap();
    assert_eq!(bruno.unwrap().summarized_until, 2, "the step was applied");
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"batchItemFailures": []})
    );
}

#[tokio::test]
async fn a_sweep_event_runs_the_sweep_and_answers_its_report() {
    let h = harness();
    h.model.push(ScriptedModel::text("ok", Usage::default()));
    h.ask.ask(&key("ana"), "hi", None, minute()).await.unwrap();
    h.clock.store(NOW + 24 * 3600, Ordering::SeqCst);
    let jobs = RecordingJobs::default();

    let sweep = LambdaEvent::new(json!({"sweep": true}), Context::default());
    let report = handle(&h.compactor, &jobs, BUDGET, sweep).await.unwrap();

    assert_eq!(
        report,
        json!({"found": 1, "enqueued": 1, "skipped": 0, "failed": 0, "buckets_failed": 0, "folds": 0})
    );
    let ana = incarnation(&h, "ana").await;
    assert_eq!(
        *jobs.0.lock().unwrap(),
        vec![Job::Facts {
            tenant: key("ana").tenant,
            incarnation: ana,
            session: 1
        }]
    );
    let (head, _) = h.store.load_memory(&key("ana"), NOW).await.unwrap();
    assert_eq!(head.unwrap().facts_requested, Some(1));
}

#[tokio::test]
async fn an_sqs_event_takes_the_batch_path_and_answers_its_partial_failures() {
    let h = harness();
    let jobs = RecordingJobs::default();
    let records = json!({"Records": [
        {"messageId": "1", "body": step(&h, "ana").await.to_string(), "eventSource": "aws:sqs",
         "attributes": {"ApproximateReceiveCount": NOT_FOUND_RECEIVES.to_string()}},
        {"messageId": "2", "body": "not a job", "eventSource": "aws:sqs"},
    ]});
    let response = handle(
        &h.compactor,
        &jobs,
        BUDGET,
        LambdaEvent::new(records, Context::default()),
    )
    .await
    .unwrap();
    assert_eq!(
        response,
        json!({"batchItemFailures": [{"itemIdentifier": "2"}]})
    );
    assert!(jobs.0.lock().unwrap().is_empty(), "no sweep ran");
}

#[tokio::test]
async fn any_other_event_is_refused_and_runs_nothing() {
    let h = harness();
    h.model.push(ScriptedModel::text("ok", Usage::default()));
    h.ask.ask(&key("ana"), "hi", None, minute()).await.unwrap();
    h.clock.store(NOW + 24 * 3600, Ordering::SeqCst);
    let jobs = RecordingJobs::default();
    for junk in [
        json!({}),
        json!({"sweep": false}),
        json!({"sweep": "true"}),
        json!("sweep"),
        json!([{"sweep": true}]),
        json!(null),
        json!({"Records": "not a list"}),
    ] {
        let result = handle(
            &h.compactor,
            &jobs,
            BUDGET,
            LambdaEvent::new(junk.clone(), Context::default()),
        )
        .await;
        assert!(result.is_err(), "{junk} was accepted: {result:?}");
    }
    assert!(jobs.0.lock().unwrap().is_empty());
    assert!(
        h.model.requests().len() == 1,
        "only the ask reached the model"
    );
}
