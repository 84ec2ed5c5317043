//! The DynamoDB adapter of the [`Store`] and [`TenantStore`] ports: one table with
//! `pk`/`sk` strings, the key layout of [`crate::store`]'s module doc, items
//! (de)serialised with `serde_dynamo`.
//!
//! Reads are strongly consistent and bounded by the window: facts and head come in
//! one query (`sk BETWEEN "FACT#" AND "HEAD"`), the window in a second, from
//! `summarized_until + 1`. Nothing here scans, and nothing reads summarized messages
//! except the transcript and the facts job's read of a closed session (from its
//! archived `summarized_until`). A round, a compaction step and a fact batch are each
//! one `TransactWriteItems`; SDK errors are mapped here, once: a failed condition is
//! [`StoreError::Conflict`] for a round and `Ok(false)` for a step or a fact batch
//! (a duplicate job or an erased contact, not an error); throttling and transient
//! failures are [`StoreError::Unavailable`]. A transaction cancelled only by a
//! `TransactionConflict` (another transaction on one of its items in flight) wrote
//! nothing, and is tried again a few times here before it counts as unavailable.
//!
//! The head also carries the sweep index's keys (`sweep_pk`, `sweep_sk`; see
//! [`crate::store`]) and its incarnation: the sweep queries the GSI [`SWEEP_INDEX`]
//! and jobs find their contact through [`INCARNATION_INDEX`], the only reads here
//! that are not strongly consistent (a GSI cannot be), so the writes that follow
//! them re-check the head under a condition.
//!
//! Messages, session archives, facts and the head carry the TTL attribute
//! `expires_at`. TTL deletes only eventually, so reads filter on it too; the head
//! is the exception of `load_turn`, which the next round's condition needs.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, Put, TransactWriteItem, Update,
    WriteRequest,
};
use serde::{Deserialize, Serialize};

use degrau::domain::{
    ContactId, ContentBlock, Fact, FactKey, FactSource, Head, IdempotencyKey, Incarnation,
    PendingFacts, Role, StoredMessage, TenantId,
};
use degrau::session::unix_now;
use degrau::store::{
    AppliedStep, Claim, ClosedSession, ContactKey, Cursor, DueHead, FactWrite,
    MAX_REFRESH_PER_ROUND, PendingChange, RoundCommit, SessionArchive, SessionFilter, Store,
    StoreError, SweepSettle, TenantStore, TranscriptPage, TurnState, validate_fact_changes,
    validate_step,
};
use degrau::tenant::TenantConfig;
use degrau::usage::Usage;
use degrau::window::after_last_gap;

/// An item as the SDK carries it.
type Item = HashMap<String, AttributeValue>;

/// How long an idempotency record lives (its TTL), in seconds.
const REQUEST_TTL_SECONDS: i64 = 24 * 60 * 60;
/// `TransactWriteItems` takes at most this many actions.
const MAX_TRANSACTION_ACTIONS: usize = 100;
/// `BatchWriteItem` takes at most this many requests.
const BATCH_WRITE_CHUNK: usize = 25;
/// Attempts at writing a batch's unprocessed items before giving up.
const BATCH_WRITE_ATTEMPTS: u32 = 8;
/// Attempts at a transaction cancelled by a `TransactionConflict` (another
/// transaction on one of its items in flight) before it is [`StoreError::Unavailable`]:
/// the backoffs between them add up to well under a second.
const TRANSACTION_CONFLICT_ATTEMPTS: u32 = 4;
/// The highest sequence number the sort key can order (8 digits).
const MAX_SEQ: u64 = 99_999_999;
/// The highest session number the sort key can order (6 digits).
const MAX_SESSION: u32 = 999_999;

/// The DynamoDB adapter: a client built once at init and the table's name.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

impl DynamoStore {
    /// An adapter on `table`, using `client` (built once per process).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table: table.into(),
        }
    }

    /// The table this adapter reads and writes.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Every item of a query, following `LastEvaluatedKey`.
    async fn query_all(&self, query: QueryFluentBuilder) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = query
                .clone()
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|err| sdk_error("query", err))?;
            items.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// The messages of `session` after `after`, oldest first, each with its TTL: one
    /// strongly consistent query, paginated.
    async fn messages_after(
        &self,
        key: &ContactKey,
        session: u32,
        after: u64,
    ) -> Result<Vec<(StoredMessage, Option<i64>)>, StoreError> {
        let first = after.saturating_add(1);
        if first > MAX_SEQ {
            return Ok(Vec::new());
        }
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(contact_pk(key)))
            .expression_attribute_values(":from", s(message_sk(session, first)))
            .expression_attribute_values(":to", s(message_sk(session, MAX_SEQ)));
        self.query_all(query)
            .await?
            .into_iter()
            .map(message_and_expiry)
            .collect()
    }

    /// Runs a transaction. One that DynamoDB cancelled only because another
    /// transaction on one of its items was in flight (`TransactionConflict`) wrote
    /// nothing and is tried again, up to [`TRANSACTION_CONFLICT_ATTEMPTS`] times
    /// with a short jittered backoff; then, or on any other failure, the error is
    /// mapped by [`transaction_error`].
    async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<(), StoreError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .send()
                .await;
            match result {
                Ok(_) => return Ok(()),
                Err(err)
                    if attempt < TRANSACTION_CONFLICT_ATTEMPTS && is_transaction_conflict(&err) =>
                {
                    tracing::info!(attempt, "transaction conflict: trying again");
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(err) => return Err(transaction_error(err)),
            }
        }
    }

    /// Runs a transaction whose failed conditions mean "not now, and nothing
    /// written" (a duplicate step, an erased contact): `Ok(false)` then.
    async fn transact_if(&self, items: Vec<TransactWriteItem>) -> Result<bool, StoreError> {
        match self.transact(items).await {
            Ok(()) => Ok(true),
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// The head and the unexpired facts: one strongly consistent query, since `FACT#…`
    /// sorts right before `HEAD` and nothing else of the contact sorts between them.
    async fn head_and_facts(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk AND sk BETWEEN :facts AND :head")
            .expression_attribute_values(":pk", s(contact_pk(key)))
            .expression_attribute_values(":facts", s(FACT_PREFIX))
            .expression_attribute_values(":head", s(HEAD_SK));
        let mut head = None;
        let mut facts = Vec::new();
        for item in self.query_all(query).await? {
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

    /// The conditional put that claims a key; `Ok(false)` when its condition failed.
    async fn put_claim(
        &self,
        pk: &str,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Result<bool, StoreError> {
        let item = RequestItem {
            pk: pk.to_owned(),
            sk: request_sk(idempotency),
            status: RequestStatus::InProgress,
            payload_hash: payload_hash.to_owned(),
            lease_until: Some(now.saturating_add(lease_seconds)),
            response: None,
            expires_at: now.saturating_add(REQUEST_TTL_SECONDS),
        };
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
        match result {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(ctx))
                if matches!(ctx.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(false)
            }
            Err(err) => Err(sdk_error("put_item", err)),
        }
    }

    /// Deletes keys in batches of 25, retrying unprocessed ones with backoff.
    async fn delete_keys(&self, keys: Vec<Item>) -> Result<(), StoreError> {
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

#[async_trait]
impl Store for DynamoStore {
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError> {
        let (head, facts) = self.head_and_facts(key, now).await?;
        let Some(head) = head else {
            return Ok(TurnState {
                head: None,
                facts,
                ..TurnState::default()
            });
        };
        // An open session's messages do not expire under it (`ask` refreshes the
        // ones close to it), but one may be gone anyway (a refresh that failed; TTL
        // deletes in any order): expired ones count as gone, and the window starts
        // after the last hole, where it is whole.
        let (messages, expiries): (Vec<StoredMessage>, Vec<Option<i64>>) = self
            .messages_after(key, head.session, head.summarized_until)
            .await?
            .into_iter()
            .filter(|(_, expires_at)| expires_at.is_none_or(|expires| expires > now))
            .unzip();
        let start = after_last_gap(&messages, head.summarized_until, head.last_seq);
        if start > 0 {
            tracing::warn!(
                session = head.session,
                skipped = start,
                "the window had a hole: it starts at the first safe start after it"
            );
        }
        Ok(TurnState {
            head: Some(head),
            facts,
            window: messages[start..].to_vec(),
            window_expires_at: expiries[start..].to_vec(),
        })
    }

    async fn load_memory(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError> {
        let (head, facts) = self.head_and_facts(key, now).await?;
        Ok((head.filter(|head| !head.expired_at(now)), facts))
    }

    async fn commit_round(&self, commit: &RoundCommit) -> Result<(), StoreError> {
        let actions = 1
            + commit.messages.len()
            + usize::from(commit.idempotency.is_some())
            + usize::from(commit.archive.is_some());
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
                .update(head_update(&self.table, &pk, commit)?)
                .build(),
        );
        for message in &commit.messages {
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(to_item(&MessageItem::new(
                    &pk,
                    message,
                    Some(commit.messages_expire_at),
                )?)?))
                .condition_expression("attribute_not_exists(sk)")
                .build()
                .map_err(|err| StoreError::Other(format!("message put: {err}")))?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        if let Some(done) = &commit.idempotency {
            let record = RequestItem {
                pk: pk.clone(),
                sk: request_sk(&done.key),
                status: RequestStatus::Completed,
                payload_hash: done.payload_hash.clone(),
                lease_until: None,
                response: Some(done.response.clone()),
                expires_at: done.expires_at,
            };
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(to_item(&record)?))
                .build()
                .map_err(|err| StoreError::Other(format!("request put: {err}")))?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        if let Some(archive) = &commit.archive {
            // Unconditional: the head's condition already lets only one round close
            // a session, and an erased contact starts over from session 1 with no
            // archive left to collide with.
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(to_item(&ArchiveItem::new(&pk, archive))?))
                .build()
                .map_err(|err| StoreError::Other(format!("archive put: {err}")))?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        self.transact(items).await
    }

    async fn claim_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Result<Claim, StoreError> {
        let pk = contact_pk(key);
        // The record can vanish between a failed condition and the read (an erase, a
        // release, TTL): then the put is tried once more.
        for _ in 0..2 {
            if self
                .put_claim(&pk, idempotency, payload_hash, now, lease_seconds)
                .await?
            {
                return Ok(Claim::Started);
            }
            let found = self
                .client
                .get_item()
                .table_name(&self.table)
                .consistent_read(true)
                .key("pk", s(&pk))
                .key("sk", s(request_sk(idempotency)))
                .send()
                .await
                .map_err(|err| sdk_error("get_item", err))?;
            let Some(item) = found.item else { continue };
            let record: RequestItem = from_item(item)?;
            return Ok(if record.payload_hash != payload_hash {
                Claim::Mismatch
            } else {
                match record.status {
                    RequestStatus::Completed => Claim::Completed {
                        response: record.response.unwrap_or_default(),
                    },
                    RequestStatus::InProgress => Claim::InProgress,
                }
            });
        }
        Err(StoreError::Unavailable(
            "the idempotency record changed twice while being claimed".into(),
        ))
    }

    async fn release_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(request_sk(idempotency)))
            .condition_expression("#status = :in_progress")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":in_progress", s(RequestStatus::IN_PROGRESS))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Absent or completed: nothing to release.
            Err(SdkError::ServiceError(ctx))
                if matches!(
                    ctx.err(),
                    DeleteItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                Ok(())
            }
            Err(err) => Err(sdk_error("delete_item", err)),
        }
    }

    async fn transcript(
        &self,
        key: &ContactKey,
        sessions: SessionFilter,
        limit: usize,
        before: Option<Cursor>,
    ) -> Result<TranscriptPage, StoreError> {
        let Some((from, to)) = transcript_range(sessions, before) else {
            return Ok(TranscriptPage::default());
        };
        if limit == 0 {
            return Ok(TranscriptPage::default());
        }
        // BETWEEN rather than begins_with: a key condition takes one operator on the
        // sort key, and BETWEEN expresses both the session filter and the exclusive
        // `before` (as the message just before it).
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .scan_index_forward(false)
            .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(contact_pk(key)))
            .expression_attribute_values(":from", s(message_sk(from.session, from.seq)))
            .expression_attribute_values(":to", s(message_sk(to.session, to.seq)));
        // `transcript` takes no `now`: expired messages are dropped by the system
        // clock. Filtering here rather than with a FilterExpression keeps one
        // definition of "expired" (`expires_at <= now`) for both adapters; the loop
        // below keeps reading until the page is full either way.
        let now = unix_now();
        // One more than asked for tells whether an older page exists.
        let want = limit.saturating_add(1);
        let mut newest_first = Vec::with_capacity(want.min(1000));
        let mut start = None;
        loop {
            let page_limit = i32::try_from(want - newest_first.len()).unwrap_or(i32::MAX);
            let page = query
                .clone()
                .limit(page_limit)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|err| sdk_error("query", err))?;
            for item in page.items.unwrap_or_default() {
                let (message, expires_at) = message_and_expiry(item)?;
                if expires_at.is_none_or(|expires| expires > now) {
                    newest_first.push(message);
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() && newest_first.len() < want => start = Some(key),
                _ => break,
            }
        }
        Ok(TranscriptPage::from_newest_first(newest_first, limit))
    }

    async fn erase_contact(&self, key: &ContactKey) -> Result<usize, StoreError> {
        // The head goes first: from then on a round racing this erase fails its
        // `last_seq = :expected` condition instead of landing between the listing and
        // the deletes below (it would leave messages with no head). A round that
        // committed before the head went is listed by a later pass.
        let head = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(HEAD_SK))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|err| sdk_error("delete head", err))?;
        let mut erased = usize::from(head.attributes.is_some_and(|a| !a.is_empty()));
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk")
            .projection_expression("pk, sk")
            .expression_attribute_values(":pk", s(contact_pk(key)));
        // Passes until a listing comes back empty; bounded, since after the head is
        // gone nothing but a brand-new first round can add items.
        for _ in 0..ERASE_PASSES {
            let mut start = None;
            let mut found = 0;
            loop {
                let page = query
                    .clone()
                    .set_exclusive_start_key(start)
                    .send()
                    .await
                    .map_err(|err| sdk_error("query", err))?;
                let keys = page.items.unwrap_or_default();
                found += keys.len();
                self.delete_keys(keys).await?;
                match page.last_evaluated_key {
                    Some(key) if !key.is_empty() => start = Some(key),
                    _ => break,
                }
            }
            erased += found;
            if found == 0 {
                return Ok(erased);
            }
        }
        Ok(erased)
    }

    async fn apply_step(&self, key: &ContactKey, step: &AppliedStep) -> Result<bool, StoreError> {
        validate_step(step)?;
        let pk = contact_pk(key);
        let head = Update::builder()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(HEAD_SK))
            .update_expression(
                "SET #summary = :summary, #summarized_until = :new, \
                 #steps = if_not_exists(#steps, :zero) + :one",
            )
            .condition_expression(
                "incarnation = :incarnation AND #session = :session \
                 AND #summarized_until = :seen",
            )
            .expression_attribute_names("#summary", "summary")
            .expression_attribute_names("#summarized_until", "summarized_until")
            .expression_attribute_names("#steps", "steps")
            .expression_attribute_names("#session", "session")
            .expression_attribute_values(":summary", s(&step.summary))
            .expression_attribute_values(":new", n(step.new_summarized_until))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":session", n(step.session))
            .expression_attribute_values(":seen", n(step.seen_summarized_until))
            .expression_attribute_values(":incarnation", s(step.incarnation.as_str()))
            .build()
            .map_err(|err| StoreError::Other(format!("step head update: {err}")))?;
        let mut items = Vec::with_capacity(1 + step.prune.len());
        items.push(TransactWriteItem::builder().update(head).build());
        for decision in &step.prune {
            // The condition keeps an update from creating a stray item (an erased
            // contact, a wrong sequence number); it fails the whole step instead.
            let update = Update::builder()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(message_sk(step.session, decision.seq)))
                .update_expression("SET pruned = :pruned")
                .condition_expression("attribute_exists(sk)")
                .expression_attribute_values(":pruned", s(blocks_json(&decision.pruned)?))
                .build()
                .map_err(|err| StoreError::Other(format!("prune update: {err}")))?;
            items.push(TransactWriteItem::builder().update(update).build());
        }
        self.transact_if(items).await
    }

    async fn load_closed_session(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<ClosedSession, StoreError> {
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(archive_sk(session)))
            .send()
            .await
            .map_err(|err| sdk_error("get_item", err))?;
        let (summary, summarized_until) = match found.item.map(from_item::<ArchiveItem>) {
            // Past its retention the archive is gone, and so is every message of the
            // session (they expired no later): nothing to read.
            Some(Ok(archive)) if archive.expires_at <= now => {
                return Ok(ClosedSession::default());
            }
            Some(archive) => {
                let archive = archive?;
                (archive.summary, archive.summarized_until)
            }
            None => (None, 0),
        };
        let messages = self
            .messages_after(key, session, summarized_until)
            .await?
            .into_iter()
            .filter(|(_, expires_at)| expires_at.is_none_or(|expires| expires > now))
            .map(|(message, _)| message)
            .collect();
        Ok(ClosedSession { summary, messages })
    }

    async fn save_facts(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        writes: &[FactWrite],
        removals: &[FactKey],
    ) -> Result<bool, StoreError> {
        validate_fact_changes(writes, removals)?;
        let pk = contact_pk(key);
        let mut actions = Vec::with_capacity(writes.len() + removals.len());
        for write in writes {
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(to_item(&FactItem::new(&pk, write))?))
                .build()
                .map_err(|err| StoreError::Other(format!("fact put: {err}")))?;
            actions.push(TransactWriteItem::builder().put(put).build());
        }
        for removal in removals {
            let delete = Delete::builder()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(fact_sk(removal)))
                .build()
                .map_err(|err| StoreError::Other(format!("fact delete: {err}")))?;
            actions.push(TransactWriteItem::builder().delete(delete).build());
        }
        // The head exists and is still the same life of the contact: an erased
        // contact who wrote again has another incarnation.
        let head_exists = ConditionCheck::builder()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(HEAD_SK))
            .condition_expression("incarnation = :incarnation")
            .expression_attribute_values(":incarnation", s(incarnation.as_str()))
            .build()
            .map_err(|err| StoreError::Other(format!("head check: {err}")))?;
        // Without changes, the check alone still answers whether the head exists.
        if actions.is_empty() {
            return self
                .transact_if(vec![
                    TransactWriteItem::builder()
                        .condition_check(head_exists)
                        .build(),
                ])
                .await;
        }
        // A tenant's fact keys are a short closed list, so one transaction is the
        // rule; a longer batch is split, each part re-checking the head. When an
        // erase lands between parts, the later ones write nothing and the answer is
        // `Ok(false)`; the earlier ones committed while the contact existed, like a
        // whole batch committed just before the erase.
        for chunk in actions.chunks(MAX_TRANSACTION_ACTIONS - 1) {
            let mut items = Vec::with_capacity(chunk.len() + 1);
            items.push(
                TransactWriteItem::builder()
                    .condition_check(head_exists.clone())
                    .build(),
            );
            items.extend_from_slice(chunk);
            if !self.transact_if(items).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn due_heads(
        &self,
        bucket: u8,
        due_by: i64,
        limit: usize,
    ) -> Result<Vec<DueHead>, StoreError> {
        // Ascending by `sweep_sk`: the heads due longest come first. No filter
        // expression, so `Limit` counts exactly the items returned.
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(SWEEP_INDEX)
            .key_condition_expression("sweep_pk = :bucket AND sweep_sk <= :due_by")
            .expression_attribute_values(":bucket", s(sweep_pk(bucket)))
            .expression_attribute_values(":due_by", n(due_by));
        let mut found = Vec::with_capacity(limit.min(1000));
        let mut start = None;
        while found.len() < limit {
            let page_limit = i32::try_from(limit - found.len()).unwrap_or(i32::MAX);
            let page = query
                .clone()
                .limit(page_limit)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|err| sdk_error("query", err))?;
            for item in page.items.unwrap_or_default() {
                let entry: SweepEntry = from_item(item)?;
                found.push(DueHead {
                    key: parse_contact_pk(&entry.pk)?,
                    due: entry.sweep_sk,
                });
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        found.truncate(limit);
        Ok(found)
    }

    async fn load_head(&self, key: &ContactKey) -> Result<Option<Head>, StoreError> {
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(HEAD_SK))
            .send()
            .await
            .map_err(|err| sdk_error("get_item", err))?;
        found
            .item
            .map(|item| from_item::<HeadItem>(item).map(Head::from))
            .transpose()
    }

    async fn settle_sweep(
        &self,
        key: &ContactKey,
        settle: &SweepSettle,
    ) -> Result<bool, StoreError> {
        let mut set = Vec::new();
        let mut remove = Vec::new();
        let mut conditions = vec![
            "incarnation = :incarnation",
            "last_activity = :last_activity",
            "sweep_sk = :due",
        ];
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(HEAD_SK))
            .expression_attribute_values(":incarnation", s(settle.incarnation.as_str()))
            .expression_attribute_values(":last_activity", n(settle.last_activity))
            .expression_attribute_values(":due", n(settle.due));
        update = match settle.pending_since {
            Some(since) => {
                conditions.push("facts_pending_since = :pending_since");
                update.expression_attribute_values(":pending_since", n(since))
            }
            None => {
                conditions.push("attribute_not_exists(facts_pending)");
                update
            }
        };
        if let Some(session) = settle.facts_requested {
            set.push("facts_requested = :facts_requested");
            update = update.expression_attribute_values(":facts_requested", n(session));
        }
        match settle.pending {
            PendingChange::Keep => {}
            PendingChange::Set(pending) => {
                set.extend(PENDING_SET);
                update = pending_values(update, pending);
            }
            PendingChange::Clear => remove.extend(PENDING_ATTRIBUTES),
        }
        match settle.next_due {
            Some(due) => {
                set.push("sweep_sk = :next_due");
                update = update.expression_attribute_values(":next_due", n(due));
            }
            None => remove.extend(["sweep_pk", "sweep_sk"]),
        }
        let result = update
            .update_expression(update_expression(&set, &remove))
            .condition_expression(conditions.join(" AND "))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            // A round, an erase (the condition keeps the update from creating an
            // item), another sweep or a finished facts job came first.
            Err(SdkError::ServiceError(ctx))
                if matches!(
                    ctx.err(),
                    UpdateItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                Ok(false)
            }
            Err(err) => Err(sdk_error("update_item", err)),
        }
    }

    async fn facts_done(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(HEAD_SK))
            .update_expression(update_expression(&[], &PENDING_ATTRIBUTES))
            .condition_expression("incarnation = :incarnation AND facts_pending = :session")
            .expression_attribute_values(":incarnation", s(incarnation.as_str()))
            .expression_attribute_values(":session", n(session))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(ctx))
                if matches!(
                    ctx.err(),
                    UpdateItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                Ok(false)
            }
            Err(err) => Err(sdk_error("update_item", err)),
        }
    }

    async fn refresh_expiry(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
        seqs: &[u64],
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        if seqs.len() > MAX_REFRESH_PER_ROUND {
            return Err(StoreError::Other(format!(
                "a refresh of {} messages exceeds the limit of {MAX_REFRESH_PER_ROUND}",
                seqs.len()
            )));
        }
        let pk = contact_pk(key);
        let head = ConditionCheck::builder()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(HEAD_SK))
            .condition_expression("incarnation = :incarnation")
            .expression_attribute_values(":incarnation", s(incarnation.as_str()))
            .build()
            .map_err(|err| StoreError::Other(format!("head check: {err}")))?;
        let mut items = Vec::with_capacity(seqs.len() + 1);
        items.push(TransactWriteItem::builder().condition_check(head).build());
        for seq in seqs {
            // The condition keeps the update from recreating a message TTL deleted.
            let update = Update::builder()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(message_sk(session, *seq)))
                .update_expression("SET expires_at = :expires_at")
                .condition_expression("attribute_exists(sk)")
                .expression_attribute_values(":expires_at", n(expires_at))
                .build()
                .map_err(|err| StoreError::Other(format!("refresh update: {err}")))?;
            items.push(TransactWriteItem::builder().update(update).build());
        }
        self.transact_if(items).await
    }

    async fn find_contact(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<ContactKey>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(INCARNATION_INDEX)
            .key_condition_expression("incarnation = :incarnation")
            .expression_attribute_values(":incarnation", s(incarnation.as_str()));
        for item in self.query_all(query).await? {
            let entry: IndexedKey = from_item(item)?;
            if entry.sk != HEAD_SK {
                continue;
            }
            let key = parse_contact_pk(&entry.pk)?;
            if key.tenant == *tenant {
                return Ok(Some(key));
            }
        }
        Ok(None)
    }

    async fn ensure_incarnation(
        &self,
        key: &ContactKey,
        candidate: &Incarnation,
    ) -> Result<Option<Incarnation>, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(HEAD_SK))
            .update_expression("SET incarnation = if_not_exists(incarnation, :candidate)")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":candidate", s(candidate.as_str()))
            // ALL_NEW rather than UPDATED_NEW: an attribute the update left as it
            // was need not count as updated.
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(output) => match output
                .attributes
                .as_ref()
                .and_then(|a| a.get("incarnation"))
            {
                Some(AttributeValue::S(value)) => Incarnation::parse(value)
                    .map(Some)
                    .map_err(|err| StoreError::Corrupt(err.to_string())),
                _ => Err(StoreError::Corrupt(
                    "the head's incarnation did not read back".into(),
                )),
            },
            // No head: the condition keeps the update from creating one.
            Err(SdkError::ServiceError(ctx))
                if matches!(
                    ctx.err(),
                    UpdateItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                Ok(None)
            }
            Err(err) => Err(sdk_error("update_item", err)),
        }
    }
}

#[async_trait]
impl TenantStore for DynamoStore {
    async fn tenant_config(&self, tenant: &TenantId) -> Result<Option<TenantConfig>, StoreError> {
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(CONFIG_SK))
            .send()
            .await
            .map_err(|err| sdk_error("get_item", err))?;
        let Some(item) = found.item else {
            return Ok(None);
        };
        let item: ConfigItem = from_item(item)?;
        serde_json::from_str(&item.config)
            .map(Some)
            .map_err(|err| StoreError::Corrupt(format!("tenant config: {err}")))
    }

    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<(), StoreError> {
        let item = ConfigItem {
            pk: tenant_pk(tenant),
            sk: CONFIG_SK.into(),
            config: serde_json::to_string(config)
                .map_err(|err| StoreError::Other(format!("tenant config: {err}")))?,
        };
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(&item)?))
            .send()
            .await
            .map_err(|err| sdk_error("put_item", err))?;
        Ok(())
    }
}

// ---- key layout ------------------------------------------------------------------

/// The sweep index: a sparse GSI on the heads, `sweep_pk` (hash) and `sweep_sk`
/// (range). Its name in `template.yaml`.
pub const SWEEP_INDEX: &str = "by-activity";

/// The incarnation index: a sparse, keys-only GSI on the heads' `incarnation`.
/// Its name in `template.yaml`.
pub const INCARNATION_INDEX: &str = "by-incarnation";

/// Listing-and-deleting passes of an erase before it settles.
const ERASE_PASSES: usize = 4;

const HEAD_SK: &str = "HEAD";
const FACT_PREFIX: &str = "FACT#";
const CONFIG_SK: &str = "CONFIG";

fn contact_pk(key: &ContactKey) -> String {
    format!("T#{}#C#{}", key.tenant, key.contact)
}

/// The contact a partition key names: the inverse of [`contact_pk`]. Neither id
/// may hold `#`, so the split is unambiguous; both are validated again.
fn parse_contact_pk(pk: &str) -> Result<ContactKey, StoreError> {
    let corrupt = || StoreError::Corrupt("a sweep index entry's pk is not a contact's".into());
    let (tenant, contact) = pk
        .strip_prefix("T#")
        .and_then(|rest| rest.split_once("#C#"))
        .ok_or_else(corrupt)?;
    Ok(ContactKey {
        tenant: TenantId::parse(tenant).map_err(|_| corrupt())?,
        contact: ContactId::parse(contact).map_err(|_| corrupt())?,
    })
}

/// The sweep index partition of a bucket.
fn sweep_pk(bucket: u8) -> String {
    format!("OPEN#{bucket}")
}

fn tenant_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}")
}

fn message_sk(session: u32, seq: u64) -> String {
    format!("S#{session:06}#M#{seq:08}")
}

fn fact_sk(key: &FactKey) -> String {
    format!("{FACT_PREFIX}{key}")
}

/// A closed session's archive. `SUM#` sorts after every `S#…` message key (`U` >
/// `#`), so no message range (`BETWEEN S#… AND S#…`) ever reaches it.
fn archive_sk(session: u32) -> String {
    format!("SUM#{session:06}")
}

fn request_sk(idempotency: &IdempotencyKey) -> String {
    format!("REQ#{idempotency}")
}

/// The inclusive `(from, to)` positions a transcript query covers, or `None` when
/// nothing can match (`before` is at or before the first possible message).
fn transcript_range(sessions: SessionFilter, before: Option<Cursor>) -> Option<(Cursor, Cursor)> {
    let (from, mut to) = match sessions {
        SessionFilter::All => (
            Cursor { session: 0, seq: 0 },
            Cursor {
                session: MAX_SESSION,
                seq: MAX_SEQ,
            },
        ),
        SessionFilter::Only(session) => (
            Cursor { session, seq: 0 },
            Cursor {
                session,
                seq: MAX_SEQ,
            },
        ),
    };
    if let Some(before) = before {
        let just_before = match before.seq {
            0 => Cursor {
                session: before.session.checked_sub(1)?,
                seq: MAX_SEQ,
            },
            seq => Cursor {
                session: before.session,
                seq: (seq - 1).min(MAX_SEQ),
            },
        };
        to = to.min(just_before);
    }
    (from <= to).then_some((from, to))
}

// ---- items -----------------------------------------------------------------------

/// The head as stored; written only through `UpdateItem`, so only read here.
#[derive(Deserialize)]
struct HeadItem {
    session: u32,
    #[serde(default)]
    last_seq: u64,
    #[serde(default)]
    summarized_until: u64,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    last_context_tokens: u64,
    #[serde(default)]
    last_activity: i64,
    #[serde(default)]
    steps: u32,
    #[serde(default)]
    facts_requested: Option<u32>,
    #[serde(default)]
    last_round: Option<String>,
    #[serde(default)]
    incarnation: Option<Incarnation>,
    #[serde(default)]
    facts_pending: Option<u32>,
    #[serde(default)]
    facts_pending_since: i64,
    #[serde(default)]
    facts_attempts: u32,
    #[serde(default)]
    hard_cap_at: Option<u64>,
    #[serde(default)]
    expires_at: Option<i64>,
}

/// A head as the sweep index has it: `sweep_sk` is when the head is due. (The
/// index also projects `session`, which the sweep no longer needs: it reads each
/// due head itself. A GSI's projection cannot change in place.)
#[derive(Deserialize)]
struct SweepEntry {
    pk: String,
    sweep_sk: i64,
}

/// An item's table keys, as a keys-only index projects them.
#[derive(Deserialize)]
struct IndexedKey {
    pk: String,
    sk: String,
}

impl From<HeadItem> for Head {
    fn from(item: HeadItem) -> Head {
        Head {
            session: item.session,
            last_seq: item.last_seq,
            summarized_until: item.summarized_until,
            summary: item.summary,
            last_context_tokens: item.last_context_tokens,
            last_activity: item.last_activity,
            steps: item.steps,
            facts_requested: item.facts_requested,
            last_round: item.last_round,
            incarnation: item.incarnation,
            facts_pending: item.facts_pending.map(|session| PendingFacts {
                session,
                since: item.facts_pending_since,
                attempts: item.facts_attempts,
            }),
            hard_cap_at: item.hard_cap_at,
            expires_at: item.expires_at,
        }
    }
}

/// A message as stored. `content` and `pruned` are the blocks as JSON strings: the
/// exact Messages-API JSON, free of DynamoDB's quirks with empty strings and maps.
#[derive(Serialize, Deserialize)]
struct MessageItem {
    pk: String,
    sk: String,
    session: u32,
    seq: u64,
    role: Role,
    content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pruned: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    #[serde(default)]
    created_at: i64,
    /// TTL; absent on messages stored before rounds carried one (kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

impl MessageItem {
    fn new(pk: &str, message: &StoredMessage, expires_at: Option<i64>) -> Result<Self, StoreError> {
        Ok(MessageItem {
            pk: pk.to_owned(),
            sk: message_sk(message.session, message.seq),
            session: message.session,
            seq: message.seq,
            role: message.role,
            content: blocks_json(&message.content)?,
            pruned: message.pruned.as_deref().map(blocks_json).transpose()?,
            usage: message.usage,
            created_at: message.created_at,
            expires_at,
        })
    }
}

/// Blocks as stored in `content` and `pruned`: their Messages-API JSON.
fn blocks_json(blocks: &[ContentBlock]) -> Result<String, StoreError> {
    serde_json::to_string(blocks).map_err(|err| StoreError::Other(format!("message blocks: {err}")))
}

/// A message item read back, with its TTL.
fn message_and_expiry(item: Item) -> Result<(StoredMessage, Option<i64>), StoreError> {
    let item: MessageItem = from_item(item)?;
    let blocks = |json: &str| {
        serde_json::from_str(json)
            .map_err(|err| StoreError::Corrupt(format!("message {}: {err}", item.sk)))
    };
    let message = StoredMessage {
        session: item.session,
        seq: item.seq,
        role: item.role,
        content: blocks(&item.content)?,
        pruned: item.pruned.as_deref().map(blocks).transpose()?,
        usage: item.usage,
        created_at: item.created_at,
    };
    Ok((message, item.expires_at))
}

/// A closed session's archive (`SUM#{session:06}`); `expires_at` is its TTL.
#[derive(Serialize, Deserialize)]
struct ArchiveItem {
    pk: String,
    sk: String,
    session: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    #[serde(default)]
    summarized_until: u64,
    #[serde(default)]
    last_seq: u64,
    expires_at: i64,
}

impl ArchiveItem {
    fn new(pk: &str, archive: &SessionArchive) -> Self {
        ArchiveItem {
            pk: pk.to_owned(),
            sk: archive_sk(archive.session),
            session: archive.session,
            summary: archive.summary.clone(),
            summarized_until: archive.summarized_until,
            last_seq: archive.last_seq,
            expires_at: archive.expires_at,
        }
    }
}

/// A fact as stored; `expires_at` is the TTL attribute (absent: kept).
#[derive(Serialize, Deserialize)]
struct FactItem {
    pk: String,
    sk: String,
    key: FactKey,
    value: String,
    source_session: u32,
    source_seq: u64,
    #[serde(default)]
    updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

impl FactItem {
    fn new(pk: &str, write: &FactWrite) -> Self {
        let fact = &write.fact;
        FactItem {
            pk: pk.to_owned(),
            sk: fact_sk(&fact.key),
            key: fact.key.clone(),
            value: fact.value.clone(),
            source_session: fact.source.session,
            source_seq: fact.source.seq,
            updated_at: fact.updated_at,
            expires_at: Some(write.expires_at),
        }
    }
}

impl From<FactItem> for Fact {
    fn from(item: FactItem) -> Fact {
        Fact {
            key: item.key,
            value: item.value,
            source: FactSource {
                session: item.source_session,
                seq: item.source_seq,
            },
            updated_at: item.updated_at,
        }
    }
}

/// The state of an idempotency record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RequestStatus {
    InProgress,
    Completed,
}

impl RequestStatus {
    const IN_PROGRESS: &str = "in_progress";
}

/// An idempotency record (`REQ#{key}`); `expires_at` is its TTL.
#[derive(Serialize, Deserialize)]
struct RequestItem {
    pk: String,
    sk: String,
    status: RequestStatus,
    payload_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_until: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<String>,
    expires_at: i64,
}

/// The tenant's `CONFIG` item: the config as a JSON string, so that unknown fields
/// are refused by serde exactly as in any other JSON.
#[derive(Serialize, Deserialize)]
struct ConfigItem {
    pk: String,
    sk: String,
    config: String,
}

// ---- writes ----------------------------------------------------------------------

/// The head's part of a round: an update of only the fields `ask` owns, so that a
/// compaction step applied since the head was loaded survives; a new session also
/// resets the summary fields.
fn head_update(table: &str, pk: &str, commit: &RoundCommit) -> Result<Update, StoreError> {
    let head = &commit.head;
    let mut set = vec![
        "#session = :session",
        "#last_seq = :last_seq",
        "#last_context_tokens = :last_context_tokens",
        "#last_activity = :last_activity",
        // Back into the sweep index, due when the round says.
        "sweep_pk = :sweep_pk",
        "sweep_sk = :sweep_sk",
    ];
    let mut remove = Vec::new();
    let mut update = Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(HEAD_SK))
        .expression_attribute_names("#session", "session")
        .expression_attribute_names("#last_seq", "last_seq")
        .expression_attribute_names("#last_context_tokens", "last_context_tokens")
        .expression_attribute_names("#last_activity", "last_activity")
        .expression_attribute_values(":session", n(head.session))
        .expression_attribute_values(":last_seq", n(head.last_seq))
        .expression_attribute_values(":last_context_tokens", n(head.last_context_tokens))
        .expression_attribute_values(":last_activity", n(head.last_activity))
        .expression_attribute_values(":sweep_pk", s(sweep_pk(commit.sweep.bucket)))
        .expression_attribute_values(":sweep_sk", n(commit.sweep.due));
    if let Some(expires_at) = head.expires_at {
        set.push("expires_at = :expires_at");
        update = update.expression_attribute_values(":expires_at", n(expires_at));
    }
    if let Some(round) = &head.last_round {
        set.push("last_round = :last_round");
        update = update.expression_attribute_values(":last_round", s(round));
    }
    update = match head.facts_requested {
        Some(session) => {
            set.push("facts_requested = :facts_requested");
            update.expression_attribute_values(":facts_requested", n(session))
        }
        None => {
            remove.push("facts_requested");
            update
        }
    };
    update = match head.hard_cap_at {
        Some(at) => {
            set.push("hard_cap_at = :hard_cap_at");
            update.expression_attribute_values(":hard_cap_at", n(at))
        }
        None => {
            remove.push("hard_cap_at");
            update
        }
    };
    if let Some(pending) = head.facts_pending {
        set.extend(PENDING_SET);
        update = update
            .expression_attribute_values(":facts_pending", n(pending.session))
            .expression_attribute_values(":facts_pending_since", n(pending.since))
            .expression_attribute_values(":facts_attempts", n(pending.attempts));
    }
    let new_session = commit
        .expected
        .as_ref()
        .is_none_or(|expected| expected.session != head.session);
    if new_session {
        set.extend(["#summarized_until = :zero", "#steps = :zero"]);
        remove.push("#summary");
        update = update
            .expression_attribute_names("#summarized_until", "summarized_until")
            .expression_attribute_names("#steps", "steps")
            .expression_attribute_names("#summary", "summary")
            .expression_attribute_values(":zero", n(0));
    }
    // The incarnation is written once: by the round that creates the head, or by
    // the first round of a head from before incarnations. A loaded head's must
    // still be there: an erase and a new first round in between make another.
    let expected_incarnation = commit
        .expected
        .as_ref()
        .and_then(|e| e.incarnation.as_ref());
    if let (None, Some(incarnation)) = (expected_incarnation, &head.incarnation) {
        set.push("incarnation = :incarnation");
        update = update.expression_attribute_values(":incarnation", s(incarnation.as_str()));
    }
    update = update.update_expression(update_expression(&set, &remove));
    update = match (&commit.expected, expected_incarnation) {
        (None, _) => update.condition_expression("attribute_not_exists(pk)"),
        (Some(expected), incarnation) => {
            let update = update
                .expression_attribute_values(":expected_session", n(expected.session))
                .expression_attribute_values(":expected_last_seq", n(expected.last_seq));
            let same_head = "#session = :expected_session AND #last_seq = :expected_last_seq";
            match incarnation {
                Some(incarnation) => update
                    .condition_expression(format!(
                        "{same_head} AND incarnation = :expected_incarnation"
                    ))
                    .expression_attribute_values(":expected_incarnation", s(incarnation.as_str())),
                None => update.condition_expression(format!(
                    "{same_head} AND attribute_not_exists(incarnation)"
                )),
            }
        }
    };
    update
        .build()
        .map_err(|err| StoreError::Other(format!("head update: {err}")))
}

/// The head's attributes of a pending fact extraction ([`Head::facts_pending`]).
const PENDING_ATTRIBUTES: [&str; 3] = ["facts_pending", "facts_pending_since", "facts_attempts"];

/// Their `SET` clauses, with the values `:facts_pending`, `:facts_pending_since`
/// and `:facts_attempts`.
const PENDING_SET: [&str; 3] = [
    "facts_pending = :facts_pending",
    "facts_pending_since = :facts_pending_since",
    "facts_attempts = :facts_attempts",
];

/// The values of [`PENDING_SET`] on an `UpdateItem`.
fn pending_values(
    update: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder,
    pending: PendingFacts,
) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    update
        .expression_attribute_values(":facts_pending", n(pending.session))
        .expression_attribute_values(":facts_pending_since", n(pending.since))
        .expression_attribute_values(":facts_attempts", n(pending.attempts))
}

/// `SET a, b REMOVE c, d`, leaving out an empty part.
fn update_expression(set: &[&str], remove: &[&str]) -> String {
    let mut parts = Vec::with_capacity(2);
    if !set.is_empty() {
        parts.push(format!("SET {}", set.join(", ")));
    }
    if !remove.is_empty() {
        parts.push(format!("REMOVE {}", remove.join(", ")));
    }
    parts.join(" ")
}

// ---- conversions and errors ------------------------------------------------------

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn to_item<T: Serialize>(value: &T) -> Result<Item, StoreError> {
    serde_dynamo::to_item(value).map_err(|err| StoreError::Other(format!("serialise item: {err}")))
}

fn from_item<T: for<'de> Deserialize<'de>>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item).map_err(|err| StoreError::Corrupt(err.to_string()))
}

/// Exponential backoff with jitter: about 50 ms, 100 ms, … capped near 2 s.
fn backoff(attempt: u32) -> Duration {
    let base = 50u64.saturating_mul(1 << attempt.min(5));
    Duration::from_millis(base / 2 + fastrand::u64(0..=base / 2))
}

/// Error codes DynamoDB answers when retrying later may succeed.
const TRANSIENT_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "TransactionInProgressException",
    "InternalServerError",
    "ServiceUnavailable",
    "LimitExceededException",
];

/// Maps an SDK failure: throttling, 5xx, timeouts and dispatch failures are
/// [`StoreError::Unavailable`]; anything else is [`StoreError::Other`].
fn sdk_error<E>(operation: &str, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let transient = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(ctx) => {
            ctx.raw().status().is_server_error()
                || ctx
                    .err()
                    .code()
                    .is_some_and(|code| TRANSIENT_CODES.contains(&code))
        }
        _ => false,
    };
    let message = format!("{operation}: {}", DisplayErrorContext(&err));
    if transient {
        tracing::warn!(operation, "dynamodb unavailable");
        StoreError::Unavailable(message)
    } else {
        StoreError::Other(message)
    }
}

/// True when a transaction was cancelled only because another transaction on one of
/// its items was in flight: a `TransactionConflict` reason and no failed condition.
/// Nothing was written, and trying again may succeed.
fn is_transaction_conflict(err: &SdkError<TransactWriteItemsError, HttpResponse>) -> bool {
    let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
        err.as_service_error()
    else {
        return false;
    };
    let codes: Vec<&str> = cancelled
        .cancellation_reasons()
        .iter()
        .filter_map(|reason| reason.code())
        .collect();
    // Without reasons, the message still names them ("… [TransactionConflict]").
    let message = cancelled.message().unwrap_or_default();
    let conflict = codes.contains(&"TransactionConflict")
        || (codes.is_empty() && message.contains("TransactionConflict"));
    let condition_failed =
        codes.contains(&"ConditionalCheckFailed") || message.contains("ConditionalCheckFailed");
    conflict && !condition_failed
}

/// Maps a failed round: any failed condition is a [`StoreError::Conflict`] (someone
/// committed first); a transaction that lost to another or was throttled is
/// [`StoreError::Unavailable`].
fn transaction_error(err: SdkError<TransactWriteItemsError, HttpResponse>) -> StoreError {
    if let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
        err.as_service_error()
    {
        let codes: Vec<&str> = cancelled
            .cancellation_reasons()
            .iter()
            .filter_map(|reason| reason.code())
            .collect();
        // Without reasons, the message still names them ("… [ConditionalCheckFailed, None]").
        let message = cancelled.message().unwrap_or_default();
        if codes.contains(&"ConditionalCheckFailed")
            || (codes.is_empty() && message.contains("ConditionalCheckFailed"))
        {
            return StoreError::Conflict("the contact's head or a message changed".into());
        }
        let transient = [
            "TransactionConflict",
            "ThrottlingError",
            "ProvisionedThroughputExceeded",
        ];
        if codes.iter().any(|code| transient.contains(code))
            || transient.iter().any(|code| message.contains(code))
        {
            return StoreError::Unavailable(format!("transaction cancelled: {codes:?}"));
        }
        return StoreError::Other(format!("transaction cancelled: {codes:?} {message}"));
    }
    sdk_error("transact_write_items", err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16) -> HttpResponse {
        HttpResponse::new(status.try_into().unwrap(), "".into())
    }

    fn cancelled(codes: &[&str]) -> SdkError<TransactWriteItemsError, HttpResponse> {
        use aws_sdk_dynamodb::types::CancellationReason;
        use aws_sdk_dynamodb::types::error::TransactionCanceledException;
        let mut err = TransactionCanceledException::builder().message("Transaction cancelled");
        for code in codes {
            err = err.cancellation_reasons(CancellationReason::builder().code(*code).build());
        }
        SdkError::service_error(
            TransactWriteItemsError::TransactionCanceledException(err.build()),
            response(400),
        )
    }

    #[test]
    fn a_failed_condition_in_a_round_is_a_conflict() {
        let err = transaction_error(cancelled(&["None", "ConditionalCheckFailed", "None"]));
        assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    }

    #[test]
    fn a_round_that_lost_a_race_or_was_throttled_is_unavailable() {
        for code in [
            "TransactionConflict",
            "ThrottlingError",
            "ProvisionedThroughputExceeded",
        ] {
            let err = transaction_error(cancelled(&["None", code]));
            assert!(matches!(err, StoreError::Unavailable(_)), "{code}: {err:?}");
        }
        let err = transaction_error(cancelled(&["ValidationError"]));
        assert!(matches!(err, StoreError::Other(_)), "{err:?}");
    }

    #[test]
    fn only_a_transaction_conflict_without_a_failed_condition_is_tried_again() {
        assert!(is_transaction_conflict(&cancelled(&[
            "None",
            "TransactionConflict"
        ])));
        assert!(!is_transaction_conflict(&cancelled(&[
            "ConditionalCheckFailed",
            "TransactionConflict"
        ])));
        assert!(!is_transaction_conflict(&cancelled(&["ThrottlingError"])));
        let err = transaction_error(cancelled(&["TransactionConflict"]));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    }

    #[test]
    fn throttling_server_errors_and_timeouts_are_unavailable() {
        use aws_sdk_dynamodb::error::ErrorMetadata;
        use aws_sdk_dynamodb::operation::get_item::GetItemError;
        let throttled =
            GetItemError::generic(ErrorMetadata::builder().code("ThrottlingException").build());
        let err = sdk_error(
            "get_item",
            SdkError::service_error(throttled, response(400)),
        );
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let internal = GetItemError::generic(ErrorMetadata::builder().code("Whatever").build());
        let err = sdk_error("get_item", SdkError::service_error(internal, response(503)));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let err = sdk_error::<GetItemError>("get_item", SdkError::timeout_error("slow"));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let invalid =
            GetItemError::generic(ErrorMetadata::builder().code("ValidationException").build());
        let err = sdk_error("get_item", SdkError::service_error(invalid, response(400)));
        assert!(matches!(err, StoreError::Other(_)), "{err:?}");
    }

    #[test]
    fn the_status_in_conditions_is_the_status_items_hold() {
        let stored: AttributeValue =
            serde_dynamo::to_attribute_value(RequestStatus::InProgress).unwrap();
        assert_eq!(stored, s(RequestStatus::IN_PROGRESS));
    }

    #[test]
    fn message_keys_sort_by_session_then_sequence() {
        assert_eq!(message_sk(2, 15), "S#000002#M#00000015");
        assert!(message_sk(1, 99) < message_sk(2, 1));
        assert!(message_sk(1, 9) < message_sk(1, 10));
        // The facts-and-head query relies on nothing else sorting between them.
        assert!(FACT_PREFIX < HEAD_SK && HEAD_SK < "REQ#" && "REQ#" < "S#");
        // Archives sort after every message, so message ranges never reach them.
        assert!(message_sk(MAX_SESSION, MAX_SEQ) < archive_sk(0));
        assert!(archive_sk(9) < archive_sk(10));
    }

    #[test]
    fn a_contact_key_reads_back_from_its_partition_key() {
        let key = ContactKey {
            tenant: TenantId::parse("barber.sp").unwrap(),
            contact: ContactId::parse("+55:11@x_y-z.C").unwrap(),
        };
        assert_eq!(parse_contact_pk(&contact_pk(&key)).unwrap(), key);
        for bad in ["T#t", "T#t#X#c", "CONFIG", "T##C#c", "T#t#C#", "T#t#C#a#b"] {
            let err = parse_contact_pk(bad).unwrap_err();
            assert!(matches!(err, StoreError::Corrupt(_)), "{bad}: {err:?}");
        }
        assert_eq!(sweep_pk(7), "OPEN#7");
    }

    #[test]
    fn transcript_ranges_stop_just_before_the_cursor() {
        let at = |session, seq| Cursor { session, seq };
        assert_eq!(
            transcript_range(SessionFilter::Only(2), Some(at(2, 5))),
            Some((at(2, 0), at(2, 4)))
        );
        assert_eq!(
            transcript_range(SessionFilter::All, Some(at(3, 1))),
            Some((at(0, 0), at(3, 0)))
        );
        assert_eq!(
            transcript_range(SessionFilter::Only(2), Some(at(5, 1))),
            Some((at(2, 0), at(2, MAX_SEQ)))
        );
        assert_eq!(
            transcript_range(SessionFilter::Only(2), Some(at(1, 7))),
            None
        );
        assert_eq!(transcript_range(SessionFilter::All, Some(at(0, 0))), None);
    }

    #[test]
    fn message_items_keep_the_blocks_as_json_strings() {
        let message = StoredMessage {
            session: 1,
            seq: 2,
            role: Role::Assistant,
            content: vec![degrau::domain::ContentBlock::text("")],
            pruned: None,
            usage: Some(Usage {
                input_tokens: 3,
                ..Usage::default()
            }),
            created_at: 7,
        };
        let item = to_item(&MessageItem::new("T#t#C#c", &message, Some(9)).unwrap()).unwrap();
        assert_eq!(item["content"], s(r#"[{"type":"text","text":""}]"#));
        assert!(!item.contains_key("pruned"));
        assert_eq!(item["expires_at"], n(9));
        assert_eq!(message_and_expiry(item).unwrap(), (message, Some(9)));
    }
}
