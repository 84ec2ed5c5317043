//! The `Jobs` port: how `ask`, the sweep and the compactor itself ask for background
//! work (a compaction step, fact extraction for a closed session), and [`Job`], the
//! message the compactor reads. The SQS FIFO adapter (crate `degrau-adapters`,
//! `sqs.rs`) sends jobs to the queue; [`NoJobs`], for runs without a queue, records
//! nothing and says so.
//!
//! (`docs/DESIGN.md`: "The flows" and invariant 12.)

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::{Incarnation, TenantId};

/// A job could not be enqueued (the round is stored anyway; the next round retries).
#[derive(Debug, thiserror::Error)]
#[error("could not enqueue a job: {0}")]
pub struct EnqueueError(pub String);

/// Background work for the compactor.
#[async_trait]
pub trait Jobs: Send + Sync {
    /// Enqueues a job. Returns false when no queue is configured.
    async fn enqueue(&self, job: &Job) -> Result<bool, EnqueueError>;
}

/// No queue configured: nothing is enqueued.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJobs;

#[async_trait]
impl Jobs for NoJobs {
    async fn enqueue(&self, _: &Job) -> Result<bool, EnqueueError> {
        Ok(false)
    }
}

/// One job, as the body of a queue message (JSON, tagged by `kind`):
/// `{"kind":"step","tenant":"t","incarnation":"9f…","session":1,"summarized_until":12,"last_seq":30}`
/// or `{"kind":"facts","tenant":"t","incarnation":"9f…","session":1}`, or a pause
/// fold, shaped as a step: `{"kind":"fold",…}`, or a closed session's recall index:
/// `{"kind":"index","tenant":"t","incarnation":"9f…","session":1,"summarise":true}`.
///
/// A job names the contact only through the head's [`Incarnation`], never by its
/// id: the compactor finds the head through the `by-incarnation` index, and once
/// the contact is erased the index holds nothing for it, so a late job (in the
/// queue or the dead-letter queue) neither names nor reaches anyone. The ids are
/// validated when the body is read, like every id that reaches a storage key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// A compaction step for `session`, planned from the head at `summarized_until`.
    Step {
        /// The tenant.
        tenant: TenantId,
        /// The head's incarnation when the step was requested.
        incarnation: Incarnation,
        /// The session the step is for.
        session: u32,
        /// The head's `summarized_until` when the step was requested: the step
        /// applies only while the head still holds it.
        summarized_until: u64,
        /// The head's `last_seq` when the step was requested (0 in a job from
        /// before it was sent): with the two above it names the request, so the
        /// queue's de-duplication never takes a later round's request for a copy
        /// of one that found nothing to fold yet.
        #[serde(default)]
        last_seq: u64,
    },
    /// A pause fold ([`crate::plan::pause_fold`]): the sweep found the contact silent
    /// past its cache entries' lifetime; fold the window down to what a step
    /// keeps if that pays, and only while no round came since (`last_seq`).
    Fold {
        /// The tenant.
        tenant: TenantId,
        /// The head's incarnation when the fold was requested.
        incarnation: Incarnation,
        /// The session the fold is for.
        session: u32,
        /// The head's `summarized_until` when the fold was requested.
        summarized_until: u64,
        /// The head's `last_seq` when the fold was requested: a round since
        /// (the contact wrote again) makes the fold stale.
        last_seq: u64,
    },
    /// Fact extraction for a session that closed.
    Facts {
        /// The tenant.
        tenant: TenantId,
        /// The head's incarnation when the extraction was requested.
        incarnation: Incarnation,
        /// The closed session.
        session: u32,
    },
    /// Recall's index of a session that closed ([`crate::plan::recall::index`]): its
    /// whole text read and indexed, with a search summary when `summarise`.
    Index {
        /// The tenant.
        tenant: TenantId,
        /// The head's incarnation when the index was requested.
        incarnation: Incarnation,
        /// The closed session.
        session: u32,
        /// Whether the summary model writes the session's search summary (one
        /// of the tenant's summary calls was spent for it).
        #[serde(default = "summarise_by_default")]
        summarise: bool,
    },
}

fn summarise_by_default() -> bool {
    true
}

impl Job {
    /// The tenant the job is about.
    pub fn tenant(&self) -> &TenantId {
        let (Job::Step { tenant, .. }
        | Job::Fold { tenant, .. }
        | Job::Facts { tenant, .. }
        | Job::Index { tenant, .. }) = self;
        tenant
    }

    /// The incarnation of the head the job is about.
    pub fn incarnation(&self) -> &Incarnation {
        let (Job::Step { incarnation, .. }
        | Job::Fold { incarnation, .. }
        | Job::Facts { incarnation, .. }
        | Job::Index { incarnation, .. }) = self;
        incarnation
    }

    /// The session the job is about.
    pub fn session(&self) -> u32 {
        let (Job::Step { session, .. }
        | Job::Fold { session, .. }
        | Job::Facts { session, .. }
        | Job::Index { session, .. }) = self;
        *session
    }

    /// `step` or `facts`, as in the JSON body (for logs and metrics).
    pub fn kind(&self) -> &'static str {
        match self {
            Job::Step { .. } => "step",
            Job::Fold { .. } => "fold",
            Job::Facts { .. } => "facts",
            Job::Index { .. } => "index",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const INCARNATION: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";

    #[test]
    fn jobs_read_and_write_their_documented_json() {
        let step = Job::Step {
            tenant: TenantId::parse("barber").unwrap(),
            incarnation: Incarnation::parse(INCARNATION).unwrap(),
            session: 2,
            summarized_until: 12,
            last_seq: 30,
        };
        assert_eq!(
            serde_json::to_value(&step).unwrap(),
            json!({"kind": "step", "tenant": "barber", "incarnation": INCARNATION,
                   "session": 2, "summarized_until": 12, "last_seq": 30})
        );
        // A job sent before `last_seq` was: 0.
        let older: Job = serde_json::from_value(json!({"kind": "step", "tenant": "barber",
            "incarnation": INCARNATION, "session": 2, "summarized_until": 12}))
        .unwrap();
        assert!(matches!(older, Job::Step { last_seq: 0, .. }));
        let facts: Job = serde_json::from_value(
            json!({"kind": "facts", "tenant": "barber", "incarnation": INCARNATION, "session": 1}),
        )
        .unwrap();
        assert_eq!((facts.kind(), facts.session()), ("facts", 1));
        assert_eq!(facts.incarnation().as_str(), INCARNATION);
        assert_eq!(step.tenant().as_str(), "barber");
    }

    #[test]
    fn bodies_with_bad_ids_or_kinds_or_a_contact_id_are_refused() {
        for body in [
            json!({"kind": "step", "tenant": "a#C#b", "incarnation": INCARNATION, "session": 1, "summarized_until": 0}),
            json!({"kind": "facts", "tenant": "t", "incarnation": "", "session": 1}),
            json!({"kind": "facts", "tenant": "t", "incarnation": "NOT-HEX", "session": 1}),
            json!({"kind": "erase", "tenant": "t", "incarnation": INCARNATION, "session": 1}),
            json!({"kind": "step", "tenant": "t", "incarnation": INCARNATION, "session": 1}),
            // The shape before incarnations: it names the contact, and is refused.
            json!({"kind": "facts", "tenant": "t", "contact": "ana", "session": 1}),
        ] {
            assert!(
                serde_json::from_value::<Job>(body.clone()).is_err(),
                "{body}"
            );
        }
    }
}
