//! The context policy's decisions in one place: where the window a request
//! carries starts ([`window_cut`]), when a round asks for a step ([`step_due`]),
//! and when a silent head's pause fold is due ([`fold_due`]). The rooms that act
//! on them ask here: `converse` when it sends a round and when it commits one,
//! `compaction` when the sweep files a head and when the fold job runs. A change
//! of policy is a change of this file.
//!
//! A pause fold is for degrau's own rounds only. A round a client recorded
//! (`POST .../rounds`, from its own loop) was sent with cache entries degrau does
//! not know: folding its window could turn the client's next read into a write,
//! so its head is never due ([`Head::client_round`]).

use crate::domain::{Head, StoredMessage};
use crate::plan::pause_fold::fold_due_at;
use crate::plan::step_plan::{CompactionPolicy, WindowCut, request_window};
use crate::plan::window::safe_window_start;

/// What a request carries of the conversation. degrau's steps are the product; the
/// other two exist so the benchmarks can run the same functions with only this
/// value switched (`CONTEXT_POLICY`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContextPolicy {
    /// Summary plus the window since the last step; steps when the threshold passes.
    #[default]
    Stepped,
    /// Every message of the session, every turn; no steps (the naive client).
    FullHistory,
    /// The last `keep_messages` messages cut at a safe start, every turn; no steps
    /// and no summary (what `trim_messages`-style helpers do).
    SlidingWindow,
}

impl ContextPolicy {
    /// Parses `stepped`, `full` or `sliding`.
    pub fn parse(text: &str) -> Option<ContextPolicy> {
        match text {
            "stepped" => Some(ContextPolicy::Stepped),
            "full" => Some(ContextPolicy::FullHistory),
            "sliding" => Some(ContextPolicy::SlidingWindow),
            _ => None,
        }
    }
}

/// Where the window sent starts before any retry, for the session `session`
/// whose unsummarised messages are `window` and whose head is `head` (`None`: a
/// new contact): a sliding window keeps its last messages; degrau's steps send
/// the window since the last step, cut at the hard cap when a step is late
/// ([`request_window`]); a full history, or a new session, sends it all.
pub fn window_cut(
    policy: ContextPolicy,
    compaction: &CompactionPolicy,
    head: Option<&Head>,
    session: u32,
    window: &[StoredMessage],
) -> WindowCut {
    match (policy, head) {
        (ContextPolicy::SlidingWindow, _) => WindowCut {
            start: safe_window_start(window, compaction.keep_messages),
            hard_capped: false,
        },
        (ContextPolicy::Stepped, Some(head)) if head.session == session => {
            request_window(head, window, compaction)
        }
        _ => WindowCut {
            start: 0,
            hard_capped: false,
        },
    }
}

/// Whether a round that measured `context_tokens` asks for a step: the policy
/// steps, and the context passed the threshold or the hard cap cut the round's
/// window (or the one retry after "prompt is too long" did: the cut made it
/// measure less).
pub fn step_due(
    policy: ContextPolicy,
    compaction: &CompactionPolicy,
    context_tokens: u64,
    hard_capped: bool,
) -> bool {
    policy == ContextPolicy::Stepped && (compaction.step_due(context_tokens) || hard_capped)
}

/// Why no pause fold is ever due on `head`, if none is: the tenant's settings do
/// not fold (`off`: the pause fold turned off, or a policy without steps), or its
/// last round was a client's (`recorded`).
pub fn fold_barred(
    policy: ContextPolicy,
    compaction: &CompactionPolicy,
    head: &Head,
) -> Option<&'static str> {
    if !compaction.pause_fold || policy != ContextPolicy::Stepped {
        return Some("off");
    }
    head.client_round.then_some("recorded")
}

/// When `head`'s pause fold is due: once every cache entry of its last request
/// is gone ([`fold_due_at`]), when nothing bars it ([`fold_barred`]) and its
/// context is past what a step keeps; `None` when never.
pub fn fold_due(policy: ContextPolicy, compaction: &CompactionPolicy, head: &Head) -> Option<i64> {
    fold_due_at(
        fold_barred(policy, compaction, head).is_none(),
        head.last_activity,
        head.cache_hour,
        head.last_context_tokens,
        compaction.keep_tokens,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::pause_fold::entries_gone_at;

    fn silent(context_tokens: u64) -> Head {
        Head {
            last_activity: 1_000,
            last_context_tokens: context_tokens,
            ..Head::default()
        }
    }

    #[test]
    fn a_fold_is_due_once_the_entries_are_gone_for_stepped_rounds_of_degrau_only() {
        let policy = CompactionPolicy {
            keep_tokens: 2_000,
            ..CompactionPolicy::default()
        };
        let stepped = ContextPolicy::Stepped;
        let head = silent(9_000);
        assert_eq!(
            fold_due(stepped, &policy, &head),
            Some(entries_gone_at(1_000, false))
        );
        // A context no larger than a step keeps: nothing to fold.
        assert_eq!(fold_due(stepped, &policy, &silent(2_000)), None);
        // A client's round: its cache entries are not degrau's to know.
        let recorded = Head {
            client_round: true,
            ..head.clone()
        };
        assert_eq!(fold_barred(stepped, &policy, &recorded), Some("recorded"));
        assert_eq!(fold_due(stepped, &policy, &recorded), None);
        // No steps, or the fold turned off.
        for other in [ContextPolicy::FullHistory, ContextPolicy::SlidingWindow] {
            assert_eq!(fold_barred(other, &policy, &head), Some("off"));
            assert_eq!(fold_due(other, &policy, &head), None);
        }
        let off = CompactionPolicy {
            pause_fold: false,
            ..policy
        };
        assert_eq!(fold_due(stepped, &off, &head), None);
    }

    #[test]
    fn a_step_is_due_past_the_threshold_or_after_a_cut_and_only_when_stepping() {
        let policy = CompactionPolicy::default();
        let at = policy.threshold_tokens;
        assert!(step_due(ContextPolicy::Stepped, &policy, at, false));
        assert!(!step_due(ContextPolicy::Stepped, &policy, at - 1, false));
        assert!(step_due(ContextPolicy::Stepped, &policy, 0, true));
        assert!(!step_due(ContextPolicy::FullHistory, &policy, at, true));
        assert!(!step_due(ContextPolicy::SlidingWindow, &policy, at, true));
    }
}
