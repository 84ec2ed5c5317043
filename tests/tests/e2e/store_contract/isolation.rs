//! Tenant isolation across the ports: two tenants with the same contact id share
//! nothing, neither reads (`load_turn`, `transcript`), nor an idempotency key, nor
//! a first round, nor an erase.

use degrau::store::{Claim, RecordStore, RoundStore, SessionFilter};

use super::{Backend, NOW, commit, contact_key, exchange, fact, idem};

pub(super) async fn tenants_are_isolated_even_with_the_same_contact_id(backend: impl Backend) {
    let store = backend.store();
    let acme = contact_key("acme", "+5511999990000");
    let other = contact_key("other-clinic", "+5511999990000");
    commit(&*store, &acme, exchange(1, None, "acme's")).await;
    backend.put_fact(&acme, fact("name", "Ana"), None).await;
    store
        .claim_request(&acme, &idem("shared-key"), "h", NOW, 30)
        .await
        .unwrap();

    assert_eq!(
        store.load_turn(&other, NOW).await.unwrap(),
        Default::default()
    );
    assert_eq!(
        store
            .transcript(&other, SessionFilter::All, 10, None)
            .await
            .unwrap(),
        Default::default()
    );
    assert_eq!(
        store
            .claim_request(&other, &idem("shared-key"), "other", NOW, 30)
            .await
            .unwrap(),
        Claim::Started
    );
    // The other tenant's first round is a first round, not a conflict.
    commit(&*store, &other, exchange(1, None, "other's")).await;
    assert_eq!(store.erase_contact(&other, NOW - 1).await.unwrap(), 4);

    let turn = store.load_turn(&acme, NOW).await.unwrap();
    assert_eq!(turn.window[0].to_message().text(), "acme's");
    assert_eq!(turn.facts, vec![fact("name", "Ana")]);
}
