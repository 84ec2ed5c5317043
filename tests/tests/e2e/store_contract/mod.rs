//! The `Store` contract: one suite, run against the in-memory adapter and against
//! the DynamoDB adapter on moto (a fresh table per test). Each test is written once
//! as a generic function over a [`Backend`]; `contract_tests!` instantiates them all
//! for each adapter, so `memory::…` and `dynamodb::…` hold the same names.
//!
//! The DynamoDB half needs `DEGRAU_TEST_AWS_ENDPOINT` (`./dev.sh test` sets it).

use degrau::store::JobStore;
use degrau::store::RecordStore;
use degrau::store::RoundStore;
use degrau::store::SweepStore;
use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use degrau::domain::PendingFacts;
use degrau::domain::{
    ContactId, ContentBlock, Fact, FactKey, FactSource, Head, IdempotencyKey, Incarnation, Role,
    StoredMessage, TenantId,
};
use degrau::memory::{ItemRef, MemoryStore};
use degrau::pruning::PruneDecision;
use degrau::store::{
    AppliedStep, Claim, ClosedSession, CompletedRequest, ContactKey, Cursor, DueHead, FactWrite,
    MAX_PRUNES_PER_STEP, MAX_REFRESH_PER_ROUND, PendingChange, RoundCommit, SessionArchive,
    SessionFilter, Store, StoreError, SweepSettle, SweepSlot,
};
use degrau::sweep::DEFAULT_SWEEP_BUCKETS;
use degrau::tenant::TenantConfig;
use degrau::tenant::TenantStore;
use degrau::usage::Usage;
use degrau_adapters::dynamodb::{DynamoStore, keys};
use degrau_tests::moto;
use degrau_tests::serial::{OneAtATime, one_at_a_time};
use serde_json::json;

/// A point in time the tests count from (seconds since the epoch).
const NOW: i64 = 1_800_000_000;
/// A TTL far beyond any test run (2100-01-01): `transcript` filters expiry by the
/// system clock, so retained items must outlive the real date, not just `NOW`.
const RETAINED: i64 = 4_102_444_800;
/// A TTL long past by any clock (2001).
const LONG_EXPIRED: i64 = 1_000_000_000;
/// How long after its round a test head is due for the sweep.
const DUE_AFTER: i64 = 3_600;

/// A contact's sweep bucket at the default bucket count.
fn sweep_bucket(key: &ContactKey) -> u8 {
    degrau::sweep::sweep_bucket(key, DEFAULT_SWEEP_BUCKETS)
}

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
    /// A message item's `expires_at` attribute, read raw (`None`: no item or none).
    async fn raw_message_expires_at(&self, key: &ContactKey, session: u32, seq: u64)
    -> Option<i64>;
    /// A session's archive item (`SUM#…`), read raw.
    async fn raw_archive(&self, key: &ContactKey, session: u32) -> Option<SessionArchive>;
    /// The head's sweep index attributes as (bucket, `sweep_sk`), read raw; `None`
    /// when the head carries none.
    async fn raw_sweep(&self, key: &ContactKey) -> Option<(u8, i64)>;
    /// Removes the head's incarnation, as on a head written before incarnations.
    async fn forget_incarnation(&self, key: &ContactKey);
    /// Deletes a message, as DynamoDB's TTL would once it expired.
    async fn delete_message(&self, key: &ContactKey, session: u32, seq: u64);
    /// The head's `expires_at` attribute, read raw.
    async fn raw_head_expires_at(&self, key: &ContactKey) -> Option<i64>;
    /// Deletes the head alone, as DynamoDB's TTL may before the messages.
    async fn delete_head(&self, key: &ContactKey);
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

    async fn raw_message_expires_at(
        &self,
        key: &ContactKey,
        session: u32,
        seq: u64,
    ) -> Option<i64> {
        self.0.message_expires_at(key, session, seq)
    }

    async fn raw_archive(&self, key: &ContactKey, session: u32) -> Option<SessionArchive> {
        self.0.archive(key, session)
    }

    async fn raw_sweep(&self, key: &ContactKey) -> Option<(u8, i64)> {
        self.0.sweep_entry(key)
    }

    async fn forget_incarnation(&self, key: &ContactKey) {
        self.0.forget_incarnation(key);
    }

    async fn delete_message(&self, key: &ContactKey, session: u32, seq: u64) {
        self.0.delete_message(key, session, seq);
    }

    async fn raw_head_expires_at(&self, key: &ContactKey) -> Option<i64> {
        self.0.load_head(key).await.unwrap()?.expires_at
    }

    async fn delete_head(&self, key: &ContactKey) {
        self.0.ttl_delete(key, &ItemRef::Head);
    }
}

struct Dynamo {
    client: aws_sdk_dynamodb::Client,
    table: String,
    store: Arc<DynamoStore>,
    /// The adapter reaches moto through it: moto's transactions race under
    /// concurrency where DynamoDB's do not (see [`OneAtATime`]), and the concurrent
    /// commits test would otherwise check moto, not the adapter.
    _serial: OneAtATime,
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The contact's partition key, as the adapter lays it out.
fn raw_pk(key: &ContactKey) -> String {
    keys::contact_pk(key)
}

fn raw_number<T: std::str::FromStr>(
    item: &HashMap<String, AttributeValue>,
    name: &str,
) -> Option<T> {
    match item.get(name) {
        Some(AttributeValue::N(number)) => number.parse().ok(),
        _ => None,
    }
}

impl Dynamo {
    async fn raw_get(
        &self,
        key: &ContactKey,
        sk: String,
    ) -> Option<HashMap<String, AttributeValue>> {
        self.client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .key("pk", s(raw_pk(key)))
            .key("sk", s(sk))
            .send()
            .await
            .unwrap()
            .item
    }
}

impl Backend for Dynamo {
    type S = DynamoStore;

    async fn start() -> Self {
        let client = moto::dynamodb_client().await;
        let table = moto::fresh_table(&client).await;
        let serial = one_at_a_time(&moto::endpoint()).await;
        let serial_client = aws_sdk_dynamodb::Client::new(&moto::sdk_config_at(serial.url()).await);
        let store = Arc::new(DynamoStore::new(serial_client, table.clone()));
        Dynamo {
            client,
            table,
            store,
            _serial: serial,
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
            .key("sk", s(keys::HEAD_SK))
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
            .item("sk", s(keys::fact_sk(&fact.key)))
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

    async fn raw_message_expires_at(
        &self,
        key: &ContactKey,
        session: u32,
        seq: u64,
    ) -> Option<i64> {
        let item = self.raw_get(key, keys::message_sk(session, seq)).await?;
        raw_number(&item, "expires_at")
    }

    async fn raw_archive(&self, key: &ContactKey, session: u32) -> Option<SessionArchive> {
        let item = self.raw_get(key, keys::archive_sk(session)).await?;
        Some(SessionArchive {
            session: raw_number(&item, "session").unwrap(),
            summary: match item.get("summary") {
                Some(AttributeValue::S(summary)) => Some(summary.clone()),
                _ => None,
            },
            summarized_until: raw_number(&item, "summarized_until").unwrap(),
            last_seq: raw_number(&item, "last_seq").unwrap(),
            expires_at: raw_number(&item, "expires_at").unwrap(),
        })
    }

    async fn raw_sweep(&self, key: &ContactKey) -> Option<(u8, i64)> {
        let item = self.raw_get(key, keys::HEAD_SK.into()).await?;
        let sweep_pk = match item.get("sweep_pk") {
            Some(AttributeValue::S(sweep_pk)) => sweep_pk.clone(),
            None => {
                assert!(!item.contains_key("sweep_sk"), "sweep_sk without sweep_pk");
                return None;
            }
            Some(other) => panic!("sweep_pk is not a string: {other:?}"),
        };
        let bucket = sweep_pk
            .strip_prefix("OPEN#")
            .and_then(|bucket| bucket.parse().ok())
            .unwrap_or_else(|| panic!("sweep_pk {sweep_pk:?} is not OPEN#{{bucket}}"));
        Some((
            bucket,
            raw_number(&item, "sweep_sk").expect("a numeric sweep_sk"),
        ))
    }

    async fn forget_incarnation(&self, key: &ContactKey) {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(raw_pk(key)))
            .key("sk", s(keys::HEAD_SK))
            .update_expression("REMOVE incarnation")
            .condition_expression("attribute_exists(pk)")
            .send()
            .await
            .unwrap();
    }

    async fn delete_message(&self, key: &ContactKey, session: u32, seq: u64) {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(raw_pk(key)))
            .key("sk", s(keys::message_sk(session, seq)))
            .send()
            .await
            .unwrap();
    }

    async fn raw_head_expires_at(&self, key: &ContactKey) -> Option<i64> {
        let item = self.raw_get(key, keys::HEAD_SK.into()).await?;
        raw_number(&item, "expires_at")
    }

    async fn delete_head(&self, key: &ContactKey) {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(raw_pk(key)))
            .key("sk", s(keys::HEAD_SK))
            .send()
            .await
            .unwrap();
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
            cache_creation: None,
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
            facts_requested: None,
            last_round: None,
            // A loaded head keeps its own; a new one gets one, as in `ask`.
            incarnation: expected
                .and_then(|head| head.incarnation.clone())
                .or_else(|| Some(Incarnation::random())),
            facts_pending: None,
            hard_cap_at: None,
            expires_at: Some(RETAINED),
            recent_gaps: Vec::new(),
        },
        sweep: SweepSlot {
            bucket: sweep_bucket(key),
            due: NOW + last.seq as i64 + DUE_AFTER,
        },
        messages,
        idempotency: None,
        archive: None,
        refresh: Vec::new(),
        messages_expire_at: RETAINED,
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

/// Session 1 with a tool call: 1 user, 2 assistant, 3 user, 4 `tool_use`,
/// 5 `tool_result`, 6 assistant, 7 user, 8 assistant.
async fn tool_session<S: Store>(store: &S, key: &ContactKey) -> Head {
    commit(store, key, exchange(1, None, "hello")).await;
    let head = commit(
        store,
        key,
        vec![
            user(1, 3, "any slot tuesday?"),
            message(
                1,
                4,
                Role::Assistant,
                vec![ContentBlock::tool_use(
                    "toolu_1",
                    "list_free_slots",
                    json!({"day": "tuesday"}),
                )],
            ),
            message(
                1,
                5,
                Role::User,
                vec![ContentBlock::tool_result(
                    "toolu_1",
                    "[\"09:00\", \"10:00\"]",
                )],
            ),
            assistant(1, 6, "09:00 or 10:00."),
        ],
    )
    .await;
    commit(store, key, exchange(1, Some(&head), "09:00 please")).await
}

/// The incarnation of the contact's head, as a job made now would carry it (a
/// fresh one when the contact has no head).
async fn life_of<S: Store>(store: &S, key: &ContactKey) -> Incarnation {
    let (head, _) = store.load_memory(key, NOW).await.unwrap();
    head.and_then(|head| head.incarnation)
        .unwrap_or_else(Incarnation::random)
}

/// A step for the contact's head as it is now (see [`life_of`]).
async fn stepped<S: Store>(
    store: &S,
    key: &ContactKey,
    session: u32,
    seen: u64,
    new: u64,
    summary: &str,
    prune: &[u64],
) -> AppliedStep {
    AppliedStep {
        incarnation: life_of(store, key).await,
        ..step(session, seen, new, summary, prune)
    }
}

/// A step planned for no head in particular (its incarnation is a fresh one).
fn step(session: u32, seen: u64, new: u64, summary: &str, prune: &[u64]) -> AppliedStep {
    AppliedStep {
        incarnation: Incarnation::random(),
        session,
        seen_summarized_until: seen,
        new_summarized_until: new,
        summary: summary.into(),
        prune: prune
            .iter()
            .map(|&seq| PruneDecision {
                seq,
                pruned: vec![ContentBlock::tool_result(
                    "toolu_1",
                    format!("[pruned at {summary}]"),
                )],
            })
            .collect(),
    }
}

fn fact_write(key: &str, value: &str, seq: u64, expires_at: i64) -> FactWrite {
    FactWrite {
        fact: Fact {
            source: FactSource { session: 1, seq },
            updated_at: NOW,
            ..fact(key, value)
        },
        expires_at,
    }
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

async fn a_round_writes_its_gap_record_on_the_head_and_a_step_keeps_it(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    let head = commit(&*store, &key, exchange(1, None, "one")).await;
    assert!(head.recent_gaps.is_empty(), "a first round has no gap");
    let mut next = round(&key, Some(&head), exchange(1, Some(&head), "two"));
    next.head.recent_gaps = vec![30, 900, 72_000];
    store.commit_round(&next).await.unwrap();
    let turn = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(turn.recent_gaps, [30, 900, 72_000]);
    let (memory, _) = store.load_memory(&key, NOW).await.unwrap();
    assert_eq!(memory.unwrap().recent_gaps, [30, 900, 72_000]);
    // A step owns other fields: the record stays.
    let applied = stepped(&*store, &key, 1, 0, 2, "Ana asked one.", &[]).await;
    assert!(store.apply_step(&key, &applied).await.unwrap());
    let stepped_head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert_eq!(stepped_head.summarized_until, 2);
    assert_eq!(stepped_head.recent_gaps, [30, 900, 72_000]);
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
    // An empty record removes it.
    let fourth = round(&key, Some(&head), exchange(2, Some(&head), "four"));
    store.commit_round(&fourth).await.unwrap();
    let head = store.load_turn(&key, NOW).await.unwrap().head.unwrap();
    assert!(head.recent_gaps.is_empty());
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

async fn a_step_applies_once_and_a_repeat_with_the_same_seen_value_changes_nothing(
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

async fn a_stale_step_changes_nothing_and_the_next_one_applies(backend: impl Backend) {
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

async fn a_step_for_a_session_the_head_left_changes_nothing(backend: impl Backend) {
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

async fn a_step_on_an_erased_contact_changes_nothing_and_writes_no_item(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    store.erase_contact(&key).await.unwrap();
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

async fn a_step_writes_pruned_copies_that_load_turn_returns_with_the_originals_intact(
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

async fn a_step_that_cannot_fit_one_transaction_is_refused(backend: impl Backend) {
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

async fn a_new_session_commit_archives_the_old_summary_for_load_closed_session(
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

async fn an_archive_without_a_summary_loads_the_session_whole_and_skips_expired_messages(
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

async fn the_transcript_of_all_sessions_never_returns_an_archive_item(backend: impl Backend) {
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

async fn message_items_carry_their_expiry_and_expired_ones_leave_the_transcript_and_the_window(
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

async fn a_window_with_a_hole_starts_at_the_first_safe_start_after_the_last_one(
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

async fn a_head_past_its_expiry_is_gone_and_a_first_round_writes_over_it(backend: impl Backend) {
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

async fn a_contact_whose_head_ttl_deleted_first_starts_over_over_its_expired_messages(
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

async fn refreshing_expiry_sets_the_ttl_of_existing_messages_of_the_same_life_only(
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

async fn a_round_that_requests_facts_leaves_them_pending_until_the_job_is_done(
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

async fn saved_facts_keep_source_and_expiry_replace_by_key_and_removals_delete(
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
                &[FactKey::parse("preferred_time").unwrap(), never_stored],
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

async fn saving_facts_for_an_erased_or_unknown_contact_writes_nothing(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    commit(&*store, &key, exchange(1, None, "hi")).await;
    store.erase_contact(&key).await.unwrap();
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
                &[FactKey::parse("name").unwrap()]
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

async fn saving_more_facts_than_one_transaction_holds_writes_them_all(backend: impl Backend) {
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
    let removals: Vec<FactKey> = (0..120)
        .map(|i| FactKey::parse(&format!("k{i:03}")).unwrap())
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

async fn a_fact_batch_naming_a_key_twice_is_refused(backend: impl Backend) {
    let store = backend.store();
    let key = ana();
    commit(&*store, &key, exchange(1, None, "hi")).await;
    let name = fact_write("name", "Ana", 1, NOW + 60);
    for (writes, removals) in [
        (vec![name.clone(), name.clone()], vec![]),
        (vec![name.clone()], vec![FactKey::parse("name").unwrap()]),
    ] {
        let err = store
            .save_facts(&key, &life_of(&*store, &key).await, &writes, &removals)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Other(_)), "{err:?}");
    }
    assert!(store.load_memory(&key, NOW).await.unwrap().1.is_empty());
}

async fn erasing_a_contact_removes_its_session_archives_too(backend: impl Backend) {
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
    assert_eq!(store.erase_contact(&key).await.unwrap(), 7);
    assert_eq!(backend.raw_item_count(&key).await, 0);
    assert_eq!(backend.raw_archive(&key, 1).await, None);
    assert_eq!(
        store.load_closed_session(&key, 1, NOW).await.unwrap(),
        ClosedSession::default()
    );
}

// ---- incarnations --------------------------------------------------------------------

async fn a_new_head_gets_an_incarnation_that_finds_its_contact_and_only_in_its_tenant(
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
    store.erase_contact(&key).await.unwrap();
    assert_eq!(store.find_contact(&key.tenant, &life).await.unwrap(), None);
}

async fn job_writes_for_an_erased_life_change_nothing_in_the_contacts_new_one(
    backend: impl Backend,
) {
    let store = backend.store();
    let key = ana();
    tool_session(&*store, &key).await;
    let old = life_of(&*store, &key).await;
    let old_head = store.load_memory(&key, NOW).await.unwrap().0.unwrap();
    store.erase_contact(&key).await.unwrap();
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
            .save_facts(&key, &old, &[], &[FactKey::parse("name").unwrap()])
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

async fn a_head_from_before_incarnations_gets_one_at_its_next_round_or_when_swept(
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

// ---- the sweep index ---------------------------------------------------------------

/// The first session's first round for `key`, due for the sweep at `due`.
async fn commit_due<S: Store>(store: &S, key: &ContactKey, due: i64) {
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

/// What the sweep writes on `head` as read, with `due` as its entry said.
fn settle(head: &Head, due: i64) -> SweepSettle {
    SweepSettle {
        incarnation: head.incarnation.clone().unwrap(),
        last_activity: head.last_activity,
        due,
        pending_since: head.facts_pending.map(|pending| pending.since),
        facts_requested: None,
        pending: PendingChange::Keep,
        next_due: None,
    }
}

async fn every_round_files_the_head_under_its_bucket_at_its_due_time(backend: impl Backend) {
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

async fn due_heads_come_earliest_first_up_to_the_limit_from_one_bucket_only(backend: impl Backend) {
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

async fn a_settled_head_moves_or_leaves_the_index_and_records_the_request(backend: impl Backend) {
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

async fn settling_a_head_that_moved_on_or_was_erased_writes_nothing(backend: impl Backend) {
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

    store.erase_contact(&key).await.unwrap();
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
            a_round_writes_its_gap_record_on_the_head_and_a_step_keeps_it,
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
            a_step_applies_once_and_a_repeat_with_the_same_seen_value_changes_nothing,
            a_stale_step_changes_nothing_and_the_next_one_applies,
            a_step_for_a_session_the_head_left_changes_nothing,
            a_step_on_an_erased_contact_changes_nothing_and_writes_no_item,
            a_step_writes_pruned_copies_that_load_turn_returns_with_the_originals_intact,
            a_step_that_cannot_fit_one_transaction_is_refused,
            a_new_session_commit_archives_the_old_summary_for_load_closed_session,
            an_archive_without_a_summary_loads_the_session_whole_and_skips_expired_messages,
            the_transcript_of_all_sessions_never_returns_an_archive_item,
            message_items_carry_their_expiry_and_expired_ones_leave_the_transcript_and_the_window,
            saved_facts_keep_source_and_expiry_replace_by_key_and_removals_delete,
            saving_facts_for_an_erased_or_unknown_contact_writes_nothing,
            saving_more_facts_than_one_transaction_holds_writes_them_all,
            a_fact_batch_naming_a_key_twice_is_refused,
            erasing_a_contact_removes_its_session_archives_too,
            a_new_head_gets_an_incarnation_that_finds_its_contact_and_only_in_its_tenant,
            job_writes_for_an_erased_life_change_nothing_in_the_contacts_new_one,
            a_head_from_before_incarnations_gets_one_at_its_next_round_or_when_swept,
            every_round_files_the_head_under_its_bucket_at_its_due_time,
            due_heads_come_earliest_first_up_to_the_limit_from_one_bucket_only,
            a_settled_head_moves_or_leaves_the_index_and_records_the_request,
            settling_a_head_that_moved_on_or_was_erased_writes_nothing,
            a_window_with_a_hole_starts_at_the_first_safe_start_after_the_last_one,
            a_head_past_its_expiry_is_gone_and_a_first_round_writes_over_it,
            a_contact_whose_head_ttl_deleted_first_starts_over_over_its_expired_messages,
            refreshing_expiry_sets_the_ttl_of_existing_messages_of_the_same_life_only,
            a_round_that_requests_facts_leaves_them_pending_until_the_job_is_done,
        );
    };
    (@each $backend:ty; $($test:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                super::$test(<$backend as super::Backend>::start().await).await;
            }
        )+
    };
}

mod memory {
    contract_tests!(super::Memory);
}

mod dynamodb {
    contract_tests!(super::Dynamo);
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

/// A storage call that hangs fails over to another attempt: every AWS client of
/// degrau is built with an attempt and an operation timeout
/// (`degrau_adapters::wiring::with_timeouts`), so a read the proxy holds for a
/// minute is tried again after the attempt's limit and answers long before the
/// hold would end (without the timeouts it waits the whole minute, and the
/// test's own limit fails it).
#[tokio::test]
async fn dynamodb_a_hung_call_is_cut_at_the_attempt_timeout_and_tried_again() {
    use degrau_adapters::wiring::{ATTEMPT_TIMEOUT, OPERATION_TIMEOUT, with_timeouts};
    let direct = moto::dynamodb_client().await;
    let table = moto::fresh_table(&direct).await;
    let proxy = degrau_awsproxy::spawn(moto::endpoint()).await;
    let sdk = with_timeouts(&moto::sdk_config_at(proxy.url()).await);
    let timeouts = sdk.timeout_config().unwrap();
    assert_eq!(timeouts.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
    assert_eq!(timeouts.operation_timeout(), Some(OPERATION_TIMEOUT));
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), table.clone());
    let key = ana();
    commit(
        &DynamoStore::new(direct, table),
        &key,
        exchange(1, None, "hello"),
    )
    .await;

    let hung: degrau_awsproxy::Fault = serde_json::from_value(json!({
        "service": "dynamodb", "operation": "Query", "delay_ms": 60_000
    }))
    .unwrap();
    proxy.faults(vec![hung]).unwrap();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        store.load_memory(&key, NOW),
    )
    .await
    .expect("the hung attempt was cut and the call tried again");
    assert_eq!(read.unwrap().0.unwrap().last_seq, 2);
    assert!(
        proxy.pending_faults().is_empty(),
        "the first attempt was held"
    );
}
