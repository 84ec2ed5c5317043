//! The events queue's batch: each record one [`Delivery`] (a tenant's event and
//! its receiver), delivered by one signed `POST` (`degrau_adapters::webhook::deliver`).
//!
//! A batch runs by the rules of [`degrau::fifo`]: records in order, each within
//! [`EVENT_BUDGET`] and the invocation's deadline; one contact's events are one
//! message group, so an event the receiver does not take (a 500, a timeout)
//! holds back that contact's later events, and every one of them comes back in
//! the same order on the queue's next receive: in order per contact, at least
//! once. After the queue's `maxReceiveCount` the event goes to the dead-letter
//! queue (whose depth alarms), and the contact's next events go on. A body that
//! is not a [`Delivery`] fails the same way and ends there too.

use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use degrau::deadline::Deadline;
use degrau::events::Delivery;
use degrau::fifo::{self, Record};
use degrau::metrics::Event;
use degrau_adapters::sqs_batch;
use degrau_adapters::webhook::WebhookCaller;
use degrau_adapters::webhook::deliver::DeliveryFailure;
use lambda_runtime::{Error, LambdaEvent};
use tracing::{info, warn};

/// One event's time: the longest `timeout_ms` a webhook may have (10 s) and the
/// secret's read.
pub const EVENT_BUDGET: Duration = Duration::from_secs(12);

/// What delivers one event (the webhook caller; a double in tests).
#[async_trait]
pub trait Deliver: Send + Sync {
    /// Delivers `delivery` by `deadline`; `Ok` when the receiver took it.
    async fn deliver(&self, delivery: &Delivery, deadline: Deadline)
    -> Result<(), DeliveryFailure>;
}

#[async_trait]
impl Deliver for WebhookCaller {
    async fn deliver(
        &self,
        delivery: &Delivery,
        deadline: Deadline,
    ) -> Result<(), DeliveryFailure> {
        WebhookCaller::deliver(self, delivery, deadline).await
    }
}

/// Runs a batch by the rules of [`degrau::fifo`], each event within `budget`.
///
/// Returns `Err` only when a record to report has no `messageId` (never seen from
/// SQS): the whole batch then comes again, which the receiver's dedupe by event
/// id absorbs.
pub async fn handle(
    deliver: &dyn Deliver,
    budget: Duration,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let (batch, context) = event.into_parts();
    let records = sqs_batch::records(&batch);
    let invocation = Deadline::from_epoch_millis(context.deadline);
    let outcome = fifo::run(&records, budget, invocation, async |record, deadline| {
        run_record(deliver, record, deadline).await
    })
    .await;
    if !outcome.reported.is_empty() {
        warn!(
            failed = outcome.reported.len(),
            done = records.len() - outcome.reported.len(),
            held_back = outcome.held_back,
            out_of_time = outcome.out_of_time,
            "batch partly failed"
        );
    }
    Ok(sqs_batch::failures(&outcome)?)
}

/// Delivers one record's event by `deadline`; true when the receiver took it.
async fn run_record(deliver: &dyn Deliver, record: &Record, deadline: Deadline) -> bool {
    let Ok(delivery) = serde_json::from_str::<Delivery>(&record.body) else {
        // The body may hold a value: never log it.
        warn!(
            receives = record.receives,
            "the body is not an event delivery"
        );
        count("malformed", "EventFailures");
        return false;
    };
    let kind = delivery.event.kind.as_str();
    match deliver.deliver(&delivery, deadline).await {
        Ok(()) => {
            info!(event = kind, receives = record.receives, "event delivered");
            count(kind, "EventsDelivered");
            true
        }
        Err(failure) => {
            warn!(
                event = kind,
                receives = record.receives,
                error = failure.kind,
                status = failure.status,
                "event not delivered; the queue retries it"
            );
            count(kind, "EventFailures");
            false
        }
    }
}

fn count(kind: &'static str, metric: &'static str) {
    Event::new("events-out")
        .dimension("Type", kind)
        .rollup()
        .count(metric, 1)
        .emit();
}

#[cfg(test)]
mod tests;
