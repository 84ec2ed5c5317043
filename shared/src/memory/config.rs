//! The tenants' configs in memory: the `CONFIG` item by tenant, versioned so a
//! replace holds only against the version it read.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::TenantId;
use crate::store::StoreError;
use crate::tenant::{StoredConfig, TenantConfig, TenantStore};

#[async_trait]
impl TenantStore for MemoryStore {
    async fn stored_config(&self, tenant: &TenantId) -> Result<Option<StoredConfig>, StoreError> {
        Ok(self.lock().tenants.get(tenant).cloned())
    }

    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<(), StoreError> {
        let text = config_text(config)?;
        let mut state = self.lock();
        let version = state.tenants.get(tenant).map_or(0, |stored| stored.version) + 1;
        state
            .tenants
            .insert(tenant.clone(), StoredConfig { text, version });
        Ok(())
    }

    async fn replace_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
        expected: u64,
    ) -> Result<Option<u64>, StoreError> {
        let text = config_text(config)?;
        let mut state = self.lock();
        let stored = state.tenants.get(tenant).map_or(0, |stored| stored.version);
        if stored != expected {
            return Ok(None);
        }
        let version = expected + 1;
        state
            .tenants
            .insert(tenant.clone(), StoredConfig { text, version });
        Ok(Some(version))
    }

    async fn tenant_policy(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<crate::platform::TenantPolicy>, StoreError> {
        self.read_policy(tenant)
    }
}

impl MemoryStore {
    /// Stores `text` as the tenant's `CONFIG` item as it is, read or not: a test's
    /// hand-written item (one that no longer reads, say).
    pub fn put_config_text(&self, tenant: &TenantId, text: &str) {
        let mut state = self.lock();
        let version = state.tenants.get(tenant).map_or(0, |stored| stored.version) + 1;
        state.tenants.insert(
            tenant.clone(),
            StoredConfig {
                text: text.to_owned(),
                version,
            },
        );
    }
}

fn config_text(config: &TenantConfig) -> Result<String, StoreError> {
    serde_json::to_string(config).map_err(|err| StoreError::Other(format!("tenant config: {err}")))
}
