//! The platform's own routes (`/v1/platform/tenants…`, scope `platform:admin`):
//! list the tenants with their usage, read a tenant's policy, and replace it
//! only from the version read. No tenant token reaches them: the edge checks the
//! platform scope before anything else, and no tenant route writes a policy.
//!
//! (`docs/DESIGN.md`: "The platform over its tenants".)

use std::sync::Arc;

use serde::Serialize;

use super::{UsageDayView, priced};
use crate::domain::TenantId;
use crate::metering::{DAY, MAX_USAGE_DAYS};
use crate::plan::session::Clock;
use crate::platform::{MAX_TENANT_PAGE, Policy, PolicyStore, StoredPolicy, TenantPolicy};
use crate::service::AskError;
use crate::store::{StoreError, UsageStore};
use crate::tenant::Defaults;

/// Tenants listed when no `limit` is asked for.
pub const DEFAULT_TENANT_PAGE: usize = 20;

/// The platform's service and its ports.
#[derive(Clone)]
pub struct PlatformAdmin {
    /// The policies and the list of tenants.
    pub policies: Arc<dyn PolicyStore>,
    /// The tenants' usage counts.
    pub usage: Arc<dyn UsageStore>,
    /// The deployment's defaults and plan.
    pub defaults: Defaults,
    /// The clock.
    pub clock: Clock,
}

/// A tenant's policy item, its version, and the policy in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyState {
    /// The item as stored, when there is one.
    pub stored: Option<StoredPolicy>,
    /// Why it does not read, when it does not (the tenant's rounds then answer
    /// 500 `tenant_config_invalid` until a valid one replaces it).
    pub problem: Option<String>,
    /// The plan with the item over it (the plan alone when the item does not read).
    pub policy: Policy,
}

impl PolicyState {
    /// The version a change must name (0: none stored).
    pub fn version(&self) -> u64 {
        self.stored.as_ref().map_or(0, |stored| stored.version)
    }
}

/// One tenant as the listing shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantSummary {
    /// The tenant's id.
    pub tenant: String,
    /// Whether the platform suspended it.
    pub suspended: bool,
    /// Its policy item's version (0: it runs on the plan).
    pub policy_version: u64,
    /// Its usage over the days asked, added up.
    pub usage: UsageTotals,
}

/// A tenant's usage over several days, added up.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UsageTotals {
    /// Rounds committed.
    pub rounds: u64,
    /// Answer calls.
    pub model_calls: u64,
    /// Summary and fact calls.
    pub summary_calls: u64,
    /// WhatsApp messages in and out.
    pub whatsapp_in: u64,
    /// WhatsApp messages out.
    pub whatsapp_out: u64,
    /// WhatsApp messages a limit held back in the queue.
    pub whatsapp_held: u64,
    /// The cost at the tenant's prices; `None` when a model used has none.
    pub cost_usd: Option<f64>,
}

impl UsageTotals {
    fn add(&mut self, day: &UsageDayView) {
        self.rounds += day.rounds;
        self.model_calls += day.model_calls;
        self.summary_calls += day.summary_calls + day.facts_calls;
        self.whatsapp_in += day.whatsapp_in;
        self.whatsapp_out += day.whatsapp_out;
        self.whatsapp_held += day.whatsapp_held;
        self.cost_usd = self.cost_usd.zip(day.cost_usd).map(|(a, b)| a + b);
    }
}

impl PlatformAdmin {
    /// The service on one store holding both ports (the DynamoDB adapter's, or the
    /// in-memory one).
    pub fn on<S: PolicyStore + UsageStore + 'static>(
        store: Arc<S>,
        defaults: Defaults,
        clock: Clock,
    ) -> PlatformAdmin {
        PlatformAdmin {
            policies: store.clone(),
            usage: store,
            defaults,
            clock,
        }
    }

    /// A page of tenants (by id, after `after`) with their usage from day `from`
    /// to day `to`, inclusive (`None`: today alone).
    pub async fn tenants(
        &self,
        limit: Option<usize>,
        after: Option<&TenantId>,
        days: Option<(i64, i64)>,
    ) -> Result<(Vec<TenantSummary>, Option<TenantId>), AskError> {
        let limit = limit.unwrap_or(DEFAULT_TENANT_PAGE);
        if !(1..=MAX_TENANT_PAGE).contains(&limit) {
            return Err(AskError::InvalidRequest(format!(
                "`limit` must be from 1 to {MAX_TENANT_PAGE}"
            )));
        }
        let today = (self.clock)().div_euclid(DAY);
        let (from, to) = days.unwrap_or((today, today));
        if to < from || to - from >= MAX_USAGE_DAYS {
            return Err(AskError::InvalidRequest(format!(
                "`from` must be on or before `to`, and the range at most {MAX_USAGE_DAYS} days"
            )));
        }
        let page = self.policies.tenants(limit, after).await?;
        let mut summaries = Vec::with_capacity(page.tenants.len());
        for tenant in &page.tenants {
            let state = self.policy(tenant).await?;
            let mut usage = UsageTotals {
                cost_usd: Some(0.0),
                ..UsageTotals::default()
            };
            for (day, counts) in self.usage.usage(tenant, from, to).await? {
                usage.add(&priced(&state.policy.prices, day, counts));
            }
            summaries.push(TenantSummary {
                tenant: tenant.to_string(),
                suspended: state.policy.suspended,
                policy_version: state.version(),
                usage,
            });
        }
        Ok((summaries, page.next))
    }

    /// The tenant's policy item and the policy in force.
    pub async fn policy(&self, tenant: &TenantId) -> Result<PolicyState, AskError> {
        let stored = self.policies.stored_policy(tenant).await?;
        Ok(self.state_of(stored))
    }

    fn state_of(&self, stored: Option<StoredPolicy>) -> PolicyState {
        let read = stored.as_ref().map(StoredPolicy::read).transpose();
        let (item, problem) = match read {
            Ok(item) => (item, None),
            Err(reason) => (None, Some(reason)),
        };
        PolicyState {
            stored,
            problem,
            policy: self.defaults.policy(item.as_ref()),
        }
    }

    /// Replaces the tenant's policy with `text` (a JSON object), checked in full
    /// first, only while the stored version is `expected`; answers the state it
    /// stored, with its own new version.
    pub async fn replace_policy(
        &self,
        tenant: &TenantId,
        text: &str,
        expected: u64,
    ) -> Result<PolicyState, AskError> {
        let candidate = StoredPolicy {
            text: text.to_owned(),
            version: 0,
        };
        let policy: TenantPolicy = candidate
            .read()
            .map_err(|reason| AskError::InvalidRequest(format!("policy: {reason}")))?;
        match self
            .policies
            .replace_policy(tenant, &policy, expected)
            .await?
        {
            Some(version) => {
                let text = serde_json::to_string(&policy)
                    .map_err(|error| AskError::Store(StoreError::Other(error.to_string())))?;
                Ok(self.state_of(Some(StoredPolicy { text, version })))
            }
            None => Err(AskError::PreconditionFailed(format!(
                "the policy is no longer version {expected}: another change landed first; \
                 read it again and reapply"
            ))),
        }
    }
}
