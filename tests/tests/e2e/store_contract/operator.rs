//! The contract of `OperatorStore` and the versioned tenant configuration: the
//! contact listing (newest first, per tenant, in pages), fact writes that land only
//! on what they expect (with their provenance and history), the configuration's
//! versions, and the usage counts.

use degrau::domain::{Fact, FactKey, FactRevision, FactSource, TenantId};
use degrau::metering::{TokenCounts, UsageCounts};
use degrau::store::{
    FactExpectation, FactRemoval, FactWrite, JobStore, OperatorStore, RecordStore, StoreError,
    UsageStore,
};
use degrau::tenant::{TenantConfig, TenantStore};

use super::{Backend, NOW, RETAINED, commit, contact_key, exchange, fact, life_of};

pub(super) async fn contacts_list_newest_first_per_tenant_in_pages(backend: impl Backend) {
    let store = backend.store();
    // Activity grows with the number of messages (NOW + last seq).
    for (contact, rounds) in [("ana", 1), ("bia", 2), ("caio", 3)] {
        let key = contact_key("acme", contact);
        let mut head = None;
        for n in 0..rounds {
            head = Some(
                commit(
                    store.as_ref(),
                    &key,
                    exchange(1, head.as_ref(), &format!("q{n}")),
                )
                .await,
            );
        }
    }
    commit(
        store.as_ref(),
        &contact_key("other", "dora"),
        exchange(1, None, "hi"),
    )
    .await;
    let bia = contact_key("acme", "bia");
    let write = FactWrite {
        fact: fact("name", "Bia"),
        expires_at: RETAINED,
        expect: FactExpectation::Absent,
    };
    let life = life_of(store.as_ref(), &bia).await;
    assert!(store.save_facts(&bia, &life, &[write], &[]).await.unwrap());

    let acme = TenantId::parse("acme").unwrap();
    let first = store.contacts(&acme, 2, None, NOW).await.unwrap();
    let listed: Vec<_> = first
        .contacts
        .iter()
        .map(|c| (c.contact.as_str(), c.messages, c.facts, c.last_activity))
        .collect();
    assert_eq!(
        listed,
        vec![("caio", 6, 0, NOW + 6), ("bia", 4, 1, NOW + 4)]
    );
    let next = first.next.expect("a next page");
    let second = store.contacts(&acme, 2, Some(&next), NOW).await.unwrap();
    let listed: Vec<_> = second.contacts.iter().map(|c| c.contact.as_str()).collect();
    assert_eq!((listed, second.next), (vec!["ana"], None));
}

pub(super) async fn a_fact_write_lands_only_on_what_it_expects(backend: impl Backend) {
    let store = backend.store();
    let key = contact_key("acme", "ana");
    commit(store.as_ref(), &key, exchange(1, None, "hi")).await;
    let life = life_of(store.as_ref(), &key).await;
    let write = |fact: Fact, expect| FactWrite {
        fact,
        expires_at: RETAINED,
        expect,
    };
    let first = fact("name", "Ana");
    assert!(
        store
            .save_facts(
                &key,
                &life,
                &[write(first.clone(), FactExpectation::Absent)],
                &[]
            )
            .await
            .unwrap()
    );
    // Absent no longer holds.
    let again = store
        .save_facts(
            &key,
            &life,
            &[write(fact("name", "Anna"), FactExpectation::Absent)],
            &[],
        )
        .await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    // The operator's correction, expecting what it read, with provenance and history.
    let corrected = Fact {
        value: "Ana Lima".into(),
        source: FactSource { session: 1, seq: 2 },
        updated_at: NOW,
        operator: Some("ops-7".into()),
        history: vec![FactRevision {
            value: "Ana".into(),
            source: first.source,
            operator: None,
            updated_at: first.updated_at,
            replaced_at: NOW,
        }],
        ..first.clone()
    };
    let landed = store
        .save_facts(
            &key,
            &life,
            &[write(
                corrected.clone(),
                FactExpectation::UpdatedAt(first.updated_at),
            )],
            &[],
        )
        .await
        .unwrap();
    assert!(landed);
    // A writer that read the first value is now refused, and changes nothing.
    let stale = store
        .save_facts(
            &key,
            &life,
            &[write(
                fact("name", "Anna"),
                FactExpectation::UpdatedAt(first.updated_at),
            )],
            &[],
        )
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    let (_, records) = store.fact_records(&key, NOW).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].fact, corrected);
    assert_eq!(records[0].expires_at, Some(RETAINED));
}

pub(super) async fn a_fact_removal_lands_only_on_the_fact_it_read(backend: impl Backend) {
    let store = backend.store();
    let key = contact_key("acme", "ana");
    commit(store.as_ref(), &key, exchange(1, None, "hi")).await;
    let life = life_of(store.as_ref(), &key).await;
    let first = fact("name", "Ana");
    let put = FactWrite {
        fact: first.clone(),
        expires_at: RETAINED,
        expect: FactExpectation::Absent,
    };
    assert!(store.save_facts(&key, &life, &[put], &[]).await.unwrap());
    // An operator corrects it...
    let corrected = Fact {
        value: "Ana Lima".into(),
        updated_at: NOW,
        ..first.clone()
    };
    let correction = FactWrite {
        fact: corrected.clone(),
        expires_at: RETAINED,
        expect: FactExpectation::UpdatedAt(first.updated_at),
    };
    assert!(
        store
            .save_facts(&key, &life, &[correction], &[])
            .await
            .unwrap()
    );
    // ...so a removal planned on the first value conflicts and removes nothing.
    let stale = store
        .save_facts(&key, &life, &[], &[FactRemoval::of(&first)])
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    let (_, records) = store.fact_records(&key, NOW).await.unwrap();
    assert_eq!(records[0].fact, corrected);
    // One planned on what is stored lands.
    assert!(
        store
            .save_facts(&key, &life, &[], &[FactRemoval::of(&corrected)])
            .await
            .unwrap()
    );
    assert!(store.fact_records(&key, NOW).await.unwrap().1.is_empty());
}

pub(super) async fn facts_outliving_their_head_are_saved_against_a_live_fact(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = contact_key("acme", "ana");
    commit(store.as_ref(), &key, exchange(1, None, "hi")).await;
    let life = life_of(store.as_ref(), &key).await;
    let name = fact("name", "Ana");
    let time = fact("preferred_time", "mornings");
    let seed: Vec<FactWrite> = [&name, &time]
        .into_iter()
        .map(|fact| FactWrite {
            fact: fact.clone(),
            expires_at: RETAINED,
            expect: FactExpectation::Absent,
        })
        .collect();
    assert!(store.save_facts(&key, &life, &seed, &[]).await.unwrap());
    // The transcript expired before the facts: the head is gone.
    backend.delete_head(&key).await;
    let (head, records) = store.fact_records(&key, NOW).await.unwrap();
    assert!(head.is_none());
    assert_eq!(records.len(), 2);
    // A new key lands while the anchor is as read; a stale anchor conflicts.
    let service = Fact {
        updated_at: NOW,
        ..fact("preferred_service", "haircut")
    };
    let new = FactWrite {
        fact: service.clone(),
        expires_at: RETAINED,
        expect: FactExpectation::Absent,
    };
    let stale_anchor = Fact {
        updated_at: NOW - 1,
        ..name.clone()
    };
    let refused = store
        .save_facts_headless(&key, &stale_anchor, std::slice::from_ref(&new), &[])
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    assert!(
        store
            .save_facts_headless(&key, &name, std::slice::from_ref(&new), &[])
            .await
            .unwrap()
    );
    // A removal of the anchor itself, as read.
    assert!(
        store
            .save_facts_headless(&key, &time, &[], &[FactRemoval::of(&time)])
            .await
            .unwrap()
    );
    let (_, records) = store.fact_records(&key, NOW).await.unwrap();
    assert_eq!(records.len(), 2);
    // Once every fact is gone (erased), nothing is written back.
    store.erase_contact(&key, NOW - 1).await.unwrap();
    let after = store
        .save_facts_headless(&key, &name, std::slice::from_ref(&new), &[])
        .await
        .unwrap();
    assert!(!after);
    assert!(store.fact_records(&key, NOW).await.unwrap().1.is_empty());
}

pub(super) async fn a_config_is_replaced_only_from_the_version_it_was_read_at(
    backend: impl Backend,
) {
    let store = backend.store();
    let acme = TenantId::parse("acme").unwrap();
    let config = |model: &str| TenantConfig {
        model: Some(model.into()),
        allowed_fact_keys: Some(vec![FactKey::parse("name").unwrap()]),
        ..TenantConfig::default()
    };
    assert_eq!(store.stored_config(&acme).await.unwrap(), None);
    assert_eq!(
        store.replace_config(&acme, &config("a"), 1).await.unwrap(),
        None,
        "none stored"
    );
    assert_eq!(
        store.replace_config(&acme, &config("a"), 0).await.unwrap(),
        Some(1)
    );
    assert_eq!(
        store.replace_config(&acme, &config("b"), 0).await.unwrap(),
        None
    );
    assert_eq!(
        store.replace_config(&acme, &config("b"), 1).await.unwrap(),
        Some(2)
    );
    // An unconditional write moves the version on too.
    store.put_tenant_config(&acme, &config("c")).await.unwrap();
    let stored = store.stored_config(&acme).await.unwrap().unwrap();
    assert_eq!(stored.version, 3);
    assert_eq!(stored.read().unwrap(), config("c"));
    assert_eq!(
        store.replace_config(&acme, &config("d"), 2).await.unwrap(),
        None
    );
    assert_eq!(store.tenant_config(&acme).await.unwrap(), Some(config("c")));
}

pub(super) async fn usage_adds_up_per_day_and_tenant(backend: impl Backend) {
    let store = backend.store();
    let acme = TenantId::parse("acme").unwrap();
    let other = TenantId::parse("other").unwrap();
    let day = NOW / 86_400;
    let mut round = UsageCounts {
        rounds: 1,
        model_calls: 2,
        tool_calls: 1,
        ..UsageCounts::default()
    };
    round.tokens.insert(
        "claude-x".into(),
        TokenCounts {
            input: 10,
            cache_write_5m: 20,
            cache_write_1h: 5,
            cache_read: 30,
            output: 4,
        },
    );
    store.add_usage(&acme, day, &round).await.unwrap();
    store.add_usage(&acme, day, &round).await.unwrap();
    let summary = UsageCounts {
        summary_calls: 1,
        ..UsageCounts::default()
    };
    store.add_usage(&acme, day + 1, &summary).await.unwrap();
    store.add_usage(&other, day, &round).await.unwrap();
    let days = store.usage(&acme, day - 1, day + 1).await.unwrap();
    assert_eq!(days.len(), 2);
    let (first_day, first) = &days[0];
    assert_eq!(*first_day, day);
    assert_eq!(
        (first.rounds, first.model_calls, first.tool_calls),
        (2, 4, 2)
    );
    assert_eq!(
        first.tokens["claude-x"],
        TokenCounts {
            input: 20,
            cache_write_5m: 40,
            cache_write_1h: 10,
            cache_read: 60,
            output: 8,
        }
    );
    assert_eq!(days[1], (day + 1, summary));
    assert_eq!(store.usage(&acme, day + 2, day + 3).await.unwrap(), vec![]);
}
