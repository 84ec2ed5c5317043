//! The pause fold: when a contact falls silent past the lifetime of the last
//! request's cache entries, fold the window down to what a step keeps (even
//! below the threshold), so that the request that resumes the conversation,
//! which writes everything it carries again anyway, writes a small context.
//! Pure rules; the sweep ([`crate::plan::sweep`]) finds the head when its fold is due
//! and the compactor runs the fold.
//!
//! **When to look.** A round's cache entries live five minutes, or an hour when
//! any of its breakpoints asked for one ([`crate::plan::cache_ttl::Lifetimes`]), from
//! the round's last use of them. Every entry of the request is gone once the
//! longest lifetime has passed since the round ([`entries_gone_at`]). A fold
//! rewrites the contact context (the summary is in `system[1]`) and moves the
//! window's start: done while an entry is alive, it would turn the next request's
//! read into a write. So the sweep files the head under that time
//! ([`fold_due_at`]) and never looks earlier: after a ten-minute pause a one-hour
//! entry is still alive, and the head is not even due. The sweep runs every 15
//! minutes, so a fold happens between the expiry and 15 minutes after it. (SQS
//! FIFO queues take no per-message `DelaySeconds`, only a queue-wide delay, so the
//! jobs queue cannot carry a "fold at the expiry" job; the sweep index already
//! holds a due time per head.)
//!
//! **Whether to fold: the expected cost.** In base input tokens of the answer
//! model (a five-minute write 1.25×, a one-hour write 2×, a read 0.1×, output
//! 5×). Once the entries are gone, the next request writes what it carries
//! whatever happens now. Let `C` be the context of the last request (as the model
//! measured it) and `C'` the context the request after a fold carries (the last
//! one without the folded messages, with a new summary about the size of the
//! old one). If the contact writes again in this session, the fold saves `w (C −
//! C')` on that request, `w` the write price of its entries: 2 when the last
//! request held an hour's entry (the rhythm that earned the hour earns it again),
//! 1.25 otherwise. (Every later read of the smaller context saves 0.1× more until
//! the next step; left out, so the rule errs on the side of not folding.) The
//! fold is one more summary request: the instructions `I`, the previous summary
//! `S` and the new one it writes `S'` (estimated as the previous one, at least
//! [`MIN_SUMMARY_TOKENS`]) at the summary model's price `k` relative to the
//! answer model's ([`SUMMARY_PRICE_RATIO`]). The folded messages `F` are read by
//! a summary request either way if the contact writes on (the next step would
//! fold them), so they count only if it does not. With `p` the chance that the
//! contact writes again before the session closes, the fold pays when
//!
//! `p · w (C − C') > k (I + S + 5 S') + (1 − p) k F`,
//!
//! in integers ([`fold_pays`], `p = r / c`, `w = w4 / 4`, `k = 1/3`):
//! `3 r w4 (C − C') > 4 (c (I + S + 5 S') + (c − r) F)`. `p` comes from the
//! contact's recent gaps ([`return_chance`]): of the recorded gaps at least as
//! long as the silence so far, the share shorter than the idle timeout, with one
//! return and one absence added (Laplace's rule), so a contact with no gap that
//! long gets ½.
//!
//! **How much a fold keeps: the rhythm.** In tokens, a smaller kept window is
//! always cheaper (the resume writes less, every later read reads less, and the
//! messages folded now would be read by the next step anyway): the kept window
//! is there for the answer, the recent turns verbatim. A contact who comes back
//! within the hour is mid-thread and gets the step's keep
//! ([`CompactionPolicy::keep_messages`]); one whose likely return is past an hour
//! (of its recorded gaps at least as long as the silence so far, more than half
//! are an hour or longer: past any cache entry's lifetime, a customer answering
//! the next day) starts again from the summary and the last exchanges, and gets
//! the fold's keep ([`CompactionPolicy::fold_keep_messages`], measured by the
//! strategies benchmark's fold-keep sweep). [`fold_keep`] is that rule.
//!
//! (`docs/DESIGN.md`: "The pause fold".)

use crate::plan::cache_ttl::{FIVE_MINUTES, ONE_HOUR};
use crate::plan::session::idle_seconds;
use crate::plan::step_plan::CompactionPolicy;

/// The summary model's price per input token over the answer model's, for the
/// fold's expected cost: the defaults' `claude-haiku-4-5` against
/// `claude-sonnet-5`, $1 against $3 per million (the same ratio holds for
/// output), as a fraction `NUM / DEN`.
pub const SUMMARY_PRICE_RATIO: (u64, u64) = (1, 3);

/// Tokens of the summary request's instructions
/// ([`crate::compaction::SUMMARY_INSTRUCTIONS`], about 1,700 characters) and its
/// tags, rounded up.
pub const SUMMARY_INSTRUCTION_TOKENS: u64 = 500;

/// Least a new summary is counted at: a fold's summary holds at least the
/// record of what it folds.
pub const MIN_SUMMARY_TOKENS: u64 = 150;

/// When every cache entry of a round made at `last_activity` is gone: five
/// minutes after it, or an hour when a breakpoint of the round asked for one.
pub fn entries_gone_at(last_activity: i64, hour: bool) -> i64 {
    let life = if hour { ONE_HOUR } else { FIVE_MINUTES };
    last_activity.saturating_add(i64::from(life))
}

/// When the sweep should look at a head for a fold: when its entries are gone
/// ([`entries_gone_at`]), for a stepped conversation whose last request
/// measured more than a step keeps (`context_tokens` above `keep_tokens`: a
/// smaller one has nothing a fold could take off); `None` otherwise.
pub fn fold_due_at(
    enabled: bool,
    last_activity: i64,
    hour: bool,
    context_tokens: u64,
    keep_tokens: u64,
) -> Option<i64> {
    (enabled && context_tokens > keep_tokens).then(|| entries_gone_at(last_activity, hour))
}

/// Whether a head's fold is due at `now`: its entries are gone, and its session
/// is not idle yet (an idle session closes at the next message, which starts
/// from the facts: a fold would save nothing).
pub fn fold_window(fold_due: Option<i64>, last_activity: i64, now: i64, idle_minutes: u64) -> bool {
    let idle_at = last_activity.saturating_add(idle_seconds(idle_minutes));
    fold_due.is_some_and(|due| due <= now && now < idle_at)
}

/// The chance that a contact silent for `silence` seconds writes again before
/// its session goes idle after `idle_minutes`, from its recorded `gaps`, as a
/// fraction `(returns, cases)`: of the gaps at least as long as the silence, the
/// ones shorter than the idle timeout, with one return and one absence added.
pub fn return_chance(gaps: &[u32], silence: i64, idle_minutes: u64) -> (u64, u64) {
    let idle = idle_seconds(idle_minutes);
    let (cases, returns) = count_as_long(gaps, silence, |gap| gap < idle);
    (returns + 1, cases + 2)
}

/// Of the recorded `gaps` at least as long as `silence`: how many, and how many
/// of them `holds`.
fn count_as_long(gaps: &[u32], silence: i64, holds: impl Fn(i64) -> bool) -> (u64, u64) {
    gaps.iter()
        .map(|&gap| i64::from(gap))
        .filter(|&gap| gap >= silence)
        .fold((0, 0), |(all, held), gap| {
            (all + 1, held + u64::from(holds(gap)))
        })
}

/// How many messages a fold keeps (see the module documentation): the fold's
/// keep (at most the step's) when more than half of the recorded `gaps` at least
/// as long as the `silence` so far are an hour or longer; the step's keep
/// otherwise, and when no gap is that long (nothing says the contact will be
/// away long).
pub fn fold_keep(gaps: &[u32], silence: i64, policy: &CompactionPolicy) -> usize {
    let (long, past_an_hour) = count_as_long(gaps, silence, |gap| gap >= i64::from(ONE_HOUR));
    if 2 * past_an_hour > long {
        policy.fold_keep_messages.min(policy.keep_messages)
    } else {
        policy.keep_messages
    }
}

/// The sizes a fold's decision weighs, in tokens (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FoldSizes {
    /// `C`: the context of the last request, as the model measured it.
    pub context: u64,
    /// `C'`: the context of the request after the fold, estimated.
    pub after: u64,
    /// `S`: the previous summary.
    pub summary: u64,
    /// `F`: the messages the fold would fold, as the summary request shows them.
    pub folded: u64,
    /// Whether the last request held an hour's entry (`w` = 2, else 1.25).
    pub hour: bool,
}

/// The rule (see the module documentation): `p · w (C − C') > k (I + S + 5 S') +
/// (1 − p) k F`, with `p = returns / cases`.
pub fn fold_pays(sizes: FoldSizes, (returns, cases): (u64, u64)) -> bool {
    let (num, den) = SUMMARY_PRICE_RATIO;
    let saved = u128::from(sizes.context.saturating_sub(sizes.after));
    let w4: u128 = if sizes.hour { 8 } else { 5 };
    let request = u128::from(
        SUMMARY_INSTRUCTION_TOKENS + sizes.summary + 5 * sizes.summary.max(MIN_SUMMARY_TOKENS),
    );
    let (r, c) = (u128::from(returns.min(cases)), u128::from(cases));
    // p · w4/4 · saved > num/den · (request + (1 − p) F), times 4 · den · c.
    c > 0
        && u128::from(den) * r * w4 * saved
            > 4 * u128::from(num) * (c * request + (c - r) * u128::from(sizes.folded))
}

#[cfg(test)]
mod tests;
