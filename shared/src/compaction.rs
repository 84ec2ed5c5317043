//! The compaction plan: when a step is due, what it folds into the summary, which
//! tool results it prunes, and the hard-cap fallback for a step that is late.
//!
//! Between steps the window is every message after `summarized_until`, so each
//! request is the previous one plus appended messages and the prompt cache keeps
//! working. A step moves the window's start forward to a safe start (see
//! [`crate::window`]) once, which rewrites the cache once.

use crate::domain::{Head, StoredMessage};
use crate::pruning::{PruneDecision, prune_plan};
use crate::window::safe_window_start;

/// The thresholds that drive steps (defaults documented in the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// A step is due once a round's measured context reaches this many tokens.
    pub threshold_tokens: u64,
    /// Messages a step keeps in the window (moved forward to a safe start).
    pub keep_messages: usize,
    /// Above this measured context, `ask` cuts the window itself while a step is late.
    pub hard_limit_tokens: u64,
    /// Tool results older than this many user turns are pruned at a step.
    pub prune_keep_turns: usize,
    /// Only results at least this long (in characters) are worth a placeholder.
    pub prune_min_chars: usize,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            // The cheapest of 4k–32k on the 200-turn benchmark (results/threshold-sweep.md):
            // 0.36 of full history, the early identifier still visible.
            threshold_tokens: 8_000,
            keep_messages: 12,
            hard_limit_tokens: 150_000,
            prune_keep_turns: 2,
            prune_min_chars: 400,
        }
    }
}

impl CompactionPolicy {
    /// Whether a round that measured `context_tokens` should enqueue a step.
    pub fn step_due(&self, context_tokens: u64) -> bool {
        context_tokens >= self.threshold_tokens
    }
}

/// What one step does, computed from the messages after `summarized_until`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPlan {
    /// The `summarized_until` the plan was made from: the step applies only if the
    /// head still holds it.
    pub seen_summarized_until: u64,
    /// How many of the given messages (from the first) fold into the summary.
    pub fold_count: usize,
    /// The new `summarized_until`: the sequence number of the last folded message.
    pub new_summarized_until: u64,
    /// Pruned copies for messages of the kept window.
    pub prune: Vec<PruneDecision>,
}

/// Plans a step, or `None` when none is due or nothing can be folded (the window is
/// already as short as a safe start allows).
///
/// `messages` are the session's messages after `head.summarized_until`, oldest
/// first; any at or before it are ignored.
pub fn plan_step(
    head: &Head,
    messages: &[StoredMessage],
    context_tokens: u64,
    policy: &CompactionPolicy,
) -> Option<StepPlan> {
    if !policy.step_due(context_tokens) {
        return None;
    }
    let skip = messages.partition_point(|m| m.seq <= head.summarized_until);
    let messages = &messages[skip..];
    let start = safe_window_start(messages, policy.keep_messages);
    if start == 0 {
        return None;
    }
    Some(StepPlan {
        seen_summarized_until: head.summarized_until,
        fold_count: skip + start,
        new_summarized_until: messages[start - 1].seq,
        prune: prune_plan(
            &messages[start..],
            policy.prune_keep_turns,
            policy.prune_min_chars,
        ),
    })
}

/// The part of the unsummarised messages a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowCut {
    /// Index of the first message sent.
    pub start: usize,
    /// True when the hard cap cut messages that the summary does not hold yet.
    pub hard_capped: bool,
}

/// The window for the next request: every message after `summarized_until`, unless
/// the last measured context reached the hard limit (the step is late). Then the
/// window is cut at a safe start for this request only: `summarized_until` does not
/// move, so the step still folds those messages into the summary later.
pub fn request_window(
    head: &Head,
    messages: &[StoredMessage],
    policy: &CompactionPolicy,
) -> WindowCut {
    if head.last_context_tokens < policy.hard_limit_tokens {
        return WindowCut {
            start: 0,
            hard_capped: false,
        };
    }
    overflow_cut(messages, policy)
}

/// The cut used once when the model answers "prompt is too long": keep what a step
/// would keep.
pub fn overflow_cut(messages: &[StoredMessage], policy: &CompactionPolicy) -> WindowCut {
    let start = safe_window_start(messages, policy.keep_messages);
    WindowCut {
        start,
        hard_capped: start > 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ContentBlock, Role};
    use serde_json::json;

    fn msg(seq: u64, role: Role, content: Vec<ContentBlock>) -> StoredMessage {
        StoredMessage {
            session: 1,
            seq,
            role,
            content,
            pruned: None,
            usage: None,
            created_at: 0,
        }
    }

    /// `turns` user turns of four messages each: text, tool_use, tool_result, reply.
    fn history(first_seq: u64, turns: usize) -> Vec<StoredMessage> {
        let mut out = Vec::new();
        let mut seq = first_seq;
        for turn in 0..turns {
            let id = format!("toolu_{seq}");
            let parts = [
                (Role::User, ContentBlock::text(format!("turn {turn}"))),
                (
                    Role::Assistant,
                    ContentBlock::tool_use(&id, "list_free_slots", json!({})),
                ),
                (Role::User, ContentBlock::tool_result(&id, "x".repeat(500))),
                (Role::Assistant, ContentBlock::text("ok")),
            ];
            for (role, block) in parts {
                out.push(msg(seq, role, vec![block]));
                seq += 1;
            }
        }
        out
    }

    fn policy() -> CompactionPolicy {
        CompactionPolicy {
            threshold_tokens: 1000,
            keep_messages: 6,
            hard_limit_tokens: 5000,
            prune_keep_turns: 1,
            prune_min_chars: 100,
        }
    }

    #[test]
    fn no_step_below_the_threshold() {
        let head = Head::default();
        assert_eq!(plan_step(&head, &history(1, 5), 999, &policy()), None);
    }

    #[test]
    fn a_due_step_folds_everything_before_the_safe_start() {
        let head = Head::default();
        let messages = history(1, 5);
        let plan = plan_step(&head, &messages, 1000, &policy()).unwrap();
        // 20 messages, keep 6: naive cut at index 14 (a tool_use); next safe start 16.
        assert_eq!(plan.fold_count, 16);
        assert_eq!(plan.new_summarized_until, 16);
        assert_eq!(plan.seen_summarized_until, 0);
        assert!(messages[plan.fold_count].is_user_text_only());
        // The kept window is one turn: no result in it is older than the last turn.
        assert!(plan.prune.is_empty());
    }

    #[test]
    fn a_step_prunes_old_results_in_the_kept_window() {
        let head = Head::default();
        let messages = history(1, 5);
        let wide = CompactionPolicy {
            keep_messages: 9,
            ..policy()
        };
        let plan = plan_step(&head, &messages, 1000, &wide).unwrap();
        assert_eq!(plan.new_summarized_until, 12);
        // Kept: turns at seq 13 and 17; the result at seq 15 is older than the last turn.
        assert_eq!(
            plan.prune.iter().map(|d| d.seq).collect::<Vec<_>>(),
            vec![15]
        );
    }

    #[test]
    fn a_later_step_starts_from_summarized_until() {
        let head = Head {
            summarized_until: 8,
            ..Head::default()
        };
        let messages = history(1, 5);
        let plan = plan_step(&head, &messages, 5000, &policy()).unwrap();
        assert_eq!(plan.seen_summarized_until, 8);
        assert_eq!(plan.fold_count, 16, "counted from the first message given");
        assert_eq!(plan.new_summarized_until, 16);
    }

    #[test]
    fn nothing_to_fold_when_the_window_is_already_short() {
        let head = Head {
            summarized_until: 16,
            ..Head::default()
        };
        assert_eq!(plan_step(&head, &history(17, 1), 5000, &policy()), None);
    }

    #[test]
    fn the_hard_cap_cuts_only_when_the_limit_was_reached_and_keeps_summarized_until() {
        let messages = history(1, 5);
        let calm = Head {
            last_context_tokens: 4999,
            ..Head::default()
        };
        assert_eq!(
            request_window(&calm, &messages, &policy()),
            WindowCut {
                start: 0,
                hard_capped: false
            }
        );
        let late = Head {
            last_context_tokens: 5000,
            ..Head::default()
        };
        let cut = request_window(&late, &messages, &policy());
        assert_eq!(
            cut,
            WindowCut {
                start: 16,
                hard_capped: true
            }
        );
        assert!(messages[cut.start].is_user_text_only());
    }
}
