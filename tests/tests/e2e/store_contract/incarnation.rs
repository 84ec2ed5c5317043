//! Incarnations across the ports (the conditioned jobs): after an erase, the job
//! writes made for the erased life (a step, facts, the sweep's settle, facts done, a
//! refresh) and a round loaded before the erase change nothing in the contact's new
//! one; a head written before incarnations gets one at its next round or from the
//! sweep (`SweepStore::ensure_incarnation`), and `JobStore::find_contact` finds it
//! by it.

use degrau::domain::{FactKey, Incarnation};
use degrau::store::{
    AppliedStep, JobStore, RecordStore, RoundStore, StoreError, SweepSettle, SweepStore,
};

use super::{
    Backend, NOW, RETAINED, ana, commit, contact_key, exchange, fact_write, life_of, round, settle,
    step, tool_session,
};

pub(super) async fn job_writes_for_an_erased_life_change_nothing_in_the_contacts_new_one(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    let old = life_of(&*store, &key).await;
    let old_head = store.load_memory(&key, NOW).await.unwrap().0.unwrap();
    store.erase_contact(&key, NOW - 1).await.unwrap();
    // The contact writes again: same session, same `summarized_until`, same seqs.
    let fresh = tool_session(&*store, &key).await;
    assert_ne!(fresh.incarnation.as_ref(), Some(&old));
    let before = store.load_turn(&key, NOW).await.unwrap();
    let items = backend.raw_item_count(&key).await;

    let late_step = AppliedStep {
        incarnation: old.clone(),
        ..step(1, 0, 6, "the erased conversation", &[5])
    };
    assert!(!store.apply_step(&key, &late_step).await.unwrap());
    let name = fact_write("name", "Ana", 1, RETAINED);
    assert!(!store.save_facts(&key, &old, &[name], &[]).await.unwrap());
    assert!(
        !store
            .save_facts(
                &key,
                &old,
                &[],
                &[degrau::store::FactRemoval::any(
                    FactKey::parse("name").unwrap(),
                )],
            )
            .await
            .unwrap()
    );
    let due = backend.raw_sweep(&key).await.unwrap().1;
    let sweep = SweepSettle {
        incarnation: old.clone(),
        facts_requested: Some(1),
        ..settle(&fresh, due)
    };
    assert!(!store.settle_sweep(&key, &sweep).await.unwrap());
    assert!(!store.facts_done(&key, &old, 1).await.unwrap());
    assert!(
        !store
            .refresh_expiry(&key, &old, 1, &[1], NOW)
            .await
            .unwrap()
    );
    // A round loaded before the erase cannot land on the new life either.
    let stale = round(
        &key,
        Some(&old_head),
        exchange(1, Some(&old_head), "from the erased life"),
    );
    let err = store.commit_round(&stale).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");

    assert_eq!(store.load_turn(&key, NOW).await.unwrap(), before);
    assert_eq!(backend.raw_item_count(&key).await, items);
}

pub(super) async fn a_head_from_before_incarnations_gets_one_at_its_next_round_or_when_swept(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "hello")).await;
    backend.forget_incarnation(&key).await;
    let legacy = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(legacy.incarnation, None);
    // A round on it gives it the one it carries.
    let next = round(&key, Some(&legacy), exchange(1, Some(&head), "again"));
    let given = next.head.incarnation.clone().unwrap();
    store.commit_round(&next).await.unwrap();
    let after = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(after.incarnation, Some(given.clone()));
    assert_eq!(
        store.find_contact(&key.tenant, &given).await.unwrap(),
        Some(key.clone())
    );
    // The sweep's way: the first candidate wins, later ones read it back.
    backend.forget_incarnation(&key).await;
    let first = Incarnation::random();
    assert_eq!(
        store.ensure_incarnation(&key, &first).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(
        store
            .ensure_incarnation(&key, &Incarnation::random())
            .await
            .unwrap(),
        Some(first)
    );
    let stranger = contact_key("acme", "stranger");
    assert_eq!(
        store
            .ensure_incarnation(&stranger, &Incarnation::random())
            .await
            .unwrap(),
        None
    );
    assert_eq!(backend.raw_item_count(&stranger).await, 0, "no stray head");
}
