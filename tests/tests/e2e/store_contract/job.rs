//! The contract of [`JobStore`]: what the compactor's jobs need.
//!
//! - **Idempotent steps.** `apply_step` applies once, under `summarized_until =
//!   seen`, the step's session and incarnation: a repeated, stale or late step, or
//!   one on an erased contact, writes nothing; its pruned copies leave the
//!   originals intact; a step no single transaction holds is refused.
//! - **Closed sessions.** `load_closed_session` reads the summary a new session's
//!   commit archived and the messages after it, skipping expired ones.
//! - **Facts.** `save_facts` keeps each fact's source and expiry, replaces by key,
//!   removes, writes more than one transaction holds, refuses a batch naming a key
//!   twice, and writes nothing for an erased or unknown contact; `facts_done` clears
//!   only the pending session of the same incarnation.
//! - **Found by incarnation.** `find_contact` finds the head that has it, in its
//!   tenant only, and nothing once the contact is erased.
//!
//! Job writes against a contact's next life are in `incarnation.rs`.

use degrau::domain::{FactKey, FactSource, Head, Incarnation, PendingFacts, TenantId};
use degrau::store::{
    AppliedStep, ClosedSession, FactRemoval, FactWrite, JobStore, MAX_PRUNES_PER_STEP, RecordStore,
    RoundCommit, RoundStore, SessionArchive, SessionFilter, StoreError,
};

use super::{
    Backend, NOW, RETAINED, ana, commit, contact_key, exchange, fact_write, idem, life_of, round,
    seqs, stepped, tool_session,
};

pub(super) async fn a_step_applies_once_and_a_repeat_with_the_same_seen_value_changes_nothing(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    assert!(
        store
            .apply_step(&key, &stepped(&*store, &key, 1, 0, 2, "first", &[5]).await)
            .await
            .unwrap()
    );
    let after = store.load_turn(&key, NOW).await.unwrap();
    let head = after.head.clone().unwrap();
    assert_eq!(
        (head.summarized_until, head.summary.as_deref(), head.steps),
        (2, Some("first"), 1)
    );
    let items = backend.raw_item_count(&key).await;

    // The same job again (another summary, another pruning, the same `seen`).
    assert!(
        !store
            .apply_step(
                &key,
                &stepped(&*store, &key, 1, 0, 4, "again", &[5, 7]).await
            )
            .await
            .unwrap()
    );
    assert_eq!(store.load_turn(&key, NOW).await.unwrap(), after);
    assert_eq!(backend.raw_item_count(&key).await, items);
}

pub(super) async fn a_stale_step_changes_nothing_and_the_next_one_applies(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    assert!(
        store
            .apply_step(&key, &stepped(&*store, &key, 1, 0, 2, "first", &[]).await)
            .await
            .unwrap()
    );
    assert!(
        store
            .apply_step(&key, &stepped(&*store, &key, 1, 2, 6, "second", &[]).await)
            .await
            .unwrap()
    );
    let before = store.load_turn(&key, NOW).await.unwrap();
    // Planned from `summarized_until = 2`, which is no longer stored.
    assert!(
        !store
            .apply_step(&key, &stepped(&*store, &key, 1, 2, 4, "stale", &[5]).await)
            .await
            .unwrap()
    );
    let after = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(after, before);
    let head = after.head.unwrap();
    assert_eq!(
        (head.summarized_until, head.summary.as_deref(), head.steps),
        (6, Some("second"), 2)
    );
    assert_eq!(seqs(&after.window), [(1, 7), (1, 8)]);
}

pub(super) async fn a_fold_planned_before_a_round_landed_changes_nothing(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let head = tool_session(&*store, &key).await;
    // A pause fold planned at this head: then the contact resumes.
    let fold = AppliedStep {
        last_seq: Some(head.last_seq),
        ..stepped(&*store, &key, 1, 0, 2, "folded", &[]).await
    };
    commit(&*store, &key, exchange(1, Some(&head), "back again")).await;
    let before = store.load_turn(&key, NOW).await.unwrap();
    let items = backend.raw_item_count(&key).await;
    assert!(!store.apply_step(&key, &fold).await.unwrap());
    assert_eq!(store.load_turn(&key, NOW).await.unwrap(), before);
    assert_eq!(backend.raw_item_count(&key).await, items);
    // Planned at the head as it now is, it lands.
    let resumed = before.head.unwrap();
    let fold = AppliedStep {
        last_seq: Some(resumed.last_seq),
        ..stepped(&*store, &key, 1, 0, 2, "folded", &[]).await
    };
    assert!(store.apply_step(&key, &fold).await.unwrap());
    assert_eq!(
        store
            .load_turn(&key, NOW)
            .await
            .unwrap()
            .head
            .unwrap()
            .summarized_until,
        2
    );
}

pub(super) async fn a_step_for_a_session_the_head_left_changes_nothing(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let head = tool_session(&*store, &key).await;
    commit(&*store, &key, exchange(2, Some(&head), "new day")).await;
    let before = store.load_turn(&key, NOW).await.unwrap();
    // Session 2 also has `summarized_until = 0`: only the session check refuses.
    assert!(
        !store
            .apply_step(&key, &stepped(&*store, &key, 1, 0, 2, "late", &[5]).await)
            .await
            .unwrap()
    );
    assert_eq!(store.load_turn(&key, NOW).await.unwrap(), before);
    let old = store
        .transcript(&key, SessionFilter::Only(1), 50, None)
        .await
        .unwrap();
    assert!(old.messages.iter().all(|m| m.pruned.is_none()));
}

pub(super) async fn a_step_on_an_erased_contact_changes_nothing_and_writes_no_item(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    store.erase_contact(&key, NOW - 1).await.unwrap();
    assert!(
        !store
            .apply_step(&key, &stepped(&*store, &key, 1, 0, 2, "ghost", &[5]).await)
            .await
            .unwrap()
    );
    assert_eq!(backend.raw_item_count(&key).await, 0);
    // Nor on a contact never seen.
    let bob = contact_key("acme", "bob");
    assert!(
        !store
            .apply_step(&bob, &stepped(&*store, &bob, 1, 0, 0, "ghost", &[]).await)
            .await
            .unwrap()
    );
    assert_eq!(backend.raw_item_count(&bob).await, 0);
}

pub(super) async fn a_step_writes_pruned_copies_that_load_turn_returns_with_the_originals_intact(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    let original = store.load_turn(&key, NOW).await.unwrap().window[4].clone();
    assert_eq!(original.seq, 5);

    let applied = stepped(&*store, &key, 1, 0, 2, "first", &[5]).await;
    assert!(store.apply_step(&key, &applied).await.unwrap());
    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(
        seqs(&turn.window),
        [(1, 3), (1, 4), (1, 5), (1, 6), (1, 7), (1, 8)]
    );
    let pruned = &turn.window[2];
    assert_eq!(pruned.pruned.as_ref(), Some(&applied.prune[0].pruned));
    assert_eq!(pruned.content, original.content);
    assert_eq!(
        pruned.effective_content(),
        applied.prune[0].pruned.as_slice()
    );
    assert!(
        turn.window
            .iter()
            .filter(|m| m.seq != 5)
            .all(|m| m.pruned.is_none())
    );
    // A prune aimed at a message that does not exist fails the whole step.
    assert!(
        !store
            .apply_step(
                &key,
                &stepped(&*store, &key, 1, 2, 4, "second", &[7, 99]).await
            )
            .await
            .unwrap()
    );
    assert_eq!(store.load_turn(&key, NOW).await.unwrap(), turn);
}

pub(super) async fn a_step_that_cannot_fit_one_transaction_is_refused(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    let too_many: Vec<u64> = (1..=MAX_PRUNES_PER_STEP as u64 + 1).collect();
    let err = store
        .apply_step(
            &key,
            &stepped(&*store, &key, 1, 0, 2, "big", &too_many).await,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Other(_)), "{err:?}");
    let err = store
        .apply_step(
            &key,
            &stepped(&*store, &key, 1, 0, 2, "twice", &[5, 5]).await,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Other(_)), "{err:?}");
    assert_eq!(
        store
            .load_turn(&key, NOW)
            .await
            .unwrap()
            .head
            .unwrap()
            .steps,
        0
    );
}

pub(super) async fn a_new_session_commit_archives_the_old_summary_for_load_closed_session(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = tool_session(&*store, &key).await;
    assert!(
        store
            .apply_step(
                &key,
                &stepped(&*store, &key, 1, 0, 4, "Ana wants Tuesday.", &[]).await
            )
            .await
            .unwrap()
    );
    let closing = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    let archive = SessionArchive {
        session: 1,
        summary: closing.summary.clone(),
        summarized_until: closing.summarized_until,
        last_seq: closing.last_seq,
        expires_at: RETAINED,
        excerpt: String::new(),
        ids: Vec::new(),
        ended_at: 0,
    };

    // A losing commit writes no archive either.
    let stale = round(
        &key,
        Some(&Head {
            last_seq: head.last_seq - 1,
            ..head.clone()
        }),
        exchange(2, None, "lost"),
    );
    let stale = RoundCommit {
        archive: Some(archive.clone()),
        ..stale
    };
    let err = store.commit_round(&stale).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert_eq!(backend.raw_archive(&key, 1).await, None);

    let opening = RoundCommit {
        archive: Some(archive.clone()),
        ..round(&key, Some(&closing), exchange(2, Some(&closing), "new day"))
    };
    store.commit_round(&opening).await.unwrap();
    assert_eq!(backend.raw_archive(&key, 1).await, Some(archive));
    let head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!((head.session, head.summary), (2, None));

    let closed = store.load_closed_session(&key, 1, NOW).await.unwrap();
    assert_eq!(closed.summary.as_deref(), Some("Ana wants Tuesday."));
    assert_eq!(seqs(&closed.messages), [(1, 5), (1, 6), (1, 7), (1, 8)]);
    assert_eq!(
        closed.messages[3].to_message().text(),
        "answer to 09:00 please"
    );

    // A session with no archive reads whole, with no summary.
    let open = store.load_closed_session(&key, 2, NOW).await.unwrap();
    assert_eq!(open.summary, None);
    assert_eq!(seqs(&open.messages), [(2, 1), (2, 2)]);
    assert_eq!(
        store.load_closed_session(&key, 7, NOW).await.unwrap(),
        ClosedSession::default()
    );
    // Past the archive's retention, the session is gone.
    assert_eq!(
        store.load_closed_session(&key, 1, RETAINED).await.unwrap(),
        ClosedSession::default()
    );
}

pub(super) async fn an_archive_without_a_summary_loads_the_session_whole_and_skips_expired_messages(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let first = RoundCommit {
        messages_expire_at: NOW,
        ..round(&key, None, exchange(1, None, "old"))
    };
    store.commit_round(&first).await.unwrap();
    let head = commit(&*store, &key, exchange(1, Some(&first.head), "newer")).await;
    let opening = RoundCommit {
        archive: Some(SessionArchive {
            session: 1,
            summary: None,
            summarized_until: 0,
            last_seq: head.last_seq,
            expires_at: RETAINED,
            excerpt: String::new(),
            ids: Vec::new(),
            ended_at: 0,
        }),
        ..round(&key, Some(&head), exchange(2, None, "next"))
    };
    store.commit_round(&opening).await.unwrap();

    let closed = store.load_closed_session(&key, 1, NOW - 1).await.unwrap();
    assert_eq!(closed.summary, None);
    assert_eq!(seqs(&closed.messages), [(1, 1), (1, 2), (1, 3), (1, 4)]);
    // At NOW the first round's messages have expired.
    let closed = store.load_closed_session(&key, 1, NOW).await.unwrap();
    assert_eq!(seqs(&closed.messages), [(1, 3), (1, 4)]);
}

pub(super) async fn saved_facts_keep_source_and_expiry_replace_by_key_and_removals_delete(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    commit(&*store, &key, exchange(1, None, "I'm Ana, mornings please")).await;
    let name = fact_write("name", "Ana", 1, NOW + 3600);
    let time = fact_write("preferred_time", "mornings", 1, NOW + 60);
    assert!(
        store
            .save_facts(
                &key,
                &life_of(&*store, &key).await,
                &[name.clone(), time.clone()],
                &[]
            )
            .await
            .unwrap()
    );
    let (_, facts) = store.load_memory(&key, NOW).await.unwrap();
    assert_eq!(facts, vec![name.fact.clone(), time.fact.clone()]);
    assert_eq!(facts[1].source, FactSource { session: 1, seq: 1 });
    // The expiry was stored with each fact.
    let (_, facts) = store.load_memory(&key, NOW + 60).await.unwrap();
    assert_eq!(facts, vec![name.fact.clone()]);

    let renamed = fact_write("name", "Ana Paula", 2, NOW + 7200);
    let never_stored = FactKey::parse("preferred_service").unwrap();
    assert!(
        store
            .save_facts(
                &key,
                &life_of(&*store, &key).await,
                std::slice::from_ref(&renamed),
                &[
                    FactRemoval::any(FactKey::parse("preferred_time").unwrap()),
                    FactRemoval::any(never_stored),
                ],
            )
            .await
            .unwrap()
    );
    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(turn.facts, vec![renamed.fact]);
    // Head, 2 messages, 1 fact.
    assert_eq!(backend.raw_item_count(&key).await, 4);
    // Nothing to change still answers whether the contact exists.
    assert!(
        store
            .save_facts(&key, &life_of(&*store, &key).await, &[], &[])
            .await
            .unwrap()
    );
}

pub(super) async fn saving_facts_for_an_erased_or_unknown_contact_writes_nothing(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    commit(&*store, &key, exchange(1, None, "hi")).await;
    store.erase_contact(&key, NOW - 1).await.unwrap();
    let name = fact_write("name", "Ana", 1, NOW + 3600);
    assert!(
        !store
            .save_facts(
                &key,
                &life_of(&*store, &key).await,
                std::slice::from_ref(&name),
                &[]
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .save_facts(
                &key,
                &life_of(&*store, &key).await,
                &[],
                &[FactRemoval::any(FactKey::parse("name").unwrap())]
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .save_facts(&key, &life_of(&*store, &key).await, &[], &[])
            .await
            .unwrap()
    );
    assert_eq!(backend.raw_item_count(&key).await, 0);
    // An idempotency record alone is not a contact.
    let bob = contact_key("acme", "bob");
    store
        .claim_request(&bob, &idem("k"), "h", NOW, 30)
        .await
        .unwrap();
    assert!(
        !store
            .save_facts(&bob, &life_of(&*store, &bob).await, &[name], &[])
            .await
            .unwrap()
    );
    assert_eq!(backend.raw_item_count(&bob).await, 1);
}

pub(super) async fn saving_more_facts_than_one_transaction_holds_writes_them_all(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    commit(&*store, &key, exchange(1, None, "hi")).await;
    let writes: Vec<FactWrite> = (0..150)
        .map(|i| fact_write(&format!("k{i:03}"), &format!("v{i}"), 1, NOW + 60))
        .collect();
    assert!(
        store
            .save_facts(&key, &life_of(&*store, &key).await, &writes, &[])
            .await
            .unwrap()
    );
    let (_, facts) = store.load_memory(&key, NOW).await.unwrap();
    assert_eq!(facts.len(), 150);
    let removals: Vec<FactRemoval> = (0..120)
        .map(|i| FactRemoval::any(FactKey::parse(&format!("k{i:03}")).unwrap()))
        .collect();
    assert!(
        store
            .save_facts(&key, &life_of(&*store, &key).await, &[], &removals)
            .await
            .unwrap()
    );
    let (_, facts) = store.load_memory(&key, NOW).await.unwrap();
    assert_eq!(facts.len(), 30);
    assert_eq!(facts[0].key.as_str(), "k120");
}

pub(super) async fn a_fact_batch_naming_a_key_twice_is_refused(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    commit(&*store, &key, exchange(1, None, "hi")).await;
    let name = fact_write("name", "Ana", 1, NOW + 60);
    for (writes, removals) in [
        (vec![name.clone(), name.clone()], vec![]),
        (
            vec![name.clone()],
            vec![FactRemoval::any(FactKey::parse("name").unwrap())],
        ),
    ] {
        let err = store
            .save_facts(&key, &life_of(&*store, &key).await, &writes, &removals)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Other(_)), "{err:?}");
    }
    assert!(store.load_memory(&key, NOW).await.unwrap().1.is_empty());
}

pub(super) async fn a_round_that_requests_facts_leaves_them_pending_until_the_job_is_done(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "hello")).await;
    let life = head.incarnation.clone().unwrap();
    let pending = PendingFacts {
        session: 1,
        since: NOW,
        attempts: 1,
    };
    let mut opening = round(&key, Some(&head), exchange(2, None, "new day"));
    opening.head.facts_pending = Some(pending);
    store.commit_round(&opening).await.unwrap();
    let head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(head.facts_pending, Some(pending));
    // A round that requests nothing leaves it as it is.
    let head = commit(&*store, &key, exchange(2, Some(&head), "more")).await;
    assert_eq!(head.facts_pending, Some(pending));

    // Done for another session, or by another life: nothing changes.
    assert!(!store.facts_done(&key, &life, 2).await.unwrap());
    assert!(
        !store
            .facts_done(&key, &Incarnation::random(), 1)
            .await
            .unwrap()
    );
    assert!(store.facts_done(&key, &life, 1).await.unwrap());
    let head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(head.facts_pending, None);
    assert!(
        !store.facts_done(&key, &life, 1).await.unwrap(),
        "done once"
    );
    let stranger = contact_key("acme", "stranger");
    assert!(!store.facts_done(&stranger, &life, 1).await.unwrap());
    assert_eq!(backend.raw_item_count(&stranger).await, 0, "no stray head");
}

pub(super) async fn a_new_head_gets_an_incarnation_that_finds_its_contact_and_only_in_its_tenant(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "hello")).await;
    let life = head
        .incarnation
        .clone()
        .expect("a new head has an incarnation");
    assert_eq!(
        store.find_contact(&key.tenant, &life).await.unwrap(),
        Some(key.clone())
    );
    let other = TenantId::parse("other-clinic").unwrap();
    assert_eq!(store.find_contact(&other, &life).await.unwrap(), None);
    assert_eq!(
        store
            .find_contact(&key.tenant, &Incarnation::random())
            .await
            .unwrap(),
        None
    );
    // The next round keeps it; another contact has its own.
    let next = commit(&*store, &key, exchange(1, Some(&head), "again")).await;
    assert_eq!(next.incarnation, Some(life.clone()));
    let bob = commit(
        &*store,
        &contact_key("acme", "bob"),
        exchange(1, None, "hi"),
    )
    .await;
    assert_ne!(bob.incarnation, Some(life.clone()));
    // Erased, the contact is found no more.
    store.erase_contact(&key, NOW - 1).await.unwrap();
    assert_eq!(store.find_contact(&key.tenant, &life).await.unwrap(), None);
}
