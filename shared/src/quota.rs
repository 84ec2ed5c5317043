//! Per-tenant quotas: how many rounds a tenant may run, and how many summary calls
//! (compaction steps and fact extractions) it may cause, per hour. A tenant sets its
//! own in its `CONFIG` (`quota`); the deployment's defaults come from
//! `QUOTA_ROUNDS_PER_HOUR` and `QUOTA_SUMMARY_CALLS_PER_HOUR`.
//!
//! **Rounds.** Every round `ask` runs (`POST .../messages`, a WhatsApp turn) and
//! every round a client records (`POST .../rounds`) spends one, before anything
//! else of it happens, so that a tenant's flood costs no model call once its hour's
//! rounds are spent: the request answers 429 `rate_limited` with `Retry-After` (the
//! seconds left of the hour), and nothing is written. An idempotent replay spends
//! none.
//!
//! **Summary calls.** A round whose context makes a step due spends one before the
//! step is requested, and a session's close one before its facts are requested.
//! When they are spent the round is still stored (its model call was made already)
//! but the step is not requested: `compaction_queued` is false, and the next round
//! past the threshold requests it again once the hour turns (the hard cap keeps the
//! requests within the model's window meanwhile); the facts stay pending on the
//! head, and the sweep requests them again.
//!
//! The count is one item per tenant, kind and hour, written with a conditional
//! increment ([`Quotas::try_spend`]): two instances never spend the last unit twice.
//! The item expires after its hour.

#[cfg(any(test, feature = "test-util"))]
pub mod memory;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::TenantId;
use crate::store::StoreError;

/// The length of a quota's period: an hour, from the hour's start (UTC).
pub const PERIOD_SECONDS: i64 = 3600;

/// How long a count outlives its hour before its item expires.
pub const COUNT_TTL_SECONDS: i64 = 2 * PERIOD_SECONDS;

/// `QUOTA_ROUNDS_PER_HOUR` when unset.
pub const DEFAULT_ROUNDS_PER_HOUR: u32 = 3_000;

/// `QUOTA_SUMMARY_CALLS_PER_HOUR` when unset.
pub const DEFAULT_SUMMARY_CALLS_PER_HOUR: u32 = 1_000;

/// What a quota counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// Rounds, asked or recorded.
    Rounds,
    /// Summary-model calls: compaction steps and fact extractions requested.
    SummaryCalls,
}

impl QuotaKind {
    /// A short, stable name (keys, logs, metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaKind::Rounds => "rounds",
            QuotaKind::SummaryCalls => "summary_calls",
        }
    }
}

/// A tenant's limits per hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Rounds per hour.
    pub rounds_per_hour: u32,
    /// Summary calls per hour.
    pub summary_calls_per_hour: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            rounds_per_hour: DEFAULT_ROUNDS_PER_HOUR,
            summary_calls_per_hour: DEFAULT_SUMMARY_CALLS_PER_HOUR,
        }
    }
}

impl Limits {
    /// The limit of `kind`.
    pub fn of(&self, kind: QuotaKind) -> u32 {
        match kind {
            QuotaKind::Rounds => self.rounds_per_hour,
            QuotaKind::SummaryCalls => self.summary_calls_per_hour,
        }
    }

    /// These limits with a tenant's own over them.
    pub fn with(self, tenant: Option<&QuotaConfig>) -> Limits {
        let Some(tenant) = tenant else {
            return self;
        };
        Limits {
            rounds_per_hour: tenant.rounds_per_hour.unwrap_or(self.rounds_per_hour),
            summary_calls_per_hour: tenant
                .summary_calls_per_hour
                .unwrap_or(self.summary_calls_per_hour),
        }
    }
}

/// The `quota` object of a tenant's `CONFIG`: each field overrides the
/// deployment's default; 0 allows none (a tenant can be suspended so).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Rounds per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_per_hour: Option<u32>,
    /// Summary calls per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_calls_per_hour: Option<u32>,
}

/// The period `now` falls in: the start of its hour.
pub fn period_of(now: i64) -> i64 {
    now.div_euclid(PERIOD_SECONDS) * PERIOD_SECONDS
}

/// Seconds from `now` to the next period (at least 1): a refused request's
/// `Retry-After`.
pub fn seconds_left(now: i64) -> u64 {
    u64::try_from(period_of(now) + PERIOD_SECONDS - now)
        .unwrap_or(1)
        .max(1)
}

/// A quota spent: what to tell the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// Which quota.
    pub kind: QuotaKind,
    /// Its limit per hour.
    pub limit: u32,
    /// Seconds until the next hour.
    pub retry_after: u64,
}

/// Whose a windowed counter is ([`Counter`]): a tenant's (kept in its partition) or
/// a contact's (in the contact's, so an erase takes it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CounterScope {
    /// The tenant's.
    Tenant(TenantId),
    /// One contact's.
    Contact(crate::store::ContactKey),
}

/// A count of uses in one fixed window (a minute, an hour) of one scope: the
/// rates of [`crate::fairshare`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Counter {
    /// Whose.
    pub scope: CounterScope,
    /// What it counts: a short name of `[a-z_0-9#]` (no personal data: a business
    /// number's id at most).
    pub name: String,
    /// The window's start, seconds since the epoch.
    pub window: i64,
}

/// The quotas' storage: the hourly quotas, and the counters and leases of each
/// tenant's fair share ([`crate::fairshare`]).
#[async_trait]
pub trait Quotas: Send + Sync {
    /// Counts one use of `kind` by `tenant` in the period starting at `period`,
    /// unless `limit` uses are counted in it already: true when it was counted.
    /// The count's item expires at `expires_at`.
    async fn try_spend(
        &self,
        tenant: &TenantId,
        kind: QuotaKind,
        period: i64,
        limit: u32,
        expires_at: i64,
    ) -> Result<bool, StoreError>;

    // The fair share's counters and leases. Both adapters (DynamoDB, memory)
    // implement them; the defaults (count nothing, refuse nothing) are for a test's
    // wrapper of the hourly quotas alone, whose tenants set no fair share.

    /// Counts one use on `counter` unless `limit` are counted in its window
    /// already (a conditional increment: two instances never count the last one
    /// twice): true when it was counted. The count expires at `expires_at`.
    async fn try_count(
        &self,
        _counter: &Counter,
        _limit: u32,
        _expires_at: i64,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Takes the lease `lease` of `tenant` until `expires_at`, unless `limit`
    /// leases are held at `now` already (one past its expiry, a crashed holder's,
    /// is not held): true when taken.
    async fn acquire_lease(
        &self,
        _tenant: &TenantId,
        _lease: &str,
        _limit: u32,
        _now: i64,
        _expires_at: i64,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Gives the lease back (nothing when it is not held).
    async fn release_lease(&self, _tenant: &TenantId, _lease: &str) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Spends one use of `kind` at `now` under `limits`, or says how long to wait.
pub async fn spend(
    quotas: &dyn Quotas,
    tenant: &TenantId,
    kind: QuotaKind,
    limits: &Limits,
    now: i64,
) -> Result<Result<(), Exhausted>, StoreError> {
    let limit = limits.of(kind);
    let period = period_of(now);
    let counted = limit > 0
        && quotas
            .try_spend(tenant, kind, period, limit, period + COUNT_TTL_SECONDS)
            .await?;
    Ok(if counted {
        Ok(())
    } else {
        Err(Exhausted {
            kind,
            limit,
            retry_after: seconds_left(now),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_is_the_hour_and_the_wait_runs_to_the_next() {
        assert_eq!(period_of(7_200), 7_200);
        assert_eq!(period_of(7_259), 7_200);
        assert_eq!(seconds_left(7_259), 3_541);
        assert_eq!(seconds_left(7_200), 3_600);
        assert_eq!(seconds_left(10_799), 1);
    }

    #[test]
    fn a_tenant_overrides_each_limit_alone() {
        let defaults = Limits::default();
        assert_eq!(defaults.with(None), defaults);
        let config: QuotaConfig = serde_json::from_str(r#"{"rounds_per_hour": 10}"#).unwrap();
        let limits = defaults.with(Some(&config));
        assert_eq!(limits.rounds_per_hour, 10);
        assert_eq!(
            limits.summary_calls_per_hour,
            defaults.summary_calls_per_hour
        );
        assert!(serde_json::from_str::<QuotaConfig>(r#"{"rounds": 10}"#).is_err());
        assert!(serde_json::from_str::<QuotaConfig>(r#"{"rounds_per_hour": -1}"#).is_err());
    }
}
