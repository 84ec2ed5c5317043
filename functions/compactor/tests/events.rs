//! The sample events for `sam local invoke CompactorFunction`: `events/compactor-jobs.json`
//! (an SQS FIFO batch of a step and a facts job, as the event source mapping
//! delivers it) and `events/compactor-sweep.json` (the schedule's constant input)
//! are what the real handler expects: every job is read and none is reported,
//! and the sweep runs.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use compactor::handler::{handle, job_budget};
use degrau::compaction::{Compactor, NOT_FOUND_RECEIVES, Wiring};
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::session::system_clock;
use degrau::tenant::Defaults;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::Value;

const JOBS: &str = include_str!("../../../events/compactor-jobs.json");
const SWEEP: &str = include_str!("../../../events/compactor-sweep.json");

fn compactor() -> Compactor {
    let store = Arc::new(MemoryStore::new());
    Compactor::on(
        store.clone(),
        Wiring {
            tenants: store,
            model: Arc::new(ScriptedModel::default()),
            defaults: Defaults::default(),
            clock: system_clock(),
            jobs: Arc::new(NoJobs),
            events: Arc::new(degrau::events::NoEvents),
        },
    )
}

async fn run(event: Value) -> Result<Value, lambda_runtime::Error> {
    let budget = job_budget(Duration::from_secs(20));
    handle(
        &compactor(),
        &NoJobs,
        budget,
        LambdaEvent::new(event, Context::default()),
    )
    .await
}

#[tokio::test]
async fn the_sample_batch_holds_jobs_the_handler_reads() {
    let event: Value = serde_json::from_str(JOBS).unwrap();
    assert_eq!(event["Records"].as_array().unwrap().len(), 2);
    // The jobs name an incarnation no head has (the sample table is empty). On
    // their first receive each is reported for redelivery (the index may not show
    // a head created a moment ago); on their third, read and skipped.
    let response = run(event.clone()).await.unwrap();
    assert_eq!(
        response["batchItemFailures"].as_array().unwrap().len(),
        2,
        "{response}"
    );
    let mut last = event.clone();
    for record in last["Records"].as_array_mut().unwrap() {
        record["attributes"]["ApproximateReceiveCount"] =
            Value::String(NOT_FOUND_RECEIVES.to_string());
    }
    let response = run(last.clone()).await.unwrap();
    assert_eq!(
        response["batchItemFailures"],
        serde_json::json!([]),
        "{response}"
    );

    // The same batch with a body that is no job: that record is reported, so the
    // check above is one a malformed sample would fail.
    let mut broken = last;
    broken["Records"][1]["body"] = Value::String("{\"kind\":\"unknown\"}".into());
    let response = run(broken).await.unwrap();
    let reported = &response["batchItemFailures"][0]["itemIdentifier"];
    assert_eq!(reported, "22222222-2222-4222-8222-222222222222");
}

#[tokio::test]
async fn the_sample_sweep_runs_the_sweep() {
    let report = run(serde_json::from_str(SWEEP).unwrap()).await.unwrap();
    assert_eq!(
        report["found"], 0,
        "a sweep report of the empty sample table: {report}"
    );
    // Anything else is refused.
    assert!(run(serde_json::json!({"sweep": "yes"})).await.is_err());
}
