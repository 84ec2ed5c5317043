//! The contract of [`SweepStore`]: the sweep index.
//!
//! - **Filed by every round.** A round files its head under its bucket at its due
//!   time, and the next round moves it (read back raw, by `due_heads` and by
//!   `RoundStore::load_head`); a partition with no head files nothing.
//! - **Due heads.** `due_heads` reads one bucket's heads due by a time, earliest
//!   first, up to the limit.
//! - **Settling.** `settle_sweep` moves a head's entry or takes it out and records
//!   the sweep's request, only while the head is as the sweep read it (no round,
//!   sweep, facts job or erase since).
//!
//! - **Deferring.** `defer_sweep` moves a head's entry to a later due time, only
//!   while the entry is where the sweep read it, and changes nothing else.
//!
//! `ensure_incarnation` is checked in `incarnation.rs`.

use degrau::domain::{Head, Incarnation, PendingFacts};
use degrau::plan::sweep::DEFAULT_SWEEP_BUCKETS;
use degrau::store::{
    ContactKey, DueHead, PendingChange, RecordStore, RoundStore, SweepSettle, SweepSlot, SweepStore,
};

use super::{
    Backend, DUE_AFTER, NOW, ana, commit, contact_key, exchange, idem, round, settle, sweep_bucket,
};

/// The first session's first round for `key`, due for the sweep at `due`.
async fn commit_due<S: RoundStore>(store: &S, key: &ContactKey, due: i64) {
    let mut commit = round(key, None, exchange(1, None, "hi"));
    commit.sweep.due = due;
    store.commit_round(&commit).await.unwrap();
}

/// `count` contacts of tenant `acme` whose sweep bucket is `bucket`.
fn contacts_in_bucket(bucket: u8, count: usize) -> Vec<ContactKey> {
    (0..)
        .map(|i| contact_key("acme", &format!("+55119{i:08}")))
        .filter(|key| sweep_bucket(key) == bucket)
        .take(count)
        .collect()
}

fn due(key: &ContactKey, due: i64) -> DueHead {
    DueHead {
        key: key.clone(),
        due,
    }
}

pub(super) async fn every_round_files_the_head_under_its_bucket_at_its_due_time(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let bucket = sweep_bucket(&key);
    assert!(bucket < DEFAULT_SWEEP_BUCKETS);
    let head = commit(&*store, &key, exchange(1, None, "hello")).await;
    let at = NOW + 2 + DUE_AFTER;
    assert_eq!(backend.raw_sweep(&key).await, Some((bucket, at)));
    assert_eq!(
        store.due_heads(bucket, at, 10).await.unwrap(),
        vec![due(&key, at)]
    );
    assert!(
        store
            .due_heads(bucket, at - 1, 10)
            .await
            .unwrap()
            .is_empty(),
        "not due yet"
    );
    let other = (bucket + 1) % DEFAULT_SWEEP_BUCKETS;
    assert!(
        store
            .due_heads(other, i64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // The next round moves the entry to its own due time.
    let mut next = round(&key, Some(&head), exchange(1, Some(&head), "again"));
    next.sweep = SweepSlot {
        bucket: other,
        due: NOW + 7,
    };
    store.commit_round(&next).await.unwrap();
    assert_eq!(backend.raw_sweep(&key).await, Some((other, NOW + 7)));
    assert!(
        store
            .due_heads(bucket, i64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.due_heads(other, NOW + 7, 10).await.unwrap(),
        vec![due(&key, NOW + 7)]
    );
    assert_eq!(store.load_head(&key).await.unwrap().unwrap().last_seq, 4);

    // A partition holding only an idempotency record has no head to file.
    let bruno = contact_key("acme", "bruno");
    store
        .claim_request(&bruno, &idem("k"), "h", NOW, 60)
        .await
        .unwrap();
    assert_eq!(backend.raw_sweep(&bruno).await, None);
    assert_eq!(store.load_head(&bruno).await.unwrap(), None);
    let found = store
        .due_heads(sweep_bucket(&bruno), i64::MAX, 10)
        .await
        .unwrap();
    assert!(found.iter().all(|entry| entry.key != bruno), "{found:?}");
}

pub(super) async fn due_heads_come_earliest_first_up_to_the_limit_from_one_bucket_only(
    backend: impl Backend,
) {
    let store = backend.store();
    let bucket = 3;
    let crowd = contacts_in_bucket(bucket, 4);
    let elsewhere = contacts_in_bucket((bucket + 1) % DEFAULT_SWEEP_BUCKETS, 1);
    // Written out of order, read back by due time.
    for (key, at) in crowd.iter().zip([NOW + 30, NOW + 20, NOW + 40, NOW + 10]) {
        commit_due(&*store, key, at).await;
    }
    commit_due(&*store, &elsewhere[0], NOW + 5).await;

    let earliest = vec![
        due(&crowd[3], NOW + 10),
        due(&crowd[1], NOW + 20),
        due(&crowd[0], NOW + 30),
    ];
    assert_eq!(
        store.due_heads(bucket, NOW + 35, 10).await.unwrap(),
        earliest
    );
    assert_eq!(
        store.due_heads(bucket, NOW + 35, 2).await.unwrap(),
        earliest[..2]
    );
    assert!(
        store
            .due_heads(bucket, NOW + 35, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.due_heads(bucket, i64::MAX, 10).await.unwrap().len(),
        4
    );
    assert!(
        store
            .due_heads(bucket, NOW + 9, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub(super) async fn a_settled_head_moves_or_leaves_the_index_and_records_the_request(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let bucket = sweep_bucket(&key);
    let head = commit(&*store, &key, exchange(1, None, "hello")).await;
    let at = NOW + 2 + DUE_AFTER;
    let requested = PendingFacts {
        session: 1,
        since: at,
        attempts: 1,
    };

    // Requested: recorded, pending, and due again when the retry is.
    let first = SweepSettle {
        facts_requested: Some(1),
        pending: PendingChange::Set(requested),
        next_due: Some(at + 100),
        ..settle(&head, at)
    };
    assert!(store.settle_sweep(&key, &first).await.unwrap());
    let swept = store.load_head(&key).await.unwrap().unwrap();
    assert_eq!(
        swept,
        Head {
            facts_requested: Some(1),
            facts_pending: Some(requested),
            ..head.clone()
        },
        "only what the sweep decided changed"
    );
    assert_eq!(backend.raw_sweep(&key).await, Some((bucket, at + 100)));
    assert!(
        !store.settle_sweep(&key, &first).await.unwrap(),
        "settled already: the due time and the pending request moved"
    );

    // Given up on, and nothing left to do: out of the index.
    let last = SweepSettle {
        pending: PendingChange::Clear,
        next_due: None,
        ..settle(&swept, at + 100)
    };
    assert!(store.settle_sweep(&key, &last).await.unwrap());
    let done = store.load_head(&key).await.unwrap().unwrap();
    assert_eq!((done.facts_pending, done.facts_requested), (None, Some(1)));
    assert_eq!(backend.raw_sweep(&key).await, None);
    assert!(
        store
            .due_heads(bucket, i64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !store
            .settle_sweep(&key, &settle(&done, at + 100))
            .await
            .unwrap(),
        "out of the index: nothing to settle"
    );

    // A round puts it back and clears `facts_requested`.
    let head = commit(&*store, &key, exchange(1, Some(&done), "again")).await;
    assert_eq!(head.facts_requested, None);
    assert_eq!(
        backend.raw_sweep(&key).await,
        Some((bucket, NOW + 4 + DUE_AFTER))
    );
}

pub(super) async fn settling_a_head_that_moved_on_or_was_erased_writes_nothing(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "hello")).await;
    let at = NOW + 2 + DUE_AFTER;
    let request = SweepSettle {
        facts_requested: Some(1),
        next_due: None,
        ..settle(&head, at)
    };
    for stale in [
        SweepSettle {
            last_activity: head.last_activity - 1,
            ..request.clone()
        },
        SweepSettle {
            due: at - 1,
            ..request.clone()
        },
        SweepSettle {
            pending_since: Some(NOW),
            ..request.clone()
        },
        SweepSettle {
            incarnation: Incarnation::random(),
            ..request.clone()
        },
    ] {
        assert!(
            !store.settle_sweep(&key, &stale).await.unwrap(),
            "{stale:?}"
        );
    }
    assert_eq!(
        store.load_head(&key).await.unwrap().unwrap(),
        head,
        "unchanged"
    );
    assert_eq!(
        backend.raw_sweep(&key).await,
        Some((sweep_bucket(&key), at))
    );

    let stranger = contact_key("acme", "stranger");
    assert!(!store.settle_sweep(&stranger, &request).await.unwrap());
    assert_eq!(backend.raw_item_count(&stranger).await, 0, "no stray head");

    store.erase_contact(&key, NOW - 1).await.unwrap();
    assert!(!store.settle_sweep(&key, &request).await.unwrap());
    assert_eq!(backend.raw_item_count(&key).await, 0);
    assert!(
        store
            .due_heads(sweep_bucket(&key), i64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub(super) async fn a_deferred_head_moves_only_its_entry_and_only_from_where_it_was_read(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let bucket = sweep_bucket(&key);
    let at = NOW + DUE_AFTER;
    commit_due(&*store, &key, at).await;
    let head = store.load_head(&key).await.unwrap();

    let later = at + 900;
    assert!(store.defer_sweep(&key, at, later).await.unwrap());
    assert_eq!(backend.raw_sweep(&key).await, Some((bucket, later)));
    assert_eq!(
        store.load_head(&key).await.unwrap(),
        head,
        "only the entry moves"
    );
    assert!(store.due_heads(bucket, at, 10).await.unwrap().is_empty());
    assert_eq!(
        store.due_heads(bucket, later, 10).await.unwrap(),
        vec![due(&key, later)]
    );

    // Read at `at` by a sweep that came late: the entry moved since, nothing changes.
    assert!(!store.defer_sweep(&key, at, later + 900).await.unwrap());
    assert_eq!(backend.raw_sweep(&key).await, Some((bucket, later)));

    // A contact with no head, or erased, has no entry to move, and gets none.
    let nobody = contact_key("acme", "+5511900000000");
    assert!(!store.defer_sweep(&nobody, at, later).await.unwrap());
    assert_eq!(backend.raw_sweep(&nobody).await, None);
    store.erase_contact(&key, NOW - 1).await.unwrap();
    assert!(!store.defer_sweep(&key, later, later + 900).await.unwrap());
    assert_eq!(backend.raw_sweep(&key).await, None);
}
