//! The compactor: the service that runs the queued jobs and the scheduled sweep
//! against the store and the summary model. What a step folds is decided by the
//! pure plan in [`crate::plan::step_plan`]; when the sweep acts, by the rules in
//! [`crate::plan::sweep`]; this folder applies them. One file each:
//!
//! * this one: the service ([`Compactor`]), a job's dispatch, its outcome and errors;
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
mod step;
mod sweep;

use std::sync::Arc;

use serde_json::Value;
use tracing::{info, instrument};

use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Role};
use crate::events::EventsOut;
use crate::jobs::{Job, Jobs};
use crate::model::{Model, ModelError, ModelResponse};
use crate::plan::request::{
    ModelRequest, RequestBlock, RequestMessage, SystemBlock, ToolDef, neutralize,
};
use crate::plan::session::Clock;
use crate::store::{ContactKey, Store, StoreError};
use crate::tenant::{Defaults, InvalidSettings, Settings, TenantStore};

pub use facts_request::{FACTS_INSTRUCTIONS, RECORD_FACTS_TOOL, facts_request, record_facts_tool};
pub use index_job::{MAX_SUMMARY_INPUT_CHARS, SEARCH_SUMMARY_INSTRUCTIONS};
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

/// What a job did. Skips are normal outcomes, not failures: the queue deletes the
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// The step was applied.
    StepApplied {
        /// The head's new `summarized_until`.
        new_summarized_until: u64,
        /// Messages given a pruned copy.
        pruned: usize,
    },
    /// No step was applied. Reasons: `erased` (no head with the job's incarnation:
    /// the contact was erased, whether or not it wrote again), `session_changed` (the
    /// session the job is for closed), `stale` (the head's `summarized_until` is not
    /// the job's: a duplicate of a step that landed, or a job overtaken by a newer
    /// step), `not_due` (nothing to fold, or below the threshold), `lost_race`
    /// (another step landed while this one was being summarised).
    StepSkipped {
        /// Why, as above.
        reason: &'static str,
    },
    /// Facts were written (or nothing valid was proposed).
    FactsStored {
        /// Facts written.
        stored: usize,
        /// Proposals refused (policy, unsupported source, malformed, duplicate key).
        refused: usize,
        /// Existing facts removed.
        removed: usize,
    },
    /// No extraction ran or nothing was written. Reasons: `no_allowed_keys` (the
    /// tenant stores no facts), `erased` (no head with the job's incarnation, or it
    /// went while extracting),
    /// `nothing_to_read` (no message of the session is left to cite).
    FactsSkipped {
        /// Why, as above.
        reason: &'static str,
    },
    /// A closed session was indexed for recall.
    Indexed {
        /// Distinct terms in its index.
        terms: usize,
        /// Whether its search summary was written.
        summarised: bool,
    },
    /// No index was written. Reasons: `erased` (no head with the job's incarnation),
    /// `open` (the session has not closed), `nothing_to_read` (no message of it is
    /// left).
    IndexSkipped {
        /// Why, as above.
        reason: &'static str,
    },
}

/// A job that failed; the queue delivers it again, then moves it to the DLQ.
#[derive(Debug, thiserror::Error)]
pub enum CompactorError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The summary model failed (after the adapter's retries).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The summary model answered with no text.
    #[error("the summary model returned an empty summary")]
    EmptySummary,
    /// The summary model stopped without a whole record of the folded messages (a
    /// refusal, its context filled while it wrote, or its output limit cut it
    /// twice): nothing was folded.
    #[error("the summary model stopped with `{0}`; nothing was folded")]
    UnusableSummary(&'static str),
    /// The fact-extraction answer has no usable `facts` list. The reason never
    /// quotes the answer, which may hold personal data.
    #[error("the fact extraction answer could not be read: {0}")]
    UnreadableFacts(&'static str),
    /// The tenant's settings cannot be honoured (fix its config, then redrive).
    #[error(transparent)]
    Settings(#[from] InvalidSettings),
    /// No head has the job's incarnation in the index, which may not show a head
    /// created a moment ago: the job is delivered again (see
    /// [`NOT_FOUND_RECEIVES`]).
    #[error("no head has the job's incarnation in the index yet")]
    NotFound,
}

impl CompactorError {
    /// Whether another delivery may succeed. Requests the API refused, bad
    /// credentials and corrupt items fail the same way every time; the handler still
    /// reports them, so they reach the DLQ for inspection after the queue's
    /// `maxReceiveCount`. A model answer that was empty or unreadable may come out
    /// right on the next try.
    pub fn retryable(&self) -> bool {
        match self {
            CompactorError::Store(error) => !matches!(error, StoreError::Corrupt(_)),
            CompactorError::Model(error) => !matches!(
                error,
                ModelError::InvalidRequest { .. }
                    | ModelError::PromptTooLong { .. }
                    | ModelError::Authentication { .. }
            ),
            CompactorError::EmptySummary
            | CompactorError::UnusableSummary(_)
            | CompactorError::UnreadableFacts(_)
            | CompactorError::NotFound => true,
            CompactorError::Settings(_) => false,
        }
    }

    /// Short stable code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            CompactorError::Store(_) => "store",
            CompactorError::Model(_) => "model",
            CompactorError::EmptySummary => "empty_summary",
            CompactorError::UnusableSummary(_) => "unusable_summary",
            CompactorError::UnreadableFacts(_) => "unreadable_facts",
            CompactorError::Settings(_) => "settings",
            CompactorError::NotFound => "not_found",
        }
    }
}

/// The compactor service and its ports.
#[derive(Clone)]
pub struct Compactor {
    /// Conversation storage.
    pub store: Arc<dyn Store>,
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

impl Compactor {
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
        let now = (self.clock)();
        crate::store::count_usage(self.store.as_ref(), tenant, now, &counts, "compactor").await;
    }

    /// Runs one job; its model call ends by `deadline`. The job names its contact
    /// only by the head's incarnation: the contact is found through
    /// [`JobStore::find_contact`](crate::store::JobStore::find_contact), and a job whose incarnation no head has (the
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
        let settings =
            crate::tenant::stored_settings(self.tenants.as_ref(), &self.defaults, tenant).await??;
        let incarnation = job.incarnation();
        let key = self.store.find_contact(tenant, incarnation).await?;
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
                self.step(
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
                self.fold(&key, settings, job, deadline).await?
            }
            (Job::Facts { session, .. }, Some(key)) => {
                self.facts(&key, settings, incarnation, *session, deadline)
                    .await?
            }
            (
                Job::Index {
                    session, summarise, ..
                },
                Some(key),
            ) => {
                self.index(&key, settings, incarnation, *session, *summarise, deadline)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fixed_inputs_and_transient_failures_are_retryable() {
        assert!(CompactorError::Store(StoreError::Unavailable("x".into())).retryable());
        assert!(!CompactorError::Store(StoreError::Corrupt("x".into())).retryable());
        assert!(CompactorError::Model(ModelError::Timeout).retryable());
        assert!(CompactorError::Model(ModelError::Unavailable { status: 529 }).retryable());
        assert!(
            !CompactorError::Model(ModelError::InvalidRequest {
                message: "x".into()
            })
            .retryable()
        );
        assert!(!CompactorError::Model(ModelError::Authentication { status: 401 }).retryable());
        assert!(CompactorError::EmptySummary.retryable());
    }
}
