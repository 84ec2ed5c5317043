//! Maps an SQS FIFO batch of the inbound queue to the worker, and the outcome to a
//! partial batch response. The batch runs by the rules of [`degrau::fifo`], the
//! compactor's too: records in order, each within its record budget
//! ([`record_budget`]) and the invocation's deadline; a failed record holds back
//! its own message group (one conversation) only; what no longer fits the
//! invocation comes back in a later batch. A body that is not a queued message is
//! reported too, and ends in the dead-letter queue.
//!
//! A record whose turn a limit holds back ([`WorkerError::held_for`]) waits instead
//! of failing its way to the dead-letter queue: it is hidden until the limit may
//! allow it ([`Hold::delay`]) and reported; one whose next receive would be its
//! last before the dead-letter queue is sent again fresh ([`Hold::requeue`]) and
//! counted done.

use std::time::Duration;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use degrau::deadline::Deadline;
use degrau::fifo::{self, Record};
use degrau::metrics::Event;
use degrau_adapters::sqs_batch;
use degrau_whatsapp::inbox::Hold;
use degrau_whatsapp::inbox::QueuedMessage;
use degrau_whatsapp::worker::{FUNCTION, Worker, WorkerError};
use lambda_runtime::{Error, LambdaEvent};
use tracing::{Instrument, error, info_span, warn};

/// Time a record keeps besides its turn: the debounce's waits (at most three
/// debounces) and its reads and writes.
pub const RECORD_STORE_MARGIN: Duration = Duration::from_secs(3);

/// The time budget of one record: three debounces, the turn's ask and send, and
/// [`RECORD_STORE_MARGIN`].
pub fn record_budget(worker: &Worker) -> Duration {
    worker.debounce * 3 + worker.turn_budget() + RECORD_STORE_MARGIN
}

/// How the batch's held records wait: the queue's holds, and the queue's
/// `maxReceiveCount` (a receive past it sends a message to the dead-letter queue).
pub struct Holding<'a> {
    /// The queue's side of a hold.
    pub hold: &'a dyn Hold,
    /// The queue's `maxReceiveCount` (`WHATSAPP_MAX_RECEIVES`).
    pub max_receives: u32,
}

/// Runs a batch by the rules of [`degrau::fifo`], each record within `budget`.
/// `Err` only when a record to report has no `messageId` (never from SQS): the
/// whole batch comes back, which is safe since every step of a turn is conditional.
pub async fn handle_batch(
    worker: &Worker,
    budget: Duration,
    holding: &Holding<'_>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let (batch, context) = event.into_parts();
    let records = sqs_batch::records(&batch);
    let receipts: Vec<Option<String>> = batch
        .records
        .iter()
        .map(|message| message.receipt_handle.clone())
        .collect();
    let invocation = Deadline::from_epoch_millis(context.deadline);
    let outcome = fifo::run(&records, budget, invocation, async |record, deadline| {
        let receipt = records
            .iter()
            .position(|r| std::ptr::eq(r, record))
            .and_then(|at| receipts[at].as_deref());
        run_record(worker, (record, receipt), holding, deadline).await
    })
    .await;
    let response = sqs_batch::failures(&outcome)?;
    if !outcome.reported.is_empty() {
        Event::new(FUNCTION)
            .count("RecordsFailed", outcome.reported.len() as u64)
            .emit();
    }
    Ok(response)
}

/// Runs one record by `deadline` (in the runner's span for the record); true when
/// it succeeded (nothing to do included, and a held record sent again fresh).
async fn run_record(
    worker: &Worker,
    (record, receipt): (&Record, Option<&str>),
    holding: &Holding<'_>,
    deadline: Deadline,
) -> bool {
    let queued = match serde_json::from_str::<QueuedMessage>(&record.body) {
        Ok(queued) => queued,
        Err(parse) => {
            // The serde message may quote the body (a number): its class only.
            error!(category = ?parse.classify(), "the body is not a queued message");
            Event::new(FUNCTION)
                .dimension("Error", "malformed")
                .rollup()
                .count("RecordFailures", 1)
                .emit();
            return false;
        }
    };
    // Every line of the turn names its tenant (never the contact: the queued
    // message names no one, and the turn's own lines carry no number).
    let span = info_span!("turn", tenant = queued.tenant.as_str());
    handle_queued(worker, (record, receipt), holding, &queued, deadline)
        .instrument(span)
        .await
}

/// Runs the queued message's turn and settles the record by the outcome.
async fn handle_queued(
    worker: &Worker,
    (record, receipt): (&Record, Option<&str>),
    holding: &Holding<'_>,
    queued: &QueuedMessage,
    deadline: Deadline,
) -> bool {
    match worker.handle(queued, deadline).await {
        Ok(outcome) => {
            tracing::info!(?outcome, "record done");
            true
        }
        Err(failure) if failure.held_for().is_some() => {
            hold(record, receipt, holding, &failure).await
        }
        Err(failure) => {
            warn!(code = failure.code(), error = %failure, "record failed; it comes back");
            Event::new(FUNCTION)
                .dimension("Error", failure.code())
                .rollup()
                .count("RecordFailures", 1)
                .emit();
            false
        }
    }
}

/// Holds a record a limit refused (see the module): hidden until the limit may
/// allow it (reported: false), or, on its last receive before the dead-letter
/// queue, sent again fresh (done: true). A hold that fails leaves the record to
/// the queue's own visibility timeout.
async fn hold(
    record: &Record,
    receipt: Option<&str>,
    holding: &Holding<'_>,
    failure: &WorkerError,
) -> bool {
    let seconds = failure.held_for().unwrap_or(1).clamp(1, MAX_HOLD_SECONDS);
    Event::new(FUNCTION).count("RecordsHeld", 1).emit();
    if record.receives + 1 >= holding.max_receives
        && let Some(group) = record.group.as_deref()
    {
        match holding.hold.requeue(group, &record.body).await {
            Ok(()) => {
                tracing::info!(seconds, "held on its last receive: sent again fresh");
                return true;
            }
            Err(error) => warn!(%error, "could not send a held record again"),
        }
    }
    if let Some(receipt) = receipt
        && let Err(error) = holding.hold.delay(receipt, seconds).await
    {
        warn!(%error, "could not hide a held record; it comes back at the queue's timeout");
    }
    tracing::info!(seconds, code = failure.code(), "record held");
    false
}

/// The longest a record is hidden at once: SQS's 12 hours.
pub const MAX_HOLD_SECONDS: u64 = 43_200;

#[cfg(test)]
mod tests;
