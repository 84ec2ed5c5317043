//! The store: everything degrau keeps about a contact, behind seven small ports
//! split by caller, each a trait of a few methods with its own types:
//!
//! * [`RoundStore`] (`round.rs`): what a round needs: the turn's bounded read, the
//!   idempotency claim, the whole round's commit, the strong head read, the TTL
//!   refresh;
//! * [`JobStore`] (`job.rs`): what a step or a facts job needs: the contact found by
//!   incarnation, the step applied, a closed session read, facts saved or done;
//! * [`SweepStore`] (`sweep.rs`): what the sweep needs: due heads, their settling;
//! * [`RecordStore`] (`record.rs`): what the memory view, the transcript and
//!   erasure need;
//! * [`OperatorStore`] (`operator.rs`): what the operator routes need: the
//!   tenant's contacts, facts with their expiry;
//! * [`UsageStore`] (`usage.rs`): the tenant's usage counts, added to by each
//!   piece of work and read per day;
//! * [`RecallStore`] (`recall.rs`): what recall needs: a closed session read whole
//!   and its index written, the indexes and texts a recall reads.
//!
//! [`Store`] is the seven together, as an adapter implements them; each service
//! holds only the ports it calls. The DynamoDB adapter
//! (crate `degrau-adapters`, `dynamodb/`) is the one production uses; the in-memory
//! one (`crate::memory`, behind the `test-util` feature) serves unit tests. One
//! contract suite (`tests/`), split the same way, runs against both.
//!
//! What the port promises, whatever the adapter:
//!
//! - **Bounded reads.** [`RoundStore::load_turn`] reads the head, the facts and the
//!   head session's messages after `summarized_until` and up to `last_seq`: never
//!   the folded history, and never a round that landed after the head was read.
//!   The two reads are not one snapshot (DynamoDB's Query is not a transactional
//!   read): a round landing between them can leave the window short of `last_seq`,
//!   which `ask` reads again.
//! - **Whole rounds.** [`RoundStore::commit_round`] writes a round's messages, the head
//!   and the idempotency record at once, under the condition that the head is as
//!   loaded, or writes nothing and answers [`StoreError::Conflict`].
//! - **Conditioned jobs.** A step, a fact batch, the sweep's mark and a refresh
//!   write only while the head still has the incarnation they were made for
//!   (`Ok(false)` otherwise: nothing written).
//! - **The sweep.** Every round files its head, by [`SweepSlot`], under one of
//!   `SWEEP_BUCKETS` buckets ([`crate::plan::sweep::sweep_bucket`]) at the time it is next *due*: when
//!   its session goes idle by its tenant's timeout, or sooner when a requested fact
//!   extraction should be checked on. [`SweepStore::due_heads`] reads one bucket's due
//!   heads, earliest first, so heads not due yet are never read and cannot crowd
//!   out the ones that are; [`SweepStore::settle_sweep`] moves a head to its next due
//!   time, or takes it out until its next round puts it back.
//! - **Jobs find their contact by incarnation.** A job names the contact only by
//!   the head's incarnation (see [`crate::domain::Head::incarnation`]); [`JobStore::find_contact`]
//!   finds the head that has it, and finds nothing once the contact is erased.
//! - **Expiry.** Messages, archives, facts and heads carry a TTL; reads treat an
//!   item past it as gone, as the real TTL eventually makes it, and a round's
//!   writes replace an item past it (the TTL deletes in any order and days late).
//!
//! How the DynamoDB adapter lays this out in one table (keys, the sweep and
//! incarnation indexes) is its own business: see its `keys.rs`, and
//! `docs/DESIGN.md` ("Key layout").

mod job;
mod operator;
mod recall;
mod record;
mod round;
mod sweep;
mod usage;

pub use crate::domain::ContactKey;

pub use job::{
    AppliedStep, ClosedSession, FactExpectation, FactRemoval, FactWrite, JobStore,
    MAX_PRUNES_PER_STEP, validate_fact_changes, validate_step,
};
pub use operator::{
    ContactCursor, ContactEntry, ContactPage, FactRecord, MAX_CONTACT_PAGE, OperatorStore,
};
pub use recall::{FoundSession, MAX_INDEX_READ_BYTES, MAX_INDEXED_MESSAGES, RecallStore};
pub use record::{Cursor, ERASE_BUCKETS, RecordStore, SessionFilter, TranscriptPage, erase_bucket};
pub use round::{
    Claim, CompletedRequest, MAX_REFRESH_PER_ROUND, MAX_ROUND_ITEMS, RoundCommit, RoundStore,
    SessionArchive, SweepSlot, TURN_READS, TurnState, load_whole_turn,
};
pub use sweep::{DueHead, PendingChange, SweepSettle, SweepStore};
pub use usage::{UsageStore, count_usage};

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
    /// The tenant's stored `CONFIG` item does not read (written by hand, or by an
    /// older version): the reason names the entry and the field.
    #[error("the tenant's stored configuration does not read: {0}")]
    InvalidConfig(String),
    /// Anything else.
    #[error("storage error: {0}")]
    Other(String),
}

/// The wait before trying a storage call again (a transaction DynamoDB cancelled
/// for a `TransactionConflict`, a throttled write): exponential with jitter, about
/// 50 ms, 100 ms, … capped near 2 s. The DynamoDB adapter waits it; the in-memory
/// store waits it too when a simulation asks for DynamoDB's time.
pub fn retry_backoff(attempt: u32) -> std::time::Duration {
    let base = 50u64.saturating_mul(1 << attempt.min(5));
    std::time::Duration::from_millis(base / 2 + fastrand::u64(0..=base / 2))
}

/// Everything degrau keeps about a contact: the seven ports by caller together, as
/// an adapter implements them (a service holds only the ones it calls).
/// The ports' signatures stand again in each adapter, as a trait's implementations
/// must; what the adapters share beyond that lives here: [`validate_step`],
/// [`validate_fact_changes`], [`TranscriptPage::from_newest_first`], [`retry_backoff`].
pub trait Store:
    RoundStore + JobStore + SweepStore + RecordStore + OperatorStore + RecallStore + UsageStore
{
}

impl<
    T: RoundStore
        + JobStore
        + SweepStore
        + RecordStore
        + OperatorStore
        + RecallStore
        + UsageStore
        + ?Sized,
> Store for T
{
}
