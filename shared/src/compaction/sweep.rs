//! The scheduled sweep: reads the due heads of the sweep index, bucket by bucket,
//! decides on each by [`crate::plan::sweep::sweep_decision`], requests the extractions
//! it calls for, and settles each head under the condition that it is as read.

use std::collections::HashMap;

use serde::Serialize;
use tracing::{info, instrument, warn};

use super::{CompactorError, Sweeper};
use crate::domain::{Head, Incarnation, TenantId};
use crate::jobs::{Job, Jobs};
use crate::plan::policy::fold_due;
use crate::plan::session::idle_seconds;
use crate::plan::sweep::{
    FACTS_MAX_ATTEMPTS, SWEEP_RETRY_MIN_SECONDS, sweep_decision_folding, sweep_retry_delay,
};
use crate::store::{ContactKey, DueHead, PendingChange, SweepSettle};
use crate::tenant::Settings;

/// What one sweep did. Every due head read counts once: `found = enqueued +
/// skipped + failed`; `buckets_failed` counts the buckets whose index read failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Due heads read from the sweep index.
    pub found: usize,
    /// Fact extractions requested, first requests and requests again alike. The
    /// head is then updated; when that fails (the contact wrote meanwhile, or
    /// storage failed), the job stands and the next sweep or message may request
    /// a harmless duplicate.
    pub enqueued: usize,
    /// Due heads with nothing to request: not idle yet by their tenant's own
    /// timeout (moved to when they are), a pending extraction given up on, or
    /// nothing left to do (taken out of the index).
    pub skipped: usize,
    /// Heads that could not be read, whose tenant config could not be read or was
    /// invalid, or whose job could not be enqueued: left as they were, so the next
    /// sweep tries them again.
    pub failed: usize,
    /// Buckets whose index read failed (their heads wait for the next sweep).
    pub buckets_failed: usize,
    /// Pause folds requested ([`crate::plan::pause_fold`]), besides the counts above
    /// (a head may have both a fold and an extraction requested).
    pub folds: usize,
}

/// How one due head went, for the [`SweepReport`] (with whether a pause fold
/// was requested).
enum Swept {
    Enqueued(bool),
    Skipped(bool),
    Failed,
}

impl Sweeper {
    /// The sweep ([`Compactor::sweep`](super::Compactor::sweep)).
    #[instrument(skip_all)]
    pub(super) async fn sweep(
        &self,
        jobs: &dyn Jobs,
        now: i64,
    ) -> Result<SweepReport, CompactorError> {
        let buckets = self.wiring.defaults.sweep_buckets.max(1);
        let mut report = SweepReport::default();
        let mut tenants: HashMap<TenantId, Settings> = HashMap::new();
        let mut first_error = None;
        for bucket in 0..buckets {
            let candidates = match self
                .index
                .due_heads(bucket, now, self.wiring.defaults.sweep_limit_per_bucket)
                .await
            {
                Ok(candidates) => candidates,
                Err(error) => {
                    warn!(bucket, %error, "sweep: could not read a bucket of the index");
                    report.buckets_failed += 1;
                    first_error.get_or_insert(error);
                    continue;
                }
            };
            report.found += candidates.len();
            for candidate in candidates {
                match self
                    .sweep_head(jobs, bucket, &candidate, now, &mut tenants)
                    .await
                {
                    Swept::Enqueued(fold) => {
                        report.enqueued += 1;
                        report.folds += usize::from(fold);
                    }
                    Swept::Skipped(fold) => {
                        report.skipped += 1;
                        report.folds += usize::from(fold);
                    }
                    Swept::Failed => report.failed += 1,
                }
            }
        }
        info!(
            found = report.found,
            enqueued = report.enqueued,
            skipped = report.skipped,
            failed = report.failed,
            buckets_failed = report.buckets_failed,
            folds = report.folds,
            "sweep done"
        );
        match first_error {
            Some(error) if report.buckets_failed == usize::from(buckets) => Err(error.into()),
            _ => Ok(report),
        }
    }

    /// One due head: read it, decide, enqueue what the decision requests, then
    /// record the decision on the head. A head from before incarnations is given
    /// one first, since the job names the contact only through it.
    async fn sweep_head(
        &self,
        jobs: &dyn Jobs,
        bucket: u8,
        due: &DueHead,
        now: i64,
        tenants: &mut HashMap<TenantId, Settings>,
    ) -> Swept {
        let key = &due.key;
        let head = match self.due_head(bucket, due, now).await {
            Ok(head) => head,
            Err(swept) => return swept,
        };
        let Some(settings) = self.sweep_settings(bucket, &key.tenant, tenants).await else {
            self.back_off(bucket, key, &head, due, now, None).await;
            return Swept::Failed;
        };
        let incarnation = match self.sweep_incarnation(bucket, key, &head).await {
            Ok(Some(incarnation)) => incarnation,
            Ok(None) => return Swept::Skipped(false),
            Err(()) => {
                self.defer(bucket, key, due.due, now + SWEEP_RETRY_MIN_SECONDS)
                    .await;
                return Swept::Failed;
            }
        };
        let decision = sweep_decision_folding(
            &head,
            now,
            settings.session_idle_minutes,
            fold_due(settings.context_policy, &settings.compaction, &head),
        );
        let folded = decision.fold
            && self
                .request_fold(jobs, bucket, key, &head, &incarnation)
                .await;
        if let Some(session) = decision.request
            && !request_facts(jobs, bucket, key, &incarnation, session).await
        {
            let settings = settings.clone();
            self.back_off(bucket, key, &head, due, now, Some(&settings))
                .await;
            return Swept::Failed;
        }
        if decision.abandoned {
            warn!(
                bucket,
                session = head.facts_pending.map(|pending| pending.session),
                attempts = FACTS_MAX_ATTEMPTS,
                "sweep: a fact extraction never completed; giving up on it"
            );
        }
        let settle = SweepSettle {
            incarnation,
            last_activity: head.last_activity,
            due: due.due,
            pending_since: head.facts_pending.map(|pending| pending.since),
            facts_requested: decision.facts_requested,
            pending: decision.pending,
            next_due: decision.next_due,
        };
        self.settle(bucket, key, &settle).await;
        match (decision.request, folded) {
            (Some(_), fold) => Swept::Enqueued(fold),
            (None, fold) => Swept::Skipped(fold),
        }
    }

    /// The due head, read; or what the sweep did about it: an erased contact's
    /// entry goes with it, a head that could not be read is deferred.
    async fn due_head(&self, bucket: u8, due: &DueHead, now: i64) -> Result<Head, Swept> {
        match self.heads.load_head(&due.key).await {
            Ok(Some(head)) => Ok(head),
            Ok(None) => Err(Swept::Skipped(false)),
            Err(error) => {
                warn!(bucket, %error, "sweep: could not read a head");
                self.defer(bucket, &due.key, due.due, now + SWEEP_RETRY_MIN_SECONDS)
                    .await;
                Err(Swept::Failed)
            }
        }
    }

    /// Requests a head's pause fold; a failure is only logged (the fold saves
    /// money, it keeps nothing: the next round writes the whole context, as it
    /// would without the fold). True when enqueued.
    async fn request_fold(
        &self,
        jobs: &dyn Jobs,
        bucket: u8,
        key: &ContactKey,
        head: &Head,
        incarnation: &Incarnation,
    ) -> bool {
        let job = Job::Fold {
            tenant: key.tenant.clone(),
            incarnation: incarnation.clone(),
            session: head.session,
            summarized_until: head.summarized_until,
            last_seq: head.last_seq,
        };
        match jobs.enqueue(&job).await {
            Ok(true) => true,
            Ok(false) => false,
            Err(error) => {
                warn!(bucket, %error, "sweep: could not enqueue a pause fold");
                false
            }
        }
    }

    /// Moves a head the sweep failed on behind the others: due again after
    /// [`sweep_retry_delay`] of how long it has been overdue (its session idle by
    /// its tenant's timeout, or the deployment's when its settings are unusable),
    /// under the condition that it is still as read. A head without an
    /// incarnation (from before them) is deferred as one not read.
    async fn back_off(
        &self,
        bucket: u8,
        key: &ContactKey,
        head: &Head,
        due: &DueHead,
        now: i64,
        settings: Option<&Settings>,
    ) {
        let Some(incarnation) = head.incarnation.clone() else {
            self.defer(bucket, key, due.due, now + SWEEP_RETRY_MIN_SECONDS)
                .await;
            return;
        };
        let idle = settings.map_or(self.wiring.defaults.session_idle_minutes, |settings| {
            settings.session_idle_minutes
        });
        let overdue = now.saturating_sub(head.last_activity.saturating_add(idle_seconds(idle)));
        let settle = SweepSettle {
            incarnation,
            last_activity: head.last_activity,
            due: due.due,
            pending_since: head.facts_pending.map(|pending| pending.since),
            facts_requested: None,
            pending: PendingChange::Keep,
            next_due: Some(now.saturating_add(sweep_retry_delay(overdue))),
        };
        self.settle(bucket, key, &settle).await;
    }

    /// Moves a head the sweep could not read behind the others (see
    /// [`SweepStore::defer_sweep`]); a failure is only logged.
    async fn defer(&self, bucket: u8, key: &ContactKey, due: i64, next_due: i64) {
        if let Err(error) = self.index.defer_sweep(key, due, next_due).await {
            warn!(bucket, %error, "sweep: could not defer a head; it is read first again");
        }
    }

    /// A tenant's settings for the sweep, read once per tenant and run; `None` (and
    /// logged) when they cannot be read or honoured.
    async fn sweep_settings<'a>(
        &self,
        bucket: u8,
        tenant: &TenantId,
        tenants: &'a mut HashMap<TenantId, Settings>,
    ) -> Option<&'a Settings> {
        if !tenants.contains_key(tenant) {
            let stored = crate::tenant::stored_settings(
                self.wiring.tenants.as_ref(),
                &self.wiring.defaults,
                tenant,
            );
            let resolved = match stored.await {
                Ok(settings) => settings.map_err(CompactorError::from),
                Err(error) => Err(error.into()),
            };
            match resolved {
                Ok(settings) => {
                    tenants.insert(tenant.clone(), settings);
                }
                Err(error) => {
                    warn!(bucket, %error, "sweep: no usable settings for a tenant");
                    return None;
                }
            }
        }
        tenants.get(tenant)
    }

    /// The head's incarnation, given one first when it has none (a head from before
    /// incarnations); `Ok(None)` when the head went meanwhile, `Err` (logged) when
    /// storage failed.
    async fn sweep_incarnation(
        &self,
        bucket: u8,
        key: &ContactKey,
        head: &Head,
    ) -> Result<Option<Incarnation>, ()> {
        if let Some(incarnation) = &head.incarnation {
            return Ok(Some(incarnation.clone()));
        }
        self.index
            .ensure_incarnation(key, &Incarnation::random())
            .await
            .map_err(|error| warn!(bucket, %error, "sweep: could not give a head an incarnation"))
    }

    /// Records the sweep's decision on the head; a head that moved on meanwhile,
    /// or a failed write, is left for the next sweep.
    async fn settle(&self, bucket: u8, key: &ContactKey, settle: &SweepSettle) {
        match self.index.settle_sweep(key, settle).await {
            Ok(true) => {}
            Ok(false) => info!(
                bucket,
                "sweep: the head moved on meanwhile; any job is a harmless duplicate"
            ),
            Err(error) => warn!(
                bucket,
                %error,
                "sweep: could not update a head; the next sweep looks at it again"
            ),
        }
    }
}

/// Enqueues the closed session's facts job; false (logged) when it could not be.
async fn request_facts(
    jobs: &dyn Jobs,
    bucket: u8,
    key: &ContactKey,
    incarnation: &Incarnation,
    session: u32,
) -> bool {
    let job = Job::Facts {
        tenant: key.tenant.clone(),
        incarnation: incarnation.clone(),
        session,
    };
    match jobs.enqueue(&job).await {
        Ok(true) => true,
        Ok(false) => {
            warn!(bucket, session, "sweep: no jobs queue is configured");
            false
        }
        Err(error) => {
            warn!(bucket, session, %error, "sweep: could not enqueue a facts job");
            false
        }
    }
}
