//! The SQS FIFO adapter of the channel's [`Inbox`]: the webhook's queue to the
//! worker. The message group is the conversation and the de-duplication id the
//! message, both hashed (a group id shows in the console and a WhatsApp message id
//! encodes the sender's number). SQS de-duplicates only for five minutes; the
//! inbound record is what makes a message "once".

use async_trait::async_trait;
use degrau::jobs::EnqueueError;
use degrau::whatsapp::inbox::{Inbox, QueuedMessage};
use sha2::{Digest, Sha256};

/// Sends the worker's messages to an SQS FIFO queue.
#[derive(Debug, Clone)]
pub struct SqsInbox {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsInbox {
    /// An adapter sending to `queue_url` (`WHATSAPP_QUEUE_URL`).
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        SqsInbox {
            client,
            queue_url: queue_url.into(),
        }
    }
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The message group of a conversation: hex SHA-256 of `T#{tenant}#C#{contact}`.
pub fn message_group_id(message: &QueuedMessage) -> String {
    sha256_hex(&format!("T#{}#C#{}", message.tenant, message.contact))
}

/// The de-duplication id of a message: hex SHA-256 of `WA#{message id}`.
pub fn deduplication_id(message: &QueuedMessage) -> String {
    sha256_hex(&format!("WA#{}", message.message))
}

#[async_trait]
impl Inbox for SqsInbox {
    async fn enqueue(&self, message: &QueuedMessage) -> Result<(), EnqueueError> {
        let body = serde_json::to_string(message).map_err(|e| EnqueueError(e.to_string()))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_group_id(message_group_id(message))
            .message_deduplication_id(deduplication_id(message))
            .send()
            .await
            .map_err(|e| EnqueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::domain::{ContactId, TenantId};
    use degrau::whatsapp::WaMessageId;

    #[test]
    fn groups_and_deduplication_ids_are_hashes_that_name_no_one() {
        let message = QueuedMessage {
            tenant: TenantId::parse("barber").unwrap(),
            contact: ContactId::parse("15550000001").unwrap(),
            message: WaMessageId::parse("wamid.HBgLMTU1NTAwMDAwMDE=").unwrap(),
        };
        let group = message_group_id(&message);
        let dedup = deduplication_id(&message);
        assert_eq!(group, sha256_hex("T#barber#C#15550000001"));
        assert_eq!((group.len(), dedup.len()), (64, 64));
        assert!(!group.contains("1555") && !dedup.contains("HBgL"));
        let other = QueuedMessage {
            message: WaMessageId::parse("wamid.other").unwrap(),
            ..message.clone()
        };
        assert_eq!(
            message_group_id(&other),
            group,
            "one group per conversation"
        );
        assert_ne!(deduplication_id(&other), dedup);
    }
}
