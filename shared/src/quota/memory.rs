//! The in-memory adapter of the [`Quotas`] port (tests only): the same counting
//! rule as the DynamoDB adapter, under one mutex.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{QuotaKind, Quotas};
use crate::domain::TenantId;
use crate::store::StoreError;

/// Counts per tenant, kind and period.
#[derive(Debug, Default)]
pub struct MemoryQuotas {
    counts: Mutex<HashMap<(TenantId, QuotaKind, i64), u32>>,
}

impl MemoryQuotas {
    /// No use counted yet.
    pub fn new() -> Self {
        MemoryQuotas::default()
    }

    /// How many uses of `kind` by `tenant` are counted in `period`.
    pub fn used(&self, tenant: &TenantId, kind: QuotaKind, period: i64) -> u32 {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(tenant.clone(), kind, period))
            .copied()
            .unwrap_or(0)
    }
}

#[async_trait]
impl Quotas for MemoryQuotas {
    async fn try_spend(
        &self,
        tenant: &TenantId,
        kind: QuotaKind,
        period: i64,
        limit: u32,
        _expires_at: i64,
    ) -> Result<bool, StoreError> {
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let used = counts.entry((tenant.clone(), kind, period)).or_default();
        if *used >= limit {
            return Ok(false);
        }
        *used += 1;
        Ok(true)
    }
}
