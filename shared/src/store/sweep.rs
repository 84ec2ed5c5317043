//! What the sweep needs: a bucket's due heads from the sweep index, a head given
//! an incarnation when it has none, and the sweep's decision written (or the head
//! moved behind the others) under the condition that the head is as read.

use async_trait::async_trait;

use super::{ContactKey, StoreError};
use crate::domain::Incarnation;
pub use crate::domain::PendingChange;

/// What the session sweep needs.
#[async_trait]
pub trait SweepStore: Send + Sync {
    /// Heads in bucket `bucket` of the sweep index due at or before `due_by`,
    /// earliest first, at most `limit`. Read from a global secondary index, so
    /// eventually consistent: an entry may show its state of a moment ago, which
    /// [`SweepStore::settle_sweep`]'s condition catches.
    async fn due_heads(
        &self,
        bucket: u8,
        due_by: i64,
        limit: usize,
    ) -> Result<Vec<DueHead>, StoreError>;

    /// The head's incarnation, after giving `candidate` to a head that has none (a
    /// head written before incarnations existed); `None` when there is no head.
    async fn ensure_incarnation(
        &self,
        key: &ContactKey,
        candidate: &Incarnation,
    ) -> Result<Option<Incarnation>, StoreError>;

    /// Writes what the sweep decided on a head, under the condition that the head
    /// is still as it read it (see [`SweepSettle`]). `Ok(false)` when it is not (a
    /// round, an erase, another sweep or a facts job came first): nothing is
    /// written.
    async fn settle_sweep(
        &self,
        key: &ContactKey,
        settle: &SweepSettle,
    ) -> Result<bool, StoreError>;

    /// Moves the head's sweep entry from `due` to `next_due`, under the condition
    /// that it is still at `due` (the sweep could not handle a head it could not
    /// read: it goes behind the others instead of first in every run). Nothing
    /// else changes; `Ok(false)` when the entry moved meanwhile or is gone.
    async fn defer_sweep(
        &self,
        key: &ContactKey,
        due: i64,
        next_due: i64,
    ) -> Result<bool, StoreError>;
}

/// A head found due in the sweep index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueHead {
    /// The contact.
    pub key: ContactKey,
    /// When its entry said it was due (`sweep_sk`).
    pub due: i64,
}

/// What the sweep writes on a head it looked at, under the condition that the head
/// is still as it read it: the same incarnation and `last_activity` (no round
/// since), the same due time (no other sweep since) and the same pending
/// extraction (no facts job finished since).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSettle {
    /// The incarnation read.
    pub incarnation: Incarnation,
    /// The `last_activity` read.
    pub last_activity: i64,
    /// The due time read (`sweep_sk`).
    pub due: i64,
    /// When the pending extraction read was requested (`None`: none was pending).
    pub pending_since: Option<i64>,
    /// Sets `facts_requested` (the sweep requested this session's extraction).
    pub facts_requested: Option<u32>,
    /// What becomes of the pending extraction.
    pub pending: PendingChange,
    /// The next due time, or `None` to take the head out of the index.
    pub next_due: Option<i64>,
}
