//! FIFO semantics as the bridge sees them through moto: a group with a message in
//! flight delivers nothing more until that message is settled, while other groups
//! keep flowing; a failed message holds back the rest of its group.

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use degrau_bridge::{Invoke, QueueConfig, poll_once};
use serde_json::{Value, json};

use crate::helpers::{
    FakeFunction, bodies, config, failing, fresh_queues, messages_in, poll_until, received,
    records, send, sqs,
};

/// A function that, while handling its first batch (so with that batch in
/// flight), runs one more round of the bridge with `inner`. It first makes its
/// batch invisible for a minute, so the check does not depend on how fast this
/// runs compared with the queue's 2 s visibility timeout.
struct PollsWhileInFlight {
    sqs: Client,
    queue: QueueConfig,
    inner: Arc<FakeFunction>,
    outer: FakeFunction,
}

#[async_trait]
impl Invoke for PollsWhileInFlight {
    async fn invoke(&self, event: Value) -> Result<Value, String> {
        if self.outer.events().is_empty() {
            for record in records(&event) {
                self.sqs
                    .change_message_visibility()
                    .queue_url(&self.queue.queue_url)
                    .receipt_handle(record["receiptHandle"].as_str().unwrap_or_default())
                    .visibility_timeout(60)
                    .send()
                    .await
                    .map_err(|e| format!("{e:?}"))?;
            }
            poll_once(&self.sqs, &self.queue, self.inner.as_ref())
                .await
                .map_err(|e| e.to_string())?;
        }
        self.outer.invoke(event).await
    }
}

#[tokio::test]
async fn a_group_with_a_message_in_flight_delivers_nothing_more_until_it_is_settled() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    send(&sqs, &queues.url, "A", "a1").await;
    send(&sqs, &queues.url, "A", "a2").await;
    send(&sqs, &queues.url, "B", "b1").await;
    let inner = Arc::new(FakeFunction::succeeding());
    let function = PollsWhileInFlight {
        sqs: sqs.clone(),
        queue: config(&queues, 10),
        inner: inner.clone(),
        outer: FakeFunction::succeeding(),
    };

    // Batches of one: the bridge takes a1, and while a1 is in flight a second
    // round (batches of ten) gets only b1: a2 waits behind a1.
    let first = poll_once(&sqs, &config(&queues, 1), &function)
        .await
        .unwrap();

    assert_eq!((first.received, first.deleted), (1, 1));
    assert_eq!(function.outer.deliveries(), ["a1"]);
    assert_eq!(inner.deliveries(), ["b1"]);
    // a1 is deleted now, so a2 flows.
    let rest = FakeFunction::succeeding();
    poll_until(&sqs, &config(&queues, 10), &rest, 10, |r| received(r) == 1).await;
    assert_eq!(rest.deliveries(), ["a2"]);
    assert_eq!(messages_in(&sqs, &queues.url).await, 0);
}

#[tokio::test]
async fn a_failed_message_holds_back_the_rest_of_its_group_but_not_other_groups() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    send(&sqs, &queues.url, "A", "a1").await;
    send(&sqs, &queues.url, "A", "a2").await;
    send(&sqs, &queues.url, "B", "b1").await;
    // a1 fails the first time it is seen; everything else succeeds.
    let function = FakeFunction::new(|call, event| {
        let records = records(event);
        if call == 0 && bodies(event) == ["a1"] {
            Ok(failing(&records))
        } else {
            Ok(json!({"batchItemFailures": []}))
        }
    });

    poll_until(&sqs, &config(&queues, 1), &function, 20, |r| {
        received(r) == 4
    })
    .await;

    let order = function.deliveries();
    let position = |body: &str, nth: usize| {
        order
            .iter()
            .enumerate()
            .filter(|(_, b)| *b == body)
            .nth(nth)
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("{body} #{nth} not delivered: {order:?}"))
    };
    assert_eq!(order[0], "a1");
    // a2 only after a1's redelivery; b1 somewhere, once.
    assert!(position("a2", 0) > position("a1", 1), "{order:?}");
    assert_eq!(order.iter().filter(|b| *b == "b1").count(), 1, "{order:?}");
    assert_eq!(messages_in(&sqs, &queues.url).await, 0);
}
