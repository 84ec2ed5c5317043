//! The jobs queue as SQS FIFO runs it, on the simulation's clock: a message group
//! per life of a conversation (as the SQS adapter sends them), de-duplication for
//! five minutes after a send (even once the first copy was deleted), delivery in
//! order within a group and never while an earlier message of the group is in
//! flight, a visibility timeout after which a message not deleted comes back,
//! a receive count, and the dead-letter queue after five receives. Faults: a send
//! refused, a delete lost (the job comes back: at least once), and an outage of
//! the compactor (nothing is delivered).
//!
//! [`SimQueue::deliver`] plays the event source mapping and the compactor's batch
//! handler: one batch of up to four, run by the handler's own runner
//! (`degrau::fifo::run`): each record in order within its budget, a failed record
//! holding back the later records of its group, and the records the invocation's
//! 120 s leave no whole budget for reported, to come back in a later batch.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use degrau::compaction::{Compactor, JobOutcome};
use degrau::deadline::Deadline;
use degrau::fifo::{self, Record};
use degrau::jobs::{EnqueueError, Job, Jobs};

use crate::clock::SimClock;

/// SQS FIFO's de-duplication interval.
pub const DEDUP_SECONDS: i64 = 5 * 60;
/// The queue's visibility timeout, as the template sets it.
pub const VISIBILITY_SECONDS: i64 = 720;
/// Receives before a message moves to the dead-letter queue.
pub const MAX_RECEIVES: u32 = 5;
/// Records a batch holds at most (the template's `BatchSize`).
pub const BATCH: usize = 4;
/// The time budget of one job, as the compactor's handler gives it: one model
/// attempt's limit (`MODEL_TIMEOUT_SECONDS`, 20 s) and 5 s for the store.
pub const JOB_BUDGET: Duration = Duration::from_secs(25);
/// The compactor's Lambda timeout (the template's `Timeout`).
pub const INVOCATION_TIMEOUT: Duration = Duration::from_secs(120);

/// One queued job.
#[derive(Debug, Clone)]
pub struct QueuedJob {
    id: u64,
    /// The job.
    pub job: Job,
    group: String,
    /// Receives so far.
    pub receives: u32,
    /// Simulated seconds until which it is invisible (in flight).
    visible_at: i64,
}

#[derive(Debug, Default)]
struct State {
    /// In send order.
    messages: Vec<QueuedJob>,
    dead: Vec<QueuedJob>,
    /// De-duplication ids and when they were sent.
    sent: HashMap<String, i64>,
    fault_rate: f64,
    outage: bool,
    next_id: u64,
    /// What the last records came to, newest last (for a failure's description).
    log: Vec<String>,
    /// The jobs the compactor skipped as erased, and at which receive, not yet
    /// taken by the oracle.
    dropped: Vec<(Job, u32)>,
}

/// What one delivery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Records delivered.
    pub delivered: usize,
    /// Records whose job succeeded (a skip included) and were deleted.
    pub done: usize,
    /// Records that failed or were held back.
    pub failed: usize,
    /// Steps applied.
    pub steps: usize,
}

/// The simulated FIFO queue.
pub struct SimQueue {
    clock: Arc<SimClock>,
    state: Mutex<State>,
}

fn lock(mutex: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The message group of a job: one life of one conversation.
fn group(job: &Job) -> String {
    match job {
        // The SQS adapter's own group for index jobs (`job_group_id`).
        Job::Index { .. } => format!("{}#{}-index", job.tenant(), job.incarnation()),
        _ => format!("{}#{}", job.tenant(), job.incarnation()),
    }
}

/// The de-duplication id of a job, as the SQS adapter builds it.
fn dedup(job: &Job) -> String {
    match job {
        Job::Step {
            session,
            summarized_until,
            last_seq,
            ..
        } => format!(
            "{}#step#{session}#{summarized_until}#{last_seq}",
            group(job)
        ),
        Job::Fold {
            session,
            summarized_until,
            last_seq,
            ..
        } => format!(
            "{}#fold#{session}#{summarized_until}#{last_seq}",
            group(job)
        ),
        Job::Facts { session, .. } => format!("{}#facts#{session}", group(job)),
        Job::Index { session, .. } => format!("{}#index#{session}", group(job)),
    }
}

impl SimQueue {
    /// An empty queue on the simulation's clock.
    pub fn new(clock: Arc<SimClock>) -> Self {
        SimQueue {
            clock,
            state: Mutex::new(State::default()),
        }
    }

    fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Faults on (`rate` of the sends refused and deletes lost) or off (0).
    pub fn set_faults(&self, rate: f64) {
        lock(&self.state).fault_rate = rate;
    }

    /// The compactor stops taking batches (`true`) or takes them again.
    pub fn set_outage(&self, outage: bool) {
        lock(&self.state).outage = outage;
    }

    /// Whether the compactor is out.
    pub fn outage(&self) -> bool {
        lock(&self.state).outage
    }

    /// Messages in the queue, visible or in flight, and in the dead-letter queue.
    pub fn depth(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.messages.len(), state.dead.len())
    }

    /// The jobs waiting (in the queue or the dead-letter queue).
    pub fn jobs(&self) -> Vec<Job> {
        let state = lock(&self.state);
        state
            .messages
            .iter()
            .chain(&state.dead)
            .map(|queued| queued.job.clone())
            .collect()
    }

    /// What the last records delivered came to, oldest first.
    pub fn log(&self) -> Vec<String> {
        lock(&self.state).log.clone()
    }

    /// The jobs the compactor skipped as erased since the last call (each with
    /// the receive it was skipped at), taken.
    pub fn take_dropped(&self) -> Vec<(Job, u32)> {
        std::mem::take(&mut lock(&self.state).dropped)
    }

    /// Whether a message can be delivered now: visible, with no earlier message
    /// of its group in flight.
    pub fn any_deliverable(&self) -> bool {
        let now = self.now();
        let state = lock(&self.state);
        let mut blocked: BTreeSet<&str> = BTreeSet::new();
        for queued in &state.messages {
            if blocked.contains(queued.group.as_str()) {
                continue;
            }
            if queued.visible_at <= now {
                return true;
            }
            blocked.insert(&queued.group);
        }
        false
    }

    /// The earliest time a message in flight becomes visible again.
    pub fn next_visible(&self) -> Option<i64> {
        let now = self.now();
        lock(&self.state)
            .messages
            .iter()
            .map(|queued| queued.visible_at)
            .filter(|at| *at > now)
            .min()
    }

    /// Moves every dead-letter message back to the queue (an operator's redrive).
    pub fn redrive(&self) -> usize {
        let mut state = lock(&self.state);
        let mut dead = std::mem::take(&mut state.dead);
        let moved = dead.len();
        for queued in &mut dead {
            queued.receives = 0;
        }
        state.messages.extend(dead);
        moved
    }

    /// Takes a batch: the first visible messages of each group in send order, a
    /// group skipped while an earlier message of it is in flight; messages past
    /// their receives go to the dead-letter queue instead.
    fn receive(&self) -> Vec<QueuedJob> {
        let now = self.now();
        let mut state = lock(&self.state);
        let mut blocked: BTreeSet<String> = BTreeSet::new();
        let mut batch = Vec::new();
        let mut index = 0;
        while index < state.messages.len() && batch.len() < BATCH {
            let queued = &state.messages[index];
            if blocked.contains(&queued.group) {
                index += 1;
                continue;
            }
            if queued.visible_at > now {
                // In flight: the rest of its group waits.
                blocked.insert(queued.group.clone());
                index += 1;
                continue;
            }
            if queued.receives >= MAX_RECEIVES {
                let dead = state.messages.remove(index);
                state.dead.push(dead);
                continue;
            }
            let queued = &mut state.messages[index];
            queued.receives += 1;
            queued.visible_at = now + VISIBILITY_SECONDS;
            batch.push(queued.clone());
            index += 1;
        }
        batch
    }

    /// One batch through the compactor, as the event source mapping and the
    /// handler run it (nothing while the compactor is out).
    pub async fn deliver(&self, compactor: &Compactor) -> Delivery {
        let mut delivery = Delivery::default();
        if self.outage() {
            return delivery;
        }
        let batch = self.receive();
        delivery.delivered = batch.len();
        let records: Vec<Record> = batch
            .iter()
            .map(|queued| Record {
                id: queued.id.to_string(),
                group: Some(queued.group.clone()),
                body: String::new(),
                receives: queued.receives,
            })
            .collect();
        // The handler's own runner (`degrau::fifo`), under the invocation's
        // deadline: a record not started for lack of time comes back later.
        let invocation = Deadline::after(INVOCATION_TIMEOUT);
        let outcome = fifo::run(
            &records,
            JOB_BUDGET,
            Some(invocation),
            async |record, deadline| {
                let Some(queued) = batch
                    .iter()
                    .find(|queued| queued.id.to_string() == record.id)
                else {
                    return false;
                };
                self.run_one(compactor, queued, deadline, &mut delivery)
                    .await
            },
        )
        .await;
        delivery.failed = outcome.reported.len();
        delivery.done = batch.len() - outcome.reported.len();
        // Deletes; one may be lost, and its job comes back after the visibility
        // timeout.
        let mut state = lock(&self.state);
        let rate = state.fault_rate;
        for queued in &batch {
            if outcome.reported.contains(&queued.id.to_string())
                || (rate > 0.0 && fastrand::f64() < rate)
            {
                continue;
            }
            state.messages.retain(|kept| kept.id != queued.id);
        }
        delivery
    }

    /// One record's job through the compactor: whether it is done.
    async fn run_one(
        &self,
        compactor: &Compactor,
        queued: &QueuedJob,
        deadline: Deadline,
        delivery: &mut Delivery,
    ) -> bool {
        let run = compactor.run_delivery(&queued.job, queued.receives, deadline);
        let result = crate::model::serving(&queued.job, run).await;
        let mut state = lock(&self.state);
        let line = format!(
            "{} {}#{} receive {}: {:?}",
            queued.job.kind(),
            queued.job.incarnation().as_str().get(..6).unwrap_or(""),
            queued.job.session(),
            queued.receives,
            result.as_ref().map_err(ToString::to_string)
        );
        state.log.push(line);
        let excess = state.log.len().saturating_sub(40);
        state.log.drain(..excess);
        match result {
            Ok(outcome) => {
                if matches!(outcome, JobOutcome::StepApplied { .. }) {
                    delivery.steps += 1;
                }
                if skipped_as_erased(&outcome) {
                    state.dropped.push((queued.job.clone(), queued.receives));
                }
                true
            }
            Err(_) => false,
        }
    }
}

/// Whether the compactor skipped a job as if its contact were erased.
fn skipped_as_erased(outcome: &JobOutcome) -> bool {
    matches!(
        outcome,
        JobOutcome::StepSkipped { reason: "erased" }
            | JobOutcome::FactsSkipped { reason: "erased" }
            | JobOutcome::IndexSkipped { reason: "erased" }
    )
}

#[async_trait]
impl Jobs for SimQueue {
    async fn enqueue(&self, job: &Job) -> Result<bool, EnqueueError> {
        // A send is a network call: a scheduling point that takes time.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(2..40))).await;
        let now = self.now();
        let mut state = lock(&self.state);
        if state.fault_rate > 0.0 && fastrand::f64() < state.fault_rate {
            return Err(EnqueueError(
                "the queue refused the send (simulated)".into(),
            ));
        }
        let id = dedup(job);
        if state
            .sent
            .get(&id)
            .is_some_and(|sent| now - sent < DEDUP_SECONDS)
        {
            // Accepted, not delivered: a duplicate within the interval.
            return Ok(true);
        }
        state.sent.insert(id, now);
        state.next_id += 1;
        let id = state.next_id;
        state.messages.push(QueuedJob {
            id,
            job: job.clone(),
            group: group(job),
            receives: 0,
            visible_at: now,
        });
        Ok(true)
    }
}
