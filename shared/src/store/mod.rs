//! The `Store` port: everything degrau keeps about a contact, behind one narrow
//! trait, with a DynamoDB adapter for production and an in-memory one for unit
//! tests. One contract suite (`tests/` of the workspace) runs against both.
//!
//! Key layout (inside the adapters only): one table, `pk`/`sk` strings.
//!
//! | item | pk | sk |
//! |---|---|---|
//! | tenant config | `T#{tenant}` | `CONFIG` |
//! | contact head | `T#{tenant}#C#{contact}` | `HEAD` |
//! | fact | `T#{tenant}#C#{contact}` | `FACT#{key}` |
//! | message | `T#{tenant}#C#{contact}` | `S#{session:06}#M#{seq:08}` |
//! | idempotency | `T#{tenant}#C#{contact}` | `REQ#{key}` |

pub mod dynamo;
pub mod memory;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::{ContactId, Fact, Head, IdempotencyKey, StoredMessage, TenantId};

/// One contact of one tenant: the partition every item about the contact lives in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContactKey {
    /// The tenant, from the verified JWT claim.
    pub tenant: TenantId,
    /// The contact, from the URL.
    pub contact: ContactId,
}

/// What `ask` reads before a turn: bounded by the window, never by the history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnState {
    /// The head, or `None` for a contact never seen.
    pub head: Option<Head>,
    /// The contact's facts (expired ones filtered out).
    pub facts: Vec<Fact>,
    /// The head session's messages after `summarized_until`, oldest first.
    pub window: Vec<StoredMessage>,
}

/// A round to commit in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundCommit {
    /// Whose round.
    pub key: ContactKey,
    /// The head as loaded (`None` for a new contact): the commit succeeds only if
    /// the stored head still has this session and `last_seq`.
    pub expected: Option<Head>,
    /// The new head. Only the fields `ask` owns are written (session, last_seq,
    /// last context tokens, last activity; and, when the session changes, the reset
    /// of summary, summarized_until and steps), so a compaction step applied
    /// meanwhile is kept.
    pub head: Head,
    /// The round's messages, with dense sequence numbers following `expected`.
    pub messages: Vec<StoredMessage>,
    /// The idempotency record to mark completed, with the response to replay.
    pub idempotency: Option<CompletedRequest>,
}

/// A completed idempotent request: the key and the response to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedRequest {
    /// The client's key.
    pub key: IdempotencyKey,
    /// Hash of the request payload, to tell a retry from a different request.
    pub payload_hash: String,
    /// The JSON response body to replay.
    pub response: String,
    /// When the record expires (TTL), seconds since the Unix epoch.
    pub expires_at: i64,
}

/// The outcome of claiming an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key was free (or its record expired, or its holder's lease ran out): the
    /// caller runs the request and completes or releases the key.
    Started,
    /// The request already completed: here is its response.
    Completed {
        /// The stored JSON response body.
        response: String,
    },
    /// Another attempt holds the key now.
    InProgress,
    /// The key was used with another payload.
    Mismatch,
}

/// A page of the transcript.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TranscriptPage {
    /// Messages, oldest first.
    pub messages: Vec<StoredMessage>,
    /// Cursor for the next (older) page: pass it as `before`.
    pub next_before: Option<Cursor>,
}

/// A position in the transcript: a message's session and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cursor {
    /// Session number.
    pub session: u32,
    /// Sequence number within the session.
    pub seq: u64,
}

/// Which sessions a transcript read covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionFilter {
    /// Every session.
    All,
    /// One session.
    Only(u32),
}

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A conditional write lost a race: someone else wrote first.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The service throttled or failed transiently; retrying may succeed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// An item could not be read back into the domain (a bug or a manual edit).
    #[error("corrupt item: {0}")]
    Corrupt(String),
    /// Anything else.
    #[error("storage error: {0}")]
    Other(String),
}

/// Everything degrau keeps, behind one port.
#[async_trait]
pub trait Store: Send + Sync {
    /// The head, the facts and the window of the head's session: what a turn needs.
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError>;

    /// The head and facts only (the memory view, and the compactor's first read).
    async fn load_memory(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError>;

    /// Commits a whole round atomically, or returns [`StoreError::Conflict`] and
    /// writes nothing.
    async fn commit_round(&self, commit: &RoundCommit) -> Result<(), StoreError>;

    /// Claims an idempotency key for one attempt (a lease of `lease_seconds`).
    async fn claim_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Result<Claim, StoreError>;

    /// Releases a claimed key after a failed attempt, so the client may retry.
    async fn release_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
    ) -> Result<(), StoreError>;

    /// A page of the transcript, newest page first, messages oldest first within it.
    async fn transcript(
        &self,
        key: &ContactKey,
        sessions: SessionFilter,
        limit: usize,
        before: Option<Cursor>,
    ) -> Result<TranscriptPage, StoreError>;

    /// Erases every item of the contact; returns how many were deleted.
    async fn erase_contact(&self, key: &ContactKey) -> Result<usize, StoreError>;
}

/// Tenant configuration, read by `ask` at each turn (a single `GetItem`).
#[async_trait]
pub trait TenantStore: Send + Sync {
    /// The tenant's config item, if one was written.
    async fn tenant_config(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<crate::tenant::TenantConfig>, StoreError>;

    /// Writes (replaces) the tenant's config item.
    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &crate::tenant::TenantConfig,
    ) -> Result<(), StoreError>;
}
