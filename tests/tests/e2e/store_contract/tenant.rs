//! The contract of [`TenantStore`]: a tenant's config reads back as put, per
//! tenant, and a second put replaces it whole.

use degrau::domain::{FactKey, TenantId};
use degrau::tenant::{TenantConfig, TenantStore};

use super::Backend;

pub(super) async fn tenant_configs_round_trip_per_tenant(backend: impl Backend) {
    let store = backend.store();
    let acme = TenantId::parse("acme").unwrap();
    let other = TenantId::parse("other-clinic").unwrap();
    assert_eq!(store.tenant_config(&acme).await.unwrap(), None);
    let config = TenantConfig {
        instructions: Some("Book haircuts.".into()),
        allowed_fact_keys: Some(vec![FactKey::parse("name").unwrap()]),
        compaction_threshold_tokens: Some(8000),
        ..TenantConfig::default()
    };
    store.put_tenant_config(&acme, &config).await.unwrap();
    assert_eq!(store.tenant_config(&acme).await.unwrap(), Some(config));
    assert_eq!(store.tenant_config(&other).await.unwrap(), None);

    let replaced = TenantConfig {
        model: Some("claude-haiku-4-5".into()),
        ..TenantConfig::default()
    };
    store.put_tenant_config(&acme, &replaced).await.unwrap();
    assert_eq!(store.tenant_config(&acme).await.unwrap(), Some(replaced));
}
