//! The contract of [`RoundStore`]: what a round needs.
//!
//! - **Whole rounds.** `commit_round` writes a round's messages, head and
//!   idempotency record at once, under the condition that the head is as loaded, or
//!   answers `Conflict` and writes nothing (a stale head, a second first round, a
//!   stored sequence number, eight commits racing on one head). It writes only the
//!   head fields a round owns: a compaction step applied meanwhile stays, a new
//!   session resets the summary, the gap record is the round's.
//! - **Bounded reads.** `load_turn` returns the head and its session's window after
//!   `summarized_until` up to `last_seq`, from the first safe start after a hole, and
//!   never a round that landed after the head was read (on DynamoDB, with the
//!   window's Query held back by a proxy).
//! - **Idempotency.** `claim_request` runs a key once and then replays its response;
//!   `release_request`, a lease run out or an expired record frees the key.
//! - **Refresh.** `refresh_expiry` sets the TTL of existing messages of the head's
//!   incarnation only, in one transaction of bounded size.
//!
//! `load_head` is checked with the sweep index (`sweep.rs`); the TTL of what a
//! round writes, across the reads, in `expiry.rs`.

use std::sync::Arc;

use degrau::domain::{ContentBlock, Head, Incarnation, Role};
use degrau::store::{
    Claim, CompletedRequest, JobStore, MAX_REFRESH_PER_ROUND, RecordStore, RoundCommit, RoundStore,
    SessionFilter, StoreError,
};
use degrau_adapters::dynamodb::DynamoStore;
use degrau_tests::moto;
use serde_json::json;

use super::{
    Backend, NOW, RETAINED, ana, assistant, commit, exchange, idem, message, round, seqs, stepped,
    tool_session, user,
};

pub(super) async fn a_contact_never_seen_loads_empty(backend: impl Backend) {
    let store = backend.store();
    let turn = store.load_turn(&ana(), NOW).await.unwrap();
    assert_eq!(turn, Default::default());
    assert_eq!(
        store.load_memory(&ana(), NOW).await.unwrap(),
        (None, vec![])
    );
    let page = store
        .transcript(&ana(), SessionFilter::All, 10, None)
        .await
        .unwrap();
    assert_eq!(page, Default::default());
}

pub(super) async fn a_committed_round_loads_back_in_order_with_its_head(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    // Blocks DynamoDB maps would mangle: an empty input object, an empty text.
    let mut messages = vec![
        user(1, 1, "Can I book Tuesday?"),
        message(
            1,
            2,
            Role::Assistant,
            vec![
                ContentBlock::text(""),
                ContentBlock::tool_use("toolu_1", "list_free_slots", json!({})),
            ],
        ),
        message(
            1,
            3,
            Role::User,
            vec![ContentBlock::ToolResult {
                tool_use_id: "toolu_1".into(),
                content: "[]".into(),
                is_error: true,
            }],
        ),
        assistant(1, 4, "Tuesday is full."),
    ];
    messages[2].pruned = Some(vec![ContentBlock::tool_result("toolu_1", "[omitted]")]);
    let commit = round(&key, None, messages.clone());
    store.commit_round(&commit).await.unwrap();

    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(turn.head, Some(commit.head.clone()));
    assert_eq!(turn.window, messages);
    assert!(turn.facts.is_empty());
    let (head, facts) = store.load_memory(&key, NOW).await.unwrap();
    assert_eq!(head, Some(commit.head));
    assert!(facts.is_empty());
}

pub(super) async fn a_commit_with_a_stale_head_conflicts_and_writes_none_of_its_messages(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let first = commit(&*store, &key, exchange(1, None, "one")).await;
    let second = commit(&*store, &key, exchange(1, Some(&first), "two")).await;

    // A round built on `first`, as a request that loaded before `second` committed.
    let stale = round(&key, Some(&first), exchange(1, Some(&second), "late"));
    let err = store.commit_round(&stale).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");

    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(turn.head, Some(second));
    assert_eq!(seqs(&turn.window), [(1, 1), (1, 2), (1, 3), (1, 4)]);
    assert!(
        turn.window
            .iter()
            .all(|m| !m.to_message().text().contains("late"))
    );
}

pub(super) async fn a_second_first_round_for_the_same_contact_conflicts(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    store
        .commit_round(&round(&key, None, exchange(1, None, "hello")))
        .await
        .unwrap();
    let mut again = round(&key, None, exchange(1, None, "hello again"));
    // Distinct sequence numbers, so only the head's condition can refuse it.
    for (offset, message) in again.messages.iter_mut().enumerate() {
        message.seq = 10 + offset as u64;
    }
    let err = store.commit_round(&again).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(seqs(&turn.window), [(1, 1), (1, 2)]);
}

pub(super) async fn a_round_reusing_a_stored_sequence_number_conflicts_and_changes_nothing(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "one")).await;
    // The head's condition holds, but seq 2 exists: the message's own condition fails.
    let mut overlapping = round(&key, Some(&head), vec![user(1, 2, "x"), user(1, 3, "y")]);
    overlapping.head.last_seq = 3;
    let err = store.commit_round(&overlapping).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(turn.head, Some(head));
    assert_eq!(seqs(&turn.window), [(1, 1), (1, 2)]);
    assert_eq!(turn.window[1].to_message().text(), "answer to one");
}

pub(super) async fn concurrent_commits_on_the_same_head_let_exactly_one_win(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "start")).await;

    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let store = store.clone();
            let commit = round(
                &key,
                Some(&head),
                exchange(1, Some(&head), &format!("from task {task}")),
            );
            tokio::spawn(async move { (task, store.commit_round(&commit).await) })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (task, Ok(())) => winners.push(task),
            (_, Err(StoreError::Conflict(_))) => {}
            (task, Err(err)) => panic!("task {task}: unexpected {err:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");

    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(seqs(&turn.window), [(1, 1), (1, 2), (1, 3), (1, 4)]);
    let winner = format!("from task {}", winners[0]);
    assert_eq!(turn.window[2].to_message().text(), winner);
    assert_eq!(
        turn.window[3].to_message().text(),
        format!("answer to {winner}")
    );
    assert_eq!(turn.head.unwrap().last_seq, 4);
}

pub(super) async fn a_new_session_resets_the_summary_and_leaves_the_old_session_out_of_the_window(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "one")).await;
    let head = commit(&*store, &key, exchange(1, Some(&head), "two")).await;
    backend
        .set_summarized_until(&key, 2, "Ana asked one.")
        .await;
    let stepped = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(
        (
            stepped.summarized_until,
            stepped.summary.as_deref(),
            stepped.steps
        ),
        (2, Some("Ana asked one."), 1)
    );

    let next = round(&key, Some(&head), exchange(2, Some(&head), "new day"));
    store.commit_round(&next).await.unwrap();

    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(turn.head, Some(next.head));
    let head = turn.head.unwrap();
    assert_eq!(
        (head.summarized_until, head.summary, head.steps),
        (0, None, 0)
    );
    assert_eq!(seqs(&turn.window), [(2, 1), (2, 2)]);
    // The old session is still in the transcript.
    let all = store
        .transcript(&key, SessionFilter::All, 10, None)
        .await
        .unwrap();
    assert_eq!(
        seqs(&all.messages),
        [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 2)]
    );
}

pub(super) async fn a_commit_in_the_same_session_keeps_a_compaction_step_applied_meanwhile(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "one")).await;
    // The step lands between this request's load and its commit.
    backend
        .set_summarized_until(&key, 2, "Ana asked one.")
        .await;
    let next = round(&key, Some(&head), exchange(1, Some(&head), "two"));
    store.commit_round(&next).await.unwrap();

    let head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(head.last_seq, 4);
    assert_eq!(head.last_context_tokens, next.head.last_context_tokens);
    assert_eq!(head.last_activity, next.head.last_activity);
    assert_eq!(
        (head.summarized_until, head.summary.as_deref(), head.steps),
        (2, Some("Ana asked one."), 1)
    );
}

pub(super) async fn a_round_writes_its_gap_record_and_cache_marks_on_the_head_and_a_step_keeps_them(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "one")).await;
    assert!(head.recent_gaps.is_empty(), "a first round has no gap");
    let mut next = round(&key, Some(&head), exchange(1, Some(&head), "two"));
    next.head.recent_gaps = vec![30, 900, 72_000];
    (next.head.cache_hour, next.head.client_round) = (true, true);
    store.commit_round(&next).await.unwrap();
    let turn = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(turn.recent_gaps, [30, 900, 72_000]);
    assert!(turn.cache_hour && turn.client_round);
    let (memory, _) = store.load_memory(&key, NOW).await.unwrap();
    assert_eq!(memory.unwrap().recent_gaps, [30, 900, 72_000]);
    // A step owns other fields: the record stays.
    let applied = stepped(&*store, &key, 1, 0, 2, "Ana asked one.", &[]).await;
    assert!(store.apply_step(&key, &applied).await.unwrap());
    let stepped_head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(stepped_head.summarized_until, 2);
    assert_eq!(stepped_head.recent_gaps, [30, 900, 72_000]);
    assert!(stepped_head.cache_hour && stepped_head.client_round);
    // Each round writes the record it was given: a new session's too.
    let mut third = round(
        &key,
        Some(&stepped_head),
        exchange(2, Some(&stepped_head), "three"),
    );
    third.head.recent_gaps = vec![900, 72_000, u32::MAX];
    store.commit_round(&third).await.unwrap();
    let head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(
        (head.session, head.recent_gaps.clone()),
        (2, vec![900, 72_000, u32::MAX])
    );
    // An empty record removes it, and a round of degrau's own with five-minute
    // entries clears the marks.
    let fourth = round(&key, Some(&head), exchange(2, Some(&head), "four"));
    store.commit_round(&fourth).await.unwrap();
    let head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert!(head.recent_gaps.is_empty());
    assert!(!head.cache_hour && !head.client_round);
}

pub(super) async fn the_window_never_holds_messages_at_or_before_summarized_until(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let mut head = None;
    for question in ["one", "two", "three"] {
        head = Some(commit(&*store, &key, exchange(1, head.as_ref(), question)).await);
    }
    backend
        .set_summarized_until(&key, 4, "Ana asked one and two.")
        .await;
    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(seqs(&turn.window), [(1, 5), (1, 6)]);

    backend.set_summarized_until(&key, 6, "Everything.").await;
    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert!(turn.window.is_empty());
    assert_eq!(turn.head.unwrap().summarized_until, 6);
}

pub(super) async fn a_window_with_a_hole_starts_at_the_first_safe_start_after_the_last_one(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    // 1 user, 2 assistant, 3 user, 4 tool_use, 5 tool_result, 6 assistant, 7 user, 8.
    tool_session(&*store, &key).await;
    let whole = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(whole.window.len(), 8);
    assert_eq!(whole.window_expires_at, vec![Some(RETAINED); 8]);

    // The tool call goes: its result would be an orphan.
    backend.delete_message(&key, 1, 4).await;
    let turn = store.load_turn(&key, NOW).await.unwrap();
    assert_eq!(seqs(&turn.window), [(1, 7), (1, 8)]);
    assert_eq!(turn.window_expires_at.len(), 2);
    // The first message after `summarized_until` goes: the same.
    backend.delete_message(&key, 1, 1).await;
    assert_eq!(
        seqs(&store.load_turn(&key, NOW).await.unwrap().window),
        [(1, 7), (1, 8)]
    );
    // The transcript shows what is left, holes and all.
    let page = store
        .transcript(&key, SessionFilter::All, 10, None)
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 6);
}

/// The window read is bounded by the head it read: a round committed between the
/// head's read and the messages' Query (the Query held back by the proxy) is not in
/// the window, which stays exactly what the head describes; the next read sees it
/// whole. Unbounded, the window held the new round though the head did not count
/// it, and a Query seeing part of a transaction could end it on a user message:
/// two user messages in a row, a 500 (issue 29).
#[tokio::test]
async fn dynamodb_a_round_committed_between_the_head_read_and_the_window_query_is_not_in_the_window()
 {
    let direct = moto::dynamodb_client().await;
    let table = moto::fresh_table(&direct).await;
    let proxy = degrau_awsproxy::spawn(moto::endpoint()).await;
    let proxied = aws_sdk_dynamodb::Client::new(&moto::sdk_config_at(proxy.url()).await);
    let reader = Arc::new(DynamoStore::new(proxied, table.clone()));
    let writer = DynamoStore::new(direct, table);
    let key = ana();
    let first = commit(&writer, &key, exchange(1, None, "hello")).await;

    let held: degrau_awsproxy::Fault = serde_json::from_value(json!({
        "service": "dynamodb", "operation": "Query", "body_contains": "#M#", "delay_ms": 1500
    }))
    .unwrap();
    proxy.faults(vec![held]).unwrap();
    let reading = {
        let (reader, key) = (reader.clone(), key.clone());
        tokio::spawn(async move { reader.load_turn(&key, NOW).await.unwrap() })
    };
    // The head is read at once; the Query waits while the next round lands.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let second = commit(&writer, &key, exchange(1, Some(&first), "again")).await;
    assert_eq!(second.last_seq, 4);
    let turn = reading.await.unwrap();
    assert!(proxy.pending_faults().is_empty(), "the Query was held");
    assert_eq!(turn.head.as_ref().unwrap().last_seq, 2);
    assert_eq!(seqs(&turn.window), [(1, 1), (1, 2)]);

    let now = reader.load_turn(&key, NOW).await.unwrap();
    assert_eq!(now.head.unwrap().last_seq, 4);
    assert_eq!(seqs(&now.window), [(1, 1), (1, 2), (1, 3), (1, 4)]);
}

pub(super) async fn an_idempotency_key_runs_once_and_then_replays_its_response(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let request = idem("7f9c2ba4-e88f-11ed-a05b-0242ac120003");
    let claim = |hash: &'static str, now| {
        let store = store.clone();
        let (key, request) = (key.clone(), request.clone());
        async move {
            store
                .claim_request(&key, &request, hash, now, 30)
                .await
                .unwrap()
        }
    };
    assert_eq!(claim("hash-a", NOW).await, Claim::Started);
    assert_eq!(claim("hash-a", NOW + 1).await, Claim::InProgress);
    assert_eq!(claim("hash-b", NOW + 1).await, Claim::Mismatch);

    let mut done = round(&key, None, exchange(1, None, "book me"));
    done.idempotency = Some(CompletedRequest {
        key: request.clone(),
        payload_hash: "hash-a".into(),
        response: r#"{"session":1}"#.into(),
        expires_at: NOW + 86_400,
    });
    store.commit_round(&done).await.unwrap();

    let replay = Claim::Completed {
        response: r#"{"session":1}"#.into(),
    };
    assert_eq!(claim("hash-a", NOW + 2).await, replay);
    // Long after the lease, a completed record still replays.
    assert_eq!(claim("hash-a", NOW + 600).await, replay);
    assert_eq!(claim("hash-b", NOW + 2).await, Claim::Mismatch);
    // Releasing only frees keys in progress.
    store.release_request(&key, &request).await.unwrap();
    assert_eq!(claim("hash-a", NOW + 3).await, replay);
}

/// Two attempts of one request never both commit: the second round's commit
/// conflicts once the first completed the key, even when its claim was taken
/// meanwhile (an erase takes every item, the claim with them), so it replays the
/// first instead of storing the message twice.
pub(super) async fn a_round_whose_key_another_attempt_completed_conflicts(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let request = idem("0b5f6a52-3c1e-4b7e-9a4e-5d2f1c0e7a11");
    let completed = |text: &str, expected: Option<&Head>, seq: u32| {
        let mut done = round(&key, expected, exchange(seq, None, text));
        done.idempotency = Some(CompletedRequest {
            key: request.clone(),
            payload_hash: "hash-a".into(),
            response: format!(r#"{{"seq":{seq}}}"#),
            expires_at: NOW + 86_400,
        });
        done
    };
    store
        .commit_round(&completed("book me", None, 1))
        .await
        .unwrap();
    let head = store.load_turn(&key, NOW).await.unwrap().head;
    let again = store
        .commit_round(&completed("book me", head.as_ref(), 3))
        .await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let replay = store
        .claim_request(&key, &request, "hash-a", NOW + 1, 30)
        .await
        .unwrap();
    assert_eq!(
        replay,
        Claim::Completed {
            response: r#"{"seq":1}"#.into()
        }
    );
}

pub(super) async fn a_released_key_can_be_claimed_again(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let request = idem("retry-me");
    assert_eq!(
        store
            .claim_request(&key, &request, "h", NOW, 30)
            .await
            .unwrap(),
        Claim::Started
    );
    store.release_request(&key, &request).await.unwrap();
    assert_eq!(
        store
            .claim_request(&key, &request, "h", NOW + 1, 30)
            .await
            .unwrap(),
        Claim::Started
    );
    // Releasing an unknown key is fine.
    store
        .release_request(&key, &idem("never-seen"))
        .await
        .unwrap();
}

pub(super) async fn a_key_whose_lease_ran_out_can_be_claimed_again_by_the_same_payload(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let request = idem("crashed-attempt");
    let claim = |hash: &'static str, now| {
        let store = store.clone();
        let (key, request) = (key.clone(), request.clone());
        async move {
            store
                .claim_request(&key, &request, hash, now, 30)
                .await
                .unwrap()
        }
    };
    assert_eq!(claim("h", NOW).await, Claim::Started);
    assert_eq!(claim("h", NOW + 29).await, Claim::InProgress);
    assert_eq!(claim("other", NOW + 30).await, Claim::Mismatch);
    assert_eq!(claim("h", NOW + 30).await, Claim::Started);
    assert_eq!(claim("h", NOW + 31).await, Claim::InProgress);
}

pub(super) async fn an_expired_idempotency_record_frees_its_key(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let request = idem("old-key");
    let mut done = round(&key, None, exchange(1, None, "hi"));
    done.idempotency = Some(CompletedRequest {
        key: request.clone(),
        payload_hash: "h".into(),
        response: "{}".into(),
        expires_at: NOW + 10,
    });
    store.commit_round(&done).await.unwrap();
    assert_eq!(
        store
            .claim_request(&key, &request, "h", NOW + 9, 30)
            .await
            .unwrap(),
        Claim::Completed {
            response: "{}".into()
        }
    );
    // DynamoDB deletes expired items only eventually: the condition must not care.
    assert_eq!(
        store
            .claim_request(&key, &request, "new", NOW + 10, 30)
            .await
            .unwrap(),
        Claim::Started
    );
}

pub(super) async fn refreshing_expiry_sets_the_ttl_of_existing_messages_of_the_same_life_only(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    let first = RoundCommit {
        messages_expire_at: NOW + 10,
        ..round(&key, None, exchange(1, None, "hello"))
    };
    store.commit_round(&first).await.unwrap();
    let head = commit(&*store, &key, exchange(1, Some(&first.head), "again")).await;
    let life = head.incarnation.clone().unwrap();

    assert!(
        store
            .refresh_expiry(&key, &life, 1, &[1, 2], NOW + 1000)
            .await
            .unwrap()
    );
    for seq in [1, 2] {
        assert_eq!(
            backend.raw_message_expires_at(&key, 1, seq).await,
            Some(NOW + 1000)
        );
    }
    assert_eq!(
        backend.raw_message_expires_at(&key, 1, 3).await,
        Some(RETAINED),
        "untouched"
    );
    // Another life, or a message that is gone: nothing is written.
    assert!(
        !store
            .refresh_expiry(&key, &Incarnation::random(), 1, &[1], NOW + 2000)
            .await
            .unwrap()
    );
    assert!(
        !store
            .refresh_expiry(&key, &life, 1, &[2, 99], NOW + 2000)
            .await
            .unwrap()
    );
    assert_eq!(
        backend.raw_message_expires_at(&key, 1, 2).await,
        Some(NOW + 1000)
    );
    let items = backend.raw_item_count(&key).await;
    assert_eq!(items, 5, "no message was created");
    let too_many: Vec<u64> = (1..=MAX_REFRESH_PER_ROUND as u64 + 1).collect();
    let err = store
        .refresh_expiry(&key, &life, 1, &too_many, NOW)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Other(_)), "{err:?}");
}
