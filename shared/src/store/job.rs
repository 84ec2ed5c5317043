//! What a compaction step or a facts job needs: the contact found by incarnation,
//! the step applied in one transaction, a closed session's record, and the facts
//! saved or marked done, every write conditioned on the job's incarnation.

use std::collections::HashSet;

use async_trait::async_trait;

use super::{ContactKey, StoreError};
use crate::domain::{Fact, FactKey, Incarnation, StoredMessage, TenantId};

/// What the compactor's jobs need (a step, a facts job).
#[async_trait]
pub trait JobStore: Send + Sync {
    /// The contact whose head has `incarnation`, for a job that names only that:
    /// `None` when no head of `tenant` has it (erased, or never existed). Read from
    /// a global secondary index, so eventually consistent: the caller checks the
    /// head it then loads, and every write is conditioned on the incarnation.
    async fn find_contact(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<ContactKey>, StoreError>;

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

    /// Stores facts (replacing by key) and removes facts, only while the
    /// contact's head exists with `incarnation` (an erased contact gets nothing
    /// back, even when it wrote again since), and only on what each write and
    /// removal expects (else [`StoreError::Conflict`], nothing written). `Ok(false)`
    /// when the head does not.
    async fn save_facts(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        writes: &[FactWrite],
        removals: &[FactRemoval],
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
    pub prune: Vec<crate::plan::pruning::PruneDecision>,
    /// A pause fold's condition: the head's `last_seq` when it was planned. A fold
    /// lands only while no round came since (a round that resumed wrote the whole
    /// context to the cache; folding it now would only write it again). `None`
    /// for a step: rounds land while it runs, and it folds only what they keep.
    pub last_seq: Option<u64>,
}

/// Most pruning decisions one step writes: one transaction holds at most 100
/// actions, one of which is the head update. Later steps prune the rest.
pub const MAX_PRUNES_PER_STEP: usize = 90;

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
    /// What the write must find stored, or it writes nothing (and the batch fails
    /// with [`StoreError::Conflict`]).
    pub expect: FactExpectation,
}

/// What a fact write expects to replace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FactExpectation {
    /// Whatever is stored (a test's seed).
    #[default]
    Anything,
    /// No fact under the key.
    Absent,
    /// The fact stored with this `updated_at` (the one the writer read).
    UpdatedAt(i64),
}

impl FactExpectation {
    /// Whether `stored` (the fact under the key, if any) is what was expected.
    pub fn holds(self, stored: Option<&Fact>) -> bool {
        match self {
            FactExpectation::Anything => true,
            FactExpectation::Absent => stored.is_none(),
            FactExpectation::UpdatedAt(at) => stored.is_some_and(|fact| fact.updated_at == at),
        }
    }
}

/// A fact to remove, and what the remover read of it: a removal lands only on the
/// fact it expects, as a write does (an extraction planned before an operator's
/// correction, or a deletion racing one, conflicts instead of removing it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactRemoval {
    /// The fact's key.
    pub key: FactKey,
    /// What is stored under it now: [`FactExpectation::UpdatedAt`] of the fact
    /// read, or [`FactExpectation::Anything`] (a test's seed). `Absent` is refused.
    pub expect: FactExpectation,
}

impl FactRemoval {
    /// The removal of `fact` as read.
    pub fn of(fact: &Fact) -> FactRemoval {
        FactRemoval {
            key: fact.key.clone(),
            expect: FactExpectation::UpdatedAt(fact.updated_at),
        }
    }

    /// The removal of whatever is stored under `key`.
    pub fn any(key: FactKey) -> FactRemoval {
        FactRemoval {
            key,
            expect: FactExpectation::Anything,
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
pub fn validate_fact_changes(
    writes: &[FactWrite],
    removals: &[FactRemoval],
) -> Result<(), StoreError> {
    if removals
        .iter()
        .any(|removal| removal.expect == FactExpectation::Absent)
    {
        return Err(StoreError::Other(
            "a removal cannot expect the fact to be absent".into(),
        ));
    }
    let mut seen = HashSet::with_capacity(writes.len() + removals.len());
    let keys = writes
        .iter()
        .map(|write| &write.fact.key)
        .chain(removals.iter().map(|removal| &removal.key));
    for key in keys {
        if !seen.insert(key.as_str()) {
            return Err(StoreError::Other(format!(
                "a fact batch names the key {key} twice"
            )));
        }
    }
    Ok(())
}
