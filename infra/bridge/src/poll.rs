//! One round of the event source mapping: receive a batch, invoke, then delete
//! what succeeded and leave the rest for a retry.

use std::collections::HashSet;
use std::time::Duration;

use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry, Message,
    MessageSystemAttributeName, QueueAttributeName,
};
use tracing::warn;

use crate::event::sqs_event;
use crate::invoke::Invoke;
use crate::response::items_to_retry;

/// Errors of the bridge itself (the function's failures are in [`BatchReport`]).
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A setting is out of the range SQS or Lambda accept.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// GetQueueAttributes failed or had no ARN.
    #[error("cannot read the queue's attributes: {0}")]
    QueueAttributes(String),
    /// ReceiveMessage failed; nothing was received.
    #[error("cannot receive from the queue: {0}")]
    Receive(String),
    /// The event could not be serialized.
    #[error("cannot build the SQS event: {0}")]
    Event(String),
    /// DeleteMessageBatch failed after the function ran: the batch comes back
    /// when its visibility timeout runs out (the function must be idempotent, as
    /// in AWS, where deletes can fail too).
    #[error("cannot delete processed messages: {0}")]
    Delete(String),
}

/// The queue to poll and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// The queue's URL.
    pub queue_url: String,
    /// The queue's ARN (the records' `eventSourceARN`; its region is `awsRegion`).
    pub queue_arn: String,
    /// Messages per batch, 1 to 10 (the most a FIFO event source takes).
    pub batch_size: i32,
    /// Long-poll wait of each ReceiveMessage, 0 to 20 seconds.
    pub wait_time_seconds: i32,
    /// Local-only shortcut: after how many seconds messages to retry become
    /// visible again, instead of the queue's own visibility timeout (`None`, as in
    /// AWS). See [`poll_once`] for how they are released.
    pub retry_visibility_seconds: Option<i32>,
}

impl QueueConfig {
    /// The settings for `queue_url` with its ARN read from the queue (one
    /// GetQueueAttributes), batches of 10, a 1 s wait and no retry shortcut.
    pub async fn discover(
        sqs: &aws_sdk_sqs::Client,
        queue_url: &str,
    ) -> Result<QueueConfig, BridgeError> {
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| BridgeError::QueueAttributes(DisplayErrorContext(e).to_string()))?;
        let queue_arn = attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn))
            .cloned()
            .ok_or_else(|| BridgeError::QueueAttributes(format!("no QueueArn for {queue_url}")))?;
        Ok(QueueConfig {
            queue_url: queue_url.to_owned(),
            queue_arn,
            batch_size: 10,
            wait_time_seconds: 1,
            retry_visibility_seconds: None,
        })
    }

    fn validate(&self) -> Result<(), BridgeError> {
        if !(1..=10).contains(&self.batch_size) {
            return Err(BridgeError::Config(format!(
                "batch size {} is not within 1..=10",
                self.batch_size
            )));
        }
        if !(0..=20).contains(&self.wait_time_seconds) {
            return Err(BridgeError::Config(format!(
                "wait time {} s is not within 0..=20",
                self.wait_time_seconds
            )));
        }
        if let Some(seconds) = self.retry_visibility_seconds
            && !(0..=43_200).contains(&seconds)
        {
            return Err(BridgeError::Config(format!(
                "retry visibility {seconds} s is not within 0..=43200"
            )));
        }
        Ok(())
    }
}

/// What one round did. `received == deleted + failed` always holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Messages received (and passed to the function).
    pub received: usize,
    /// Messages deleted from the queue (the function's successes).
    pub deleted: usize,
    /// Messages left in the queue for a retry: the ones the function reported,
    /// all of them when the invocation failed or the answer was malformed, and any
    /// whose delete SQS refused.
    pub failed: usize,
    /// Why the invocation failed (the function's error type, never a body).
    pub invoke_error: Option<String>,
    /// Why the function's answer failed the whole batch (see [`crate::response`]).
    pub bad_response: Option<String>,
}

/// Receives one batch from `queue`, invokes the function with it, and settles
/// it: deletes the messages that succeeded; leaves the others in the queue. An
/// empty receive is an empty report.
///
/// With [`QueueConfig::retry_visibility_seconds`] set, the messages to retry are
/// held invisible (their group stays blocked, as in AWS) and released after that
/// many seconds by a background task that sets their visibility to 0, in receive
/// order. Releasing them that way, rather than letting a shorter visibility
/// timeout run out, is what keeps their order in moto: when several in-flight
/// messages of one group become visible by timing out, moto redelivers the last
/// one first (see the crate docs). Should the bridge stop before the release,
/// they come back [`HOLD_MARGIN_SECONDS`] later anyway.
pub async fn poll_once(
    sqs: &aws_sdk_sqs::Client,
    queue: &QueueConfig,
    invoke: &dyn Invoke,
) -> Result<BatchReport, BridgeError> {
    queue.validate()?;
    let received = sqs
        .receive_message()
        .queue_url(&queue.queue_url)
        .max_number_of_messages(queue.batch_size)
        .wait_time_seconds(queue.wait_time_seconds)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .map_err(|e| BridgeError::Receive(DisplayErrorContext(e).to_string()))?;
    let messages = received.messages();
    if messages.is_empty() {
        return Ok(BatchReport::default());
    }
    let mut report = BatchReport {
        received: messages.len(),
        ..BatchReport::default()
    };

    let event = serde_json::to_value(sqs_event(messages, &queue.queue_arn))
        .map_err(|e| BridgeError::Event(e.to_string()))?;
    let to_retry: Vec<&Message> = match invoke.invoke(event).await {
        Err(error) => {
            report.invoke_error = Some(error);
            messages.iter().collect()
        }
        Ok(answer) => {
            let ids: Vec<&str> = messages.iter().filter_map(|m| m.message_id()).collect();
            let listed = match items_to_retry(&answer, &ids) {
                Ok(listed) => listed,
                Err(reason) => {
                    report.bad_response = Some(reason);
                    ids.iter().map(|id| (*id).to_owned()).collect()
                }
            };
            let (retry, done): (Vec<&Message>, Vec<&Message>) = messages
                .iter()
                .partition(|m| m.message_id().is_some_and(|id| listed.contains(id)));
            report.deleted = delete(sqs, &queue.queue_url, &done).await?;
            retry
        }
    };
    report.failed = report.received - report.deleted;
    if let Some(seconds) = queue.retry_visibility_seconds {
        let handles = to_retry
            .iter()
            .filter_map(|m| m.receipt_handle().map(str::to_owned))
            .collect();
        retry_after(sqs, &queue.queue_url, handles, seconds).await;
    }
    Ok(report)
}

/// How long past the retry delay a held message stays invisible if the bridge
/// never releases it.
pub const HOLD_MARGIN_SECONDS: i32 = 30;

/// Makes the messages behind `handles` visible again in `seconds` (see
/// [`poll_once`]).
async fn retry_after(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    handles: Vec<String>,
    seconds: i32,
) {
    if handles.is_empty() {
        return;
    }
    if seconds == 0 {
        change_visibility(sqs, queue_url, &handles, 0).await;
        return;
    }
    let hold = seconds.saturating_add(HOLD_MARGIN_SECONDS).min(43_200);
    change_visibility(sqs, queue_url, &handles, hold).await;
    let sqs = sqs.clone();
    let queue_url = queue_url.to_owned();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(seconds.unsigned_abs().into())).await;
        change_visibility(&sqs, &queue_url, &handles, 0).await;
    });
}

/// Deletes `messages` (≤ 10, one batch call); returns how many SQS deleted.
async fn delete(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: &[&Message],
) -> Result<usize, BridgeError> {
    let entries: Vec<DeleteMessageBatchRequestEntry> = messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("m{i}"))
                .receipt_handle(m.receipt_handle()?)
                .build()
                .ok()
        })
        .collect();
    if entries.is_empty() {
        return Ok(0);
    }
    let output = sqs
        .delete_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(entries))
        .send()
        .await
        .map_err(|e| BridgeError::Delete(DisplayErrorContext(e).to_string()))?;
    if !output.failed().is_empty() {
        let codes: HashSet<&str> = output.failed().iter().map(|f| f.code()).collect();
        warn!(
            count = output.failed().len(),
            codes = ?codes,
            "SQS refused some deletes; those messages will be redelivered"
        );
    }
    Ok(output.successful().len())
}

/// Sets the visibility timeout of the messages behind `handles`, in order (one
/// batch call). Best effort: if it fails they come back after the queue's own
/// timeout, which is still correct, only slower.
async fn change_visibility(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    handles: &[String],
    seconds: i32,
) {
    let entries: Vec<ChangeMessageVisibilityBatchRequestEntry> = handles
        .iter()
        .enumerate()
        .filter_map(|(i, handle)| {
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id(format!("m{i}"))
                .receipt_handle(handle)
                .visibility_timeout(seconds)
                .build()
                .ok()
        })
        .collect();
    if entries.is_empty() {
        return;
    }
    match sqs
        .change_message_visibility_batch()
        .queue_url(queue_url)
        .set_entries(Some(entries))
        .send()
        .await
    {
        Ok(output) if !output.failed().is_empty() => warn!(
            count = output.failed().len(),
            "could not change the visibility of some messages to retry"
        ),
        Ok(_) => {}
        Err(e) => warn!(
            error = %DisplayErrorContext(e),
            "could not change the visibility of the messages to retry"
        ),
    }
}
