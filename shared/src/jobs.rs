//! The `Jobs` port: how `ask` asks for background work (a compaction step, fact
//! extraction for a closed session). The SQS FIFO adapter arrives with the
//! compactor; until a queue is configured, [`NoJobs`] records nothing and says so.

use async_trait::async_trait;

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
