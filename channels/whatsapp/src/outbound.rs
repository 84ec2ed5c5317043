//! The `Sender` port: one message out through the Graph API (`POST
//! /{phone-number-id}/messages`). The adapter (`degrau-adapters`,
//! `whatsapp/graph.rs`) retries 429 and 5xx answers within the deadline it is given,
//! honouring `Retry-After`; what it answers here is final for this attempt.

use async_trait::async_trait;

use super::{PhoneNumberId, WaId, WaMessageId};
use crate::settings::TemplateRef;
use degrau::deadline::Deadline;

/// The Graph API's error code for a free-form message outside the customer service
/// window ("re-engagement message").
pub const OUTSIDE_WINDOW_CODE: i64 = 131_047;

/// One message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboundMessage<'a> {
    /// Free text (at most [`super::MAX_OUTBOUND_CHARS`] characters).
    Text(&'a str),
    /// An approved template without parameters.
    Template(&'a TemplateRef),
}

/// Why a message did not go out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Meta refused free text because the customer service window is closed
    /// ([`OUTSIDE_WINDOW_CODE`]).
    #[error("outside the customer service window (131047)")]
    OutsideWindow,
    /// Meta refused the message for good (a bad token, a bad recipient, a
    /// template that does not exist…): trying again would not help.
    #[error("refused by the Graph API (HTTP {status}, code {code:?})")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The Graph API's error code, when it gave one.
        code: Option<i64>,
    },
    /// Rate limited, a 5xx or no answer, still after the retries that fit the
    /// deadline: a later delivery may succeed.
    #[error("the Graph API is unavailable: {0}")]
    Unavailable(String),
}

/// Sends messages.
#[async_trait]
pub trait Sender: Send + Sync {
    /// Sends `message` from the business number `from` to the customer `to`, by
    /// `deadline` (retries included); answers the sent message's id when the Graph
    /// API gave one (its status callbacks name it).
    async fn send(
        &self,
        from: &PhoneNumberId,
        to: &WaId,
        message: OutboundMessage<'_>,
        deadline: Deadline,
    ) -> Result<Option<WaMessageId>, SendError>;

    /// Marks the customer's message `message` (sent to `from`) read and shows the
    /// typing indicator, by `deadline`. WhatsApp dismisses the indicator at the
    /// next message from the business or after 25 seconds.
    async fn mark_read(
        &self,
        from: &PhoneNumberId,
        message: &WaMessageId,
        deadline: Deadline,
    ) -> Result<(), SendError>;
}
