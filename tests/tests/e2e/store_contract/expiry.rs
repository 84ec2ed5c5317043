//! Expiry across the ports: facts, messages and heads past their TTL are gone to
//! every read (`load_turn`'s facts and window, `load_memory`, `transcript`), as
//! DynamoDB's TTL eventually makes them; a round's writes carry their TTL and
//! replace expired items, whichever of them the TTL deleted first, never a live one.

use degrau::store::{RecordStore, RoundCommit, RoundStore, SessionFilter, StoreError};

use super::{Backend, LONG_EXPIRED, NOW, RETAINED, ana, commit, exchange, fact, round, seqs};

pub(super) async fn facts_whose_ttl_passed_are_filtered_out(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    commit(&*store, &key, exchange(1, None, "hi")).await;
    backend.put_fact(&key, fact("name", "Ana"), None).await;
    backend
        .put_fact(&key, fact("preferred_time", "mornings"), Some(NOW + 3600))
        .await;
    backend
        .put_fact(&key, fact("preferred_service", "haircut"), Some(NOW))
        .await;
    backend
        .put_fact(&key, fact("preferred_language", "pt"), Some(NOW - 1))
        .await;

    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(
        turn.facts,
        vec![fact("name", "Ana"), fact("preferred_time", "mornings")]
    );
    assert_eq!(seqs(&turn.window), [(1, 1), (1, 2)]);
    let (_, facts) = store.load_memory(&key, NOW).await.unwrap();
    assert_eq!(facts, turn.facts);
    // An hour later the second one has expired too.
    let (_, facts) = store.load_memory(&key, NOW + 3600).await.unwrap();
    assert_eq!(facts, vec![fact("name", "Ana")]);
}

pub(super) async fn message_items_carry_their_expiry_and_expired_ones_leave_the_transcript_and_the_window(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let old = RoundCommit {
        messages_expire_at: LONG_EXPIRED,
        ..round(&key, None, exchange(1, None, "long ago"))
    };
    store.commit_round(&old).await.unwrap();
    commit(&*store, &key, exchange(1, Some(&old.head), "today")).await;
    for seq in [1, 2] {
        assert_eq!(
            backend.raw_message_expires_at(&key, 1, seq).await,
            Some(LONG_EXPIRED)
        );
    }
    for seq in [3, 4] {
        assert_eq!(
            backend.raw_message_expires_at(&key, 1, seq).await,
            Some(RETAINED)
        );
    }

    for sessions in [SessionFilter::All, SessionFilter::Only(1)] {
        let page = store.transcript(&key, sessions, 10, None).await.unwrap();
        assert_eq!(seqs(&page.messages), [(1, 3), (1, 4)]);
        assert_eq!(page.next_before, None);
    }
    // A full page followed only by expired messages has no older page.
    let page = store
        .transcript(&key, SessionFilter::All, 2, None)
        .await
        .unwrap();
    assert_eq!(seqs(&page.messages), [(1, 3), (1, 4)]);
    // Expired messages are gone from the window too; it starts at a safe start.
    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(seqs(&turn.window), [(1, 3), (1, 4)]);
    assert_eq!(turn.window_expires_at, [Some(RETAINED), Some(RETAINED)]);
}

pub(super) async fn a_head_past_its_expiry_is_gone_and_a_first_round_writes_over_it(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let mut first = round(&key, None, exchange(1, None, "hello"));
    first.head.expires_at = Some(NOW + 60);
    first.messages_expire_at = NOW + 60;
    store.commit_round(&first).await.unwrap();
    assert_eq!(backend.raw_head_expires_at(&key).await, Some(NOW + 60));
    let (head, _) = store.load_memory(&key, NOW + 59).await.unwrap();
    assert_eq!(head.unwrap().expires_at, Some(NOW + 60));
    assert_eq!(store.load_memory(&key, NOW + 60).await.unwrap().0, None);
    // Gone for the next round too, as DynamoDB's TTL will make it: a round starts
    // over, and its writes replace the expired items their keys still name.
    let turn = store.load_turn(&key, NOW + 60).await.unwrap();
    assert_eq!(turn.head, None);
    assert!(turn.window.is_empty());
    let mut again = round(&key, None, exchange(1, None, "again"));
    again.head.last_activity = NOW + 61;
    store.commit_round(&again).await.unwrap();
    assert_eq!(backend.raw_head_expires_at(&key).await, Some(RETAINED));
    assert_eq!(
        backend.raw_message_expires_at(&key, 1, 1).await,
        Some(RETAINED)
    );
    let turn = store.load_turn(&key, NOW + 61).await.unwrap();
    assert_eq!(turn.head.unwrap().incarnation, again.head.incarnation);
    assert_eq!(turn.window, again.messages);
}

pub(super) async fn a_contact_whose_head_ttl_deleted_first_starts_over_over_its_expired_messages(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let mut first = round(&key, None, exchange(1, None, "hello"));
    first.head.expires_at = Some(NOW + 60);
    first.messages_expire_at = NOW + 60;
    store.commit_round(&first).await.unwrap();
    // TTL deletes in any order: here the head first, the messages not yet.
    backend.delete_head(&key).await;
    assert_eq!(backend.raw_item_count(&key).await, 2);
    let mut again = round(&key, None, exchange(1, None, "again"));
    again.head.last_activity = NOW + 61;
    store.commit_round(&again).await.unwrap();
    assert_eq!(
        store.load_turn(&key, NOW + 61).await.unwrap().window,
        again.messages
    );
    // A message still live is never written over, head or no head.
    let mut live = round(&key, None, exchange(1, None, "third"));
    live.head.last_activity = NOW + 62;
    backend.delete_head(&key).await;
    assert!(matches!(
        store.commit_round(&live).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        backend.raw_message_expires_at(&key, 1, 1).await,
        Some(RETAINED)
    );
}

pub(super) async fn a_new_life_replaces_what_an_older_life_left_past_the_rounds_own_retention(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    // A life whose head expired long before its messages: the retention was
    // lowered after they were written.
    let mut first = round(&key, None, exchange(1, None, "hello"));
    first.head.expires_at = Some(NOW + 60);
    store.commit_round(&first).await.unwrap();
    assert_eq!(
        backend.raw_message_expires_at(&key, 1, 1).await,
        Some(RETAINED),
        "still live"
    );
    // A round a retention younger than them (its own messages live 100 s) starts
    // a new life over them, and dates it.
    let later = NOW + 10_000;
    let mut again = round(&key, None, exchange(1, None, "again"));
    again.head.last_activity = later;
    again.head.born_at = Some(later);
    again.messages_expire_at = later + 100;
    // Stale: what was written before its life began (later than its settings'
    // reach, `later - 100`).
    assert_eq!(again.stale_before(), Some(later));
    store.commit_round(&again).await.unwrap();
    let turn = store.load_turn(&key, later).await.unwrap();
    let head = turn.head.unwrap();
    assert_eq!(head.born_at, Some(later));
    assert_eq!(turn.window, again.messages);
    assert_eq!(
        backend.raw_message_expires_at(&key, 1, 1).await,
        Some(later + 100)
    );
}
