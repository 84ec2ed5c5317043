//! The `WhatsAppStore` port: the binding of a business number to its tenant, and
//! the channel's records in the contact's partition (so erasing the contact erases
//! them too). The DynamoDB adapter (`degrau-adapters`, `dynamodb/whatsapp.rs`) is
//! the production one; the in-memory store implements it as well (behind
//! `test-util`), and one contract holds for both:
//!
//! - **An inbound record per message id**, written once (a conditional put):
//!   [`WhatsAppStore::record_inbound`] tells a new message from a redelivery, and
//!   whether the redelivered one was ever enqueued. Each record gets the contact's
//!   next *arrival* number, the order turns are made in.
//! - **Records move forward only**: `pending` → `taken` by one turn → `handled` by
//!   it, each move conditioned on the state before, so two workers never take one
//!   record and a record is never answered twice. [`WhatsAppStore::take`] writes
//!   the turn with its records' move, [`WhatsAppStore::settle`] the reply to send
//!   with theirs, each in one transaction.
//! - **Nothing after an erase**: every write but the first put is conditioned on
//!   its item existing, so a worker in flight across an erase writes nothing back.
//! - Records and turns carry a TTL ([`super::RECORD_TTL_SECONDS`]); reads treat one
//!   past it as gone.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::keyed::Tombstone;
use super::records::{AudioRef, VoiceTurn};
use super::{PhoneNumberId, WaMessageId};
use crate::settings::TemplateRef;
use degrau::domain::{Incarnation, TenantId};
use degrau::store::{ContactKey, StoreError};

pub use super::records::DeliveryRecord;
pub use super::records::{Handoff, HandoffBy};

/// Most records one turn takes (and so one transaction moves, with the turn): a
/// longer burst makes more turns.
pub const MAX_TURN_MESSAGES: usize = 20;

/// Most unhandled records one read returns, oldest arrival first.
pub const MAX_UNHANDLED: usize = 100;

/// An inbound message to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInbound {
    /// Its id.
    pub id: WaMessageId,
    /// The record's incarnation: a random id its queue message names it by
    /// ([`super::inbox::QueuedMessage`]); `None` on a record from before records
    /// had one.
    pub incarnation: Option<Incarnation>,
    /// The business number it was sent to (the reply goes out from it).
    pub phone_number_id: PhoneNumberId,
    /// Its text in the turn.
    pub text: String,
    /// True for a bare media note (`[audio]`).
    pub bare_note: bool,
    /// True for an echo: a person of the business wrote it to the customer.
    pub by_business: bool,
    /// A voice note's media (its id and type, never its bytes): the worker
    /// transcribes it ([`super::voice`]).
    pub audio: Option<AudioRef>,
    /// When the webhook received it, seconds since the epoch.
    pub received_at: i64,
    /// TTL.
    pub expires_at: i64,
    /// Its tombstone (a keyed hash of the tenant and the message id, naming no
    /// one): what an erase of the contact leaves of it, so a redelivery after the
    /// erase is recognised ([`Recorded::Erased`]); `None` on records from before.
    pub tombstone: Option<Tombstone>,
}

/// Where a record stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordState {
    /// Waiting for a turn.
    Pending,
    /// Taken by a turn not settled yet.
    Taken(TurnId),
    /// Its turn's reply is recorded (sent, or to be sent).
    Handled(TurnId),
}

/// An inbound record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundRecord {
    /// The message as recorded.
    pub message: NewInbound,
    /// The contact's arrival number: turns take records in this order.
    pub arrival: u64,
    /// Where it stands.
    pub state: RecordState,
    /// True once its queue message was sent.
    pub enqueued: bool,
}

/// What [`WhatsAppStore::record_inbound`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// A new message: recorded now.
    New,
    /// A message whose contact was erased since it was first delivered (its
    /// tombstone is kept for [`super::RECORD_TTL_SECONDS`]): nothing recorded.
    Erased,
    /// A redelivery: the record exists, enqueued or not.
    Existing {
        /// Whether its queue message was sent.
        enqueued: bool,
        /// The record's incarnation (what a queue message names it by).
        incarnation: Option<Incarnation>,
    },
}

/// A turn's id: 64 hex digits, the SHA-256 of its message ids in order. It is the
/// `Idempotency-Key` of the turn's ask, so a retried delivery replays the answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TurnId(String);

impl TurnId {
    /// The id of a turn of `messages` (in arrival order).
    pub fn of(messages: &[WaMessageId]) -> TurnId {
        let mut hash = Sha256::new();
        for id in messages {
            hash.update(id.as_str().as_bytes());
            hash.update(b"\n");
        }
        TurnId(hex::encode(hash.finalize()))
    }

    /// The 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TurnId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        if value.len() == 64 && value.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
            Ok(TurnId(value))
        } else {
            Err("a turn id is 64 lowercase hex digits".into())
        }
    }
}

impl From<TurnId> for String {
    fn from(value: TurnId) -> String {
        value.0
    }
}

/// What a turn sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outgoing {
    /// The reply, in parts of at most [`super::MAX_OUTBOUND_CHARS`] characters.
    Text {
        /// The parts, in order.
        parts: Vec<String>,
        /// The transcript message the reply is (its delivery state is shown on
        /// it); absent on turns from before, and on a media reply.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_at: Option<(u32, u64)>,
    },
    /// The tenant's template (the window was closed).
    Template {
        /// Which one.
        template: TemplateRef,
    },
    /// Nothing (the window was closed and the tenant has no template, or the turn
    /// could not be answered).
    Nothing {
        /// Why, for logs and metrics.
        reason: String,
    },
}

impl Outgoing {
    /// How many messages it sends.
    pub fn len(&self) -> usize {
        match self {
            Outgoing::Text { parts, .. } => parts.len(),
            Outgoing::Template { .. } => 1,
            Outgoing::Nothing { .. } => 0,
        }
    }

    /// True when it sends nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where a turn stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnStatus {
    /// Taken, not answered yet (or its answer not recorded yet).
    Taken,
    /// The reply is recorded: `sent` of its messages went out.
    Sending {
        /// What to send.
        outgoing: Outgoing,
        /// How many of its messages went out.
        sent: usize,
    },
    /// Everything went out (or nothing could).
    Done {
        /// What it sent.
        outgoing: Outgoing,
    },
}

/// A turn: the records it took, their joined text, and what it sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRecord {
    /// Its id.
    pub id: TurnId,
    /// The business number the reply goes out from.
    pub phone_number_id: PhoneNumberId,
    /// The records it took, in arrival order.
    pub messages: Vec<WaMessageId>,
    /// Their texts, one a line: the user message of the ask.
    pub text: String,
    /// True when every record is a bare media note.
    pub bare_notes: bool,
    /// True for a turn a person of the business answered (it holds their echoes):
    /// recorded in the transcript, never asked of the model.
    pub by_person: bool,
    /// What its voice notes came to; `None` when it has none heard (or
    /// speech-to-text is off).
    pub voice: Option<VoiceTurn>,
    /// The latest of its records' receive times: the customer service window runs
    /// from it.
    pub last_inbound_at: i64,
    /// Where it stands.
    pub status: TurnStatus,
    /// TTL.
    pub expires_at: i64,
}

/// The channel's storage.
#[async_trait]
pub trait WhatsAppStore: Send + Sync {
    /// The tenant bound to a business number, if any.
    async fn binding(&self, phone: &PhoneNumberId) -> Result<Option<TenantId>, StoreError>;

    /// Binds a business number to a tenant (replacing any binding).
    async fn bind(&self, phone: &PhoneNumberId, tenant: &TenantId) -> Result<(), StoreError>;

    /// Records an inbound message unless its record exists (a redelivery) or its
    /// tombstone does (its contact was erased since), giving a new one the
    /// contact's next arrival number. An erase of the contact
    /// ([`degrau::store::RecordStore::erase_contact`]) leaves each record's
    /// tombstone for [`super::RECORD_TTL_SECONDS`].
    async fn record_inbound(
        &self,
        key: &ContactKey,
        message: &NewInbound,
    ) -> Result<Recorded, StoreError>;

    /// The record a queue message names: its contact and message id, found by the
    /// record's incarnation among `tenant`'s; `None` when no record has it (erased,
    /// expired, or not yet visible: the lookup may trail a write by a moment).
    async fn find_inbound(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<(ContactKey, WaMessageId)>, StoreError>;

    /// Marks a record enqueued; `Ok(false)` when it is gone (erased).
    async fn mark_enqueued(&self, key: &ContactKey, id: &WaMessageId) -> Result<bool, StoreError>;

    /// One record (strongly consistent), `None` when absent or past its TTL.
    async fn inbound(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        now: i64,
    ) -> Result<Option<InboundRecord>, StoreError>;

    /// The contact's records not handled yet (pending or taken), by arrival, at
    /// most [`MAX_UNHANDLED`].
    async fn unhandled(&self, key: &ContactKey, now: i64)
    -> Result<Vec<InboundRecord>, StoreError>;

    /// Writes `turn` (status taken) and moves its records from pending to taken by
    /// it, at once (at most [`MAX_TURN_MESSAGES`] records); `Ok(false)`, nothing
    /// written, when one of them is no longer pending (or gone).
    async fn take(&self, key: &ContactKey, turn: &TurnRecord) -> Result<bool, StoreError>;

    /// A turn (strongly consistent), `None` when absent or past its TTL.
    async fn turn(
        &self,
        key: &ContactKey,
        id: &TurnId,
        now: i64,
    ) -> Result<Option<TurnRecord>, StoreError>;

    /// Records what the turn sends and moves its records from taken to handled, at
    /// once; `Ok(false)`, nothing written, when the turn is not taken any more (or
    /// gone).
    async fn settle(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        outgoing: &Outgoing,
    ) -> Result<bool, StoreError>;

    /// Who has the contact's conversation: a person until [`Handoff::until`], or
    /// the agent (`None`, also once that time passed).
    async fn handoff(&self, key: &ContactKey, now: i64) -> Result<Option<Handoff>, StoreError>;

    /// Hands the contact's conversation to a person (`Some`, replacing any
    /// handoff), or back to the agent (`None`).
    async fn set_handoff(
        &self,
        key: &ContactKey,
        handoff: Option<&Handoff>,
    ) -> Result<(), StoreError>;

    /// Keeps a reply's delivery record (once: a redelivery leaves it as it is).
    async fn record_delivery(
        &self,
        key: &ContactKey,
        record: &DeliveryRecord,
    ) -> Result<(), StoreError>;

    /// Moves the delivery record of the sent message `id` to `status` (with the
    /// failure's `error_code`) when that is further along ([`super::records::rank`]);
    /// `Ok(false)` when there is no record or it is as far already.
    async fn update_delivery(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        status: &str,
        error_code: Option<i64>,
        now: i64,
    ) -> Result<bool, StoreError>;

    /// The contact's delivery records, in no particular order; those past their TTL
    /// are left out.
    async fn deliveries(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<DeliveryRecord>, StoreError>;

    /// Records that `sent` of the turn's messages went out (`done`: all of them, or
    /// all that could); `Ok(false)` when the turn is gone.
    async fn mark_sent(
        &self,
        key: &ContactKey,
        turn: &TurnId,
        sent: usize,
        done: bool,
    ) -> Result<bool, StoreError>;
}

/// Refuses a turn no single transaction may hold, or that names a record twice.
pub fn validate_turn(turn: &TurnRecord) -> Result<(), StoreError> {
    if turn.messages.is_empty() || turn.messages.len() > MAX_TURN_MESSAGES {
        return Err(StoreError::Other(format!(
            "a turn takes 1 to {MAX_TURN_MESSAGES} records, not {}",
            turn.messages.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    if !turn.messages.iter().all(|id| seen.insert(id)) {
        return Err(StoreError::Other("a turn names a record twice".into()));
    }
    Ok(())
}
