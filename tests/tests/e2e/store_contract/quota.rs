//! The contract of the `Quotas` port (the in-memory quotas and the DynamoDB
//! adapter): an hour's quota and a fair-share counter count to their limit and no
//! further, per tenant, kind or scope and window; a tenant's leases are held to
//! their limit, and one past its expiry or given back frees its place.

use degrau::quota::{Counter, CounterScope, QuotaKind};

use super::{Backend, NOW, contact_key};

pub(super) async fn an_hours_quota_and_a_windows_counter_stop_at_their_limit_per_scope(
    backend: impl Backend,
) {
    let quotas = backend.quotas();
    let ana = contact_key("acme", "ana");
    let tenant = ana.tenant.clone();
    for _ in 0..2 {
        assert!(
            quotas
                .try_spend(&tenant, QuotaKind::Rounds, NOW, 2, NOW + 7200)
                .await
                .unwrap()
        );
    }
    assert!(
        !quotas
            .try_spend(&tenant, QuotaKind::Rounds, NOW, 2, NOW + 7200)
            .await
            .unwrap()
    );
    assert!(
        quotas
            .try_spend(&tenant, QuotaKind::SummaryCalls, NOW, 2, NOW + 7200)
            .await
            .unwrap()
    );
    let counter = |scope: CounterScope, name: &str, window: i64| Counter {
        scope,
        name: name.into(),
        window,
    };
    let contact = counter(CounterScope::Contact(ana.clone()), "turns", NOW);
    assert!(quotas.try_count(&contact, 1, NOW + 120).await.unwrap());
    assert!(!quotas.try_count(&contact, 1, NOW + 120).await.unwrap());
    // Another contact, another name, another window, another tenant: counted apart.
    let bia = counter(
        CounterScope::Contact(contact_key("acme", "bia")),
        "turns",
        NOW,
    );
    assert!(quotas.try_count(&bia, 1, NOW + 120).await.unwrap());
    let tenant_scope = counter(CounterScope::Tenant(tenant.clone()), "turns", NOW);
    assert!(quotas.try_count(&tenant_scope, 1, NOW + 120).await.unwrap());
    let next = counter(CounterScope::Contact(ana.clone()), "turns", NOW + 60);
    assert!(quotas.try_count(&next, 1, NOW + 180).await.unwrap());
    let named = counter(CounterScope::Contact(ana), "wa_turns", NOW);
    assert!(quotas.try_count(&named, 1, NOW + 120).await.unwrap());
    let other = contact_key("other-clinic", "ana");
    let theirs = counter(CounterScope::Contact(other), "turns", NOW);
    assert!(quotas.try_count(&theirs, 1, NOW + 120).await.unwrap());
}

pub(super) async fn leases_are_held_to_the_limit_and_one_expired_or_given_back_frees_its_place(
    backend: impl Backend,
) {
    let quotas = backend.quotas();
    let tenant = contact_key("acme", "ana").tenant;
    assert!(
        quotas
            .acquire_lease(&tenant, "a", 2, NOW, NOW + 30)
            .await
            .unwrap()
    );
    assert!(
        quotas
            .acquire_lease(&tenant, "b", 2, NOW, NOW + 10)
            .await
            .unwrap()
    );
    assert!(
        !quotas
            .acquire_lease(&tenant, "c", 2, NOW, NOW + 30)
            .await
            .unwrap()
    );
    // Another tenant's leases are its own.
    let other = contact_key("other-clinic", "ana").tenant;
    assert!(
        quotas
            .acquire_lease(&other, "x", 1, NOW, NOW + 30)
            .await
            .unwrap()
    );
    // Given back, its place is free.
    quotas.release_lease(&tenant, "a").await.unwrap();
    assert!(
        quotas
            .acquire_lease(&tenant, "c", 2, NOW, NOW + 30)
            .await
            .unwrap()
    );
    assert!(
        !quotas
            .acquire_lease(&tenant, "d", 2, NOW, NOW + 30)
            .await
            .unwrap()
    );
    // Past its expiry, a crashed holder's lease no longer counts.
    assert!(
        quotas
            .acquire_lease(&tenant, "d", 2, NOW + 10, NOW + 40)
            .await
            .unwrap()
    );
    // Giving back one not held is nothing.
    quotas.release_lease(&tenant, "never").await.unwrap();
    quotas
        .release_lease(&contact_key("nobody", "x").tenant, "y")
        .await
        .unwrap();
}
