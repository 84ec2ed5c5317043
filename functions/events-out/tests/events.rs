//! The sample event for `sam local invoke EventsOutFunction`:
//! `events/events-out-delivery.json` (an SQS FIFO batch of one event, as the
//! event source mapping delivers it) is what the real handler reads: its body is
//! a delivery, taken by a receiver that answers 2xx, and reported for the
//! queue's retry by one that does not.

#![allow(clippy::unwrap_used, missing_docs)]

use async_trait::async_trait;
use aws_lambda_events::sqs::SqsEvent;
use degrau::deadline::Deadline;
use degrau::events::{Delivery, EventType};
use degrau_adapters::webhook::deliver::DeliveryFailure;
use events_out::handler::{Deliver, EVENT_BUDGET, handle};
use lambda_runtime::{Context, LambdaEvent};

const DELIVERY: &str = include_str!("../../../events/events-out-delivery.json");

/// A receiver answering `status`.
struct Answers(u16);

#[async_trait]
impl Deliver for Answers {
    async fn deliver(&self, delivery: &Delivery, _: Deadline) -> Result<(), DeliveryFailure> {
        assert_eq!(delivery.event.kind, EventType::FactSet);
        match self.0 {
            200..=299 => Ok(()),
            status => Err(DeliveryFailure {
                kind: "status",
                status: Some(status),
            }),
        }
    }
}

async fn reported(receiver: Answers) -> usize {
    let batch: SqsEvent = serde_json::from_str(DELIVERY).unwrap();
    let response = handle(
        &receiver,
        EVENT_BUDGET,
        LambdaEvent::new(batch, Context::default()),
    )
    .await
    .unwrap();
    response.batch_item_failures.len()
}

#[tokio::test]
async fn the_sample_batch_holds_an_event_the_handler_delivers_or_leaves_for_a_retry() {
    assert_eq!(reported(Answers(204)).await, 0);
    assert_eq!(reported(Answers(500)).await, 1);
}
