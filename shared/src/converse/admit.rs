//! Whether a round may start, before anything of it happens
//! ([`crate::fairshare`], [`crate::quota`]): not when the platform suspended the
//! tenant (403); not past the tenant's rounds per minute or the contact's turns
//! per minute, nor while the tenant holds all its leases (429 with `Retry-After`);
//! and, for a round of the API, not past the tenant's rounds for the hour. A
//! refused round writes nothing of the conversation (the counters it spent are the
//! only writes). An ask or a stream holds a lease until it ends ([`Admitted`]).

use tracing::warn;

use super::{AskError, Converse, by};
use crate::deadline::Deadline;
use crate::fairshare::{self, Lease, Throttle};
use crate::metrics::Event;
use crate::store::ContactKey;
use crate::tenant::Settings;

/// Which budget a round spends besides its tenant's fair share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundBudget {
    /// The tenant's API rounds for the hour (`quota.rounds_per_hour`): a round
    /// asked, streamed or recorded through the API.
    Api,
    /// A channel's own budget, which the channel spent before it asked (a
    /// WhatsApp number's turns for the hour): never the API's, so strangers on a
    /// public number cannot spend the business's own rounds.
    Channel,
}

/// An admitted round's lease, given back when it ends.
#[derive(Debug)]
pub(super) struct Admitted(Option<Lease>);

impl Converse {
    /// Admits a round of `key` (see the module), with a lease when `leased` (an
    /// ask or a stream; a recorded round runs no model and holds none).
    pub(super) async fn admit(
        &self,
        key: &ContactKey,
        settings: &Settings,
        (budget, leased): (RoundBudget, bool),
        deadline: Deadline,
    ) -> Result<Admitted, AskError> {
        if settings.policy.suspended {
            warn!("the tenant is suspended by the platform; the round is refused");
            Event::new("ask").count("RoundsSuspended", 1).emit();
            return Err(AskError::Suspended);
        }
        let fair = &settings.policy.fair_share;
        let now = (self.clock)();
        let rates = fairshare::rates(self.quotas.as_ref(), key, fair, now);
        by(deadline, rates).await?.map_err(throttled)?;
        let lease = match leased {
            true => {
                let taken =
                    fairshare::lease(self.quotas.as_ref(), &key.tenant, fair, now, deadline);
                by(deadline, taken).await?.map_err(throttled)?
            }
            false => None,
        };
        let admitted = Admitted(lease);
        if budget == RoundBudget::Api
            && let Err(error) = self.spend_round(key, settings, deadline).await
        {
            self.give_back(admitted, deadline).await;
            return Err(error);
        }
        Ok(admitted)
    }

    /// Gives an admitted round's lease back; one that cannot be stops counting at
    /// its expiry.
    pub(super) async fn give_back(&self, admitted: Admitted, deadline: Deadline) {
        let Admitted(Some(lease)) = admitted else {
            return;
        };
        let released = fairshare::release(self.quotas.as_ref(), &lease);
        // Past the request's own deadline too: a lease is worth freeing.
        let patience = Deadline::at(deadline.instant() + std::time::Duration::from_secs(2));
        if let Err(error) = by(patience, released).await {
            warn!(%error, "could not give a lease back; it frees itself at its expiry");
        }
    }
}

/// A refusal of the fair share: logged and counted by what was limited.
fn throttled(throttle: Throttle) -> AskError {
    warn!(
        limit = throttle.limit,
        what = throttle.what.as_str(),
        retry_after = throttle.retry_after,
        "a fair-share limit refused the round"
    );
    Event::new("ask")
        .dimension("Limit", throttle.what.as_str())
        .rollup()
        .count("RoundsThrottled", 1)
        .emit();
    AskError::Throttled(throttle)
}
