//! The contract of [`RecordStore`]: what the business reads and how a contact is
//! erased.
//!
//! - **Transcript.** `transcript` pages cover every session exactly once, newest
//!   page first and oldest first within a page, by session or all, and never return
//!   a session's archive item.
//! - **Erasure.** `erase_contact` deletes every item of the contact (head,
//!   messages, facts, idempotency records, archives), pages through a long history,
//!   answers how many it deleted (none the second time), and leaves other contacts
//!   and the tenant's config alone. A new head's round begun at or before an erase
//!   of its contact's bucket is refused after it (a late transaction brings no one
//!   back).
//!
//! `load_memory` is checked with the rounds and jobs that write what it reads
//! (`round.rs`, `job.rs`) and with the TTL (`expiry.rs`).

use degrau::store::{
    Claim, ClosedSession, CompletedRequest, Cursor, JobStore, RecordStore, RoundCommit, RoundStore,
    SessionArchive, SessionFilter, StoreError, erase_bucket,
};
use degrau::tenant::{TenantConfig, TenantStore};

use super::{
    Backend, NOW, RETAINED, ana, commit, contact_key, exchange, fact, fact_write, idem, life_of,
    round, seqs, user,
};

pub(super) async fn transcript_pages_cover_every_session_exactly_once_in_order(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    // Session 1: seqs 1..=5; session 2: seqs 1..=4.
    let head = commit(&*store, &key, exchange(1, None, "a")).await;
    commit(&*store, &key, exchange(1, Some(&head), "b")).await;
    let head = commit(&*store, &key, vec![user(1, 5, "c")]).await;
    let head = commit(&*store, &key, exchange(2, Some(&head), "d")).await;
    commit(&*store, &key, exchange(2, Some(&head), "e")).await;
    backend.put_fact(&key, fact("name", "Ana"), None).await;
    assert_eq!(
        store
            .claim_request(&key, &idem("k"), "h", NOW, 30)
            .await
            .unwrap(),
        Claim::Started
    );
    let expected = [
        (1, 1),
        (1, 2),
        (1, 3),
        (1, 4),
        (1, 5),
        (2, 1),
        (2, 2),
        (2, 3),
        (2, 4),
    ];

    // Pages of 3 over 9 messages: exactly 3 pages, the last without a cursor.
    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .transcript(&key, SessionFilter::All, 3, before)
            .await
            .unwrap();
        assert!(page.messages.len() <= 3);
        assert!(
            page.messages
                .windows(2)
                .all(|w| (w[0].session, w[0].seq) < (w[1].session, w[1].seq))
        );
        pages.push(seqs(&page.messages));
        match page.next_before {
            Some(cursor) => {
                let oldest = &page.messages[0];
                assert_eq!(
                    cursor,
                    Cursor {
                        session: oldest.session,
                        seq: oldest.seq
                    }
                );
                before = Some(cursor);
            }
            None => break,
        }
        assert!(pages.len() < 10, "paging does not end");
    }
    assert_eq!(
        pages,
        vec![
            vec![(2, 2), (2, 3), (2, 4)],
            vec![(1, 4), (1, 5), (2, 1)],
            vec![(1, 1), (1, 2), (1, 3)],
        ]
    );
    let all: Vec<_> = pages.into_iter().rev().flatten().collect();
    assert_eq!(all, expected);

    // One session, pages of 2: 4,5 then 2,3 then 1.
    let first = store
        .transcript(&key, SessionFilter::Only(1), 2, None)
        .await
        .unwrap();
    assert_eq!(seqs(&first.messages), [(1, 4), (1, 5)]);
    let second = store
        .transcript(&key, SessionFilter::Only(1), 2, first.next_before)
        .await
        .unwrap();
    assert_eq!(seqs(&second.messages), [(1, 2), (1, 3)]);
    let third = store
        .transcript(&key, SessionFilter::Only(1), 2, second.next_before)
        .await
        .unwrap();
    assert_eq!(seqs(&third.messages), [(1, 1)]);
    assert_eq!(third.next_before, None);

    // A page bigger than the session holds it whole, with no cursor.
    let whole = store
        .transcript(&key, SessionFilter::Only(2), 50, None)
        .await
        .unwrap();
    assert_eq!(seqs(&whole.messages), [(2, 1), (2, 2), (2, 3), (2, 4)]);
    assert_eq!(whole.next_before, None);
    assert_eq!(whole.messages[1].to_message().text(), "answer to d");
    // A cursor from another session's page narrows nothing it should not.
    let older = store
        .transcript(
            &key,
            SessionFilter::Only(1),
            50,
            Some(Cursor { session: 2, seq: 1 }),
        )
        .await
        .unwrap();
    assert_eq!(older.messages.len(), 5);
}

pub(super) async fn the_transcript_of_all_sessions_never_returns_an_archive_item(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let mut head = commit(&*store, &key, exchange(1, None, "one")).await;
    // Sessions 1 to 3 closed and archived, session 4 open.
    for session in 2..=4 {
        let opening = RoundCommit {
            archive: Some(SessionArchive {
                session: session - 1,
                summary: Some(format!("session {}", session - 1)),
                summarized_until: 0,
                last_seq: head.last_seq,
                expires_at: RETAINED,
                excerpt: String::new(),
                ids: Vec::new(),
                ended_at: 0,
            }),
            ..round(&key, Some(&head), exchange(session, None, "again"))
        };
        store.commit_round(&opening).await.unwrap();
        head = opening.head;
    }
    // Head, 8 messages, 3 archives.
    assert_eq!(backend.raw_item_count(&key).await, 12);
    let all = store
        .transcript(&key, SessionFilter::All, 100, None)
        .await
        .unwrap();
    assert_eq!(
        seqs(&all.messages),
        [
            (1, 1),
            (1, 2),
            (2, 1),
            (2, 2),
            (3, 1),
            (3, 2),
            (4, 1),
            (4, 2)
        ]
    );
    assert_eq!(all.next_before, None);
    // Paging from the newest end starts at a message, not at an archive.
    let newest = store
        .transcript(&key, SessionFilter::All, 1, None)
        .await
        .unwrap();
    assert_eq!(seqs(&newest.messages), [(4, 2)]);
    let last_closed = store
        .transcript(&key, SessionFilter::Only(3), 100, None)
        .await
        .unwrap();
    assert_eq!(seqs(&last_closed.messages), [(3, 1), (3, 2)]);
}

pub(super) async fn erasing_a_contact_removes_every_item_and_a_second_erase_finds_none(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let bob = contact_key("acme", "bob@example.com");
    let head = commit(&*store, &key, exchange(1, None, "one")).await;
    let mut done = round(&key, Some(&head), exchange(1, Some(&head), "two"));
    done.idempotency = Some(CompletedRequest {
        key: idem("done"),
        payload_hash: "h".into(),
        response: "{}".into(),
        expires_at: NOW + 86_400,
    });
    store.commit_round(&done).await.unwrap();
    backend.put_fact(&key, fact("name", "Ana"), None).await;
    store
        .claim_request(&key, &idem("pending"), "h", NOW, 30)
        .await
        .unwrap();
    commit(&*store, &bob, exchange(1, None, "bob's")).await;
    store
        .put_tenant_config(&key.tenant, &TenantConfig::default())
        .await
        .unwrap();

    // Head, 4 messages, 1 fact, 2 idempotency records.
    assert_eq!(backend.raw_item_count(&key).await, 8);
    assert_eq!(store.erase_contact(&key, NOW - 1).await.unwrap(), 8);
    assert_eq!(backend.raw_item_count(&key).await, 0);
    assert_eq!(store.erase_contact(&key, NOW - 1).await.unwrap(), 0);

    assert_eq!(
        store.load_turn(&key, NOW).await.unwrap(),
        Default::default()
    );
    assert_eq!(
        store
            .claim_request(&key, &idem("done"), "other", NOW, 30)
            .await
            .unwrap(),
        Claim::Started
    );
    // Others are untouched, and the contact can start over.
    assert_eq!(backend.raw_item_count(&bob).await, 3);
    assert!(store.tenant_config(&key.tenant).await.unwrap().is_some());
    commit(&*store, &key, exchange(1, None, "again")).await;
}

pub(super) async fn erasing_pages_through_a_long_history(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    // 120 messages: more than one batch of 25, in rounds of 40.
    let mut head = None;
    for round_no in 0..3u64 {
        let messages: Vec<_> = (1..=40)
            .map(|i| user(1, round_no * 40 + i, &format!("message {i}")))
            .collect();
        head = Some(commit(&*store, &key, messages).await);
    }
    assert_eq!(head.unwrap().last_seq, 120);
    assert_eq!(store.erase_contact(&key, NOW - 1).await.unwrap(), 121);
    assert_eq!(backend.raw_item_count(&key).await, 0);
}

pub(super) async fn erasing_a_contact_removes_its_session_archives_too(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "one")).await;
    let opening = RoundCommit {
        archive: Some(SessionArchive {
            session: 1,
            summary: Some("Ana said one.".into()),
            summarized_until: 2,
            last_seq: 2,
            expires_at: RETAINED,
            excerpt: String::new(),
            ids: Vec::new(),
            ended_at: 0,
        }),
        ..round(&key, Some(&head), exchange(2, None, "two"))
    };
    store.commit_round(&opening).await.unwrap();
    assert!(
        store
            .save_facts(
                &key,
                &life_of(&*store, &key).await,
                &[fact_write("name", "Ana", 1, RETAINED)],
                &[]
            )
            .await
            .unwrap()
    );
    // Head, 4 messages, 1 archive, 1 fact.
    assert_eq!(backend.raw_item_count(&key).await, 7);
    assert_eq!(store.erase_contact(&key, NOW - 1).await.unwrap(), 7);
    assert_eq!(backend.raw_item_count(&key).await, 0);
    assert_eq!(backend.raw_archive(&key, 1).await, None);
    assert_eq!(
        store.load_closed_session(&key, 1, NOW).await.unwrap(),
        ClosedSession::default()
    );
}

pub(super) async fn session_records_come_newest_first_and_every_one_is_kept(backend: impl Backend) {
    use degrau::plan::recall::{MAX_RECORDS, SessionRecord};
    let store = backend.store();
    let key = ana();
    let bob = contact_key("shop", "bob");
    commit(&*store, &bob, exchange(1, None, "bob's")).await;
    let mut head = commit(&*store, &key, exchange(1, None, "one")).await;
    let last = MAX_RECORDS + 3;
    // Sessions 1 to 23 closed, each archived with its record; 24 open.
    for session in 2..=last + 1 {
        let closed = session - 1;
        let record = SessionRecord {
            session: closed,
            summary: (closed % 2 == 0).then(|| format!("summary {closed}")),
            excerpt: format!("customer: session {closed}"),
            ids: vec![format!("BK-{closed:02}AA")],
            messages: head.last_seq,
            ended_at: NOW - i64::from(last - closed) * 86_400,
        };
        // The newest record is past its TTL: gone to the read.
        let expires_at = if closed == last { NOW } else { RETAINED };
        let opening = RoundCommit {
            archive: Some(SessionArchive::from_record(&record, 0, expires_at)),
            ..round(&key, Some(&head), exchange(session, None, "again"))
        };
        store.commit_round(&opening).await.unwrap();
        head = opening.head;
    }
    // No record is dropped for a newer one: each lives until its retention.
    for kept in 1..=3 {
        assert!(backend.raw_archive(&key, kept).await.is_some(), "{kept}");
    }
    let kept = backend.raw_archive(&key, 4).await.unwrap();
    assert_eq!(
        (kept.excerpt.as_str(), kept.ids.as_slice()),
        ("customer: session 4", &["BK-04AA".to_owned()][..])
    );
    let records = store.session_records(&key, 50, NOW).await.unwrap();
    let sessions: Vec<u32> = records.iter().map(|r| r.session).collect();
    assert_eq!(sessions, (1..last).rev().collect::<Vec<_>>());
    assert_eq!(records[0].summary.as_deref(), Some("summary 22"));
    assert_eq!(records[0].ids, ["BK-22AA"]);
    assert_eq!(records[0].ended_at, NOW - 86_400);
    assert_eq!(records[1].summary, None);
    let newest: Vec<u32> = store
        .session_records(&key, 2, NOW)
        .await
        .unwrap()
        .iter()
        .map(|r| r.session)
        .collect();
    assert_eq!(newest, [22, 21]);
    assert!(
        store
            .session_records(&bob, 20, NOW)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.erase_contact(&key, NOW - 1).await.unwrap() > 0);
    assert!(
        store
            .session_records(&key, 20, NOW)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A round's transaction that lands after an erase of its contact (its caller was
/// told it failed, or went away, and then the contact was erased) must not bring
/// the contact back: a new head's round that began at or before the erase is
/// refused as a conflict, with nothing written. One that began after it lands, and
/// so does one of a contact in another erase bucket (the mark names no one), or of
/// another tenant.
pub(super) async fn a_new_life_begun_before_an_erase_cannot_land_after_it(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    // The round began at NOW; it is still in flight when the contact is erased.
    let late = round(&key, None, exchange(1, None, "sent before the erase"));
    assert_eq!(late.head.born_at, Some(NOW));
    store.erase_contact(&key, NOW).await.unwrap();
    let refused = store.commit_round(&late).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    assert_eq!(backend.raw_item_count(&key).await, 0, "nothing written");
    assert_eq!(store.load_turn(&key, NOW + 1).await.unwrap().head, None);

    // An erase dated earlier (a clock behind) does not move the mark back.
    store.erase_contact(&key, NOW - 60).await.unwrap();
    assert!(store.commit_round(&late).await.is_err());

    // A round begun after the erase starts the contact's new life.
    let mut after = round(&key, None, exchange(1, None, "sent after the erase"));
    after.head.born_at = Some(NOW + 1);
    store.commit_round(&after).await.unwrap();
    assert!(store.load_turn(&key, NOW + 1).await.unwrap().head.is_some());

    // Another contact of the tenant in another bucket, and the same contact id
    // at another tenant, are not held back by this erase.
    let other = (0..)
        .map(|i| contact_key("acme", &format!("other-{i}")))
        .find(|other| erase_bucket(other) != erase_bucket(&key))
        .unwrap();
    store
        .commit_round(&round(&other, None, exchange(1, None, "hi")))
        .await
        .unwrap();
    let elsewhere = contact_key("globex", key.contact.as_str());
    store
        .commit_round(&round(&elsewhere, None, exchange(1, None, "hi")))
        .await
        .unwrap();
}
