//! The in-memory adapter of the [`Quotas`] port (tests only): the same counting
//! and leasing rules as the DynamoDB adapter, under a mutex each.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Counter, QuotaKind, Quotas};
use crate::domain::TenantId;
use crate::store::StoreError;

/// Counts per tenant, kind and period; counters; leases per tenant.
#[derive(Debug, Default)]
pub struct MemoryQuotas {
    counts: Mutex<HashMap<(TenantId, QuotaKind, i64), u32>>,
    counters: Mutex<HashMap<Counter, u32>>,
    leases: Mutex<HashMap<TenantId, HashMap<String, i64>>>,
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

    async fn try_count(
        &self,
        counter: &Counter,
        limit: u32,
        _expires_at: i64,
    ) -> Result<bool, StoreError> {
        let mut counters = self
            .counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let used = counters.entry(counter.clone()).or_default();
        if *used >= limit {
            return Ok(false);
        }
        *used += 1;
        Ok(true)
    }

    async fn acquire_lease(
        &self,
        tenant: &TenantId,
        lease: &str,
        limit: u32,
        now: i64,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        let mut leases = self
            .leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = leases.entry(tenant.clone()).or_default();
        held.retain(|_, until| *until > now);
        if held.len() >= limit as usize {
            return Ok(false);
        }
        held.insert(lease.to_owned(), expires_at);
        Ok(true)
    }

    async fn release_lease(&self, tenant: &TenantId, lease: &str) -> Result<(), StoreError> {
        if let Some(held) = self
            .leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(tenant)
        {
            held.remove(lease);
        }
        Ok(())
    }
}

impl MemoryQuotas {
    /// How many leases of `tenant` are held at `now`.
    pub fn leases_held(&self, tenant: &TenantId, now: i64) -> usize {
        self.leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(tenant)
            .map_or(0, |held| {
                held.values().filter(|until| **until > now).count()
            })
    }
}
