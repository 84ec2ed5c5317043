//! The compactor: the service that runs the queued jobs and the scheduled sweep
//! against the store and the summary model. What a step folds is decided by the
//! pure plan in [`crate::plan::step_plan`]; when the sweep acts, by the rules in
//! [`crate::plan::sweep`]; this folder applies them. One file each:
//!
//! * this one: the service ([`Compactor`]: a job's contact found, the job handed
//!   to its part, each part holding only the ports it calls) and a job's dispatch;
//! * `outcome.rs`: what a job did ([`JobOutcome`]) and how it failed
//!   ([`CompactorError`]);
//! * `step.rs`: a compaction step (re-plan, summarise, apply under
//!   `summarized_until = :seen`, request the next step when capped) and the summary
//!   request ([`summary_request`]);
//! * `facts_job.rs`: a closed session's fact extraction (the forced `record_facts`
//!   call, [`facts_request`], and what of its answer is kept);
//! * `fold.rs`: a pause fold ([`crate::plan::pause_fold`]), a step the sweep asks for
//!   once a silent contact's cache entries are gone;
//! * `index_job.rs`: a closed session's recall index (its whole text indexed,
//!   then a search summary by the summary model, [`SEARCH_SUMMARY_INSTRUCTIONS`]);
//! * `sweep.rs`: the scheduled sweep over the sweep index ([`Compactor::sweep`]).
//!
//! **Events out.** Once an extraction's facts are stored, each fact whose value
//! changed is published as `fact.set` (`"by": "model"`); once a closed session's
//! index (and its search summary) is stored, `session.closed` with that summary
//! ([`crate::events`]). A tenant without an events webhook publishes nothing, and
//! an event that cannot be queued is counted, never the job's failure.
//!
//! **Which contact.** A job names its contact only by the head's incarnation; the
//! compactor finds the head through the incarnation index, and every write it makes
//! is conditioned on that incarnation, so a job whose contact was erased (even one
//! who wrote again since, with a new head) is skipped as `erased` and writes nothing.
//!
//! **Steps.** A step reads the head and the window, re-plans with
//! [`crate::plan::step_plan::plan_step`] (the job only says *which* step it is for), asks
//! the summary model to merge the previous summary with the folded messages, and
//! applies the result under the condition `summarized_until = :seen` (invariant 7).
//! A duplicate, stale, not-due or erased job is skipped without a write; a step that
//! loses the race at the write is skipped too, since the winner already moved the
//! window. A step folds at most the policy's token budget; when that stopped it
//! short of the kept window, the compactor requests the next step itself, so a long
//! backlog is caught up in successive steps that each fit one summary request.
//!
//! **Facts.** Fact extraction reads the closed session's record and last messages,
//! asks the summary model for facts through a forced `record_facts` tool call, and
//! stores only what passes [`crate::plan::facts::FactPolicy::check`] and cites a message
//! of the session (invariant 8). A session closed by the next message is read from
//! its archive (its summary when it closed) and the messages after it; a session
//! the sweep closed is still the head's, so it is read from the head's summary and
//! the messages after `summarized_until`. Either way the extraction sees what a
//! step kept, never the whole session. A requested extraction stays pending on the
//! head until its job is done; the sweep requests it again after
//! [`crate::plan::sweep::FACTS_RETRY_SECONDS`] (a job lost, or in the dead-letter queue),
//! at most [`crate::plan::sweep::FACTS_MAX_ATTEMPTS`] times in all.
//!
//! **The sweep.** The scheduled [`Compactor::sweep`] reads the heads that are due
//! in the sweep index and requests their extraction, at most
//! [`crate::plan::sweep::SWEEP_LIMIT_PER_BUCKET`] per bucket and run.
//!
//! **What the model sees.** Message text is rendered as one line per item and
//! passed through [`crate::plan::request::neutralize`], so it can neither close the
//! prompt's tags nor forge a speaker line. Long raw tool output is left out of the
//! summary prompt; short results (booking confirmations) are kept for their
//! identifiers.
//!
//! **Logs.** Structured fields only: kinds, counts, sequence numbers, refusal codes
//! and fact keys. Never message text, summaries, fact values or contact ids.
//!
//! (`docs/DESIGN.md`: "The flows" (a step, a facts job, the sweep).)

mod facts_job;
mod facts_request;
mod fold;
mod index_job;
mod outcome;
mod step;
mod sweep;

use std::sync::Arc;

use serde_json::Value;
use tracing::{info, instrument};

use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Role};
use crate::events::EventsOut;
use crate::jobs::{Job, Jobs};
use crate::model::{Model, ModelResponse};
use crate::plan::request::{
    ModelRequest, RequestBlock, RequestMessage, SystemBlock, ToolDef, neutralize,
};
use crate::plan::session::Clock;
use crate::store::{
    ContactKey, JobStore, RecallStore, RecordStore, RoundStore, Store, SweepStore, UsageStore,
};
use crate::tenant::{Defaults, Settings, TenantStore};

pub use facts_request::{FACTS_INSTRUCTIONS, RECORD_FACTS_TOOL, facts_request, record_facts_tool};
pub use index_job::{MAX_SUMMARY_INPUT_CHARS, SEARCH_SUMMARY_INSTRUCTIONS};
pub use outcome::{CompactorError, JobOutcome};
pub use step::{SUMMARY_INSTRUCTIONS, summary_request};
pub use sweep::SweepReport;

/// Output budget of a summary or fact-extraction call.
pub const COMPACTOR_MAX_TOKENS: u32 = 1024;

/// Receives of a job that finds no head before it is skipped as erased: the
/// `by-incarnation` index is eventually consistent, so a job sent right after its
/// head was created may miss it, and a job dropped then would not come back (the
/// queue de-duplicates the same step for five minutes, and the next round may not
/// need one). Under the queue's five receives, so an erased contact's jobs never
/// reach the dead-letter queue.
pub const NOT_FOUND_RECEIVES: u32 = 3;

/// What the compactor's jobs share besides storage: the tenant's settings, the
/// summary model, the defaults, the clock, the jobs queue and events out.
#[derive(Clone)]
pub struct Wiring {
    /// Tenant configuration.
    pub tenants: Arc<dyn TenantStore>,
    /// The summary model.
    pub model: Arc<dyn Model>,
    /// Service-wide defaults (`summary_model` among them).
    pub defaults: Defaults,
    /// The clock.
    pub clock: Clock,
    /// The jobs queue, for the next step after a step that was capped.
    pub jobs: Arc<dyn Jobs>,
    /// Events out: an extraction's changed facts (`fact.set`) and a closed
    /// session's recall summary (`session.closed`), after each write.
    pub events: Arc<dyn EventsOut>,
}

/// What a job that calls the summary model holds: the [`Wiring`], and where its
/// calls are counted.
#[derive(Clone)]
struct Common {
    wiring: Wiring,
    usage: Arc<dyn UsageStore>,
}

impl Common {
    /// Counts one summary or facts call (`kind` sets its counter) and its tokens
    /// in the tenant's usage.
    async fn count_call(
        &self,
        tenant: &crate::domain::TenantId,
        model: &str,
        usage: &crate::usage::Usage,
        kind: impl FnOnce(&mut crate::metering::UsageCounts),
    ) {
        let mut counts = crate::metering::UsageCounts::default();
        kind(&mut counts);
        counts.add_tokens(model, usage);
        let now = (self.wiring.clock)();
        crate::store::count_usage(self.usage.as_ref(), tenant, now, &counts, "compactor").await;
    }
}

/// Steps and pause folds (`step.rs`, `fold.rs`): a window read whole, a step
/// applied.
#[derive(Clone)]
struct Steps {
    common: Common,
    turns: Arc<dyn RoundStore>,
    steps: Arc<dyn JobStore>,
}

/// A closed session's fact extraction (`facts_job.rs`): the memory read, the
/// session's kept messages, the facts written.
#[derive(Clone)]
struct FactsJob {
    common: Common,
    memory: Arc<dyn RecordStore>,
    turns: Arc<dyn RoundStore>,
    facts: Arc<dyn JobStore>,
}

/// A closed session's recall index (`index_job.rs`): the head read, the
/// session's messages, its index written.
#[derive(Clone)]
struct IndexJob {
    common: Common,
    memory: Arc<dyn RecordStore>,
    recall: Arc<dyn RecallStore>,
}

/// The scheduled sweep (`sweep.rs`): the sweep index and the heads it files.
#[derive(Clone)]
struct Sweeper {
    wiring: Wiring,
    heads: Arc<dyn RoundStore>,
    index: Arc<dyn SweepStore>,
}

/// The compactor: a job's contact found by its incarnation, then the job run by
/// its own part, each holding only the ports it calls (no part holds the whole
/// [`Store`]); and the scheduled sweep.
#[derive(Clone)]
pub struct Compactor {
    /// What the jobs share besides storage.
    pub wiring: Wiring,
    contacts: Arc<dyn JobStore>,
    steps: Steps,
    facts: FactsJob,
    index: IndexJob,
    sweeper: Sweeper,
}

impl Compactor {
    /// The compactor on one store holding every port its jobs call (the DynamoDB
    /// adapter's, or the in-memory one).
    pub fn on<S: Store + 'static>(store: Arc<S>, wiring: Wiring) -> Compactor {
        let common = Common {
            wiring: wiring.clone(),
            usage: store.clone(),
        };
        Compactor {
            contacts: store.clone(),
            steps: Steps {
                common: common.clone(),
                turns: store.clone(),
                steps: store.clone(),
            },
            facts: FactsJob {
                common: common.clone(),
                memory: store.clone(),
                turns: store.clone(),
                facts: store.clone(),
            },
            index: IndexJob {
                common,
                memory: store.clone(),
                recall: store.clone(),
            },
            sweeper: Sweeper {
                wiring: wiring.clone(),
                heads: store.clone(),
                index: store,
            },
            wiring,
        }
    }

    /// The session sweep: requests fact extraction for every session idle past its
    /// tenant's timeout whose contact did not write again (the next message would
    /// have closed it and requested the extraction itself), and again for every
    /// extraction still pending [`FACTS_RETRY_SECONDS`](crate::plan::sweep::FACTS_RETRY_SECONDS) after it was requested.
    ///
    /// Reads each of the `SWEEP_BUCKETS` buckets ([`Defaults::sweep_buckets`](crate::tenant::Defaults::sweep_buckets)) of
    /// the sweep index for heads due by `now`, longest due first, at most
    /// [`SWEEP_LIMIT_PER_BUCKET`](crate::plan::sweep::SWEEP_LIMIT_PER_BUCKET) each. Each round files its head under the time
    /// its session goes idle by its tenant's own timeout, so heads not due are
    /// never read and cannot hold up the ones that are. For each, reads the head
    /// and decides by its tenant's settings (a tenant that lengthened its timeout
    /// since the round only moves the head to its new due time); enqueues the facts
    /// job, and only then updates the head under the condition that it is still as
    /// read ([`SweepStore::settle_sweep`]). In that order a failed update leaves a job
    /// that is a harmless duplicate, and a failed enqueue leaves the head due for
    /// the next sweep.
    ///
    /// A failure on one head, or on one bucket's index read, is logged and
    /// counted, and the sweep goes on with the rest, so that one throttled read or
    /// one unreadable entry holds up only its own bucket. When every bucket's read
    /// failed (storage is down), the sweep is an error: the first one.
    pub async fn sweep(&self, jobs: &dyn Jobs, now: i64) -> Result<SweepReport, CompactorError> {
        self.sweeper.sweep(jobs, now).await
    }

    /// Runs one job; its model call ends by `deadline`. The job names its contact
    /// only by the head's incarnation: the contact is found through
    /// [`JobStore::find_contact`], and a job whose incarnation no head has (the
    /// contact was erased, whether or not it wrote again since) is skipped as
    /// `erased`. (A job the queue delivers goes through [`Compactor::run_delivery`],
    /// which first leaves a job that finds no head for redelivery.)
    pub async fn run(&self, job: &Job, deadline: Deadline) -> Result<JobOutcome, CompactorError> {
        self.run_job(job, None, deadline).await
    }

    /// Runs one job the queue delivered for the `receives`th time (1 the first
    /// time), as [`Compactor::run`] does, except that the index is eventually
    /// consistent: a job that finds no head is left for redelivery
    /// ([`CompactorError::NotFound`]) until its [`NOT_FOUND_RECEIVES`]th receive,
    /// and only then skipped as erased.
    pub async fn run_delivery(
        &self,
        job: &Job,
        receives: u32,
        deadline: Deadline,
    ) -> Result<JobOutcome, CompactorError> {
        self.run_job(job, Some(receives), deadline).await
    }

    #[instrument(skip_all, fields(job = job.kind(), session = job.session()))]
    async fn run_job(
        &self,
        job: &Job,
        receives: Option<u32>,
        deadline: Deadline,
    ) -> Result<JobOutcome, CompactorError> {
        let tenant = job.tenant();
        let wiring = &self.wiring;
        let settings =
            crate::tenant::stored_settings(wiring.tenants.as_ref(), &wiring.defaults, tenant)
                .await??;
        let incarnation = job.incarnation();
        let key = self.contacts.find_contact(tenant, incarnation).await?;
        if key.is_none() && receives.is_some_and(|receives| receives < NOT_FOUND_RECEIVES) {
            // A head created a moment ago may not show in the index yet.
            return Err(CompactorError::NotFound);
        }
        let outcome = self.dispatch(job, key, &settings, deadline).await?;
        info!(?outcome, "job done");
        Ok(outcome)
    }

    /// Runs `job` on the contact found (`None`: erased, the job skips).
    async fn dispatch(
        &self,
        job: &Job,
        key: Option<ContactKey>,
        settings: &Settings,
        deadline: Deadline,
    ) -> Result<JobOutcome, CompactorError> {
        let incarnation = job.incarnation();
        let outcome = match (job, key) {
            (Job::Step { .. }, None) => JobOutcome::StepSkipped { reason: "erased" },
            (Job::Fold { .. }, None) => JobOutcome::StepSkipped { reason: "erased" },
            (Job::Facts { .. }, None) => JobOutcome::FactsSkipped { reason: "erased" },
            (Job::Index { .. }, None) => JobOutcome::IndexSkipped { reason: "erased" },
            (
                Job::Step {
                    session,
                    summarized_until,
                    ..
                },
                Some(key),
            ) => {
                self.steps
                    .step(
                        &key,
                        settings,
                        incarnation,
                        *session,
                        *summarized_until,
                        deadline,
                    )
                    .await?
            }
            (
                Job::Fold {
                    session,
                    summarized_until,
                    last_seq,
                    ..
                },
                Some(key),
            ) => {
                let job = fold::FoldJob {
                    incarnation,
                    session: *session,
                    summarized_until: *summarized_until,
                    last_seq: *last_seq,
                };
                self.steps.fold(&key, settings, job, deadline).await?
            }
            (Job::Facts { session, .. }, Some(key)) => {
                self.facts
                    .facts(&key, settings, incarnation, *session, deadline)
                    .await?
            }
            (
                Job::Index {
                    session, summarise, ..
                },
                Some(key),
            ) => {
                self.index
                    .index(&key, settings, incarnation, *session, *summarise, deadline)
                    .await?
            }
        };
        Ok(outcome)
    }
}

/// The text blocks of an answer, joined and trimmed.
fn response_text(response: &ModelResponse) -> String {
    response.message().text().trim().to_owned()
}

/// Text as one neutralised line: line breaks, line and paragraph separators and
/// format characters become spaces ([`crate::text::one_line`]), so a message cannot
/// start a line that looks like another speaker's.
fn one_line(text: &str) -> String {
    crate::text::one_line(&neutralize(text.trim()))
}

fn text_request(
    model: &str,
    system: &str,
    user: String,
    tools: Vec<ToolDef>,
    tool_choice: Option<Value>,
) -> ModelRequest {
    ModelRequest {
        model: model.to_owned(),
        max_tokens: COMPACTOR_MAX_TOKENS,
        thinking: None,
        tools,
        tool_choice,
        system: vec![SystemBlock {
            kind: "text".to_owned(),
            text: system.to_owned(),
            cache_control: None,
        }],
        messages: vec![RequestMessage {
            role: Role::User,
            content: vec![RequestBlock {
                block: ContentBlock::text(user),
                cache_control: None,
            }],
        }],
    }
}
