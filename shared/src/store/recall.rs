//! What recall needs of the store: a closed session's whole text read once (to
//! index it), its index and text written under the head's incarnation, and the
//! reads of a recall: every index of the contact (one query), then the text and
//! the record of the sessions it returns (one batch read).

use async_trait::async_trait;

use super::{ContactKey, StoreError};
use crate::domain::{Incarnation, StoredMessage};
use crate::plan::recall::SessionRecord;
use crate::plan::recall::index::{SessionIndex, SessionText};

/// Most bytes of index items one recall reads (one DynamoDB query page): the
/// newest sessions' indexes, about 150 to 250 sessions of 20 to 40 exchanges. A
/// contact with more has its oldest sessions left out of recall (still in the
/// transcript until their retention); `docs/DESIGN.md`, "Recall".
pub const MAX_INDEX_READ_BYTES: usize = 1_000_000;

/// Most messages of a closed session read to index it (a session this long is
/// indexed from its first messages).
pub const MAX_INDEXED_MESSAGES: usize = 2_000;

/// What recall reads and writes.
#[async_trait]
pub trait RecallStore: Send + Sync {
    /// The live messages of `session`, oldest first (at most
    /// [`MAX_INDEXED_MESSAGES`]), with the latest expiry among them (`None` when
    /// none is left).
    async fn session_messages(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<(Vec<StoredMessage>, Option<i64>), StoreError>;

    /// Writes a closed session's index, and its text when given, expiring at
    /// `expires_at`, while the head still has `incarnation`; false (nothing
    /// written) otherwise. A second write of the same session replaces the first
    /// (the index with its search summary, the text left as written).
    async fn save_session_index(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        index: &SessionIndex,
        text: Option<&SessionText>,
        expires_at: i64,
    ) -> Result<bool, StoreError>;

    /// The contact's session indexes, newest first, within
    /// [`MAX_INDEX_READ_BYTES`]; an index past its expiry is gone to this read.
    async fn session_indexes(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<SessionIndex>, StoreError>;

    /// What is still stored of `sessions` to show them (their texts and their
    /// archives' records), one entry a session, in the order asked.
    async fn found_sessions(
        &self,
        key: &ContactKey,
        sessions: &[u32],
        now: i64,
    ) -> Result<Vec<FoundSession>, StoreError>;
}

/// What a recall shows of a session it found, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoundSession {
    /// The session's number.
    pub session: u32,
    /// Its lines, for the passages (`None` once gone).
    pub text: Option<SessionText>,
    /// Its archive's record (`None` once gone).
    pub record: Option<SessionRecord>,
}
