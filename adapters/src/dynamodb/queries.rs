//! The requests the adapter sends, built here so that the trait implementations in
//! `mod.rs` read as what they do: the reads (one paging helper, [`Pages`], for every
//! query that may span pages), and the writes (the transaction items of a round, a
//! step, a fact batch and a refresh; the sweep's update; [`UpdateParts`] for the
//! update expressions).
//!
//! Reads are strongly consistent and bounded by the window: facts and head come in
//! one query (`sk BETWEEN "FACT#" AND "HEAD"`), the window in a second, from
//! `summarized_until + 1`. Nothing here scans, and nothing reads summarized messages
//! except the transcript and the facts job's read of a closed session (from its
//! archived `summarized_until`). The two index queries (the sweep's and a job's
//! search for its contact) cannot be strongly consistent: the writes that follow
//! them re-check the head under a condition.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, Put, TransactWriteItem, Update,
    WriteRequest,
};
use degrau::domain::{
    Fact, FactKey, Head, IdempotencyKey, Incarnation, PendingFacts, StoredMessage,
};
use degrau::store::{
    AppliedStep, ContactKey, FactWrite, PendingChange, RoundCommit, StoreError, SweepSettle,
};

use super::DynamoStore;
use super::error::{backoff, sdk_error, unless_condition_failed};
use super::items::{
    ArchiveItem, FactItem, HeadItem, Item, MessageItem, RequestItem, RequestStatus, blocks_json,
    from_item, message_and_expiry, n, s, to_item,
};
use super::keys::{FACT_PREFIX, HEAD_SK, MAX_SEQ, contact_pk, fact_sk, message_sk, sweep_pk};

/// `TransactWriteItems` takes at most this many actions.
pub(super) const MAX_TRANSACTION_ACTIONS: usize = 100;
/// `BatchWriteItem` takes at most this many requests.
const BATCH_WRITE_CHUNK: usize = 25;
/// Attempts at writing a batch's unprocessed items before giving up.
const BATCH_WRITE_ATTEMPTS: u32 = 8;

// ---- reads ---------------------------------------------------------------------

/// The pages of a query, following `LastEvaluatedKey`: the one paging loop of the
/// adapter. Each call to [`Pages::next`] sends one request; after the last page it
/// sends none and answers `None`.
pub(super) struct Pages {
    query: QueryFluentBuilder,
    start: Option<Item>,
    done: bool,
}

impl Pages {
    /// The pages of `query`, from its first.
    pub(super) fn new(query: QueryFluentBuilder) -> Pages {
        Pages {
            query,
            start: None,
            done: false,
        }
    }

    /// The next page's items, asking for at most `limit` of them (`None`: as many as
    /// one page holds); `None` once the last page was read.
    pub(super) async fn next(
        &mut self,
        limit: Option<usize>,
    ) -> Result<Option<Vec<Item>>, StoreError> {
        if self.done {
            return Ok(None);
        }
        let mut query = self
            .query
            .clone()
            .set_exclusive_start_key(self.start.take());
        if let Some(limit) = limit {
            query = query.limit(i32::try_from(limit).unwrap_or(i32::MAX));
        }
        let page = query.send().await.map_err(|err| sdk_error("query", err))?;
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => self.start = Some(key),
            _ => self.done = true,
        }
        Ok(Some(page.items.unwrap_or_default()))
    }

    /// Every item of every page.
    pub(super) async fn all(mut self) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        while let Some(page) = self.next(None).await? {
            items.extend(page);
        }
        Ok(items)
    }
}

impl DynamoStore {
    /// A query on the table, strongly consistent.
    pub(super) fn query(&self) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
    }

    /// A query on a global secondary index (eventually consistent: an index cannot
    /// be read otherwise).
    pub(super) fn query_index(&self, index: &str) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .index_name(index)
    }

    /// A contact's items with sort keys from `from` to `to`, both included.
    pub(super) fn query_range(
        &self,
        key: &ContactKey,
        from: String,
        to: String,
    ) -> QueryFluentBuilder {
        self.query()
            .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(contact_pk(key)))
            .expression_attribute_values(":from", s(from))
            .expression_attribute_values(":to", s(to))
    }

    /// One item by its keys, strongly consistent; `None` when there is none.
    pub(super) async fn get(&self, pk: String, sk: String) -> Result<Option<Item>, StoreError> {
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .send()
            .await
            .map_err(|err| sdk_error("get_item", err))?;
        Ok(found.item)
    }

    /// The messages of `session` after `after` and up to `through`, oldest first,
    /// each with its TTL: one strongly consistent query, paginated. A Query is not a
    /// transactional read, so the upper bound is what keeps a round landing meanwhile
    /// (or part of one) out of a window read for a head that does not count it.
    pub(super) async fn messages_between(
        &self,
        key: &ContactKey,
        session: u32,
        after: u64,
        through: u64,
    ) -> Result<Vec<(StoredMessage, Option<i64>)>, StoreError> {
        let first = after.saturating_add(1);
        let last = through.min(MAX_SEQ);
        if first > last {
            return Ok(Vec::new());
        }
        let query = self.query_range(key, message_sk(session, first), message_sk(session, last));
        Pages::new(query)
            .all()
            .await?
            .into_iter()
            .map(message_and_expiry)
            .collect()
    }

    /// The head and the unexpired facts: one strongly consistent query, since `FACT#…`
    /// sorts right before `HEAD` and nothing else of the contact sorts between them.
    pub(super) async fn head_and_facts(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError> {
        let query = self
            .query()
            .key_condition_expression("pk = :pk AND sk BETWEEN :facts AND :head")
            .expression_attribute_values(":pk", s(contact_pk(key)))
            .expression_attribute_values(":facts", s(FACT_PREFIX))
            .expression_attribute_values(":head", s(HEAD_SK));
        let mut head = None;
        let mut facts = Vec::new();
        for item in Pages::new(query).all().await? {
            match item.get("sk") {
                Some(AttributeValue::S(sk)) if sk == HEAD_SK => {
                    head = Some(from_item::<HeadItem>(item)?.into());
                }
                Some(AttributeValue::S(sk)) if sk.starts_with(FACT_PREFIX) => {
                    let fact: FactItem = from_item(item)?;
                    if fact.expires_at.is_none_or(|expires| expires > now) {
                        facts.push(fact.into());
                    }
                }
                _ => {}
            }
        }
        Ok((head, facts))
    }

    // ---- single writes -------------------------------------------------------------

    /// The conditional put that claims a key; `Ok(false)` when its condition failed.
    pub(super) async fn put_claim(
        &self,
        pk: &str,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Result<bool, StoreError> {
        let item = RequestItem::in_progress(pk, idempotency, payload_hash, now, lease_seconds);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(&item)?))
            .condition_expression(
                "attribute_not_exists(pk) OR expires_at <= :now \
                 OR (#status = :in_progress AND lease_until <= :now AND payload_hash = :hash)",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":in_progress", s(RequestStatus::IN_PROGRESS))
            .expression_attribute_values(":hash", s(payload_hash))
            .send()
            .await;
        Ok(unless_condition_failed("put_item", result)?.is_some())
    }

    /// An update of the head of `key`.
    pub(super) fn update_head(&self, key: &ContactKey) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(HEAD_SK))
    }

    /// Deletes keys in batches of 25, retrying unprocessed ones with backoff.
    pub(super) async fn delete_keys(&self, keys: Vec<Item>) -> Result<(), StoreError> {
        for chunk in keys.chunks(BATCH_WRITE_CHUNK) {
            let mut requests = chunk
                .iter()
                .map(|key| {
                    let delete = DeleteRequest::builder()
                        .set_key(Some(key.clone()))
                        .build()
                        .map_err(|err| StoreError::Other(format!("delete request: {err}")))?;
                    Ok(WriteRequest::builder().delete_request(delete).build())
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            let mut attempt = 0;
            while !requests.is_empty() {
                if attempt == BATCH_WRITE_ATTEMPTS {
                    return Err(StoreError::Unavailable(format!(
                        "batch_write_item left {} items unprocessed after {attempt} attempts",
                        requests.len()
                    )));
                }
                if attempt > 0 {
                    tokio::time::sleep(backoff(attempt)).await;
                }
                attempt += 1;
                let output = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, requests)
                    .send()
                    .await
                    .map_err(|err| sdk_error("batch_write_item", err))?;
                requests = output
                    .unprocessed_items
                    .and_then(|mut unprocessed| unprocessed.remove(&self.table))
                    .unwrap_or_default();
            }
        }
        Ok(())
    }
}

// ---- transaction items ---------------------------------------------------------

/// A put in a transaction, with an optional condition; `what` names it in errors.
fn put(
    table: &str,
    item: Item,
    condition: Option<&str>,
    what: &str,
) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .set_condition_expression(condition.map(str::to_owned))
        .build()
        .map_err(|err| StoreError::Other(format!("{what} put: {err}")))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// A put in a transaction that creates its item, or replaces one past its TTL
/// (`expires_at <= now`): never one still live.
fn put_unless_live(
    table: &str,
    item: Item,
    now: i64,
    what: &str,
) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(sk) OR expires_at <= :now")
        .expression_attribute_values(":now", n(now))
        .build()
        .map_err(|err| StoreError::Other(format!("{what} put: {err}")))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// The check, in a transaction, that the head of `pk` still has `incarnation`: the
/// same life of the contact (an erased contact who wrote again has another).
fn head_check(
    table: &str,
    pk: &str,
    incarnation: &Incarnation,
) -> Result<TransactWriteItem, StoreError> {
    let check = ConditionCheck::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(HEAD_SK))
        .condition_expression("incarnation = :incarnation")
        .expression_attribute_values(":incarnation", s(incarnation.as_str()))
        .build()
        .map_err(|err| StoreError::Other(format!("head check: {err}")))?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// An update of an existing message (the condition keeps it from creating a stray
/// item for an erased contact or a wrong sequence number, or recreating a message
/// TTL deleted: it fails the whole transaction instead).
fn message_update(
    table: &str,
    pk: &str,
    session: u32,
    seq: u64,
    set: &str,
    value: (&str, AttributeValue),
    what: &str,
) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(message_sk(session, seq)))
        .update_expression(set)
        .condition_expression("attribute_exists(sk)")
        .expression_attribute_values(value.0, value.1)
        .build()
        .map_err(|err| StoreError::Other(format!("{what} update: {err}")))?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// A round's transaction: the head update, a conditional put of each message (a
/// sequence number is never reused), the completed idempotency record, the
/// archive of a session this round closed, and the new TTL of the window messages
/// that would expire before the session can close.
pub(super) fn round_items(
    table: &str,
    commit: &RoundCommit,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let actions = 1
        + commit.messages.len()
        + usize::from(commit.idempotency.is_some())
        + usize::from(commit.archive.is_some())
        + commit.refresh.len();
    if actions > MAX_TRANSACTION_ACTIONS {
        return Err(StoreError::Other(format!(
            "a round of {} messages does not fit one transaction",
            commit.messages.len()
        )));
    }
    let pk = contact_pk(&commit.key);
    let mut items = Vec::with_capacity(actions);
    items.push(
        TransactWriteItem::builder()
            .update(head_update(table, &pk, commit)?)
            .build(),
    );
    // A sequence number is never reused, but for an item past its TTL that
    // DynamoDB has not deleted yet (of a life of the contact whose memory expired).
    let now = commit.head.last_activity;
    for message in &commit.messages {
        let item = MessageItem::new(&pk, message, Some(commit.messages_expire_at))?;
        items.push(put_unless_live(table, to_item(&item)?, now, "message")?);
    }
    if let Some(done) = &commit.idempotency {
        let record = RequestItem::completed(&pk, done);
        items.push(put(table, to_item(&record)?, None, "request")?);
    }
    if let Some(archive) = &commit.archive {
        // Unconditional: the head's condition already lets only one round close
        // a session, and an erased contact starts over from session 1 with no
        // archive left to collide with.
        let item = ArchiveItem::new(&pk, archive);
        items.push(put(table, to_item(&item)?, None, "archive")?);
    }
    // The window's TTL, in the same transaction: each message must still exist (a
    // message TTL deleted meanwhile fails the round, which is then read again).
    for &seq in &commit.refresh {
        items.push(message_update(
            table,
            &pk,
            commit.head.session,
            seq,
            "SET expires_at = :expires_at",
            (":expires_at", n(commit.messages_expire_at)),
            "refresh",
        )?);
    }
    Ok(items)
}

/// The head's part of a round: an update of only the fields `ask` owns, so that a
/// compaction step applied since the head was loaded survives; a new session also
/// resets the summary fields. Its condition: the head is as loaded (session,
/// `last_seq`, incarnation), or absent for a new contact. Long because it lists every
/// attribute a round owns, one clause each.
fn head_update(table: &str, pk: &str, commit: &RoundCommit) -> Result<Update, StoreError> {
    let head = &commit.head;
    let mut parts = UpdateParts::default();
    parts
        .set("#session = :session")
        .set("#last_seq = :last_seq")
        .set("#last_context_tokens = :last_context_tokens")
        .set("#last_activity = :last_activity")
        // Back into the sweep index, due when the round says.
        .set("sweep_pk = :sweep_pk")
        .set("sweep_sk = :sweep_sk")
        .name("#session", "session")
        .name("#last_seq", "last_seq")
        .name("#last_context_tokens", "last_context_tokens")
        .name("#last_activity", "last_activity")
        .value(":session", n(head.session))
        .value(":last_seq", n(head.last_seq))
        .value(":last_context_tokens", n(head.last_context_tokens))
        .value(":last_activity", n(head.last_activity))
        .value(":sweep_pk", s(sweep_pk(commit.sweep.bucket)))
        .value(":sweep_sk", n(commit.sweep.due));
    if let Some(expires_at) = head.expires_at {
        parts
            .set("expires_at = :expires_at")
            .value(":expires_at", n(expires_at));
    }
    if let Some(round) = &head.last_round {
        parts
            .set("last_round = :last_round")
            .value(":last_round", s(round));
    }
    parts.set_or_remove("facts_requested", head.facts_requested.map(n));
    parts.set_or_remove("hard_cap_at", head.hard_cap_at.map(n));
    parts.set_or_remove(
        "recent_gaps",
        (!head.recent_gaps.is_empty())
            .then(|| AttributeValue::L(head.recent_gaps.iter().copied().map(n).collect())),
    );
    if let Some(pending) = head.facts_pending {
        parts.pending(pending);
    }
    let new_session = commit
        .expected
        .as_ref()
        .is_none_or(|expected| expected.session != head.session);
    if new_session {
        parts
            .set("#summarized_until = :zero")
            .set("#steps = :zero")
            .remove("#summary")
            .name("#summarized_until", "summarized_until")
            .name("#steps", "steps")
            .name("#summary", "summary")
            .value(":zero", n(0));
    }
    // The incarnation is written once: by the round that creates the head, or by
    // the first round of a head from before incarnations. A loaded head's must
    // still be there: an erase and a new first round in between make another.
    let expected_incarnation = commit
        .expected
        .as_ref()
        .and_then(|e| e.incarnation.as_ref());
    if let (None, Some(incarnation)) = (expected_incarnation, &head.incarnation) {
        parts
            .set("incarnation = :incarnation")
            .value(":incarnation", s(incarnation.as_str()));
    }
    match (&commit.expected, expected_incarnation) {
        (None, _) => {
            // A new head, or one over a head past its TTL: none of the old one's
            // state stays (its pending extraction is of another life).
            parts
                .condition("(attribute_not_exists(pk) OR expires_at <= :now)")
                .value(":now", n(head.last_activity));
            if head.facts_pending.is_none() {
                parts.remove_pending();
            }
        }
        (Some(expected), incarnation) => {
            parts
                .condition("#session = :expected_session")
                .condition("#last_seq = :expected_last_seq")
                .value(":expected_session", n(expected.session))
                .value(":expected_last_seq", n(expected.last_seq));
            match incarnation {
                Some(incarnation) => parts
                    .condition("incarnation = :expected_incarnation")
                    .value(":expected_incarnation", s(incarnation.as_str())),
                None => parts.condition("attribute_not_exists(incarnation)"),
            };
        }
    }
    parts.update(table, pk, HEAD_SK, "head")
}

/// A compaction step's transaction: the head's summary, `summarized_until` and step
/// count under the condition that the head still has the step's incarnation,
/// session and `summarized_until = :seen`; then the pruned copies.
pub(super) fn step_items(
    table: &str,
    key: &ContactKey,
    step: &AppliedStep,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let pk = contact_pk(key);
    let mut head = UpdateParts::default();
    head.set("#summary = :summary")
        .set("#summarized_until = :new")
        .set("#steps = if_not_exists(#steps, :zero) + :one")
        .condition("incarnation = :incarnation")
        .condition("#session = :session")
        .condition("#summarized_until = :seen")
        .name("#summary", "summary")
        .name("#summarized_until", "summarized_until")
        .name("#steps", "steps")
        .name("#session", "session")
        .value(":summary", s(&step.summary))
        .value(":new", n(step.new_summarized_until))
        .value(":zero", n(0))
        .value(":one", n(1))
        .value(":session", n(step.session))
        .value(":seen", n(step.seen_summarized_until))
        .value(":incarnation", s(step.incarnation.as_str()));
    let mut items = Vec::with_capacity(1 + step.prune.len());
    items.push(
        TransactWriteItem::builder()
            .update(head.update(table, &pk, HEAD_SK, "step head")?)
            .build(),
    );
    for decision in &step.prune {
        let pruned = s(blocks_json(&decision.pruned)?);
        items.push(message_update(
            table,
            &pk,
            step.session,
            decision.seq,
            "SET pruned = :pruned",
            (":pruned", pruned),
            "prune",
        )?);
    }
    Ok(items)
}

/// A fact batch's transactions: the puts and deletes, each part checking the head's
/// incarnation first. A tenant's fact keys are a short closed list, so one
/// transaction is the rule; a longer batch is split, each part re-checking the
/// head. Without changes, the check alone still answers whether the head exists.
pub(super) fn fact_transactions(
    table: &str,
    key: &ContactKey,
    incarnation: &Incarnation,
    writes: &[FactWrite],
    removals: &[FactKey],
) -> Result<Vec<Vec<TransactWriteItem>>, StoreError> {
    let pk = contact_pk(key);
    let mut actions = Vec::with_capacity(writes.len() + removals.len());
    for write in writes {
        actions.push(put(
            table,
            to_item(&FactItem::new(&pk, write))?,
            None,
            "fact",
        )?);
    }
    for removal in removals {
        let delete = Delete::builder()
            .table_name(table)
            .key("pk", s(&pk))
            .key("sk", s(fact_sk(removal)))
            .build()
            .map_err(|err| StoreError::Other(format!("fact delete: {err}")))?;
        actions.push(TransactWriteItem::builder().delete(delete).build());
    }
    let check = head_check(table, &pk, incarnation)?;
    if actions.is_empty() {
        return Ok(vec![vec![check]]);
    }
    Ok(actions
        .chunks(MAX_TRANSACTION_ACTIONS - 1)
        .map(|chunk| {
            let mut items = Vec::with_capacity(chunk.len() + 1);
            items.push(check.clone());
            items.extend_from_slice(chunk);
            items
        })
        .collect())
}

/// A refresh's transaction: the head's incarnation checked, then each message's
/// `expires_at` set.
pub(super) fn refresh_items(
    table: &str,
    key: &ContactKey,
    incarnation: &Incarnation,
    session: u32,
    seqs: &[u64],
    expires_at: i64,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let pk = contact_pk(key);
    let mut items = Vec::with_capacity(seqs.len() + 1);
    items.push(head_check(table, &pk, incarnation)?);
    for seq in seqs {
        items.push(message_update(
            table,
            &pk,
            session,
            *seq,
            "SET expires_at = :expires_at",
            (":expires_at", n(expires_at)),
            "refresh",
        )?);
    }
    Ok(items)
}

/// What the sweep writes on a head, under the condition that it is as the sweep
/// read it (see [`SweepSettle`]).
pub(super) fn settle_parts(settle: &SweepSettle) -> UpdateParts {
    let mut parts = UpdateParts::default();
    parts
        .condition("incarnation = :incarnation")
        .condition("last_activity = :last_activity")
        .condition("sweep_sk = :due")
        .value(":incarnation", s(settle.incarnation.as_str()))
        .value(":last_activity", n(settle.last_activity))
        .value(":due", n(settle.due));
    match settle.pending_since {
        Some(since) => parts
            .condition("facts_pending_since = :pending_since")
            .value(":pending_since", n(since)),
        None => parts.condition("attribute_not_exists(facts_pending)"),
    };
    if let Some(session) = settle.facts_requested {
        parts
            .set("facts_requested = :facts_requested")
            .value(":facts_requested", n(session));
    }
    match settle.pending {
        PendingChange::Keep => {}
        PendingChange::Set(pending) => {
            parts.pending(pending);
        }
        PendingChange::Clear => {
            parts.remove_pending();
        }
    }
    match settle.next_due {
        Some(due) => parts.set("sweep_sk = :next_due").value(":next_due", n(due)),
        None => parts.remove("sweep_pk").remove("sweep_sk"),
    };
    parts
}

// ---- update expressions --------------------------------------------------------

/// The head's attributes of a pending fact extraction (`Head::facts_pending`).
const PENDING_ATTRIBUTES: [&str; 3] = ["facts_pending", "facts_pending_since", "facts_attempts"];

/// An update's expression built clause by clause (`SET a = :a, … REMOVE b, …`),
/// with its condition (clauses joined by `AND`), names and values.
#[derive(Debug, Default)]
pub(super) struct UpdateParts {
    set: Vec<String>,
    remove: Vec<String>,
    conditions: Vec<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl UpdateParts {
    /// A `SET` clause.
    pub(super) fn set(&mut self, clause: impl Into<String>) -> &mut Self {
        self.set.push(clause.into());
        self
    }

    /// A `REMOVE` clause.
    pub(super) fn remove(&mut self, attribute: impl Into<String>) -> &mut Self {
        self.remove.push(attribute.into());
        self
    }

    /// A clause of the condition.
    pub(super) fn condition(&mut self, clause: impl Into<String>) -> &mut Self {
        self.conditions.push(clause.into());
        self
    }

    /// An attribute name placeholder (`#name`).
    pub(super) fn name(&mut self, placeholder: &str, attribute: &str) -> &mut Self {
        self.names
            .insert(placeholder.to_owned(), attribute.to_owned());
        self
    }

    /// A value placeholder (`:value`).
    pub(super) fn value(&mut self, placeholder: &str, value: AttributeValue) -> &mut Self {
        self.values.insert(placeholder.to_owned(), value);
        self
    }

    /// `SET attribute = :attribute` with `value`, or `REMOVE attribute` without one.
    pub(super) fn set_or_remove(
        &mut self,
        attribute: &str,
        value: Option<AttributeValue>,
    ) -> &mut Self {
        match value {
            Some(value) => self
                .set(format!("{attribute} = :{attribute}"))
                .value(&format!(":{attribute}"), value),
            None => self.remove(attribute),
        }
    }

    /// Sets the pending fact extraction (`Head::facts_pending`).
    pub(super) fn pending(&mut self, pending: PendingFacts) -> &mut Self {
        self.set("facts_pending = :facts_pending")
            .set("facts_pending_since = :facts_pending_since")
            .set("facts_attempts = :facts_attempts")
            .value(":facts_pending", n(pending.session))
            .value(":facts_pending_since", n(pending.since))
            .value(":facts_attempts", n(pending.attempts))
    }

    /// Removes the pending fact extraction.
    pub(super) fn remove_pending(&mut self) -> &mut Self {
        for attribute in PENDING_ATTRIBUTES {
            self.remove(attribute);
        }
        self
    }

    /// `SET a, b REMOVE c, d`, leaving out an empty part.
    fn expression(&self) -> String {
        let mut parts = Vec::with_capacity(2);
        if !self.set.is_empty() {
            parts.push(format!("SET {}", self.set.join(", ")));
        }
        if !self.remove.is_empty() {
            parts.push(format!("REMOVE {}", self.remove.join(", ")));
        }
        parts.join(" ")
    }

    /// The condition, when there is one.
    fn condition_expression(&self) -> Option<String> {
        (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "))
    }

    /// A map for the request, or none when empty (DynamoDB refuses an empty one).
    fn non_empty<V>(map: HashMap<String, V>) -> Option<HashMap<String, V>> {
        (!map.is_empty()).then_some(map)
    }

    /// The update of item `pk`/`sk` in a transaction; `what` names it in errors.
    pub(super) fn update(
        self,
        table: &str,
        pk: &str,
        sk: &str,
        what: &str,
    ) -> Result<Update, StoreError> {
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(self.expression())
            .set_condition_expression(self.condition_expression())
            .set_expression_attribute_names(Self::non_empty(self.names))
            .set_expression_attribute_values(Self::non_empty(self.values))
            .build()
            .map_err(|err| StoreError::Other(format!("{what} update: {err}")))
    }

    /// These parts on a single `UpdateItem`.
    pub(super) fn apply(self, update: UpdateItemFluentBuilder) -> UpdateItemFluentBuilder {
        update
            .update_expression(self.expression())
            .set_condition_expression(self.condition_expression())
            .set_expression_attribute_names(Self::non_empty(self.names))
            .set_expression_attribute_values(Self::non_empty(self.values))
    }
}

/// Sends a single conditional update; `Ok(false)` when its condition failed.
pub(super) async fn update_if(update: UpdateItemFluentBuilder) -> Result<bool, StoreError> {
    let result = update.send().await;
    Ok(unless_condition_failed("update_item", result)?.is_some())
}
