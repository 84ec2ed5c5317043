//! The `Inbox` port: the inbound FIFO queue between the webhook and the worker,
//! and [`QueuedMessage`], the body the worker reads. The SQS adapter
//! (`degrau-adapters`, `whatsapp/inbox.rs`) sends it with the conversation as the
//! message group (hashed: a group id shows in the console and names no one) and the
//! message as the de-duplication id (hashed too: a WhatsApp message id encodes the
//! sender's number).
//!
//! The body names no one: it carries the tenant and the inbound record's
//! *incarnation*, a random id the record gets when it is written, never reused, as
//! jobs carry a head's. The worker finds the record through the incarnation index,
//! in the contact's partition, so an erase (or the record's TTL) takes the only
//! link from a queued message to the contact: a message still in the queue (4
//! days) or the dead-letter queue (14) then finds no one and does nothing, and no
//! queue ever holds a phone number or a message id.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::WaMessageId;
use degrau::domain::{Incarnation, TenantId};
use degrau::jobs::EnqueueError;
use degrau::store::ContactKey;

/// One queue message: a recorded inbound message to make a turn of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuedMessage {
    /// The tenant bound to the business number.
    pub tenant: TenantId,
    /// The inbound record's incarnation.
    pub record: Incarnation,
    /// When the webhook enqueued it (seconds since the epoch): a record the index
    /// does not show yet is waited for while the message is young.
    pub queued_at: i64,
}

/// The inbound queue.
#[async_trait]
pub trait Inbox: Send + Sync {
    /// Sends one message to the worker: `body`, grouped by `key`'s conversation and
    /// de-duplicated by the message `id` (both hashed, never sent in clear).
    async fn enqueue(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        body: &QueuedMessage,
    ) -> Result<(), EnqueueError>;
}

/// What the worker does with a queue message whose turn a limit holds back
/// ([`super::worker::WorkerError::Held`]): it waits in the queue until the limit
/// may allow it, instead of failing its way through the queue's receives into the
/// dead-letter queue.
#[async_trait]
pub trait Hold: Send + Sync {
    /// Hides the received message (by its receipt handle) for `seconds`: it comes
    /// back then. It still counts a receive.
    async fn delay(&self, receipt: &str, seconds: u64) -> Result<(), EnqueueError>;

    /// Sends `body` again to the message group `group`, fresh (its receive count
    /// starts over): for a message held so often that its next receive would send
    /// it to the dead-letter queue. The inbound record makes a copy harmless.
    async fn requeue(&self, group: &str, body: &str) -> Result<(), EnqueueError>;
}
