//! The `Store` contract: one suite, run against the in-memory adapter and against
//! the DynamoDB adapter on moto (a fresh table per test). Each test is written once
//! as a generic function over a [`Backend`]; `contract_tests!` instantiates them all
//! for each adapter, so `memory::…` and `dynamodb::…` hold the same names.
//!
//! The DynamoDB half needs `DEGRAU_TEST_AWS_ENDPOINT` (`./dev.sh test` sets it).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use degrau::domain::{
    ContactId, ContentBlock, Fact, FactKey, FactSource, Head, IdempotencyKey, Role, StoredMessage,
    TenantId,
};
use degrau::store::dynamo::DynamoStore;
use degrau::store::memory::MemoryStore;
use degrau::store::{
    Claim, CompletedRequest, ContactKey, Cursor, RoundCommit, SessionFilter, Store, StoreError,
    TenantStore,
};
use degrau::tenant::TenantConfig;
use degrau::usage::Usage;
use degrau_tests::moto;
use serde_json::json;

/// A point in time the tests count from (seconds since the epoch).
const NOW: i64 = 1_800_000_000;

/// An adapter under test, with the few raw writes and reads the contract needs that
/// the port itself does not offer (a compaction step, a fact, an item count).
trait Backend: Sized {
    type S: Store + TenantStore + 'static;

    async fn start() -> Self;
    fn store(&self) -> Arc<Self::S>;
    /// Records a compaction step on the head, as the compactor would.
    async fn set_summarized_until(&self, key: &ContactKey, until: u64, summary: &str);
    /// Writes a fact item, with its TTL when given.
    async fn put_fact(&self, key: &ContactKey, fact: Fact, expires_at: Option<i64>);
    /// Counts the items of the contact's partition, bypassing the adapter's reads.
    async fn raw_item_count(&self, key: &ContactKey) -> usize;
}

struct Memory(Arc<MemoryStore>);

impl Backend for Memory {
    type S = MemoryStore;

    async fn start() -> Self {
        Memory(Arc::new(MemoryStore::new()))
    }

    fn store(&self) -> Arc<MemoryStore> {
        self.0.clone()
    }

    async fn set_summarized_until(&self, key: &ContactKey, until: u64, summary: &str) {
        self.0
            .set_summarized_until(key, until, Some(summary.into()));
    }

    async fn put_fact(&self, key: &ContactKey, fact: Fact, expires_at: Option<i64>) {
        self.0.put_fact(key, fact, expires_at);
    }

    async fn raw_item_count(&self, key: &ContactKey) -> usize {
        self.0.item_count(key)
    }
}

struct Dynamo {
    client: aws_sdk_dynamodb::Client,
    table: String,
    store: Arc<DynamoStore>,
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The contact's partition key, as the adapter lays it out.
fn raw_pk(key: &ContactKey) -> String {
    format!("T#{}#C#{}", key.tenant, key.contact)
}

impl Backend for Dynamo {
    type S = DynamoStore;

    async fn start() -> Self {
        let client = moto::dynamodb_client().await;
        let table = moto::fresh_table(&client).await;
        let store = Arc::new(DynamoStore::new(client.clone(), table.clone()));
        Dynamo {
            client,
            table,
            store,
        }
    }

    fn store(&self) -> Arc<DynamoStore> {
        self.store.clone()
    }

    async fn set_summarized_until(&self, key: &ContactKey, until: u64, summary: &str) {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(raw_pk(key)))
            .key("sk", s("HEAD"))
            .update_expression(
                "SET summarized_until = :until, summary = :summary, \
                 steps = if_not_exists(steps, :zero) + :one",
            )
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":until", n(until))
            .expression_attribute_values(":summary", s(summary))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .send()
            .await
            .unwrap();
    }

    async fn put_fact(&self, key: &ContactKey, fact: Fact, expires_at: Option<i64>) {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(raw_pk(key)))
            .item("sk", s(format!("FACT#{}", fact.key)))
            .item("key", s(fact.key.as_str()))
            .item("value", s(fact.value))
            .item("source_session", n(fact.source.session))
            .item("source_seq", n(fact.source.seq))
            .item("updated_at", n(fact.updated_at));
        if let Some(expires_at) = expires_at {
            put = put.item("expires_at", n(expires_at));
        }
        put.send().await.unwrap();
    }

    async fn raw_item_count(&self, key: &ContactKey) -> usize {
        let mut count = 0;
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(raw_pk(key)))
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            count += page.items().len();
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return count,
            }
        }
    }
}

// ---- fixtures --------------------------------------------------------------------

fn contact_key(tenant: &str, contact: &str) -> ContactKey {
    ContactKey {
        tenant: TenantId::parse(tenant).unwrap(),
        contact: ContactId::parse(contact).unwrap(),
    }
}

fn ana() -> ContactKey {
    contact_key("acme", "+5511999990000")
}

fn message(session: u32, seq: u64, role: Role, content: Vec<ContentBlock>) -> StoredMessage {
    StoredMessage {
        session,
        seq,
        role,
        content,
        pruned: None,
        usage: None,
        created_at: NOW,
    }
}

fn user(session: u32, seq: u64, text: &str) -> StoredMessage {
    message(session, seq, Role::User, vec![ContentBlock::text(text)])
}

fn assistant(session: u32, seq: u64, text: &str) -> StoredMessage {
    StoredMessage {
        usage: Some(Usage {
            input_tokens: 10,
            cache_creation_input_tokens: 20,
            cache_read_input_tokens: 30,
            output_tokens: 5,
        }),
        ..message(
            session,
            seq,
            Role::Assistant,
            vec![ContentBlock::text(text)],
        )
    }
}

/// A question and its answer, as the round after `expected` in `session`.
fn exchange(session: u32, expected: Option<&Head>, question: &str) -> Vec<StoredMessage> {
    let first = match expected {
        Some(head) if head.session == session => head.last_seq + 1,
        _ => 1,
    };
    vec![
        user(session, first, question),
        assistant(session, first + 1, &format!("answer to {question}")),
    ]
}

/// A round committing `messages` after `expected`.
fn round(key: &ContactKey, expected: Option<&Head>, messages: Vec<StoredMessage>) -> RoundCommit {
    let last = messages.last().unwrap();
    RoundCommit {
        key: key.clone(),
        expected: expected.cloned(),
        head: Head {
            session: last.session,
            last_seq: last.seq,
            summarized_until: 0,
            summary: None,
            last_context_tokens: 60 + last.seq,
            last_activity: NOW + last.seq as i64,
            steps: 0,
        },
        messages,
        idempotency: None,
        archive: None,
        messages_expire_at: NOW + 90 * 86_400,
    }
}

/// Commits a round after the stored head and returns the new head.
async fn commit<S: Store>(store: &S, key: &ContactKey, messages: Vec<StoredMessage>) -> Head {
    let expected = store.load_turn(key, NOW).await.unwrap().head;
    store
        .commit_round(&round(key, expected.as_ref(), messages))
        .await
        .unwrap();
    store.load_turn(key, NOW).await.unwrap().head.unwrap()
}

fn fact(key: &str, value: &str) -> Fact {
    Fact {
        key: FactKey::parse(key).unwrap(),
        value: value.into(),
        source: FactSource { session: 1, seq: 1 },
        updated_at: NOW - 60,
    }
}

fn idem(key: &str) -> IdempotencyKey {
    IdempotencyKey::parse(key).unwrap()
}

fn seqs(messages: &[StoredMessage]) -> Vec<(u32, u64)> {
    messages.iter().map(|m| (m.session, m.seq)).collect()
}

// ---- the contract ----------------------------------------------------------------

async fn a_contact_never_seen_loads_empty(backend: impl Backend) {
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

async fn a_committed_round_loads_back_in_order_with_its_head(backend: impl Backend) {
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

async fn a_commit_with_a_stale_head_conflicts_and_writes_none_of_its_messages(
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

async fn a_second_first_round_for_the_same_contact_conflicts(backend: impl Backend) {
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

async fn a_round_reusing_a_stored_sequence_number_conflicts_and_changes_nothing(
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

async fn a_new_session_resets_the_summary_and_leaves_the_old_session_out_of_the_window(
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

async fn a_commit_in_the_same_session_keeps_a_compaction_step_applied_meanwhile(
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

async fn the_window_never_holds_messages_at_or_before_summarized_until(backend: impl Backend) {
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

async fn facts_whose_ttl_passed_are_filtered_out(backend: impl Backend) {
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

async fn an_idempotency_key_runs_once_and_then_replays_its_response(backend: impl Backend) {
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

async fn a_released_key_can_be_claimed_again(backend: impl Backend) {
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

async fn a_key_whose_lease_ran_out_can_be_claimed_again_by_the_same_payload(backend: impl Backend) {
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

async fn an_expired_idempotency_record_frees_its_key(backend: impl Backend) {
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

async fn transcript_pages_cover_every_session_exactly_once_in_order(backend: impl Backend) {
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

async fn erasing_a_contact_removes_every_item_and_a_second_erase_finds_none(backend: impl Backend) {
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
    assert_eq!(store.erase_contact(&key).await.unwrap(), 8);
    assert_eq!(backend.raw_item_count(&key).await, 0);
    assert_eq!(store.erase_contact(&key).await.unwrap(), 0);

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

async fn erasing_pages_through_a_long_history(backend: impl Backend) {
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
    assert_eq!(store.erase_contact(&key).await.unwrap(), 121);
    assert_eq!(backend.raw_item_count(&key).await, 0);
}

async fn tenants_are_isolated_even_with_the_same_contact_id(backend: impl Backend) {
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
    assert_eq!(store.erase_contact(&other).await.unwrap(), 4);

    let turn = store.load_turn(&acme, NOW).await.unwrap();
    assert_eq!(turn.window[0].to_message().text(), "acme's");
    assert_eq!(turn.facts, vec![fact("name", "Ana")]);
}

async fn tenant_configs_round_trip_per_tenant(backend: impl Backend) {
    let store = backend.store();
    let acme = TenantId::parse("acme").unwrap();
    let other = TenantId::parse("other-clinic").unwrap();
    assert_eq!(store.tenant_config(&acme).await.unwrap(), None);
    let config = TenantConfig {
        instructions: Some("Book haircuts.".into()),
        allowed_fact_keys: Some(vec![FactKey::parse("name").unwrap()]),
        compaction_threshold_tokens: Some(8000),
        ..TenantConfig::default()
    };
    store.put_tenant_config(&acme, &config).await.unwrap();
    assert_eq!(store.tenant_config(&acme).await.unwrap(), Some(config));
    assert_eq!(store.tenant_config(&other).await.unwrap(), None);

    let replaced = TenantConfig {
        model: Some("claude-haiku-4-5".into()),
        ..TenantConfig::default()
    };
    store.put_tenant_config(&acme, &replaced).await.unwrap();
    assert_eq!(store.tenant_config(&acme).await.unwrap(), Some(replaced));
}

async fn concurrent_commits_on_the_same_head_let_exactly_one_win(backend: impl Backend) {
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

// ---- one suite per adapter -------------------------------------------------------

macro_rules! contract_tests {
    ($backend:ty) => {
        contract_tests!(@each $backend;
            a_contact_never_seen_loads_empty,
            a_committed_round_loads_back_in_order_with_its_head,
            a_commit_with_a_stale_head_conflicts_and_writes_none_of_its_messages,
            a_second_first_round_for_the_same_contact_conflicts,
            a_round_reusing_a_stored_sequence_number_conflicts_and_changes_nothing,
            a_new_session_resets_the_summary_and_leaves_the_old_session_out_of_the_window,
            a_commit_in_the_same_session_keeps_a_compaction_step_applied_meanwhile,
            the_window_never_holds_messages_at_or_before_summarized_until,
            facts_whose_ttl_passed_are_filtered_out,
            an_idempotency_key_runs_once_and_then_replays_its_response,
            a_released_key_can_be_claimed_again,
            a_key_whose_lease_ran_out_can_be_claimed_again_by_the_same_payload,
            an_expired_idempotency_record_frees_its_key,
            transcript_pages_cover_every_session_exactly_once_in_order,
            erasing_a_contact_removes_every_item_and_a_second_erase_finds_none,
            erasing_pages_through_a_long_history,
            tenants_are_isolated_even_with_the_same_contact_id,
            tenant_configs_round_trip_per_tenant,
            concurrent_commits_on_the_same_head_let_exactly_one_win,
        );
    };
    (@each $backend:ty; $($test:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                crate::$test(<$backend as crate::Backend>::start().await).await;
            }
        )+
    };
}

mod memory {
    contract_tests!(crate::Memory);
}

mod dynamodb {
    contract_tests!(crate::Dynamo);
}
