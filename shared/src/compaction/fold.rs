//! A pause fold ([`crate::plan::pause_fold`]): the sweep found a contact silent past
//! its cache entries' lifetime and asked for one. Re-check that nothing moved
//! (no round since, every entry still gone, the session still open), plan what
//! a step would fold (keeping what the contact's rhythm asks for), weigh it, and
//! apply it as a step.

use tracing::info;

use super::{Compactor, CompactorError, JobOutcome};
use crate::deadline::Deadline;
use crate::domain::Incarnation;
use crate::plan::pause_fold::{
    FoldSizes, MIN_SUMMARY_TOKENS, fold_due_at, fold_keep, fold_pays, fold_window, return_chance,
};
use crate::plan::request::render_contact_context;
use crate::plan::step_plan::{CompactionPolicy, plan_fold, text_tokens};
use crate::store::{AppliedStep, ContactKey, load_whole_turn};
use crate::tenant::Settings;

/// What a fold job names: the head's state when the sweep asked.
pub(super) struct FoldJob<'a> {
    pub(super) incarnation: &'a Incarnation,
    pub(super) session: u32,
    pub(super) summarized_until: u64,
    pub(super) last_seq: u64,
}

impl Compactor {
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
        let now = (self.clock)();
        let state = load_whole_turn(self.store.as_ref(), key, now).await?;
        let Some(head) = state
            .head
            .filter(|head| head.incarnation.as_ref() == Some(job.incarnation))
        else {
            return skipped("erased");
        };
        if head.session != job.session {
            return skipped("session_changed");
        }
        if head.summarized_until != job.summarized_until {
            return skipped("stale");
        }
        if head.last_seq != job.last_seq {
            return skipped("resumed");
        }
        let policy = &settings.compaction;
        if !policy.pause_fold {
            return skipped("off");
        }
        let due = fold_due_at(
            true,
            head.last_activity,
            head.cache_hour,
            head.last_context_tokens,
            policy.keep_tokens,
        );
        if !fold_window(due, head.last_activity, now, settings.session_idle_minutes) {
            return skipped("alive");
        }
        let summary_tokens = head.summary.as_deref().map_or(0, text_tokens);
        let prefix_tokens = text_tokens(&settings.instructions).saturating_add(text_tokens(
            &render_contact_context(&state.facts, head.summary.as_deref()),
        ));
        // The rhythm chooses the kept window: fewer messages for a contact
        // likely to be away past the hour.
        let silence = now.saturating_sub(head.last_activity);
        let keep = fold_keep(&head.recent_gaps, silence, policy);
        let kept = CompactionPolicy {
            keep_messages: keep,
            ..*policy
        };
        let Some((plan, estimate)) = plan_fold(&head, &state.window, prefix_tokens, &kept) else {
            return skipped("not_due");
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
            return skipped("does_not_pay");
        }
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
        if !self.store.apply_step(key, &step).await? {
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
