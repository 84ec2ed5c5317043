//! The SQS FIFO adapter of the channel's [`Inbox`]: the webhook's queue to the
//! worker. The message group is the conversation and the de-duplication id the
//! message, each a keyed hash ([`ChannelKeys`], under a key derived from the
//! deployment's pseudonym secret): a group id shows in the console and stays in the
//! dead-letter queue, and neither a number nor a WhatsApp message id (which encodes
//! the sender's number) can be recovered from it by hashing the numbering plan.
//! SQS de-duplicates only for five minutes; the inbound record is what makes a
//! message "once".

use std::sync::Arc;

use crate::WaMessageId;
use crate::inbox::{Hold, Inbox, QueuedMessage};
use crate::keyed::ChannelKeys;
use async_trait::async_trait;
use degrau::jobs::EnqueueError;
use degrau::store::ContactKey;

/// Sends the worker's messages to an SQS FIFO queue.
#[derive(Debug, Clone)]
pub struct SqsInbox {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    keys: Arc<ChannelKeys>,
}

impl SqsInbox {
    /// An adapter sending to `queue_url` (`WHATSAPP_QUEUE_URL`), naming groups and
    /// messages under `keys`.
    pub fn new(
        client: aws_sdk_sqs::Client,
        queue_url: impl Into<String>,
        keys: Arc<ChannelKeys>,
    ) -> Self {
        SqsInbox {
            client,
            queue_url: queue_url.into(),
            keys,
        }
    }
}

#[async_trait]
impl Inbox for SqsInbox {
    async fn enqueue(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        body: &QueuedMessage,
    ) -> Result<(), EnqueueError> {
        let body = serde_json::to_string(body).map_err(|e| EnqueueError(e.to_string()))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_group_id(self.keys.group_id(key))
            .message_deduplication_id(self.keys.deduplication_id(id))
            .send()
            .await
            .map_err(|e| EnqueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }
}

/// The SQS side of a held message ([`Hold`]): `ChangeMessageVisibility` on its
/// receipt, or a fresh `SendMessage` to its group (a random de-duplication id: the
/// copy must not be taken for the original within SQS's five minutes).
#[derive(Debug, Clone)]
pub struct SqsHold {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsHold {
    /// The holds of the queue at `queue_url` (`WHATSAPP_QUEUE_URL`).
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        SqsHold {
            client,
            queue_url: queue_url.into(),
        }
    }
}

#[async_trait]
impl Hold for SqsHold {
    async fn delay(&self, receipt: &str, seconds: u64) -> Result<(), EnqueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(i32::try_from(seconds).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| EnqueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }

    async fn requeue(&self, group: &str, body: &str) -> Result<(), EnqueueError> {
        let dedup = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_group_id(group)
            .message_deduplication_id(dedup)
            .send()
            .await
            .map_err(|e| EnqueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }
}

/// Holds nothing: a worker without `WHATSAPP_QUEUE_URL` leaves a held message to
/// the queue's own visibility timeout.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHold;

#[async_trait]
impl Hold for NoHold {
    async fn delay(&self, _receipt: &str, _seconds: u64) -> Result<(), EnqueueError> {
        Ok(())
    }

    async fn requeue(&self, _group: &str, _body: &str) -> Result<(), EnqueueError> {
        Err(EnqueueError("no queue to send a held message to".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::domain::{Incarnation, TenantId};

    #[test]
    fn the_body_names_the_record_by_its_incarnation_and_no_one() {
        let body = QueuedMessage {
            tenant: TenantId::parse("barber").unwrap(),
            record: Incarnation::random(),
            queued_at: 1_800_000_000,
        };
        let json = serde_json::to_string(&body).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&json)
                .unwrap()
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["queued_at", "record", "tenant"]
        );
        // A body of the old layout (naming the contact) is refused.
        let old = r#"{"tenant": "barber", "contact": "15550000001", "message": "wamid.X"}"#;
        assert!(serde_json::from_str::<QueuedMessage>(old).is_err());
    }
}
