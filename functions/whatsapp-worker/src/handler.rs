//! Maps an SQS FIFO batch of the inbound queue to the worker, and the outcome to a
//! partial batch response. The batch runs by the rules of [`degrau::fifo`], the
//! compactor's too: records in order, each within its record budget
//! ([`record_budget`]) and the invocation's deadline; a failed record holds back
//! its own message group (one conversation) only; what no longer fits the
//! invocation comes back in a later batch. A body that is not a queued message is
//! reported too, and ends in the dead-letter queue.

use std::time::Duration;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use degrau::deadline::Deadline;
use degrau::fifo::{self, Outcome, Record};
use degrau::metrics::Event;
use degrau::whatsapp::inbox::QueuedMessage;
use degrau::whatsapp::worker::{FUNCTION, Worker};
use lambda_runtime::{Error, LambdaEvent};
use tracing::{error, warn};

/// Time a record keeps besides its turn: the debounce's waits (at most three
/// debounces) and its reads and writes.
pub const RECORD_STORE_MARGIN: Duration = Duration::from_secs(3);

/// The time budget of one record: three debounces, the turn's ask and send, and
/// [`RECORD_STORE_MARGIN`].
pub fn record_budget(worker: &Worker) -> Duration {
    worker.debounce * 3 + worker.turn_budget() + RECORD_STORE_MARGIN
}

/// Runs a batch by the rules of [`degrau::fifo`], each record within `budget`.
/// `Err` only when a record to report has no `messageId` (never from SQS): the
/// whole batch comes back, which is safe since every step of a turn is conditional.
pub async fn handle_batch(
    worker: &Worker,
    budget: Duration,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let (batch, context) = event.into_parts();
    let records: Vec<Record> = batch.records.iter().map(record).collect();
    let invocation = Deadline::from_epoch_millis(context.deadline);
    let outcome = fifo::run(&records, budget, invocation, async |record, deadline| {
        run_record(worker, record, deadline).await
    })
    .await;
    let response = failures(&outcome)?;
    if !outcome.reported.is_empty() {
        Event::new(FUNCTION)
            .count("RecordsFailed", outcome.reported.len() as u64)
            .emit();
    }
    Ok(response)
}

/// An SQS message as the runner reads it: a missing id, body or group is empty or
/// none, and a receive count that cannot be read is the first. (The compactor's
/// handler maps SQS the same way, and back with the same `failures`: their one home
/// would be `degrau-adapters`, which holds no Lambda event types yet.)
fn record(message: &SqsMessage) -> Record {
    Record {
        id: message.message_id.clone().unwrap_or_default(),
        group: message.attributes.get("MessageGroupId").cloned(),
        body: message.body.clone().unwrap_or_default(),
        receives: message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|count| count.parse().ok())
            .unwrap_or(1),
    }
}

/// The partial batch response naming the records the runner reported, in order; an
/// error when one of them has no `messageId`.
fn failures(outcome: &Outcome) -> Result<SqsBatchResponse, Error> {
    let mut response = SqsBatchResponse::default();
    for id in &outcome.reported {
        if id.is_empty() {
            return Err("a record to report has no messageId; failing the whole batch".into());
        }
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id.clone();
        response.batch_item_failures.push(failure);
    }
    Ok(response)
}

/// Runs one record by `deadline` (in the runner's span for the record); true when
/// it succeeded (nothing to do included).
async fn run_record(worker: &Worker, record: &Record, deadline: Deadline) -> bool {
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
    match worker.handle(&queued, deadline).await {
        Ok(outcome) => {
            tracing::info!(?outcome, "record done");
            true
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

#[cfg(test)]
mod tests;
