//! Redrive to the dead-letter queue is the queue's job (RedrivePolicy): these
//! tests check that moto does it for the bridge, so the bridge needs no redrive
//! code of its own.

use crate::helpers::{
    FakeFunction, MAX_RECEIVE_COUNT, config, dead_letters, failing, fresh_queues, messages_in,
    records, send, sqs,
};
use degrau_bridge::poll_once;

#[tokio::test]
async fn a_message_that_always_fails_ends_in_the_dead_letter_queue_after_max_receives() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    send(&sqs, &queues.url, "g", "poison").await;
    let function = FakeFunction::new(|_, event| Ok(failing(&records(event))));
    let mut queue = config(&queues, 10);
    queue.retry_visibility_seconds = Some(0);

    let mut rounds = 0;
    while messages_in(&sqs, &queues.url).await > 0 {
        rounds += 1;
        assert!(rounds <= 20, "still in the queue after 20 rounds");
        let report = poll_once(&sqs, &queue, &function).await.unwrap();
        assert_eq!(report.deleted, 0);
    }

    let counts: Vec<String> = function
        .events()
        .iter()
        .flat_map(records)
        .map(|r| {
            r["attributes"]["ApproximateReceiveCount"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let expected: Vec<String> = (1..=MAX_RECEIVE_COUNT).map(|n| n.to_string()).collect();
    assert_eq!(counts, expected);
    assert_eq!(
        dead_letters(&sqs, &queues).await,
        [("poison".to_owned(), "g".to_owned())]
    );
}

#[tokio::test]
async fn a_function_that_keeps_crashing_also_sends_the_batch_to_the_dead_letter_queue() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    send(&sqs, &queues.url, "g", "x").await;
    send(&sqs, &queues.url, "g", "y").await;
    let function = FakeFunction::new(|_, _| Err("function error (HTTP 500): Panic".to_owned()));
    let mut queue = config(&queues, 10);
    queue.retry_visibility_seconds = Some(0);

    let mut rounds = 0;
    while messages_in(&sqs, &queues.url).await > 0 {
        rounds += 1;
        assert!(rounds <= 20, "still in the queue after 20 rounds");
        poll_once(&sqs, &queue, &function).await.unwrap();
    }

    assert_eq!(function.events().len(), MAX_RECEIVE_COUNT);
    let mut dead: Vec<String> = dead_letters(&sqs, &queues)
        .await
        .into_iter()
        .map(|(body, _)| body)
        .collect();
    dead.sort();
    assert_eq!(dead, ["x", "y"]);
}
