//! The work after a commit, none of it the round's failure: the window messages
//! the commit could not hold given the round's TTL, the closed session's facts, its
//! recall index and a due step requested, and the round's usage counted.

use tracing::{info, warn};

use super::commit::PreparedRound;
use super::turn::TurnPlan;
use super::{Converse, by};
use crate::deadline::Deadline;
use crate::domain::{Incarnation, TenantId};
use crate::jobs::Job;
use crate::metering::UsageCounts;
use crate::metrics::Event;
use crate::store::{ContactKey, MAX_REFRESH_PER_ROUND};
use crate::tenant::Settings;

impl Converse {
    /// Gives the window messages the commit could not hold the round's TTL, in a
    /// transaction of their own, while the deadline allows. A failure is only
    /// logged: the next round tries again, and the window loader survives a
    /// message gone meanwhile.
    pub(super) async fn refresh_rest(
        &self,
        key: &ContactKey,
        prepared: &PreparedRound,
        deadline: Deadline,
    ) {
        let seqs = &prepared.refresh_rest;
        if seqs.is_empty() {
            return;
        }
        let seqs = &seqs[..seqs.len().min(MAX_REFRESH_PER_ROUND)];
        let refresh = self.store.refresh_expiry(
            key,
            &prepared.incarnation,
            prepared.commit.head.session,
            seqs,
            prepared.commit.messages_expire_at,
        );
        match by(deadline, refresh).await {
            Ok(true) => info!(
                refreshed = seqs.len(),
                "window messages kept for the open session"
            ),
            Ok(false) => warn!(
                "the window changed before its expiry was refreshed; the next round tries again"
            ),
            Err(error) => {
                warn!(%error, "could not refresh the window's expiry; the next round tries again")
            }
        }
    }

    /// Requests the closed session's facts and a due step, each while the deadline
    /// allows (a facts request stays pending on the head for the sweep; a step is
    /// requested again by the next round that needs it).
    pub(super) async fn after_commit(
        &self,
        key: &ContactKey,
        settings: &Settings,
        prepared: &PreparedRound,
        plan: &TurnPlan,
        deadline: Deadline,
    ) {
        let incarnation = &prepared.incarnation;
        if let (Some(session), None) = (plan.closed_session, plan.request_facts) {
            info!(
                session,
                "session closed: the sweep already requested its fact extraction"
            );
        }
        if let Some(closed) = plan.request_facts
            && deadline
                .run(self.spend_summary_call(key, settings, "facts"))
                .await
                .unwrap_or(false)
        {
            let job = Job::Facts {
                tenant: key.tenant.clone(),
                incarnation: incarnation.clone(),
                session: closed,
            };
            match deadline.run(self.jobs.enqueue(&job)).await {
                Some(Ok(queued)) => info!(
                    session = closed,
                    queued, "session closed: fact extraction requested"
                ),
                Some(Err(error)) => {
                    warn!(%error, session = closed, "could not request fact extraction; the sweep requests it again")
                }
                None => warn!(
                    session = closed,
                    "no time left to request fact extraction; the sweep requests it again"
                ),
            }
        }
        if let Some(closed) = plan.closed_session {
            self.request_index(key, settings, incarnation, closed, deadline)
                .await;
        }
        if !prepared.step_due {
            return;
        }
        let step = Job::Step {
            tenant: key.tenant.clone(),
            incarnation: incarnation.clone(),
            session: plan.session,
            summarized_until: plan.summarized_until,
            last_seq: prepared.commit.head.last_seq,
        };
        match deadline.run(self.jobs.enqueue(&step)).await {
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                warn!(%error, "could not enqueue a compaction step; the next round retries")
            }
            None => warn!("no time left to enqueue a compaction step; the next round retries"),
        }
    }

    /// Requests the recall index of `closed`, the session this round archived,
    /// while the deadline allows: with a search summary when one of the tenant's
    /// summary calls is left for it. A request the queue did not take is logged and
    /// counted (`IndexRequestsLost`): that session is then left out of recall (its
    /// record, in its archive, still lists it and feeds the digest).
    async fn request_index(
        &self,
        key: &ContactKey,
        settings: &Settings,
        incarnation: &Incarnation,
        closed: u32,
        deadline: Deadline,
    ) {
        let summarise = deadline
            .run(self.spend_summary_call(key, settings, "index"))
            .await
            .unwrap_or(false);
        let job = Job::Index {
            tenant: key.tenant.clone(),
            incarnation: incarnation.clone(),
            session: closed,
            summarise,
        };
        match deadline.run(self.jobs.enqueue(&job)).await {
            Some(Ok(_)) => info!(
                session = closed,
                summarise, "session closed: index requested"
            ),
            Some(Err(error)) => {
                warn!(%error, session = closed, "could not request the session's index");
                Event::new("ask").count("IndexRequestsLost", 1).emit();
            }
            None => {
                warn!(
                    session = closed,
                    "no time left to request the session's index"
                );
                Event::new("ask").count("IndexRequestsLost", 1).emit();
            }
        }
    }

    /// Adds a piece of work's usage to the tenant's count of today, while the
    /// deadline allows; a count that does not land is logged and counted, never
    /// the work's failure.
    pub async fn count_usage(&self, tenant: &TenantId, counts: &UsageCounts, deadline: Deadline) {
        let now = (self.clock)();
        let counted = crate::store::count_usage(self.usage.as_ref(), tenant, now, counts, "ask");
        if deadline.run(counted).await.is_none() {
            warn!("no time left to count the usage; the day's figures miss this work");
            Event::new("ask").count("UsageWriteFailures", 1).emit();
        }
    }
}
