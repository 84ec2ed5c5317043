//! The contract of [`PolicyStore`] (and the `TenantStore` side that reads a
//! policy): a tenant's policy is replaced only from the version read and reads
//! back as written, per tenant; one that no longer reads is `InvalidConfig`; and a
//! tenant is listed, in id order and in pages, once it has a config, a policy or
//! counted usage.

use degrau::domain::TenantId;
use degrau::metering::UsageCounts;
use degrau::platform::{FairShare, PolicyStore, TenantPolicy};
use degrau::store::{StoreError, UsageStore};
use degrau::tenant::{TenantConfig, TenantStore};

use super::Backend;

pub(super) async fn a_policy_is_replaced_only_from_the_version_read_and_reads_back_per_tenant(
    backend: impl Backend,
) {
    let store = backend.store();
    let acme = TenantId::parse("acme").unwrap();
    let other = TenantId::parse("other-clinic").unwrap();
    assert_eq!(store.stored_policy(&acme).await.unwrap(), None);
    assert_eq!(store.tenant_policy(&acme).await.unwrap(), None);
    let policy = TenantPolicy {
        suspended: Some(true),
        fair_share: Some(FairShare {
            concurrency: Some(2),
            ..FairShare::default()
        }),
        ..TenantPolicy::default()
    };
    assert_eq!(store.replace_policy(&acme, &policy, 1).await.unwrap(), None);
    assert_eq!(
        store.replace_policy(&acme, &policy, 0).await.unwrap(),
        Some(1)
    );
    assert_eq!(store.replace_policy(&acme, &policy, 0).await.unwrap(), None);
    assert_eq!(store.tenant_policy(&acme).await.unwrap(), Some(policy));
    assert_eq!(store.tenant_policy(&other).await.unwrap(), None);
    let lifted = TenantPolicy::default();
    assert_eq!(
        store.replace_policy(&acme, &lifted, 1).await.unwrap(),
        Some(2)
    );
    assert_eq!(
        store.stored_policy(&acme).await.unwrap().unwrap().version,
        2
    );
    assert_eq!(store.tenant_policy(&acme).await.unwrap(), Some(lifted));
}

pub(super) async fn tenants_are_listed_by_id_in_pages_once_they_have_a_config_a_policy_or_usage(
    backend: impl Backend,
) {
    let store = backend.store();
    let ids = ["b-config", "a-policy", "c-usage"].map(|id| TenantId::parse(id).unwrap());
    assert!(store.tenants(10, None).await.unwrap().tenants.is_empty());
    store
        .put_tenant_config(&ids[0], &TenantConfig::default())
        .await
        .unwrap();
    store
        .replace_policy(&ids[1], &TenantPolicy::default(), 0)
        .await
        .unwrap();
    let usage = UsageCounts {
        rounds: 1,
        ..UsageCounts::default()
    };
    store.add_usage(&ids[2], 20_000, &usage).await.unwrap();
    store.add_usage(&ids[2], 20_000, &usage).await.unwrap();
    let all = store.tenants(10, None).await.unwrap();
    let names: Vec<&str> = all.tenants.iter().map(TenantId::as_str).collect();
    assert_eq!(names, ["a-policy", "b-config", "c-usage"]);
    assert_eq!(all.next, None);
    let first = store.tenants(2, None).await.unwrap();
    assert_eq!(first.tenants.len(), 2);
    let rest = store.tenants(2, first.next.as_ref()).await.unwrap();
    let names: Vec<&str> = rest.tenants.iter().map(TenantId::as_str).collect();
    assert_eq!(names, ["c-usage"]);
    assert_eq!(rest.next, None);
}

pub(super) async fn a_stored_policy_that_no_longer_reads_is_invalid_config(backend: impl Backend) {
    let store = backend.store();
    let acme = TenantId::parse("acme").unwrap();
    backend
        .put_raw_policy(&acme, r#"{"fair_share": {"concurrency": 0}}"#)
        .await;
    let error = store.tenant_policy(&acme).await.unwrap_err();
    assert!(
        matches!(&error, StoreError::InvalidConfig(why) if why.contains("fair_share.concurrency")),
        "{error:?}"
    );
}
