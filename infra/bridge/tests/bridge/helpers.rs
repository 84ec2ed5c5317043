//! Shared setup: an SQS client for moto, a fresh FIFO queue with its FIFO
//! dead-letter queue per test, a scripted fake function that records every event
//! it gets, and bounded polling loops (never wall-clock assertions).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use degrau_bridge::{BatchReport, Invoke, QueueConfig, poll_once};
use serde_json::{Value, json};

/// The variable holding the moto endpoint, e.g. `http://127.0.0.1:5005`.
const ENDPOINT_VAR: &str = "DEGRAU_TEST_AWS_ENDPOINT";

/// `maxReceiveCount` of every test queue's redrive policy.
pub const MAX_RECEIVE_COUNT: usize = 2;

/// An SQS client talking to moto; panics with directions when it is not set.
pub async fn sqs() -> Client {
    let endpoint = match std::env::var(ENDPOINT_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "{ENDPOINT_VAR} is not set: these tests need moto. Run `bash infra/moto.sh start`, \
             then `{ENDPOINT_VAR}=$(bash infra/moto.sh url) cargo test -p degrau-bridge`"
        ),
    };
    let config = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "degrau-test",
            "degrau-test",
            None,
            None,
            "degrau-bridge-tests",
        ))
        .endpoint_url(endpoint)
        .load()
        .await;
    Client::new(&config)
}

/// A name no other test of this or a concurrent run uses.
fn unique_name(what: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "degrau-bridge-{what}-{}-{}-{nanos:09}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A test's FIFO queue and its FIFO dead-letter queue.
pub struct Queues {
    /// The source queue (what the bridge polls).
    pub url: String,
    /// Its ARN.
    pub arn: String,
    /// The dead-letter queue.
    pub dlq_url: String,
}

async fn arn_of(sqs: &Client, url: &str) -> String {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("get queue attributes")
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .cloned()
        .expect("a queue ARN")
}

async fn create_fifo(sqs: &Client, name: &str, extra: &[(QueueAttributeName, String)]) -> String {
    let mut request = sqs
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false");
    for (name, value) in extra {
        request = request.attributes(name.clone(), value);
    }
    request
        .send()
        .await
        .unwrap_or_else(|e| panic!("create queue {name}: {e:?}"))
        .queue_url
        .expect("a queue URL")
}

/// A fresh FIFO queue (visibility timeout 2 s) redriving to a fresh FIFO
/// dead-letter queue after [`MAX_RECEIVE_COUNT`] receives.
pub async fn fresh_queues(sqs: &Client) -> Queues {
    let base = unique_name("q");
    let dlq_url = create_fifo(sqs, &format!("{base}-dlq.fifo"), &[]).await;
    let dlq_arn = arn_of(sqs, &dlq_url).await;
    let redrive = json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT});
    let url = create_fifo(
        sqs,
        &format!("{base}.fifo"),
        &[
            (QueueAttributeName::VisibilityTimeout, "2".to_owned()),
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
        ],
    )
    .await;
    let arn = arn_of(sqs, &url).await;
    Queues { url, arn, dlq_url }
}

/// Bridge settings for `queues`: batches of `batch_size`, 1 s long polls, and
/// messages to retry visible again after 1 s.
pub fn config(queues: &Queues, batch_size: i32) -> QueueConfig {
    QueueConfig {
        queue_url: queues.url.clone(),
        queue_arn: queues.arn.clone(),
        batch_size,
        wait_time_seconds: 1,
        retry_visibility_seconds: Some(1),
    }
}

/// Sends `body` to `group` (its de-duplication id is the body, which tests keep
/// unique per queue).
pub async fn send(sqs: &Client, url: &str, group: &str, body: &str) {
    sqs.send_message()
        .queue_url(url)
        .message_group_id(group)
        .message_deduplication_id(body)
        .message_body(body)
        .send()
        .await
        .expect("send message");
}

/// Visible plus in-flight messages of a queue.
pub async fn messages_in(sqs: &Client, url: &str) -> usize {
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("get queue attributes");
    let count = |name: &QueueAttributeName| -> usize {
        attributes
            .attributes()
            .and_then(|a| a.get(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    count(&QueueAttributeName::ApproximateNumberOfMessages)
        + count(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
}

/// Receives what the dead-letter queue holds: (body, group id) pairs.
pub async fn dead_letters(sqs: &Client, queues: &Queues) -> Vec<(String, String)> {
    let received = sqs
        .receive_message()
        .queue_url(&queues.dlq_url)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .expect("receive from the dead-letter queue");
    received
        .messages()
        .iter()
        .map(|m| {
            let group = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
                .cloned()
                .unwrap_or_default();
            (m.body().unwrap_or_default().to_owned(), group)
        })
        .collect()
}

/// The bodies of an SQS event's records, in order.
pub fn bodies(event: &Value) -> Vec<String> {
    records(event)
        .iter()
        .map(|r| r["body"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The records of an SQS event.
pub fn records(event: &Value) -> Vec<Value> {
    event["Records"].as_array().cloned().unwrap_or_default()
}

/// A batch response listing `records` (message ids) as failed.
pub fn failing(records: &[Value]) -> Value {
    let items: Vec<Value> = records
        .iter()
        .map(|r| json!({"itemIdentifier": r["messageId"]}))
        .collect();
    json!({"batchItemFailures": items})
}

type Script = dyn Fn(usize, &Value) -> Result<Value, String> + Send + Sync;

/// A fake function: answers each event with `script(call index, event)` and
/// records the events.
pub struct FakeFunction {
    script: Box<Script>,
    events: Mutex<Vec<Value>>,
}

impl FakeFunction {
    /// A function whose answers come from `script`.
    pub fn new(
        script: impl Fn(usize, &Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> FakeFunction {
        FakeFunction {
            script: Box::new(script),
            events: Mutex::new(Vec::new()),
        }
    }

    /// A function that succeeds with an empty failure list every time.
    pub fn succeeding() -> FakeFunction {
        FakeFunction::new(|_, _| Ok(json!({"batchItemFailures": []})))
    }

    /// Every event received so far.
    pub fn events(&self) -> Vec<Value> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Bodies of every record received so far, in delivery order.
    pub fn deliveries(&self) -> Vec<String> {
        self.events().iter().flat_map(bodies).collect()
    }
}

#[async_trait]
impl Invoke for FakeFunction {
    async fn invoke(&self, event: Value) -> Result<Value, String> {
        let index = {
            let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            events.push(event.clone());
            events.len() - 1
        };
        (self.script)(index, &event)
    }
}

/// Polls until `done` holds for the reports so far, at most `rounds` times;
/// returns the non-empty reports. Each round waits at most the 1 s long poll.
pub async fn poll_until(
    sqs: &Client,
    queue: &QueueConfig,
    function: &dyn Invoke,
    rounds: usize,
    done: impl Fn(&[BatchReport]) -> bool,
) -> Vec<BatchReport> {
    let mut reports = Vec::new();
    for _ in 0..rounds {
        if done(&reports) {
            break;
        }
        let report = poll_once(sqs, queue, function).await.expect("poll once");
        assert_eq!(
            report.received,
            report.deleted + report.failed,
            "{report:?}"
        );
        if report.received > 0 {
            reports.push(report);
        }
    }
    assert!(
        done(&reports),
        "not done after {rounds} rounds: {reports:?}"
    );
    reports
}

/// Messages received over `reports`.
pub fn received(reports: &[BatchReport]) -> usize {
    reports.iter().map(|r| r.received).sum()
}
