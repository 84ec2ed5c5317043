//! The SQS FIFO adapter of the channel's [`Inbox`]: the webhook's queue to the
//! worker. The message group is the conversation and the de-duplication id the
//! message, both hashed (a group id shows in the console and a WhatsApp message id
//! encodes the sender's number). SQS de-duplicates only for five minutes; the
//! inbound record is what makes a message "once".

use async_trait::async_trait;
use degrau::jobs::EnqueueError;
use degrau::store::ContactKey;
use degrau::whatsapp::WaMessageId;
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
pub fn message_group_id(key: &ContactKey) -> String {
    sha256_hex(&format!("T#{}#C#{}", key.tenant, key.contact))
}

/// The de-duplication id of a message: hex SHA-256 of `WA#{message id}`.
pub fn deduplication_id(id: &WaMessageId) -> String {
    sha256_hex(&format!("WA#{id}"))
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
            .message_group_id(message_group_id(key))
            .message_deduplication_id(deduplication_id(id))
            .send()
            .await
            .map_err(|e| EnqueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::domain::{ContactId, Incarnation, TenantId};

    #[test]
    fn groups_and_deduplication_ids_are_hashes_that_name_no_one() {
        let key = ContactKey {
            tenant: TenantId::parse("barber").unwrap(),
            contact: ContactId::parse("15550000001").unwrap(),
        };
        let id = WaMessageId::parse("wamid.HBgLMTU1NTAwMDAwMDE=").unwrap();
        let group = message_group_id(&key);
        let dedup = deduplication_id(&id);
        assert_eq!(group, sha256_hex("T#barber#C#15550000001"));
        assert_eq!((group.len(), dedup.len()), (64, 64));
        assert!(!group.contains("1555") && !dedup.contains("HBgL"));
        let other = WaMessageId::parse("wamid.other").unwrap();
        assert_ne!(deduplication_id(&other), dedup);
    }

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
