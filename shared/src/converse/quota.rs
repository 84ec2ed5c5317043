//! The quotas of a round ([`crate::quota`]): one round spent where a round starts,
//! one summary call spent before a step or a facts job is requested. A spent
//! rounds quota is [`AskError::QuotaExceeded`] (429 with `Retry-After`) with
//! nothing written; a spent summary quota defers the request (logged, counted as
//! `SummaryCallsDeferred`), and a storage failure while counting defers it too,
//! since the round itself is stored.

use tracing::warn;

use super::round::Round;
use super::{AskError, COMMIT_MARGIN, Converse, by};
use crate::deadline::Deadline;
use crate::metrics::Event;
use crate::plan::policy::step_due;
use crate::quota::{QuotaKind, spend};
use crate::store::ContactKey;
use crate::tenant::Settings;

impl Converse {
    /// Spends one of the tenant's rounds for this hour, or refuses the round
    /// (`ask/admit.rs` calls it for a round of the API).
    pub(super) async fn spend_round(
        &self,
        key: &ContactKey,
        settings: &Settings,
        deadline: Deadline,
    ) -> Result<(), AskError> {
        let now = (self.clock)();
        let spent = spend(
            self.quotas.as_ref(),
            &key.tenant,
            QuotaKind::Rounds,
            &settings.quota,
            now,
        );
        match by(deadline, spent).await? {
            Ok(()) => Ok(()),
            Err(exhausted) => {
                warn!(
                    limit = exhausted.limit,
                    retry_after = exhausted.retry_after,
                    "the tenant's rounds for this hour are spent; the round is refused"
                );
                Event::new("ask")
                    .dimension("Kind", QuotaKind::Rounds.as_str())
                    .rollup()
                    .count("QuotaExceeded", 1)
                    .emit();
                Err(AskError::QuotaExceeded(exhausted))
            }
        }
    }

    /// Whether `round` may request a step: when its context makes one due (or its
    /// window was cut at the hard cap, or after "prompt is too long": the cut made
    /// it measure less), one of the tenant's summary calls is spent for it first,
    /// by `deadline` less [`COMMIT_MARGIN`] (none left, or no time to count it:
    /// the next round asks again).
    pub(super) async fn step_allowed(
        &self,
        key: &ContactKey,
        settings: &Settings,
        round: &Round,
        deadline: Deadline,
    ) -> bool {
        let due = step_due(
            settings.context_policy,
            &settings.compaction,
            round.usage.context_tokens(),
            round.stats.hard_capped,
        );
        // Counted before the commit, by the time the commit's margin starts: a slow
        // count defers the step rather than eat the time the commit needs (an
        // ask would then answer "may be stored" with nothing stored).
        due && deadline
            .before(COMMIT_MARGIN)
            .run(self.spend_summary_call(key, settings, "step"))
            .await
            .unwrap_or(false)
    }

    /// Spends one of the tenant's summary calls for this hour; false (the call is
    /// deferred) when they are spent or cannot be counted.
    pub(super) async fn spend_summary_call(
        &self,
        key: &ContactKey,
        settings: &Settings,
        what: &'static str,
    ) -> bool {
        let spent = spend(
            self.quotas.as_ref(),
            &key.tenant,
            QuotaKind::SummaryCalls,
            &settings.quota,
            (self.clock)(),
        )
        .await;
        let reason = match spent {
            Ok(Ok(())) => return true,
            Ok(Err(_)) => "quota",
            Err(error) => {
                warn!(%error, "could not count a summary call");
                "unavailable"
            }
        };
        warn!(
            what,
            reason, "the summary call is deferred: the tenant's summary calls are spent"
        );
        Event::new("ask")
            .dimension("Reason", reason)
            .rollup()
            .count("SummaryCallsDeferred", 1)
            .emit();
        false
    }
}
