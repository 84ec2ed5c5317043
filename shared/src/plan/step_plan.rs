//! The step plan, pure: when a compaction step is due, what it folds into the
//! summary, which tool results it prunes, and the hard-cap fallback for a step that
//! is late. The compactor ([`crate::compaction`]) is the service that applies it;
//! nothing here imports from it.
//!
//! Between steps the window is every message after `summarized_until`, so each
//! request is the previous one plus appended messages and the prompt cache keeps
//! working. A step moves the window's start forward to a safe start (see
//! [`crate::plan::window`]) once, which rewrites the cache once.
//!
//! **Bounded steps.** One step folds at most [`CompactionPolicy::max_fold_tokens`]
//! into the summary: after an outage the span before the kept window can be far
//! longer than one summary request holds, and a request the model refuses as too
//! long would fail the same way on every delivery. The step then stops at the
//! furthest safe start within the budget and says it was capped; the compactor
//! requests the next step at once, so successive steps catch up. The budget is
//! counted by [`fold_cost_tokens`], a character estimate used for this safety cap
//! only: every other context size in degrau is the model's own measure.
//!
//! **A kept window that stays cacheable.** The request right after a step is the
//! tools, the instructions, the new contact context and the kept window; when that
//! is below the model's minimum cacheable length (1,024 tokens for Sonnet models),
//! nothing of it is cached and every request is uncached until the window grows
//! past it. So a step keeps at least [`CompactionPolicy::keep_messages`] messages
//! *and* enough for the instructions, the contact context and the kept window to
//! hold [`CompactionPolicy::keep_tokens`]: of the latest safe start that keeps
//! enough messages and the latest that keeps enough tokens, the window starts at
//! the earlier one. Those sizes are estimates made before the step (the new summary is not
//! written yet), see [`window_tokens`]: the usage the messages carry where it
//! measures them, their characters otherwise; the tools (which the compactor does
//! not know) and the next message only add to the request, so the estimate errs
//! on the side of keeping more.
//! The kept window is sized as the step sends it: a tool result the step prunes
//! counts as its placeholder, so pruning cannot take the request under the minimum.
//!
//! (`docs/DESIGN.md`: "The flows" (a step) and what changed from the brief.)

use crate::domain::{ContentBlock, Head, Role, StoredMessage};
use crate::plan::pruning::{PruneDecision, apply, prune_plan};
use crate::plan::window::safe_window_start;

/// Tool results up to this many characters are shown whole to the summary model
/// (a booking confirmation); longer ones are replaced by their length.
pub const MAX_SHOWN_TOOL_OUTPUT_CHARS: usize = 300;

/// The thresholds that drive steps (defaults documented in the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// A step is due once a round's measured context reaches this many tokens.
    pub threshold_tokens: u64,
    /// Messages a step keeps in the window at least (moved forward to a safe
    /// start).
    pub keep_messages: usize,
    /// Tokens the request after a step holds at least, as estimated before it:
    /// the instructions and contact context ahead of the window, and the window
    /// (see the module documentation); 0 keeps by message count only. At most
    /// half the threshold counts, so a step always folds about half of it.
    pub keep_tokens: u64,
    /// Above this measured context, `ask` cuts the window itself while a step is late.
    pub hard_limit_tokens: u64,
    /// Tool results older than this many user turns are pruned at a step.
    pub prune_keep_turns: usize,
    /// Only results at least this long (in characters) are worth a placeholder.
    pub prune_min_chars: usize,
    /// Most tokens one step folds, as [`fold_cost_tokens`] estimates them.
    pub max_fold_tokens: u64,
    /// Whether a pause past the cache entries' lifetime may fold the window
    /// down to what a step keeps, below the threshold (`PAUSE_FOLD`; see
    /// [`crate::plan::pause_fold`]).
    pub pause_fold: bool,
    /// Messages a pause fold keeps when the contact's likely return is past an
    /// hour (`PAUSE_FOLD_KEEP_MESSAGES`; at most [`Self::keep_messages`]; see
    /// [`crate::plan::pause_fold::fold_keep`]).
    pub fold_keep_messages: usize,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            // The cheapest of 4k–32k on the 200-turn benchmark (results/threshold-sweep.md):
            // 0.36 of full history, the early identifier still visible.
            threshold_tokens: 8_000,
            keep_messages: 12,
            // The minimum cacheable prefix of Sonnet models.
            keep_tokens: 1_024,
            hard_limit_tokens: 150_000,
            prune_keep_turns: 2,
            prune_min_chars: 400,
            // A fifth of a 200,000-token context: with the instructions, the
            // previous record and the answer, one summary request stays far below
            // the summary model's limit.
            max_fold_tokens: 40_000,
            pause_fold: true,
            // The fold-keep sweep (results/pause-fold/fold-keep/): cheaper than 8
            // and 12 under next-day timing, and 2 costs the same.
            fold_keep_messages: 4,
        }
    }
}

/// Characters counted as one token by [`fold_cost_tokens`]: fewer than English
/// averages (about 4), so Portuguese text and JSON are not underestimated.
pub const CHARS_PER_TOKEN_ESTIMATE: u64 = 3;

/// What folding `message` adds to a summary request, in estimated tokens: its
/// text, its tool calls' names and inputs, and its tool results as the request
/// shows them (at most [`MAX_SHOWN_TOOL_OUTPUT_CHARS`] each),
/// plus a little for each line's label, at [`CHARS_PER_TOKEN_ESTIMATE`]
/// characters a token. A safety estimate for [`CompactionPolicy::max_fold_tokens`]
/// only.
pub fn fold_cost_tokens(message: &StoredMessage) -> u64 {
    const LABEL_CHARS: usize = 40;
    let chars: usize = message
        .effective_content()
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => LABEL_CHARS + text.chars().count(),
            ContentBlock::ToolUse { name, input, .. } => {
                LABEL_CHARS + name.chars().count() + input.to_string().chars().count()
            }
            ContentBlock::ToolResult { content, .. } => {
                LABEL_CHARS + content.chars().count().min(MAX_SHOWN_TOOL_OUTPUT_CHARS)
            }
            // The summary request leaves thinking out.
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => 0,
        })
        .sum();
    (chars as u64).div_ceil(CHARS_PER_TOKEN_ESTIMATE)
}

impl CompactionPolicy {
    /// Whether a round that measured `context_tokens` should enqueue a step.
    pub fn step_due(&self, context_tokens: u64) -> bool {
        context_tokens >= self.threshold_tokens
    }
}

/// Characters counted as one token where no usage measures a message, for the
/// token-sized keep: about what English text averages (Portuguese and JSON have
/// more tokens per character), so the estimate is low rather than high and the
/// keep errs on the side of keeping more. (The fold budget's estimate,
/// [`CHARS_PER_TOKEN_ESTIMATE`], errs the other way, for the other reason.)
pub const KEEP_CHARS_PER_TOKEN: u64 = 4;

/// Tokens of a text of `text` as the token-sized keep estimates it.
pub fn text_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(KEEP_CHARS_PER_TOKEN)
}

/// A message's size in a request by its characters: its text, its tool calls'
/// names and inputs and its tool results as sent (the pruned copy when there is
/// one), at [`KEEP_CHARS_PER_TOKEN`]; thinking blocks count for nothing (the API
/// does not count an earlier turn's thinking as context).
fn chars_tokens(message: &StoredMessage) -> u64 {
    let chars: usize = message
        .effective_content()
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.chars().count(),
            ContentBlock::ToolUse { name, input, .. } => {
                name.chars().count() + input.to_string().chars().count()
            }
            ContentBlock::ToolResult { content, .. } => content.chars().count(),
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => 0,
        })
        .sum();
    (chars as u64).div_ceil(KEEP_CHARS_PER_TOKEN)
}

/// The usage of an assistant message that measures it: one that carries usage and
/// no thinking (whose output tokens count thinking the next request leaves out).
fn measuring_usage(message: &StoredMessage) -> Option<crate::usage::Usage> {
    let thinks = message.content.iter().any(ContentBlock::is_thinking);
    match (message.role, message.usage) {
        (Role::Assistant, Some(usage)) if !thinks => Some(usage),
        _ => None,
    }
}

/// Each message's size in the next request, estimated for the token-sized keep:
///
/// - an assistant message whose usage measures it: its `output_tokens`, what the
///   model wrote;
/// - a user message between two such assistant messages, sent as it was (not
///   pruned since): the growth of the measured context from the request before
///   it to the one after, less what the assistant wrote in between. Two requests
///   a step lies between do not extend each other (their contexts drop): a growth
///   under half the message's character estimate is taken for that, and the
///   characters are used instead;
/// - anything else: its characters ([`KEEP_CHARS_PER_TOKEN`]).
pub fn window_tokens(messages: &[StoredMessage]) -> Vec<u64> {
    (0..messages.len())
        .map(|index| {
            let message = &messages[index];
            let by_chars = chars_tokens(message);
            if let Some(usage) = measuring_usage(message) {
                return usage.output_tokens;
            }
            if message.role != Role::User || message.pruned.is_some() {
                return by_chars;
            }
            let before = index
                .checked_sub(1)
                .and_then(|i| measuring_usage(&messages[i]));
            let after = messages.get(index + 1).and_then(measuring_usage);
            match (before, after) {
                (Some(before), Some(after)) => {
                    let grown = after
                        .context_tokens()
                        .checked_sub(before.context_tokens() + before.output_tokens);
                    grown
                        .filter(|&grown| grown > 0 && 2 * grown >= by_chars)
                        .unwrap_or(by_chars)
                }
                _ => by_chars,
            }
        })
        .collect()
}

/// Each message's size in the request after a step, as [`window_tokens`]
/// estimates it once the step's pruning is applied: a result the step prunes
/// counts as its placeholder. The step prunes the same results whichever safe
/// start its window takes (a result is old by its place among the last turns,
/// and the call its placeholder names is kept with it), so the plan over the
/// whole span is the plan of every window the step could keep.
fn sent_tokens(messages: &[StoredMessage], policy: &CompactionPolicy) -> Vec<u64> {
    let prune = prune_plan(messages, policy.prune_keep_turns, policy.prune_min_chars);
    if prune.is_empty() {
        return window_tokens(messages);
    }
    let mut sent = messages.to_vec();
    apply(&mut sent, &prune);
    window_tokens(&sent)
}

/// Where the kept window of a step starts in `messages` (the messages after
/// `summarized_until`): the earlier of the latest safe start keeping
/// [`CompactionPolicy::keep_messages`] messages and the latest safe start whose
/// window, behind `prefix_tokens` of instructions and contact context, holds
/// [`CompactionPolicy::keep_tokens`], or half the threshold when that is less (0
/// when even the whole span does not). The window is sized as the request after
/// the step sends it, with the results the step prunes as placeholders
/// ([`prune_plan`]): sized whole, it could fall under the minimum once pruned.
pub fn kept_window_start(
    messages: &[StoredMessage],
    prefix_tokens: u64,
    policy: &CompactionPolicy,
) -> usize {
    let by_count = safe_window_start(messages, policy.keep_messages);
    let keep_tokens = policy.keep_tokens.min(policy.threshold_tokens / 2);
    if prefix_tokens >= keep_tokens {
        return by_count;
    }
    let tokens = sent_tokens(messages, policy);
    let mut kept = prefix_tokens;
    for index in (0..messages.len()).rev() {
        kept = kept.saturating_add(tokens[index]);
        if kept >= keep_tokens && messages[index].is_user_text_only() {
            return by_count.min(index);
        }
    }
    0
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
    /// True when [`CompactionPolicy::max_fold_tokens`] stopped the step short of
    /// the kept window: another step is due right after it.
    pub capped: bool,
}

/// Plans a step, or `None` when none is due or nothing can be folded (the window is
/// already as short as a safe start allows). A step is due when the last round
/// measured `context_tokens` at the threshold or more, or when the hard cap cut the
/// head's rounds since its last step (`hard_cap_at` is its `summarized_until`): the
/// cut rounds measure less, and what they cut must still be folded.
///
/// `messages` are the session's messages after `head.summarized_until`, oldest
/// first; any at or before it are ignored. `prefix_tokens` estimates what comes
/// before the window in the request after the step (the instructions and the
/// contact context). The step folds everything before the kept window's start
/// ([`kept_window_start`]), or, when that is more than
/// [`CompactionPolicy::max_fold_tokens`], everything before the furthest safe start
/// within the budget (at least one turn, however long: a step always moves).
pub fn plan_step(
    head: &Head,
    messages: &[StoredMessage],
    context_tokens: u64,
    prefix_tokens: u64,
    policy: &CompactionPolicy,
) -> Option<StepPlan> {
    // A head whose rounds the hard cap cut since the last step measured less than
    // its window holds: the cut messages still wait to be folded.
    let capped = head.hard_cap_at == Some(head.summarized_until);
    if !policy.step_due(context_tokens) && !capped {
        return None;
    }
    plan_any(head, messages, prefix_tokens, policy)
}

/// A pause fold's plan ([`crate::plan::pause_fold`]): what a step would fold, whatever
/// the context measured (below the threshold too), and the estimates its
/// decision weighs: what it takes off the request (the folded messages as sent,
/// [`window_tokens`]) and the folded messages' tokens as the summary request
/// shows them ([`fold_cost_tokens`]). `None` when nothing
/// can be folded.
pub fn plan_fold(
    head: &Head,
    messages: &[StoredMessage],
    prefix_tokens: u64,
    policy: &CompactionPolicy,
) -> Option<(StepPlan, FoldEstimate)> {
    let plan = plan_any(head, messages, prefix_tokens, policy)?;
    let skip = messages.partition_point(|m| m.seq <= head.summarized_until);
    let window = &messages[skip..];
    let start = plan.fold_count - skip;
    let removed = window_tokens(&window[..start]).iter().sum();
    let folded = window[..start].iter().map(fold_cost_tokens).sum();
    Some((plan, FoldEstimate { removed, folded }))
}

/// A fold's sizes, estimated before it (see [`plan_fold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldEstimate {
    /// What the fold takes off the request: the folded messages as the last
    /// request sent them ([`window_tokens`]).
    pub removed: u64,
    /// The folded messages, as the summary request shows them.
    pub folded: u64,
}

/// The plan of a step that is due (or a fold): see [`plan_step`].
fn plan_any(
    head: &Head,
    messages: &[StoredMessage],
    prefix_tokens: u64,
    policy: &CompactionPolicy,
) -> Option<StepPlan> {
    let skip = messages.partition_point(|m| m.seq <= head.summarized_until);
    let messages = &messages[skip..];
    let kept = kept_window_start(messages, prefix_tokens, policy);
    if kept == 0 {
        return None;
    }
    let start = capped_fold(&messages[..kept], policy.max_fold_tokens).unwrap_or(kept);
    Some(StepPlan {
        seen_summarized_until: head.summarized_until,
        fold_count: skip + start,
        new_summarized_until: messages[start - 1].seq,
        prune: prune_plan(
            &messages[start..],
            policy.prune_keep_turns,
            policy.prune_min_chars,
        ),
        capped: start < kept,
    })
}

/// Where a fold of `span` (everything before the kept window) must stop to stay
/// within `budget` tokens: `None` when the whole span fits; else the index of the
/// furthest safe start (a text-only user message) whose prefix fits, or of the
/// first safe start after index 0 when not even one turn fits.
fn capped_fold(span: &[StoredMessage], budget: u64) -> Option<usize> {
    let mut cost = 0u64;
    let mut furthest = None;
    for (index, message) in span.iter().enumerate() {
        if index > 0 && message.is_user_text_only() {
            if cost > budget {
                return Some(furthest.unwrap_or(index));
            }
            furthest = Some(index);
        }
        cost = cost.saturating_add(fold_cost_tokens(message));
    }
    (cost > budget).then(|| furthest.unwrap_or(span.len()))
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
/// the last measured context reached the hard limit (the step is late), or an
/// earlier round was cut so and no step has landed since (`hard_cap_at` still
/// equals `summarized_until`: a cut round measures less, which must not switch
/// the cap off while the step is still late). Then the window is cut at a safe
/// start for this request only: `summarized_until` does not move, so the step
/// still folds those messages into the summary later.
pub fn request_window(
    head: &Head,
    messages: &[StoredMessage],
    policy: &CompactionPolicy,
) -> WindowCut {
    let capped_since_the_last_step = head.hard_cap_at == Some(head.summarized_until);
    if head.last_context_tokens < policy.hard_limit_tokens && !capped_since_the_last_step {
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

/// The cut of the one retry after "prompt is too long" (or a context filled while
/// the model wrote), when the refused request's window started at `from`: the
/// overflow cut, or the next safe start after `from` when that cut drops nothing
/// more (the refused request was already cut there: the hard cap of a late step);
/// and when the API said by how many tokens the prompt was over, later safe
/// starts until the messages dropped since `from` cover that and a fifth more (by
/// [`window_tokens`]' estimate), or the window is empty. Without it a window whose
/// last messages alone pass the model's window was refused twice, round after
/// round.
pub fn retry_cut(
    messages: &[StoredMessage],
    policy: &CompactionPolicy,
    from: usize,
    over_by: Option<u64>,
) -> WindowCut {
    let next = |after: usize| {
        (after + 1..messages.len())
            .find(|&index| messages[index].is_user_text_only())
            .unwrap_or(messages.len())
    };
    let mut start = overflow_cut(messages, policy).start;
    if start <= from {
        start = next(from).min(messages.len());
    }
    if let Some(over) = over_by {
        let tokens = window_tokens(messages);
        let needed = over.saturating_add(over / 5);
        let dropped = |start: usize| tokens[from.min(start)..start].iter().sum::<u64>();
        while start < messages.len() && dropped(start) < needed {
            start = next(start);
        }
    }
    WindowCut {
        start,
        hard_capped: start > 0,
    }
}

#[cfg(test)]
mod tests;
