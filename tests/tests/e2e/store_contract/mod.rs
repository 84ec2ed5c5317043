//! The store contract: one suite, run against the in-memory adapter and against
//! the DynamoDB adapter on moto (a fresh table per test). Each test is written once
//! as a generic function over a [`Backend`]; `contract_tests!` instantiates them all
//! for each adapter, so `memory::…` and `dynamodb::…` hold the same names.
//!
//! Split as the port is, one file per trait, each saying which of its promises it
//! checks: `round.rs` ([`RoundStore`]), `job.rs` ([`JobStore`]), `sweep.rs`
//! ([`SweepStore`]), `record.rs` ([`RecordStore`]), `tenant.rs` ([`TenantStore`]);
//! what holds across the ports in a file named for it: `isolation.rs` (between
//! tenants), `incarnation.rs` (a contact's lives), `expiry.rs` (the TTL). Two
//! DynamoDB-only cases need a proxy in front of moto: the bounded window read
//! (`round.rs`) and a hung call (`timeouts.rs`). This file holds the [`Backend`]s,
//! their raw reads and writes, and the fixtures.
//!
//! The DynamoDB half needs `DEGRAU_TEST_AWS_ENDPOINT` (`./dev.sh test` sets it).

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use degrau::domain::{
    ContactId, ContentBlock, Fact, FactKey, FactSource, Head, IdempotencyKey, Incarnation, Role,
    StoredMessage, TenantId,
};
use degrau::memory::{ItemRef, MemoryStore};
use degrau::plan::pruning::PruneDecision;
use degrau::plan::sweep::DEFAULT_SWEEP_BUCKETS;
use degrau::store::{
    AppliedStep, ContactKey, FactWrite, PendingChange, RecordStore, RoundCommit, RoundStore,
    SessionArchive, Store, SweepSettle, SweepSlot,
};
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
    degrau::plan::sweep::sweep_bucket(key, DEFAULT_SWEEP_BUCKETS)
}

/// An adapter under test, with the few raw writes and reads the contract needs that
/// the port itself does not offer (a compaction step, a fact, an item count).
trait Backend: Sized {
    type S: Store + TenantStore + degrau::platform::PolicyStore + 'static;

    async fn start() -> Self;
    fn store(&self) -> Arc<Self::S>;
    /// The WhatsApp channel's store on the same items (its records live in the
    /// contact's partition).
    fn whatsapp(&self) -> Arc<dyn degrau_whatsapp::store::WhatsAppStore>;
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
    /// Writes a tenant's `POLICY` item as `text`, read or not (one written by hand).
    async fn put_raw_policy(&self, tenant: &TenantId, text: &str);
    /// The adapter's quotas, counters and leases (the same for the whole test).
    fn quotas(&self) -> Arc<dyn degrau::quota::Quotas>;
}

struct Memory(
    Arc<MemoryStore>,
    Arc<degrau::quota::memory::MemoryQuotas>,
    Arc<degrau_whatsapp::memory::MemoryWhatsApp>,
);

impl Backend for Memory {
    type S = MemoryStore;

    async fn start() -> Self {
        let store = Arc::new(MemoryStore::new());
        let whatsapp = degrau_whatsapp::memory::MemoryWhatsApp::on(store.clone());
        Memory(
            store,
            Arc::new(degrau::quota::memory::MemoryQuotas::new()),
            whatsapp,
        )
    }

    fn store(&self) -> Arc<MemoryStore> {
        self.0.clone()
    }

    fn whatsapp(&self) -> Arc<dyn degrau_whatsapp::store::WhatsAppStore> {
        self.2.clone()
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

    async fn put_raw_policy(&self, tenant: &TenantId, text: &str) {
        self.0.put_policy_text(tenant, text);
    }

    fn quotas(&self) -> Arc<dyn degrau::quota::Quotas> {
        self.1.clone()
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

    fn whatsapp(&self) -> Arc<dyn degrau_whatsapp::store::WhatsAppStore> {
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
            excerpt: match item.get("excerpt") {
                Some(AttributeValue::S(excerpt)) => excerpt.clone(),
                _ => String::new(),
            },
            ids: match item.get("ids") {
                Some(AttributeValue::L(ids)) => ids
                    .iter()
                    .filter_map(|id| id.as_s().ok().cloned())
                    .collect(),
                _ => Vec::new(),
            },
            ended_at: raw_number(&item, "ended_at").unwrap_or(0),
            // Not an attribute: the commit's instruction to delete an older one.
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

    async fn put_raw_policy(&self, tenant: &TenantId, text: &str) {
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(keys::tenant_pk(tenant)))
            .item("sk", s(keys::POLICY_SK))
            .item("policy", s(text))
            .item("version", AttributeValue::N("1".into()))
            .send()
            .await
            .unwrap();
    }

    fn quotas(&self) -> Arc<dyn degrau::quota::Quotas> {
        self.store.clone()
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
        written_by_person: false,
        transcribed: false,
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
            cache_hour: false,
            client_round: false,
            // A loaded head keeps its own; a new one's life begins with the round,
            // when its messages were written (`created_at`: a message written
            // before its head's life began is of an earlier life).
            born_at: expected.map_or(Some(NOW), |head| head.born_at),
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
async fn commit<S: RoundStore>(store: &S, key: &ContactKey, messages: Vec<StoredMessage>) -> Head {
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
        operator: None,
        history: Vec::new(),
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
async fn tool_session<S: RoundStore>(store: &S, key: &ContactKey) -> Head {
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
async fn life_of<S: RecordStore>(store: &S, key: &ContactKey) -> Incarnation {
    let (head, _) = store.load_memory(key, NOW).await.unwrap();
    head.and_then(|head| head.incarnation)
        .unwrap_or_else(Incarnation::random)
}

/// A step for the contact's head as it is now (see [`life_of`]).
async fn stepped<S: RecordStore>(
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
        last_seq: None,
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
        expect: degrau::store::FactExpectation::Anything,
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

// ---- one suite per adapter -------------------------------------------------------

mod expiry;
mod incarnation;
mod isolation;
mod job;
mod operator;
mod platform;
mod quota;
mod recall;
mod record;
mod round;
mod sweep;
mod tenant;
mod timeouts;
mod tombstone;

/// Every case by its file and name; each adapter's instance is named for the case
/// alone (`memory::a_contact_never_seen_loads_empty`).
macro_rules! contract_tests {
    ($backend:ty) => {
        contract_tests!(@each $backend;
            round::a_contact_never_seen_loads_empty,
            round::a_committed_round_loads_back_in_order_with_its_head,
            round::a_commit_with_a_stale_head_conflicts_and_writes_none_of_its_messages,
            round::a_second_first_round_for_the_same_contact_conflicts,
            round::a_round_reusing_a_stored_sequence_number_conflicts_and_changes_nothing,
            round::concurrent_commits_on_the_same_head_let_exactly_one_win,
            round::a_new_session_resets_the_summary_and_leaves_the_old_session_out_of_the_window,
            round::a_commit_in_the_same_session_keeps_a_compaction_step_applied_meanwhile,
            round::a_round_writes_its_gap_record_and_cache_marks_on_the_head_and_a_step_keeps_them,
            round::the_window_never_holds_messages_at_or_before_summarized_until,
            round::a_window_with_a_hole_starts_at_the_first_safe_start_after_the_last_one,
            round::an_idempotency_key_runs_once_and_then_replays_its_response,
            round::a_round_whose_key_another_attempt_completed_conflicts,
            round::a_released_key_can_be_claimed_again,
            round::a_key_whose_lease_ran_out_can_be_claimed_again_by_the_same_payload,
            round::an_expired_idempotency_record_frees_its_key,
            round::refreshing_expiry_sets_the_ttl_of_existing_messages_of_the_same_life_only,
            job::a_step_applies_once_and_a_repeat_with_the_same_seen_value_changes_nothing,
            job::a_stale_step_changes_nothing_and_the_next_one_applies,
            job::a_fold_planned_before_a_round_landed_changes_nothing,
            job::a_step_for_a_session_the_head_left_changes_nothing,
            job::a_step_on_an_erased_contact_changes_nothing_and_writes_no_item,
            job::a_step_writes_pruned_copies_that_load_turn_returns_with_the_originals_intact,
            job::a_step_that_cannot_fit_one_transaction_is_refused,
            job::a_new_session_commit_archives_the_old_summary_for_load_closed_session,
            job::an_archive_without_a_summary_loads_the_session_whole_and_skips_expired_messages,
            job::saved_facts_keep_source_and_expiry_replace_by_key_and_removals_delete,
            job::saving_facts_for_an_erased_or_unknown_contact_writes_nothing,
            job::saving_more_facts_than_one_transaction_holds_writes_them_all,
            job::a_fact_batch_naming_a_key_twice_is_refused,
            job::a_round_that_requests_facts_leaves_them_pending_until_the_job_is_done,
            job::a_new_head_gets_an_incarnation_that_finds_its_contact_and_only_in_its_tenant,
            sweep::every_round_files_the_head_under_its_bucket_at_its_due_time,
            sweep::due_heads_come_earliest_first_up_to_the_limit_from_one_bucket_only,
            sweep::a_settled_head_moves_or_leaves_the_index_and_records_the_request,
            sweep::settling_a_head_that_moved_on_or_was_erased_writes_nothing,
            sweep::a_deferred_head_moves_only_its_entry_and_only_from_where_it_was_read,
            record::transcript_pages_cover_every_session_exactly_once_in_order,
            record::the_transcript_of_all_sessions_never_returns_an_archive_item,
            record::erasing_a_contact_removes_every_item_and_a_second_erase_finds_none,
            record::erasing_pages_through_a_long_history,
            record::erasing_a_contact_removes_its_session_archives_too,
            record::a_new_life_begun_before_an_erase_cannot_land_after_it,
            record::session_records_come_newest_first_and_every_one_is_kept,
            recall::a_closed_sessions_index_is_written_under_the_heads_incarnation_and_read_back,
            recall::indexes_come_newest_first_and_one_past_its_expiry_is_gone,
            recall::found_sessions_bring_the_texts_and_records_asked_for,
            tenant::tenant_configs_round_trip_per_tenant,
            platform::a_policy_is_replaced_only_from_the_version_read_and_reads_back_per_tenant,
            platform::tenants_are_listed_by_id_in_pages_once_they_have_a_config_a_policy_or_usage,
            platform::a_stored_policy_that_no_longer_reads_is_invalid_config,
            quota::an_hours_quota_and_a_windows_counter_stop_at_their_limit_per_scope,
            quota::leases_are_held_to_the_limit_and_one_expired_or_given_back_frees_its_place,
            tombstone::an_erase_leaves_tombstones_that_refuse_a_replayed_message_for_the_records_life,
            operator::contacts_list_newest_first_per_tenant_in_pages,
            operator::a_fact_write_lands_only_on_what_it_expects,
            operator::a_fact_removal_lands_only_on_the_fact_it_read,
            operator::facts_outliving_their_head_are_saved_against_a_live_fact,
            operator::a_config_is_replaced_only_from_the_version_it_was_read_at,
            operator::usage_adds_up_per_day_and_tenant,
            isolation::tenants_are_isolated_even_with_the_same_contact_id,
            incarnation::job_writes_for_an_erased_life_change_nothing_in_the_contacts_new_one,
            incarnation::a_head_from_before_incarnations_gets_one_at_its_next_round_or_when_swept,
            expiry::facts_whose_ttl_passed_are_filtered_out,
            expiry::message_items_carry_their_expiry_and_expired_ones_leave_the_transcript_and_the_window,
            expiry::a_head_past_its_expiry_is_gone_and_a_first_round_writes_over_it,
            expiry::a_contact_whose_head_ttl_deleted_first_starts_over_over_its_expired_messages,
            expiry::a_new_life_replaces_what_an_older_life_left_past_the_rounds_own_retention,
        );
    };
    (@each $backend:ty; $($file:ident::$test:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                super::$file::$test(<$backend as super::Backend>::start().await).await;
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
