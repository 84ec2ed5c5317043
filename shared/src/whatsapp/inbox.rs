//! The `Inbox` port: the inbound FIFO queue between the webhook and the worker,
//! and [`QueuedMessage`], the body the worker reads. The SQS adapter
//! (`degrau-adapters`, `whatsapp/inbox.rs`) sends it with the conversation as the
//! message group (hashed: a group id shows in the console and names no one) and the
//! message as the de-duplication id (hashed too: a WhatsApp message id encodes the
//! sender's number).
//!
//! The body names the contact (its WhatsApp id), since the worker must find the
//! record in the contact's partition; it holds no text. It lives as long as the
//! queue keeps it (4 days; the dead-letter queue 14), and once the contact is erased
//! it finds no record and does nothing.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::WaMessageId;
use crate::domain::{ContactId, TenantId};
use crate::jobs::EnqueueError;
use crate::store::ContactKey;

/// One queue message: a recorded inbound message to make a turn of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuedMessage {
    /// The tenant bound to the business number.
    pub tenant: TenantId,
    /// The customer (their WhatsApp id).
    pub contact: ContactId,
    /// The message's record.
    pub message: WaMessageId,
}

impl QueuedMessage {
    /// The contact's key.
    pub fn key(&self) -> ContactKey {
        ContactKey {
            tenant: self.tenant.clone(),
            contact: self.contact.clone(),
        }
    }
}

/// The inbound queue.
#[async_trait]
pub trait Inbox: Send + Sync {
    /// Sends one message to the worker.
    async fn enqueue(&self, message: &QueuedMessage) -> Result<(), EnqueueError>;
}
