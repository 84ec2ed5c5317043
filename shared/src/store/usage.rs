//! The tenant's usage counts: added to by each piece of work (a round, a job, a
//! channel's message), read per day by the operator's and the platform's routes.

use async_trait::async_trait;
use tracing::warn;

use super::StoreError;
use crate::domain::TenantId;
use crate::metering::{DAY, UsageCounts};
use crate::metrics::Event;

/// The usage counters of each tenant, per day.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Adds `counts` to the tenant's counts of `day` (one write; the counters are
    /// created on first use).
    async fn add_usage(
        &self,
        tenant: &TenantId,
        day: i64,
        counts: &UsageCounts,
    ) -> Result<(), StoreError>;

    /// The tenant's counts of each day from `from` to `to` (inclusive) that has
    /// any, in order.
    async fn usage(
        &self,
        tenant: &TenantId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, UsageCounts)>, StoreError>;
}

/// Adds `counts` to the tenant's usage of `now`'s day (UTC). A count that does not
/// land is logged and counted (`UsageWriteFailures`, under `function`), never the
/// failure of the work it counts.
pub async fn count_usage(
    store: &dyn UsageStore,
    tenant: &TenantId,
    now: i64,
    counts: &UsageCounts,
    function: &str,
) {
    if counts.is_empty() {
        return;
    }
    if let Err(error) = store.add_usage(tenant, now.div_euclid(DAY), counts).await {
        warn!(%error, "could not count the usage; the day's figures miss this work");
        Event::new(function).count("UsageWriteFailures", 1).emit();
    }
}
