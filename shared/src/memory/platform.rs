//! The platform's port in memory: the tenants' policy items by tenant, versioned
//! like their configs, and the tenants listed from what the store holds of them (a
//! config, a policy or counted usage), as the DynamoDB adapter's registry lists them.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::TenantId;
use crate::platform::{PolicyStore, StoredPolicy, TenantPage, TenantPolicy};
use crate::store::StoreError;

#[async_trait]
impl PolicyStore for MemoryStore {
    async fn stored_policy(&self, tenant: &TenantId) -> Result<Option<StoredPolicy>, StoreError> {
        Ok(self.lock().policies.get(tenant).cloned())
    }

    async fn replace_policy(
        &self,
        tenant: &TenantId,
        policy: &TenantPolicy,
        expected: u64,
    ) -> Result<Option<u64>, StoreError> {
        let text = serde_json::to_string(policy)
            .map_err(|err| StoreError::Other(format!("tenant policy: {err}")))?;
        let mut state = self.lock();
        let stored = state
            .policies
            .get(tenant)
            .map_or(0, |stored| stored.version);
        if stored != expected {
            return Ok(None);
        }
        let version = expected + 1;
        state
            .policies
            .insert(tenant.clone(), StoredPolicy { text, version });
        Ok(Some(version))
    }

    async fn tenants(
        &self,
        limit: usize,
        after: Option<&TenantId>,
    ) -> Result<TenantPage, StoreError> {
        let state = self.lock();
        let known: BTreeSet<&TenantId> = state
            .tenants
            .keys()
            .chain(state.policies.keys())
            .chain(state.usage.keys().map(|(tenant, _)| tenant))
            .filter(|tenant| after.is_none_or(|after| *tenant > after))
            .collect();
        let mut tenants: Vec<TenantId> = known.into_iter().take(limit + 1).cloned().collect();
        let more = tenants.len() > limit;
        tenants.truncate(limit);
        let next = more.then(|| tenants.last().cloned()).flatten();
        Ok(TenantPage { tenants, next })
    }
}

impl MemoryStore {
    /// The tenant's policy item, read (the `TenantStore` side).
    pub(super) fn read_policy(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<TenantPolicy>, StoreError> {
        self.lock()
            .policies
            .get(tenant)
            .map(|stored| stored.read().map_err(StoreError::InvalidConfig))
            .transpose()
    }

    /// Stores `text` as the tenant's `POLICY` item as it is, read or not (a test's
    /// hand-written item).
    pub fn put_policy_text(&self, tenant: &TenantId, text: &str) {
        let mut state = self.lock();
        let version = state
            .policies
            .get(tenant)
            .map_or(0, |stored| stored.version)
            + 1;
        state.policies.insert(
            tenant.clone(),
            StoredPolicy {
                text: text.to_owned(),
                version,
            },
        );
    }
}
