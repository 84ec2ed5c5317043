//! What a job did ([`JobOutcome`]) and how it failed ([`CompactorError`]).

use crate::model::ModelError;
use crate::store::StoreError;
use crate::tenant::InvalidSettings;

#[cfg(doc)]
use super::NOT_FOUND_RECEIVES;

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
