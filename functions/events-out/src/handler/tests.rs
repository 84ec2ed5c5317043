use std::collections::HashMap;
use std::sync::Mutex;

use aws_lambda_events::sqs::SqsMessage;
use degrau::events::{Event as Sent, EventType};
use degrau::tools::Webhook;
use lambda_runtime::Context;
use serde_json::json;

use super::*;

/// A receiver that refuses the events whose id it is told to, and keeps the ids
/// of the ones it took, in order.
#[derive(Default)]
struct Receiver {
    refuse: Vec<String>,
    took: Mutex<Vec<String>>,
}

#[async_trait]
impl Deliver for Receiver {
    async fn deliver(&self, delivery: &Delivery, _: Deadline) -> Result<(), DeliveryFailure> {
        if self.refuse.contains(&delivery.event.id) {
            return Err(DeliveryFailure {
                kind: "status",
                status: Some(500),
            });
        }
        self.took.lock().unwrap().push(delivery.event.id.clone());
        Ok(())
    }
}

fn message(id: &str, group: &str) -> SqsMessage {
    let delivery = Delivery {
        webhook: Webhook {
            url: "https://hooks.example.com/e".into(),
            secret_parameter: "/degrau/webhooks/shop/events".into(),
            timeout_ms: 5000,
        },
        event: Sent {
            id: id.into(),
            kind: EventType::FactDeleted,
            tenant: "shop".into(),
            contact: group.into(),
            at: 1,
            data: json!({"key": "name"}),
        },
    };
    let mut message = SqsMessage::default();
    message.message_id = Some(format!("m-{id}"));
    message.body = Some(serde_json::to_string(&delivery).unwrap());
    message.attributes = HashMap::from([
        ("MessageGroupId".to_owned(), group.to_owned()),
        ("ApproximateReceiveCount".to_owned(), "1".to_owned()),
    ]);
    message
}

async fn run(receiver: &Receiver, messages: Vec<SqsMessage>) -> Vec<String> {
    let mut batch = SqsEvent::default();
    batch.records = messages;
    let response = handle(
        receiver,
        EVENT_BUDGET,
        LambdaEvent::new(batch, Context::default()),
    )
    .await
    .unwrap();
    response
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect()
}

#[tokio::test]
async fn a_refused_event_holds_back_its_contacts_later_events_only() {
    let receiver = Receiver {
        refuse: vec!["a2".into()],
        ..Receiver::default()
    };
    let reported = run(
        &receiver,
        vec![
            message("a1", "ana"),
            message("b1", "bia"),
            message("a2", "ana"),
            message("b2", "bia"),
            message("a3", "ana"),
        ],
    )
    .await;
    assert_eq!(reported, ["m-a2", "m-a3"], "both come back, in order");
    assert_eq!(*receiver.took.lock().unwrap(), ["a1", "b1", "b2"]);

    // The next receive, the receiver well again: the rest in order.
    let receiver = Receiver::default();
    let reported = run(&receiver, vec![message("a2", "ana"), message("a3", "ana")]).await;
    assert!(reported.is_empty());
    assert_eq!(*receiver.took.lock().unwrap(), ["a2", "a3"]);
}

#[tokio::test]
async fn a_body_that_is_not_a_delivery_is_reported_to_end_in_the_dead_letter_queue() {
    let receiver = Receiver::default();
    let mut broken = message("x", "ana");
    broken.body = Some("{\"contact\": \"+5511999\"}".into());
    let reported = run(&receiver, vec![broken, message("b1", "bia")]).await;
    assert_eq!(reported, ["m-x"]);
    assert_eq!(*receiver.took.lock().unwrap(), ["b1"]);
}
