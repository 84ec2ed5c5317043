//! What the business reads of a contact and how it is erased: the memory view's
//! head and facts, the transcript a page at a time, the session records recall
//! reads, and the erasure of every item.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{ContactKey, StoreError};
use crate::domain::{Fact, Head, StoredMessage};
use crate::plan::recall::SessionRecord;

/// How many marks of its last erases a tenant keeps (see [`erase_bucket`]).
pub const ERASE_BUCKETS: u8 = 64;

/// Which of its tenant's erase marks a contact's new life checks: one of
/// [`ERASE_BUCKETS`], by a hash of the contact (as the sweep's buckets). A mark holds only a
/// time and names no one (a bucket holds one number in 64 of any numbering plan),
/// yet a new contact's first round meets an unrelated erase only when it falls in
/// the same bucket and began in the same second: then it is answered again, once.
pub fn erase_bucket(key: &ContactKey) -> u8 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("T#{}#C#{}", key.tenant, key.contact).as_bytes());
    digest[0] % ERASE_BUCKETS
}

/// What the memory view, the transcript and erasure need.
#[async_trait]
pub trait RecordStore: Send + Sync {
    /// The head and facts only (the memory view, and the compactor's first read).
    /// A head past its `expires_at` is gone to this read (`None`), as DynamoDB's
    /// TTL will make it (and to [`RoundStore::load_turn`](super::RoundStore::load_turn)'s).
    async fn load_memory(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError>;

    /// A page of the transcript, newest page first, messages oldest first within it.
    async fn transcript(
        &self,
        key: &ContactKey,
        sessions: SessionFilter,
        limit: usize,
        before: Option<Cursor>,
    ) -> Result<TranscriptPage, StoreError>;

    /// The contact's session records ([`crate::plan::recall`]), newest first, at most
    /// `limit` (the contact keeps at most [`crate::plan::recall::MAX_RECORDS`]); records
    /// past their TTL are gone to this read.
    async fn session_records(
        &self,
        key: &ContactKey,
        limit: usize,
        now: i64,
    ) -> Result<Vec<SessionRecord>, StoreError>;

    /// Erases every item of the contact; returns how many were deleted. `now` is
    /// the erase's time: it becomes the last erase of the contact's
    /// [`erase_bucket`], recorded before the first delete, and a new head's round
    /// ([`RoundCommit::expected`](super::RoundCommit::expected) `None`) that began
    /// at or before it is refused (a conflict), so a round's transaction still in
    /// flight when the erase ran (its caller told it failed, or gone) cannot land
    /// after it and bring the contact back.
    async fn erase_contact(&self, key: &ContactKey, now: i64) -> Result<usize, StoreError>;
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

impl TranscriptPage {
    /// A page from up to `limit + 1` messages read newest first: the first `limit`,
    /// turned oldest first, with a cursor when the extra one shows there is more.
    pub fn from_newest_first(mut newest_first: Vec<StoredMessage>, limit: usize) -> TranscriptPage {
        let more = newest_first.len() > limit;
        newest_first.truncate(limit);
        newest_first.reverse();
        let next_before = more
            .then(|| {
                newest_first.first().map(|oldest| Cursor {
                    session: oldest.session,
                    seq: oldest.seq,
                })
            })
            .flatten();
        TranscriptPage {
            messages: newest_first,
            next_before,
        }
    }
}
