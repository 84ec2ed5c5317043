//! The `Jobs` port: how `ask` asks for background work (a compaction step, fact
//! extraction for a closed session), and [`Job`], the message the compactor reads.
//! [`sqs::SqsJobs`] sends jobs to the SQS FIFO queue; [`NoJobs`], for runs without a
//! queue, records nothing and says so.

pub mod sqs;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::{ContactId, TenantId};
use crate::store::ContactKey;

/// A job could not be enqueued (the round is stored anyway; the next round retries).
#[derive(Debug, thiserror::Error)]
#[error("could not enqueue a job: {0}")]
pub struct EnqueueError(pub String);

/// Background work for the compactor.
#[async_trait]
pub trait Jobs: Send + Sync {
    /// Requests a compaction step for the session, as seen at `summarized_until`.
    /// Returns false when no queue is configured.
    async fn enqueue_step(
        &self,
        key: &ContactKey,
        session: u32,
        summarized_until: u64,
    ) -> Result<bool, EnqueueError>;

    /// Requests fact extraction for a session that just closed.
    async fn enqueue_facts(&self, key: &ContactKey, session: u32) -> Result<bool, EnqueueError>;
}

/// No queue configured: nothing is enqueued.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJobs;

#[async_trait]
impl Jobs for NoJobs {
    async fn enqueue_step(&self, _: &ContactKey, _: u32, _: u64) -> Result<bool, EnqueueError> {
        Ok(false)
    }

    async fn enqueue_facts(&self, _: &ContactKey, _: u32) -> Result<bool, EnqueueError> {
        Ok(false)
    }
}

/// One job, as the body of a queue message (JSON, tagged by `kind`):
/// `{"kind":"step","tenant":"t","contact":"c","session":1,"summarized_until":12}` or
/// `{"kind":"facts","tenant":"t","contact":"c","session":1}`. The ids are validated
/// when the body is read, like every id that reaches a storage key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// A compaction step for `session`, planned from the head at `summarized_until`.
    Step {
        /// The tenant.
        tenant: TenantId,
        /// The contact.
        contact: ContactId,
        /// The session the step is for.
        session: u32,
        /// The head's `summarized_until` when the step was requested: the step
        /// applies only while the head still holds it.
        summarized_until: u64,
    },
    /// Fact extraction for a session that closed.
    Facts {
        /// The tenant.
        tenant: TenantId,
        /// The contact.
        contact: ContactId,
        /// The closed session.
        session: u32,
    },
}

impl Job {
    /// The contact the job is about.
    pub fn key(&self) -> ContactKey {
        let (Job::Step {
            tenant, contact, ..
        }
        | Job::Facts {
            tenant, contact, ..
        }) = self;
        ContactKey {
            tenant: tenant.clone(),
            contact: contact.clone(),
        }
    }

    /// The session the job is about.
    pub fn session(&self) -> u32 {
        let (Job::Step { session, .. } | Job::Facts { session, .. }) = self;
        *session
    }

    /// `step` or `facts`, as in the JSON body (for logs and metrics).
    pub fn kind(&self) -> &'static str {
        match self {
            Job::Step { .. } => "step",
            Job::Facts { .. } => "facts",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jobs_read_and_write_their_documented_json() {
        let step = Job::Step {
            tenant: TenantId::parse("barber").unwrap(),
            contact: ContactId::parse("+5511900000000").unwrap(),
            session: 2,
            summarized_until: 12,
        };
        assert_eq!(
            serde_json::to_value(&step).unwrap(),
            json!({"kind": "step", "tenant": "barber", "contact": "+5511900000000",
                   "session": 2, "summarized_until": 12})
        );
        let facts: Job = serde_json::from_value(
            json!({"kind": "facts", "tenant": "barber", "contact": "ana@example.com", "session": 1}),
        )
        .unwrap();
        assert_eq!((facts.kind(), facts.session()), ("facts", 1));
        assert_eq!(facts.key().contact.as_str(), "ana@example.com");
        assert_eq!(step.key().tenant.as_str(), "barber");
    }

    #[test]
    fn bodies_with_bad_ids_or_kinds_are_refused() {
        for body in [
            json!({"kind": "step", "tenant": "a#C#b", "contact": "c", "session": 1, "summarized_until": 0}),
            json!({"kind": "facts", "tenant": "t", "contact": "", "session": 1}),
            json!({"kind": "erase", "tenant": "t", "contact": "c", "session": 1}),
            json!({"kind": "step", "tenant": "t", "contact": "c", "session": 1}),
        ] {
            assert!(
                serde_json::from_value::<Job>(body.clone()).is_err(),
                "{body}"
            );
        }
    }
}
