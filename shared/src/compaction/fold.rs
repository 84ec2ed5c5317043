//! A pause fold ([`crate::plan::pause_fold`]): the sweep found a contact silent past
//! its cache entries' lifetime and asked for one. Re-check that nothing moved
//! (no round since, every entry still gone, the session still open), plan what
//! a step would fold (keeping what the contact's rhythm asks for), weigh it, and
//! apply it as a step.

use tracing::info;

use super::{CompactorError, JobOutcome, Steps};
use crate::deadline::Deadline;
use crate::domain::{Fact, Head, Incarnation, StoredMessage};
use crate::plan::pause_fold::{
    FoldSizes, MIN_SUMMARY_TOKENS, fold_keep, fold_pays, fold_window, return_chance,
};
use crate::plan::policy::{fold_barred, fold_due};
use crate::plan::step_plan::{CompactionPolicy, StepPlan, plan_fold, text_tokens};
use crate::store::{AppliedStep, ContactKey, load_whole_turn};
use crate::tenant::Settings;

/// What a fold job names: the head's state when the sweep asked.
pub(super) struct FoldJob<'a> {
    pub(super) incarnation: &'a Incarnation,
    pub(super) session: u32,
    pub(super) summarized_until: u64,
    pub(super) last_seq: u64,
}

impl Steps {
    /// Runs a fold job. Skips (reasons beside a step's): `resumed` (a round came
    /// since the sweep asked: its request wrote the context, which is now
    /// cached), `off` (the tenant's settings turned the fold off), `alive` (an
    /// entry of the last request still lives, or the session went idle),
    /// `not_due` (nothing to fold), `does_not_pay` (the expected cost says no).
    pub(super) async fn fold(
        &self,
        key: &ContactKey,
        settings: &Settings,
        job: FoldJob<'_>,
        deadline: Deadline,
    ) -> Result<JobOutcome, CompactorError> {
        let skipped = |reason| Ok(JobOutcome::StepSkipped { reason });
        let now = (self.common.wiring.clock)();
        let state = load_whole_turn(self.turns.as_ref(), key, now).await?;
        let Some(head) = state
            .head
            .filter(|head| head.incarnation.as_ref() == Some(job.incarnation))
        else {
            return skipped("erased");
        };
        if let Some(reason) = not_due(&head, &job, settings, now) {
            return skipped(reason);
        }
        let (plan, keep, sizes) =
            match fold_plan(&head, (&state.facts, &state.window), settings, now) {
                Ok(fold) => fold,
                Err(reason) => return skipped(reason),
            };
        let (summary, _) = self
            .summarize(
                &key.tenant,
                head.summary.as_deref(),
                &state.window[..plan.fold_count],
                deadline,
            )
            .await?;
        let prune = super::step::capped(plan.prune);
        let pruned = prune.len();
        let step = AppliedStep {
            incarnation: job.incarnation.clone(),
            session: job.session,
            seen_summarized_until: plan.seen_summarized_until,
            new_summarized_until: plan.new_summarized_until,
            summary,
            prune,
            // Nothing may land after a round resumed the conversation meanwhile
            // (the summary call takes seconds).
            last_seq: Some(job.last_seq),
        };
        if !self.steps.apply_step(key, &step).await? {
            return skipped("lost_race");
        }
        info!(
            folded = plan.fold_count,
            from = plan.seen_summarized_until,
            to = plan.new_summarized_until,
            pruned,
            keep,
            context = sizes.context,
            after = sizes.after,
            "pause fold applied"
        );
        Ok(JobOutcome::StepApplied {
            new_summarized_until: plan.new_summarized_until,
            pruned,
        })
    }
}

/// Why the fold asked for is not due on `head`, if it is not: the head moved since
/// the sweep asked (`session_changed`, `stale`, `resumed`), nothing folds it (`off`,
/// `recorded`: [`fold_barred`]), or an entry of the last request still lives, or the session
/// went idle (`alive`).
fn not_due(head: &Head, job: &FoldJob<'_>, settings: &Settings, now: i64) -> Option<&'static str> {
    if head.session != job.session {
        return Some("session_changed");
    }
    if head.summarized_until != job.summarized_until {
        return Some("stale");
    }
    if head.last_seq != job.last_seq {
        return Some("resumed");
    }
    let (policy, compaction) = (settings.context_policy, &settings.compaction);
    if let Some(barred) = fold_barred(policy, compaction, head) {
        return Some(barred);
    }
    let due = fold_due(policy, compaction, head);
    (!fold_window(due, head.last_activity, now, settings.session_idle_minutes)).then_some("alive")
}

/// The fold of a due head: its plan, the messages kept (the contact's rhythm chooses
/// them) and the request's sizes before and after; or why none (`not_due`: nothing
/// to fold; `does_not_pay`: the expected cost says no).
fn fold_plan(
    head: &Head,
    (facts, window): (&[Fact], &[StoredMessage]),
    settings: &Settings,
    now: i64,
) -> Result<(StepPlan, usize, FoldSizes), &'static str> {
    let policy = &settings.compaction;
    let summary_tokens = head.summary.as_deref().map_or(0, text_tokens);
    let prefix_tokens = super::step::prefix_tokens(settings, facts, head.summary.as_deref());
    // The rhythm chooses the kept window: fewer messages for a contact
    // likely to be away past the hour.
    let silence = now.saturating_sub(head.last_activity);
    let keep = fold_keep(&head.recent_gaps, silence, policy);
    let kept = CompactionPolicy {
        keep_messages: keep,
        ..*policy
    };
    let Some((plan, estimate)) = plan_fold(head, window, prefix_tokens, &kept) else {
        return Err("not_due");
    };
    // The request after the fold: the last one without what the fold takes
    // off, with the summary grown by a new record when there was none.
    let growth = if summary_tokens == 0 {
        MIN_SUMMARY_TOKENS
    } else {
        0
    };
    let sizes = FoldSizes {
        context: head.last_context_tokens,
        after: head
            .last_context_tokens
            .saturating_sub(estimate.removed)
            .saturating_add(growth),
        summary: summary_tokens,
        folded: estimate.folded,
        hour: head.cache_hour,
    };
    let chance = return_chance(&head.recent_gaps, silence, settings.session_idle_minutes);
    if !fold_pays(sizes, chance) {
        info!(
            context = sizes.context,
            after = sizes.after,
            folded = sizes.folded,
            keep,
            returns = chance.0,
            cases = chance.1,
            "pause fold: does not pay"
        );
        return Err("does_not_pay");
    }
    Ok((plan, keep, sizes))
}
