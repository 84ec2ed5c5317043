//! The compactor's two kinds of events: an SQS FIFO batch of jobs, mapped to a
//! partial batch response ([`handle_batch`]), and the scheduled rule's constant
//! input `{"sweep": true}`, which runs the session sweep and answers its report.
//! [`handle`] tells them apart; anything else is refused with an error.
//!
//! A batch runs by the rules of [`degrau::fifo`]: records in order, each within its
//! job budget ([`job_budget`]) and the invocation's deadline; a failed record holds
//! back its own message group (one conversation) only; what no longer fits the
//! invocation comes back in a later batch. A body that is not a [`Job`] is a
//! failure too, and ends in the DLQ. Every failure is reported, retryable or not;
//! [`degrau::compaction::CompactorError::retryable`] only sets the log level, since
//! the DLQ is where a job that cannot succeed should end up.

use std::time::Duration;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use degrau::compaction::{Compactor, CompactorError, JobOutcome, SweepReport};
use degrau::deadline::Deadline;
use degrau::fifo::{self, Record};
use degrau::jobs::{Job, Jobs};
use degrau::metrics::Event;
use degrau_adapters::sqs_batch;
use lambda_runtime::{Error, LambdaEvent};
use serde_json::Value;
use tracing::{error, warn};

/// Time a job keeps besides its model call: its reads and its conditional write.
pub const JOB_STORE_MARGIN: Duration = Duration::from_secs(5);

/// The time budget of one job: one model attempt's limit (`MODEL_TIMEOUT_SECONDS`;
/// the adapter's retries fit in what is left of it when an attempt fails fast) and
/// [`JOB_STORE_MARGIN`].
pub fn job_budget(model_timeout: Duration) -> Duration {
    model_timeout + JOB_STORE_MARGIN
}

/// Dispatches one event: `Records` (an SQS batch) to [`handle_batch`], each job
/// within `job_budget`, whose partial batch response it returns as JSON; `{"sweep": true}` to
/// [`Compactor::sweep`] with `jobs`, whose [`SweepReport`] it returns as JSON.
/// Anything else is an error (nothing runs), as is a sweep that could read no
/// bucket of the index (the schedule's retry, or the next run, starts it over).
pub async fn handle(
    compactor: &Compactor,
    jobs: &dyn Jobs,
    job_budget: Duration,
    event: LambdaEvent<Value>,
) -> Result<Value, Error> {
    let (payload, context) = event.into_parts();
    if payload.get("Records").is_some() {
        // The serde message may quote the event: report its class only.
        let batch: SqsEvent = serde_json::from_value(payload).map_err(|err| {
            format!(
                "an event with Records is not an SQS batch ({:?})",
                err.classify()
            )
        })?;
        let response =
            handle_batch(compactor, job_budget, LambdaEvent::new(batch, context)).await?;
        return Ok(serde_json::to_value(response)?);
    }
    if payload.get("sweep") == Some(&Value::Bool(true)) {
        let result = compactor.sweep(jobs, (compactor.wiring.clock)()).await;
        record_sweep_metrics(&result);
        let report = result.map_err(|failure| {
            error!(code = failure.code(), error = %failure, "sweep failed");
            failure
        })?;
        return Ok(serde_json::to_value(report)?);
    }
    // Never echo the event: it may hold anything.
    Err("unrecognised event: expected an SQS batch (Records) or {\"sweep\": true}".into())
}

/// Runs a batch by the rules of [`degrau::fifo`], each job within `job_budget`.
///
/// Returns `Err` only when a record to report has no `messageId` (never seen from
/// SQS): the whole batch is then delivered again, which is safe because every job
/// is idempotent.
pub async fn handle_batch(
    compactor: &Compactor,
    job_budget: Duration,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let (batch, context) = event.into_parts();
    let records = sqs_batch::records(&batch);
    let invocation = Deadline::from_epoch_millis(context.deadline);
    let outcome = fifo::run(
        &records,
        job_budget,
        invocation,
        async |record, deadline| run_record(compactor, record, deadline).await,
    )
    .await;

    let response = sqs_batch::failures(&outcome)?;
    if !outcome.reported.is_empty() {
        warn!(
            failed = outcome.reported.len(),
            done = records.len() - outcome.reported.len(),
            held_back = outcome.held_back,
            out_of_time = outcome.out_of_time,
            "batch partly failed"
        );
        for (reason, count) in [
            ("group_failed", outcome.held_back),
            ("out_of_time", outcome.out_of_time),
        ] {
            if count > 0 {
                Event::new("compactor")
                    .dimension("Reason", reason)
                    .rollup()
                    .count("RecordsHeldBack", count as u64)
                    .emit();
            }
        }
    }
    Ok(response)
}

/// Runs one record's job by `deadline` (in the runner's span for the record); true
/// when it succeeded (a skip included).
async fn run_record(compactor: &Compactor, record: &Record, deadline: Deadline) -> bool {
    let job = match serde_json::from_str::<Job>(&record.body) {
        Ok(job) => job,
        Err(parse) => {
            Event::new("compactor")
                .dimension("Kind", "malformed")
                .rollup()
                .count("JobFailures", 1)
                .emit();
            // The serde message may quote the body (a contact id): log its class only.
            error!(category = ?parse.classify(), "the body is not a job");
            return false;
        }
    };
    // A job that finds no head yet is left for redelivery for its first receives.
    let result = compactor
        .run_delivery(&job, record.receives, deadline)
        .await;
    record_metrics(&job, &result);
    match result {
        Ok(_) => true,
        Err(failure) => {
            let (code, retryable) = (failure.code(), failure.retryable());
            if retryable {
                warn!(code, retryable, error = %failure, "job failed");
            } else {
                error!(code, retryable, error = %failure, "job failed");
            }
            false
        }
    }
}

/// One EMF event per sweep: what it found and did.
fn record_sweep_metrics(result: &Result<SweepReport, CompactorError>) {
    let event = Event::new("compactor").dimension("Kind", "sweep");
    let event = match result {
        Ok(report) => event
            .count("SweepFound", report.found as u64)
            .count("SweepEnqueued", report.enqueued as u64)
            .count("SweepSkipped", report.skipped as u64)
            .count("SweepFailed", report.failed as u64)
            .count("SweepBucketsFailed", report.buckets_failed as u64),
        Err(error) => event
            .dimension("Error", error.code())
            .count("JobFailures", 1),
    };
    event.rollup().emit();
}

/// One EMF event per job: what it did, by kind and reason.
fn record_metrics(job: &Job, result: &Result<JobOutcome, CompactorError>) {
    let event = Event::new("compactor").dimension("Kind", job.kind());
    let event = match result {
        Ok(JobOutcome::StepApplied { pruned, .. }) => event
            .count("StepsApplied", 1)
            .count("MessagesPruned", *pruned as u64),
        Ok(
            JobOutcome::StepSkipped { reason }
            | JobOutcome::FactsSkipped { reason }
            | JobOutcome::IndexSkipped { reason },
        ) => event.dimension("Reason", *reason).count("JobsSkipped", 1),
        Ok(JobOutcome::Indexed { summarised, .. }) => event
            .count("SessionsIndexed", 1)
            .count("SearchSummaries", u64::from(*summarised)),
        Ok(JobOutcome::FactsStored {
            stored,
            refused,
            removed,
        }) => event
            .count("FactsStored", *stored as u64)
            .count("FactsRefused", *refused as u64)
            .count("FactsRemoved", *removed as u64),
        Err(error) => event
            .dimension("Error", error.code())
            .count("JobFailures", 1),
    };
    event.rollup().emit();
}

#[cfg(test)]
mod tests;
