//! The `Store` port: everything degrau keeps about a contact, behind one narrow
//! trait. The DynamoDB adapter (crate `degrau-adapters`, `dynamodb/`) is the one
//! production uses; the in-memory one (`crate::memory`, behind the `test-util`
//! feature) serves unit tests. One contract suite (`tests/`) runs against both.
//!
//! What the port promises, whatever the adapter:
//!
//! - **Bounded reads.** [`Store::load_turn`] reads the head, the facts and the
//!   head session's messages after `summarized_until` and up to `last_seq`: never
//!   the folded history, and never a round that landed after the head was read.
//!   The two reads are not one snapshot (DynamoDB's Query is not a transactional
//!   read): a round landing between them can leave the window short of `last_seq`,
//!   which `ask` reads again.
//! - **Whole rounds.** [`Store::commit_round`] writes a round's messages, the head
//!   and the idempotency record at once, under the condition that the head is as
//!   loaded, or writes nothing and answers [`StoreError::Conflict`].
//! - **Conditioned jobs.** A step, a fact batch, the sweep's mark and a refresh
//!   write only while the head still has the incarnation they were made for
//!   (`Ok(false)` otherwise: nothing written).
//! - **The sweep.** Every round files its head, by [`SweepSlot`], under one of
//!   `SWEEP_BUCKETS` buckets ([`sweep_bucket`]) at the time it is next *due*: when
//!   its session goes idle by its tenant's timeout, or sooner when a requested fact
//!   extraction should be checked on. [`Store::due_heads`] reads one bucket's due
//!   heads, earliest first, so heads not due yet are never read and cannot crowd
//!   out the ones that are; [`Store::settle_sweep`] moves a head to its next due
//!   time, or takes it out until its next round puts it back.
//! - **Jobs find their contact by incarnation.** A job names the contact only by
//!   the head's incarnation (see [`Head::incarnation`]); [`Store::find_contact`]
//!   finds the head that has it, and finds nothing once the contact is erased.
//! - **Expiry.** Messages, archives, facts and heads carry a TTL; reads treat an
//!   item past it as gone, as the real TTL eventually makes it, and a round's
//!   writes replace an item past it (the TTL deletes in any order and days late).
//!
//! How the DynamoDB adapter lays this out in one table (keys, the sweep and
//! incarnation indexes) is its own business: see its `keys.rs`, and
//! `docs/DESIGN.md` ("Key layout").

use std::collections::HashSet;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::{
    ContactId, Fact, FactKey, Head, IdempotencyKey, Incarnation, PendingFacts, StoredMessage,
    TenantId,
};

/// One contact of one tenant: the partition every item about the contact lives in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContactKey {
    /// The tenant, from the verified JWT claim.
    pub tenant: TenantId,
    /// The contact, from the URL.
    pub contact: ContactId,
}

/// Where a round puts its head in the sweep index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSlot {
    /// The bucket, [`crate::sweep::sweep_bucket`] of the contact.
    pub bucket: u8,
    /// When the head is due (`sweep_sk`), seconds since the epoch.
    pub due: i64,
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

/// A change to [`Head::facts_pending`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingChange {
    /// Left as it is.
    Keep,
    /// Set (a request made now).
    Set(PendingFacts),
    /// Removed (given up on).
    Clear,
}

/// What `ask` reads before a turn: bounded by the window, never by the history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnState {
    /// The head, or `None` for a contact never seen.
    pub head: Option<Head>,
    /// The contact's facts (expired ones filtered out).
    pub facts: Vec<Fact>,
    /// The head session's messages after `summarized_until` and up to the head's
    /// `last_seq`, oldest first, from the first safe start after the last hole when
    /// one went missing (see [`crate::window::after_last_gap`]); messages past
    /// their TTL count as gone.
    pub window: Vec<StoredMessage>,
    /// The TTL of each window message, in the same order (`None`: it has none).
    pub window_expires_at: Vec<Option<i64>>,
}

/// A round to commit in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundCommit {
    /// Whose round.
    pub key: ContactKey,
    /// The head as loaded (`None` for a new contact): the commit succeeds only if
    /// the stored head still has this session, `last_seq` and incarnation (or
    /// still has none, or one past its TTL, when the loaded one was none). Every
    /// item the round writes may replace one past its TTL (`expires_at` at or
    /// before the head's `last_activity`, the round's time): DynamoDB deletes
    /// expired items in any order and days late, and a contact whose memory
    /// expired starts again from session 1 over what is left of it.
    pub expected: Option<Head>,
    /// The new head. Only the fields `ask` owns are written (session, last_seq,
    /// last context tokens, last activity, `expires_at`, the recent gaps as given,
    /// `facts_requested` and `hard_cap_at` as given — set when `Some`, removed
    /// when `None` —,
    /// `facts_pending` when `Some` (a round that requests an extraction; `None`
    /// leaves it), and, when the session changes, the reset of summary,
    /// summarized_until and steps), so a compaction step applied meanwhile is
    /// kept. It also writes `incarnation` (a new head's, or the one an older head
    /// without it receives; `ask` keeps a loaded head's).
    pub head: Head,
    /// Where the round puts the head in the sweep index.
    pub sweep: SweepSlot,
    /// The round's messages, with dense sequence numbers following `expected`.
    pub messages: Vec<StoredMessage>,
    /// The idempotency record to mark completed, with the response to replay.
    pub idempotency: Option<CompletedRequest>,
    /// When this round opens a new session: the closed session's summary, kept as
    /// its own item (`SUM#{session:06}`) for the facts job and the transcript view.
    pub archive: Option<SessionArchive>,
    /// Window messages of the head's session whose TTL the commit sets to
    /// `messages_expire_at` (each must still exist, or the commit conflicts), so an
    /// open session's window never expires under it; at most what the transaction
    /// holds besides the rest ([`MAX_ROUND_ITEMS`]).
    pub refresh: Vec<u64>,
    /// When the round's messages expire (TTL attribute `expires_at`, seconds since
    /// the epoch): when the session could close at the earliest (now plus the idle
    /// timeout) plus the tenant's transcript retention.
    pub messages_expire_at: i64,
}

/// A closed session's summary, archived when the next session opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionArchive {
    /// The closed session.
    pub session: u32,
    /// Its summary when it closed, if any step ran.
    pub summary: Option<String>,
    /// Its `summarized_until` when it closed.
    pub summarized_until: u64,
    /// Its last sequence number.
    pub last_seq: u64,
    /// TTL: now plus the tenant's transcript retention.
    pub expires_at: i64,
}

/// A compaction step to apply under the condition `summarized_until = :seen`.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedStep {
    /// The incarnation the step was planned for (the head must still have it).
    pub incarnation: Incarnation,
    /// The session the step was planned for (the head must still be in it).
    pub session: u32,
    /// The `summarized_until` the plan was made from.
    pub seen_summarized_until: u64,
    /// The new `summarized_until`.
    pub new_summarized_until: u64,
    /// The merged summary.
    pub summary: String,
    /// Pruned copies for kept messages (at most [`MAX_PRUNES_PER_STEP`]).
    pub prune: Vec<crate::pruning::PruneDecision>,
}

/// Most pruning decisions one step writes: one transaction holds at most 100
/// actions, one of which is the head update. Later steps prune the rest.
pub const MAX_PRUNES_PER_STEP: usize = 90;

/// Most messages one round refreshes the TTL of apart from its commit: one
/// transaction holds at most 100 actions, one of which checks the head. The next
/// rounds refresh the rest.
pub const MAX_REFRESH_PER_ROUND: usize = 99;

/// Most items a round's commit writes in its one transaction (DynamoDB's limit):
/// the head, the messages, the idempotency record, the archive and the window
/// messages whose TTL it extends ([`RoundCommit::refresh`]).
pub const MAX_ROUND_ITEMS: usize = 100;

/// Reads of a turn whose window falls short of its head before it is taken as it
/// is (see [`load_whole_turn`]).
pub const TURN_READS: u32 = 3;

/// [`Store::load_turn`], read again while its window falls short of the head it was
/// read with (at most [`TURN_READS`] reads, a short wait between them): the head
/// and the window are two reads, and DynamoDB's Query is not a transactional read,
/// so a round landing between them can leave the head counting messages the window
/// does not show yet. A live head's last message expires with it, so one that
/// stays missing is a hole ([`crate::window::after_last_gap`] then decides), never
/// the TTL.
pub async fn load_whole_turn(
    store: &dyn Store,
    key: &ContactKey,
    now: i64,
) -> Result<TurnState, StoreError> {
    let mut state = store.load_turn(key, now).await?;
    for read in 1..TURN_READS {
        if !state.window_short(now) {
            break;
        }
        tracing::warn!(
            read,
            "the window read fell short of its head: reading again"
        );
        crate::metrics::Event::new("store")
            .count("ShortWindowReads", 1)
            .emit();
        tokio::time::sleep(std::time::Duration::from_millis(25 * u64::from(read))).await;
        state = store.load_turn(key, now).await?;
    }
    Ok(state)
}

impl TurnState {
    /// Whether the window ends before the live head's `last_seq` (a session with
    /// messages after `summarized_until`).
    pub fn window_short(&self, now: i64) -> bool {
        match &self.head {
            Some(head) if !head.expired_at(now) && head.last_seq > head.summarized_until => {
                self.window.last().map(|message| message.seq) != Some(head.last_seq)
            }
            _ => false,
        }
    }
}

/// What the facts job reads about a closed session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClosedSession {
    /// The archived summary of the session (`None` when no step ran or nothing was
    /// archived).
    pub summary: Option<String>,
    /// The session's messages after the archived `summarized_until`, oldest first
    /// (bounded by the window the session had when it closed).
    pub messages: Vec<StoredMessage>,
}

/// A fact to store, with its expiry (TTL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactWrite {
    /// The fact, with its source.
    pub fact: Fact,
    /// Seconds since the epoch: its update time plus the tenant's fact retention.
    pub expires_at: i64,
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

/// Everything degrau keeps, behind one port. (Its signatures stand again in each
/// adapter, as a trait's implementations must; what the adapters share beyond that
/// lives here: [`validate_step`], [`validate_fact_changes`],
/// [`TranscriptPage::from_newest_first`].)
#[async_trait]
pub trait Store: Send + Sync {
    /// The head, the facts and the window of the head's session (bounded by the
    /// head's `last_seq`): what a turn needs. A head past its `expires_at` reads
    /// as none, as DynamoDB's TTL will make it: the next round writes over it.
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError>;

    /// The head and facts only (the memory view, and the compactor's first read).
    /// A head past its `expires_at` is gone to this read (`None`), as DynamoDB's
    /// TTL will make it (and to [`Store::load_turn`]'s).
    async fn load_memory(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError>;

    /// Commits a whole round atomically (its TTL refresh included), or returns
    /// [`StoreError::Conflict`] and writes nothing.
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

    /// Applies a compaction step in one transaction: the head's summary,
    /// `summarized_until` and step count, under the condition that the head exists,
    /// still has `step.incarnation`, is still in `step.session` and still has
    /// `summarized_until = seen`; and the pruned copies of the kept messages.
    /// `Ok(false)` when the condition fails (a duplicate or stale job, or an erased
    /// contact, even one that wrote again since): nothing is written.
    async fn apply_step(&self, key: &ContactKey, step: &AppliedStep) -> Result<bool, StoreError>;

    /// The archived summary of a closed session and its messages after it.
    async fn load_closed_session(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<ClosedSession, StoreError>;

    /// Stores facts (replacing by key) and removes keys, only while the contact's
    /// head exists with `incarnation` (an erased contact gets nothing back, even
    /// when it wrote again since). `Ok(false)` when it does not.
    async fn save_facts(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        writes: &[FactWrite],
        removals: &[FactKey],
    ) -> Result<bool, StoreError>;

    /// The contact whose head has `incarnation`, for a job that names only that:
    /// `None` when no head of `tenant` has it (erased, or never existed). Read from
    /// a global secondary index, so eventually consistent: the caller checks the
    /// head it then loads, and every write is conditioned on the incarnation.
    async fn find_contact(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<ContactKey>, StoreError>;

    /// The head's incarnation, after giving `candidate` to a head that has none (a
    /// head written before incarnations existed); `None` when there is no head.
    async fn ensure_incarnation(
        &self,
        key: &ContactKey,
        candidate: &Incarnation,
    ) -> Result<Option<Incarnation>, StoreError>;

    /// Heads in bucket `bucket` of the sweep index due at or before `due_by`,
    /// earliest first, at most `limit`. Read from a global secondary index, so
    /// eventually consistent: an entry may show its state of a moment ago, which
    /// [`Store::settle_sweep`]'s condition catches.
    async fn due_heads(
        &self,
        bucket: u8,
        due_by: i64,
        limit: usize,
    ) -> Result<Vec<DueHead>, StoreError>;

    /// The head as stored (strongly consistent, expired or not): what the sweep
    /// decides on.
    async fn load_head(&self, key: &ContactKey) -> Result<Option<Head>, StoreError>;

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

    /// Records that the extraction of `session` is done: removes `facts_pending`
    /// when the head still has `incarnation` and that session pending. `Ok(false)`
    /// when it does not (nothing is written).
    async fn facts_done(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
    ) -> Result<bool, StoreError>;

    /// Sets the TTL of messages `seqs` of `session` to `expires_at`, in one
    /// transaction with at most [`MAX_REFRESH_PER_ROUND`] of them, while the head
    /// still has `incarnation` and each message exists. `Ok(false)` when not:
    /// nothing is written.
    async fn refresh_expiry(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
        seqs: &[u64],
        expires_at: i64,
    ) -> Result<bool, StoreError>;
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

// Checks every adapter shares, so they refuse the same input the same way.

/// Refuses a step no single transaction can hold: more than
/// [`MAX_PRUNES_PER_STEP`] decisions (the caller truncates), or two decisions for one
/// message (a transaction may not touch an item twice).
pub fn validate_step(step: &AppliedStep) -> Result<(), StoreError> {
    if step.prune.len() > MAX_PRUNES_PER_STEP {
        return Err(StoreError::Other(format!(
            "a step with {} pruning decisions exceeds the limit of {MAX_PRUNES_PER_STEP}",
            step.prune.len()
        )));
    }
    let mut seen = HashSet::with_capacity(step.prune.len());
    if let Some(twice) = step.prune.iter().find(|d| !seen.insert(d.seq)) {
        return Err(StoreError::Other(format!(
            "a step prunes message {} twice",
            twice.seq
        )));
    }
    Ok(())
}

/// Refuses a fact batch that names one key twice (two writes, or a write and a
/// removal): which one should win is the caller's decision, not the store's, and a
/// transaction may not touch an item twice.
pub fn validate_fact_changes(writes: &[FactWrite], removals: &[FactKey]) -> Result<(), StoreError> {
    let mut seen = HashSet::with_capacity(writes.len() + removals.len());
    let keys = writes.iter().map(|write| &write.fact.key).chain(removals);
    for key in keys {
        if !seen.insert(key.as_str()) {
            return Err(StoreError::Other(format!(
                "a fact batch names the key {key} twice"
            )));
        }
    }
    Ok(())
}
