//! Batches and their outcomes: all succeed, some fail, the invocation fails, the
//! answer is malformed.

use degrau_bridge::poll_once;
use serde_json::json;

use crate::helpers::{
    FakeFunction, bodies, config, failing, fresh_queues, messages_in, poll_until, received,
    records, send, sqs,
};

#[tokio::test]
async fn a_batch_that_all_succeeds_is_deleted_and_the_queue_is_empty() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    for body in ["a", "b", "c"] {
        send(&sqs, &queues.url, "g", body).await;
    }
    let function = FakeFunction::succeeding();

    let reports = poll_until(&sqs, &config(&queues, 10), &function, 10, |r| {
        received(r) == 3
    })
    .await;

    assert!(
        reports
            .iter()
            .all(|r| r.deleted == r.received && r.failed == 0)
    );
    assert!(reports.iter().all(|r| r.invoke_error.is_none()));
    assert_eq!(function.deliveries(), ["a", "b", "c"]);
    let first = &records(&function.events()[0])[0];
    assert_eq!(first["eventSource"], "aws:sqs");
    assert_eq!(first["eventSourceARN"], queues.arn.as_str());
    assert_eq!(first["awsRegion"], "us-east-1");
    assert_eq!(first["messageAttributes"], json!({}));
    assert_eq!(first["attributes"]["MessageGroupId"], "g");
    assert_eq!(first["attributes"]["MessageDeduplicationId"], "a");
    assert_eq!(first["attributes"]["ApproximateReceiveCount"], "1");
    for attribute in [
        "SequenceNumber",
        "SentTimestamp",
        "ApproximateFirstReceiveTimestamp",
    ] {
        assert!(first["attributes"][attribute].is_string(), "{attribute}");
    }
    for field in ["messageId", "receiptHandle", "md5OfBody"] {
        assert!(
            first[field].as_str().is_some_and(|v| !v.is_empty()),
            "{field}"
        );
    }
    assert_eq!(messages_in(&sqs, &queues.url).await, 0);
}

#[tokio::test]
async fn a_failed_item_is_redelivered_later_with_the_rest_of_the_batch_in_order() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    for body in ["a", "b", "c"] {
        send(&sqs, &queues.url, "g", body).await;
    }
    // The first time, fail "b" and report every later message too, as a FIFO
    // consumer must; afterwards succeed.
    let function = FakeFunction::new(|call, event| {
        let records = records(event);
        let first_failure = records.iter().position(|r| r["body"] == "b");
        match first_failure {
            Some(at) if call == 0 => Ok(failing(&records[at..])),
            _ => Ok(json!({"batchItemFailures": []})),
        }
    });
    let queue = config(&queues, 10);

    let first = poll_once(&sqs, &queue, &function).await.unwrap();
    assert_eq!((first.received, first.deleted, first.failed), (3, 1, 2));
    assert_eq!(first.invoke_error, None);

    let retried = poll_until(&sqs, &queue, &function, 10, |r| received(r) == 2).await;
    assert!(retried.iter().all(|r| r.failed == 0));
    let events = function.events();
    let redelivered: Vec<String> = events[1..].iter().flat_map(bodies).collect();
    assert_eq!(redelivered, ["b", "c"]);
    let counts: Vec<String> = events[1..]
        .iter()
        .flat_map(records)
        .map(|r| r["attributes"]["ApproximateReceiveCount"].to_string())
        .collect();
    assert_eq!(counts, ["\"2\"", "\"2\""]);
    assert_eq!(messages_in(&sqs, &queues.url).await, 0);
}

#[tokio::test]
async fn an_invoke_error_deletes_nothing_and_the_batch_comes_back() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    for body in ["a", "b", "c"] {
        send(&sqs, &queues.url, "g", body).await;
    }
    let function = FakeFunction::new(|call, _| {
        if call == 0 {
            Err("function error (HTTP 500): Timeout".to_owned())
        } else {
            Ok(json!({"batchItemFailures": []}))
        }
    });
    let queue = config(&queues, 10);

    let first = poll_once(&sqs, &queue, &function).await.unwrap();
    assert_eq!((first.received, first.deleted, first.failed), (3, 0, 3));
    assert_eq!(
        first.invoke_error.as_deref(),
        Some("function error (HTTP 500): Timeout")
    );
    assert_eq!(messages_in(&sqs, &queues.url).await, 3);

    poll_until(&sqs, &queue, &function, 10, |r| received(r) == 3).await;
    assert_eq!(function.deliveries(), ["a", "b", "c", "a", "b", "c"]);
    assert_eq!(messages_in(&sqs, &queues.url).await, 0);
}

#[tokio::test]
async fn without_the_retry_shortcut_the_queue_visibility_timeout_brings_failures_back() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    send(&sqs, &queues.url, "g", "a").await;
    let function = FakeFunction::new(|call, event| {
        if call == 0 {
            Ok(failing(&records(event)))
        } else {
            Ok(json!({"batchItemFailures": []}))
        }
    });
    let mut queue = config(&queues, 10);
    queue.retry_visibility_seconds = None;

    // The queue's visibility timeout is 2 s: a handful of 1 s polls see it again.
    poll_until(&sqs, &queue, &function, 10, |r| received(r) == 2).await;

    assert_eq!(function.deliveries(), ["a", "a"]);
    assert_eq!(messages_in(&sqs, &queues.url).await, 0);
}

#[tokio::test]
async fn a_malformed_failure_list_fails_the_whole_batch() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    for body in ["a", "b"] {
        send(&sqs, &queues.url, "g", body).await;
    }
    let function = FakeFunction::new(|_, _| {
        Ok(json!({"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}))
    });

    let report = poll_once(&sqs, &config(&queues, 10), &function)
        .await
        .unwrap();

    assert_eq!((report.received, report.deleted, report.failed), (2, 0, 2));
    assert!(report.bad_response.is_some());
    assert_eq!(messages_in(&sqs, &queues.url).await, 2);
}

#[tokio::test]
async fn an_answer_without_a_failure_list_counts_as_complete_success() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    for body in ["a", "b"] {
        send(&sqs, &queues.url, "g", body).await;
    }
    let function = FakeFunction::new(|_, _| Ok(json!({"statusCode": 200})));

    let report = poll_once(&sqs, &config(&queues, 10), &function)
        .await
        .unwrap();

    assert_eq!((report.received, report.deleted, report.failed), (2, 2, 0));
    assert_eq!(messages_in(&sqs, &queues.url).await, 0);
}

#[tokio::test]
async fn an_empty_queue_gives_an_empty_report_without_invoking() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    let function = FakeFunction::succeeding();
    let mut queue = config(&queues, 10);
    queue.wait_time_seconds = 0;

    let report = poll_once(&sqs, &queue, &function).await.unwrap();

    assert_eq!(report, Default::default());
    assert!(function.events().is_empty());
}

#[tokio::test]
async fn a_batch_size_above_ten_is_refused() {
    let sqs = sqs().await;
    let queues = fresh_queues(&sqs).await;
    let function = FakeFunction::succeeding();

    let error = poll_once(&sqs, &config(&queues, 11), &function)
        .await
        .unwrap_err();

    assert!(error.to_string().contains("batch size 11"), "{error}");
}
