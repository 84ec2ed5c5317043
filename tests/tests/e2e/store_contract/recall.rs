//! The contract of [`RecallStore`]: what recall needs.
//!
//! - **A session read whole**: `session_messages` returns every live message of a
//!   session, with their latest expiry.
//! - **Indexes under the head's incarnation**: `save_session_index` writes a
//!   session's index and text only while the head has the job's incarnation, and a
//!   second write replaces the first; `session_indexes` reads them newest first,
//!   an index past its expiry gone; the contact's erasure takes them.
//! - **What a recall shows**: `found_sessions` returns the texts and archived
//!   records of the sessions asked, one entry each, empty once gone.

use degrau::plan::recall::index::{SessionIndex, SessionText, index_session, with_summary};
use degrau::plan::recall::tokenize::StemmingTokenizer;
use degrau::store::{RecallStore, RecordStore, RoundCommit, RoundStore, SessionArchive};

use super::{Backend, NOW, RETAINED, ana, contact_key, exchange, life_of, round, tool_session};

/// Session 1 of the contact indexed from what is stored of it.
async fn indexed<S: RecallStore>(
    store: &S,
    key: &degrau::store::ContactKey,
) -> (SessionIndex, SessionText) {
    let (messages, _) = store.session_messages(key, 1, NOW).await.unwrap();
    index_session(1, &messages, &StemmingTokenizer::default())
}

pub(super) async fn a_closed_sessions_index_is_written_under_the_heads_incarnation_and_read_back(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = tool_session(&*store, &key).await;
    let (messages, expires) = store.session_messages(&key, 1, NOW).await.unwrap();
    assert_eq!(messages.len() as u64, head.last_seq, "the whole session");
    assert!(messages.windows(2).all(|pair| pair[0].seq < pair[1].seq));
    assert!(expires.is_some_and(|at| at > NOW));
    let (index, text) = indexed(&*store, &key).await;
    // Another life's job writes nothing.
    let stranger = degrau::domain::Incarnation::random();
    let items = backend.raw_item_count(&key).await;
    assert!(
        !store
            .save_session_index(&key, &stranger, &index, Some(&text), RETAINED)
            .await
            .unwrap()
    );
    assert_eq!(backend.raw_item_count(&key).await, items);
    let life = life_of(&*store, &key).await;
    assert!(
        store
            .save_session_index(&key, &life, &index, Some(&text), RETAINED)
            .await
            .unwrap()
    );
    assert_eq!(
        store.session_indexes(&key, NOW).await.unwrap(),
        std::slice::from_ref(&index)
    );
    // Written again with its search summary and without its text: the index
    // replaced, the text kept, nothing added.
    let carded = with_summary(
        index,
        "Booked 09:00 on Tuesday.",
        &StemmingTokenizer::default(),
    );
    assert!(
        store
            .save_session_index(&key, &life, &carded, None, RETAINED)
            .await
            .unwrap()
    );
    assert_eq!(backend.raw_item_count(&key).await, items + 2);
    let read = store.session_indexes(&key, NOW).await.unwrap();
    assert_eq!(read, [carded]);
    let shown = store.found_sessions(&key, &[1], NOW).await.unwrap();
    assert_eq!(shown[0].text.as_ref(), Some(&text));
    // Another contact sees none of it; the erasure takes it.
    let bob = contact_key("acme", "bob");
    assert!(store.session_indexes(&bob, NOW).await.unwrap().is_empty());
    assert!(store.erase_contact(&key, NOW - 1).await.unwrap() > 0);
    assert!(store.session_indexes(&key, NOW).await.unwrap().is_empty());
    assert_eq!(backend.raw_item_count(&key).await, 0);
}

pub(super) async fn indexes_come_newest_first_and_one_past_its_expiry_is_gone(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    let life = life_of(&*store, &key).await;
    let (index, text) = indexed(&*store, &key).await;
    for (session, expires) in [(1, RETAINED), (2, NOW), (3, RETAINED)] {
        let index = SessionIndex {
            session,
            ..index.clone()
        };
        let text = SessionText {
            session,
            ..text.clone()
        };
        assert!(
            store
                .save_session_index(&key, &life, &index, Some(&text), expires)
                .await
                .unwrap()
        );
    }
    let read: Vec<u32> = store
        .session_indexes(&key, NOW)
        .await
        .unwrap()
        .iter()
        .map(|index| index.session)
        .collect();
    assert_eq!(read, [3, 1], "session 2's expired at NOW");
}

pub(super) async fn found_sessions_bring_the_texts_and_records_asked_for(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let head = tool_session(&*store, &key).await;
    let life = life_of(&*store, &key).await;
    let (index, text) = indexed(&*store, &key).await;
    assert!(
        store
            .save_session_index(&key, &life, &index, Some(&text), RETAINED)
            .await
            .unwrap()
    );
    // Session 2 opens, archiving session 1's record.
    let record = degrau::plan::recall::record_of(1, None, &[], head.last_seq, NOW);
    let opening = RoundCommit {
        archive: Some(SessionArchive::from_record(&record, 0, RETAINED)),
        ..round(&key, Some(&head), exchange(2, None, "again"))
    };
    store.commit_round(&opening).await.unwrap();
    let found = store.found_sessions(&key, &[1, 7], NOW).await.unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].session, 1);
    assert_eq!(found[0].text.as_ref(), Some(&text));
    assert_eq!(
        found[0].record.as_ref().map(|r| r.messages),
        Some(head.last_seq)
    );
    assert_eq!(
        (found[1].session, &found[1].text, &found[1].record),
        (7, &None, &None)
    );
    let records = store.session_records(&key, 5, NOW).await.unwrap();
    assert_eq!(records.len(), 1);
}
