//! The sweep's rules, in one place: which bucket of the sweep index a contact's head
//! is filed under ([`sweep_bucket`]), when a head is next due ([`next_sweep_due`],
//! which `ask` uses after every round and the sweep after every head), what the
//! sweep does with a due head (`sweep_decision`), and how long it backs off from
//! a head it failed on ([`sweep_retry_delay`]). Pure functions over the head and
//! the tenant's idle timeout; the compactor's [`crate::compaction`] sweep applies
//! them against the store.
//!
//! A session whose contact never writes again would never have its facts
//! extracted, since only the next message closes a session: the scheduled sweep
//! reads the heads that are due (their session idle by their tenant's timeout, or a
//! pending extraction to check on) and requests their extraction.
//! (`docs/DESIGN.md`: "The flows", the sweep.)

use sha2::{Digest, Sha256};

use crate::domain::{ContactKey, PendingChange};
use crate::domain::{Head, PendingFacts};
use crate::plan::pause_fold::fold_window;
use crate::plan::session::{idle_seconds, idle_since};

/// How many buckets the sweep spreads heads over unless `SWEEP_BUCKETS` says
/// otherwise: few enough that a sweep reads them all with one small query each,
/// enough that no single bucket takes every head's write (in DynamoDB each bucket
/// is one partition key of the sweep index, about 1,000 writes a second).
pub const DEFAULT_SWEEP_BUCKETS: u8 = 16;

/// The sweep bucket of a contact among `buckets`: the first byte of the SHA-256 of
/// `T#{tenant}#C#{contact}`, modulo `buckets`. Stable, and spread evenly whatever
/// the ids look like (phone numbers share long prefixes). A `buckets` of 0 counts
/// as 1.
///
/// Part of the port, not of an adapter: `ask` chooses a round's bucket, the sweep
/// reads every bucket, and both adapters and the contract suite must agree. The
/// hashed text happens to be the DynamoDB adapter's partition key, which is how
/// the buckets were first defined; it must not change, or every head would be
/// filed under another bucket than the one its entry is in.
pub fn sweep_bucket(key: &ContactKey, buckets: u8) -> u8 {
    let digest = Sha256::digest(format!("T#{}#C#{}", key.tenant, key.contact).as_bytes());
    digest[0] % buckets.max(1)
}

/// Most due heads one sweep reads per bucket (16 buckets by default: at most
/// 1,600 per run). Each costs a head read, a tenant config read (once per tenant
/// and run), one `SendMessage` when an extraction is requested and one
/// conditional update, a few tens of milliseconds in all, so a full run stays well
/// inside the compactor's timeout. Heads past the limit wait for the next run
/// (every 15 minutes): the longest due go first.
pub const SWEEP_LIMIT_PER_BUCKET: usize = 100;

/// How long a requested fact extraction may stay pending before the sweep
/// requests it again: longer than a failing job takes to reach the dead-letter
/// queue (5 receives, 720 s of visibility timeout each: an hour).
pub const FACTS_RETRY_SECONDS: i64 = 6 * 3600;

/// How many times a session's fact extraction is requested in all; after the
/// last one stays pending for [`FACTS_RETRY_SECONDS`], the sweep gives up on it.
pub const FACTS_MAX_ATTEMPTS: u32 = 3;

/// When a head is next due for the sweep, from its state after a round or a sweep:
/// when its session goes idle by the tenant's timeout (unless the sweep already
/// requested that session's extraction), or when its pending extraction is due to
/// be requested again, whichever comes first; `None` when neither applies.
pub fn next_sweep_due(
    last_activity: i64,
    idle_minutes: u64,
    session_requested: bool,
    pending: Option<PendingFacts>,
) -> Option<i64> {
    let idle =
        (!session_requested).then(|| last_activity.saturating_add(idle_seconds(idle_minutes)));
    let retry = pending.map(|pending| pending.since.saturating_add(FACTS_RETRY_SECONDS));
    match (idle, retry) {
        (Some(idle), Some(retry)) => Some(idle.min(retry)),
        (idle, retry) => idle.or(retry),
    }
}

/// Least wait before the sweep reads again a head it failed on: one sweep period.
pub const SWEEP_RETRY_MIN_SECONDS: i64 = 15 * 60;
/// Longest wait before the sweep reads again a head it failed on: as long as a
/// pending extraction waits before it is requested again.
pub const SWEEP_RETRY_MAX_SECONDS: i64 = FACTS_RETRY_SECONDS;

/// How long the sweep waits before reading again a head it failed on, `overdue`
/// seconds after the head became due: as long again, within one sweep period and
/// six hours. Each failure so at least doubles the wait, and a head that keeps failing
/// (a tenant whose configuration is broken) goes behind the heads that can be
/// handled, instead of being read first in every run.
pub fn sweep_retry_delay(overdue: i64) -> i64 {
    overdue.clamp(SWEEP_RETRY_MIN_SECONDS, SWEEP_RETRY_MAX_SECONDS)
}

/// What the sweep does with one due head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SweepDecision {
    /// The session whose extraction to request now.
    pub(crate) request: Option<u32>,
    /// `facts_requested` to record (the head's own session, requested now).
    pub(crate) facts_requested: Option<u32>,
    /// The pending extraction after this sweep.
    pub(crate) pending: PendingChange,
    /// When the head is next due (`None`: out of the index).
    pub(crate) next_due: Option<i64>,
    /// A pending extraction was given up on.
    pub(crate) abandoned: bool,
    /// A pause fold to request ([`crate::plan::pause_fold`]).
    pub(crate) fold: bool,
}

/// The sweep's rule for one head read at `now`: its session idle and not swept
/// yet → request its extraction; else a pending extraction due again → request it
/// again, or give up after [`FACTS_MAX_ATTEMPTS`]; then the next due time. A head
/// past its retention is only taken out of the index.
pub(crate) fn sweep_decision(head: &Head, now: i64, idle_minutes: u64) -> SweepDecision {
    let mut decision = SweepDecision {
        request: None,
        facts_requested: None,
        pending: PendingChange::Keep,
        next_due: None,
        abandoned: false,
        fold: false,
    };
    if head.expired_at(now) {
        return decision;
    }
    let retry_due = head
        .facts_pending
        .filter(|pending| pending.since.saturating_add(FACTS_RETRY_SECONDS) <= now);
    if idle_since(head.last_activity, now, idle_minutes)
        && head.facts_requested != Some(head.session)
    {
        decision.request = Some(head.session);
        decision.facts_requested = Some(head.session);
        decision.pending = PendingChange::Set(PendingFacts {
            session: head.session,
            since: now,
            attempts: 1,
        });
    } else if let Some(pending) = retry_due {
        if pending.attempts < FACTS_MAX_ATTEMPTS {
            decision.request = Some(pending.session);
            decision.pending = PendingChange::Set(PendingFacts {
                since: now,
                attempts: pending.attempts + 1,
                ..pending
            });
        } else {
            decision.pending = PendingChange::Clear;
            decision.abandoned = true;
        }
    }
    let pending = match decision.pending {
        PendingChange::Keep => head.facts_pending,
        PendingChange::Set(pending) => Some(pending),
        PendingChange::Clear => None,
    };
    let session_requested = decision.facts_requested.or(head.facts_requested) == Some(head.session);
    decision.next_due =
        next_sweep_due(head.last_activity, idle_minutes, session_requested, pending);
    decision
}

/// [`sweep_decision`] for a head whose pause fold is due at `fold_due`
/// ([`crate::plan::pause_fold::fold_due_at`] of its last round): the fold is requested
/// once every entry is gone and while the session is open, whatever the facts
/// decision; a fold still to come keeps the head due by then.
pub(crate) fn sweep_decision_folding(
    head: &Head,
    now: i64,
    idle_minutes: u64,
    fold_due: Option<i64>,
) -> SweepDecision {
    let mut decision = sweep_decision(head, now, idle_minutes);
    if head.expired_at(now) {
        return decision;
    }
    decision.fold = fold_window(fold_due, head.last_activity, now, idle_minutes);
    if let Some(fold) = fold_due.filter(|&fold| fold > now) {
        decision.next_due = Some(decision.next_due.map_or(fold, |due| due.min(fold)));
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_requests_idle_sessions_and_pending_extractions_then_gives_up() {
        let minutes = 30;
        let idle = idle_seconds(minutes);
        let head = Head {
            session: 2,
            last_activity: 1_000,
            ..Head::default()
        };
        let pending = |session, since, attempts| PendingFacts {
            session,
            since,
            attempts,
        };

        // Not idle yet (a tenant that lengthened its timeout): moved, nothing asked.
        let early = sweep_decision(&head, 1_000 + idle - 1, minutes);
        assert_eq!((early.request, early.next_due), (None, Some(1_000 + idle)));
        // Idle: its session is requested, pending, and due again for the retry.
        let now = 1_000 + idle;
        let swept = sweep_decision(&head, now, minutes);
        assert_eq!(swept.request, Some(2));
        assert_eq!(swept.facts_requested, Some(2));
        assert_eq!(swept.pending, PendingChange::Set(pending(2, now, 1)));
        assert_eq!(swept.next_due, Some(now + FACTS_RETRY_SECONDS));

        // Requested, still pending when the retry is due: requested again...
        let requested = Head {
            facts_requested: Some(2),
            facts_pending: Some(pending(2, now, 1)),
            ..head.clone()
        };
        let later = now + FACTS_RETRY_SECONDS;
        let again = sweep_decision(&requested, later, minutes);
        assert_eq!(again.request, Some(2));
        assert_eq!(again.pending, PendingChange::Set(pending(2, later, 2)));
        // ...not before it is due...
        let not_yet = sweep_decision(&requested, later - 1, minutes);
        assert_eq!(
            (not_yet.request, not_yet.pending),
            (None, PendingChange::Keep)
        );
        assert_eq!(not_yet.next_due, Some(later));
        // ...and given up on after the last attempt: nothing left, out of the index.
        let last = Head {
            facts_pending: Some(pending(2, now, FACTS_MAX_ATTEMPTS)),
            ..requested.clone()
        };
        let gave_up = sweep_decision(&last, later, minutes);
        assert_eq!(gave_up.request, None);
        assert_eq!(gave_up.pending, PendingChange::Clear);
        assert!(gave_up.abandoned);
        assert_eq!(gave_up.next_due, None);
        // Done (nothing pending, session requested): out of the index.
        let done = Head {
            facts_pending: None,
            ..requested
        };
        assert_eq!(sweep_decision(&done, later, minutes).next_due, None);
        // Past its retention: only out of the index.
        let expired = Head {
            expires_at: Some(now),
            ..head
        };
        let gone = sweep_decision(&expired, now, minutes);
        assert_eq!((gone.request, gone.next_due), (None, None));
    }

    #[test]
    fn a_fold_is_requested_once_its_entries_are_gone_and_never_before() {
        let minutes = 24 * 60;
        let head = Head {
            session: 1,
            last_activity: 1_000,
            ..Head::default()
        };
        let fold_due = Some(1_000 + 3_600);
        // Before: nothing, and the head stays due by the fold.
        let early = sweep_decision_folding(&head, 1_000 + 600, minutes, fold_due);
        assert!(!early.fold);
        assert_eq!(early.next_due, fold_due);
        // At the expiry: the fold, then due when the session goes idle.
        let at = sweep_decision_folding(&head, 1_000 + 3_600, minutes, fold_due);
        assert!(at.fold);
        assert_eq!(at.request, None);
        assert_eq!(at.next_due, Some(1_000 + idle_seconds(minutes)));
        // Once idle: the extraction, no fold.
        let idle = sweep_decision_folding(&head, 1_000 + idle_seconds(minutes), minutes, fold_due);
        assert!(!idle.fold);
        assert_eq!(idle.request, Some(1));
        // No fold due: as the plain decision.
        let plain = sweep_decision_folding(&head, 1_000 + 3_600, minutes, None);
        assert_eq!(plain, sweep_decision(&head, 1_000 + 3_600, minutes));
    }
}
