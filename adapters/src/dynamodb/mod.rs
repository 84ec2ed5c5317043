//! The DynamoDB adapter of the [`Store`](degrau::store::Store) and [`TenantStore`](degrau::tenant::TenantStore)
//! ports: one table, the layout of [`keys`], items (de)serialised with
//! `serde_dynamo` (`items`), the requests built in `queries` and SDK errors mapped
//! in `error`. This file holds the trait implementations only.
//!
//! A round, a compaction step, a fact batch and a refresh are each one
//! `TransactWriteItems`: a failed condition is [`StoreError::Conflict`] for a round
//! and `Ok(false)` for the others (a duplicate job or an erased contact, not an
//! error); throttling and transient failures are [`StoreError::Unavailable`].
//!
//! Messages, session archives, facts and the head carry the TTL attribute
//! `expires_at`. TTL deletes only eventually and in any order, so reads filter on
//! it too, and a round's writes accept an item past it in place of none.
//!
//! (`docs/DESIGN.md`: "Key layout".)

pub mod channel;
mod error;
mod items;
pub mod keys;
mod operator;
mod platform;
mod queries;
mod quota;
mod recall;
mod records;
mod tombstone;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use degrau::domain::{Head, IdempotencyKey, Incarnation, StoredMessage, TenantId};
use degrau::plan::window::after_last_gap;
use degrau::store::{
    AppliedStep, Claim, ClosedSession, ContactKey, DueHead, FactRemoval, FactWrite, JobStore,
    MAX_REFRESH_PER_ROUND, RoundCommit, RoundStore, StoreError, SweepSettle, SweepStore, TurnState,
    validate_fact_changes, validate_step,
};

use error::{transact, transact_if, unless_condition_failed};
use items::{ArchiveItem, HeadItem, IndexedKey, RequestItem, RequestStatus, SweepEntry};
use items::{from_item, n, s, to_item};
use keys::{HEAD_SK, MAX_SEQ, archive_sk, contact_pk, parse_contact_pk, request_sk, sweep_pk};
pub use keys::{INCARNATION_INDEX, SWEEP_INDEX, TENANT_INDEX};
use queries::{
    FactGuard, Pages, UpdateParts, fact_transactions, refresh_items, round_items, settle_parts,
    step_items, update_if,
};
pub use recall::{index_item, text_item};

/// The item a closed session's archive (its recall record included) is stored as,
/// in the contact `key`'s partition: what the recall benchmark weighs a recall's
/// read by (DynamoDB bills a query by the size of the items it reads).
pub fn archive_item(
    key: &ContactKey,
    archive: &degrau::store::SessionArchive,
) -> Result<std::collections::HashMap<String, AttributeValue>, StoreError> {
    to_item(&ArchiveItem::new(&contact_pk(key), archive))
}

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

    /// The client it sends with (for a channel's own items, see [`channel`]).
    pub fn client(&self) -> &Client {
        &self.client
    }
}

#[async_trait]
impl RoundStore for DynamoStore {
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError> {
        let (head, facts) = self.head_and_facts(key, now).await?;
        // A head past its TTL is gone, as DynamoDB will make it: the next round
        // writes over it (see `round_items`).
        let Some(head) = head.filter(|head| !head.expired_at(now)) else {
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
            .messages_between(key, head.session, head.summarized_until, head.last_seq)
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

    async fn load_head(&self, key: &ContactKey) -> Result<Option<Head>, StoreError> {
        self.get(contact_pk(key), HEAD_SK.to_owned())
            .await?
            .map(|item| from_item::<HeadItem>(item).map(Head::from))
            .transpose()
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
            let Some(item) = self.get(pk.clone(), request_sk(idempotency)).await? else {
                continue;
            };
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
        // A failed condition: absent or completed, nothing to release.
        unless_condition_failed("delete_item", result)?;
        Ok(())
    }

    async fn commit_round(&self, commit: &RoundCommit) -> Result<(), StoreError> {
        transact(&self.client, round_items(&self.table, commit)?).await
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
        let items = refresh_items(&self.table, key, incarnation, session, seqs, expires_at)?;
        transact_if(&self.client, items).await
    }
}

#[async_trait]
impl JobStore for DynamoStore {
    async fn find_contact(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<ContactKey>, StoreError> {
        let query = self
            .query_index(INCARNATION_INDEX)
            .key_condition_expression("incarnation = :incarnation")
            .expression_attribute_values(":incarnation", s(incarnation.as_str()));
        for item in Pages::new(query).all().await? {
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

    async fn apply_step(&self, key: &ContactKey, step: &AppliedStep) -> Result<bool, StoreError> {
        validate_step(step)?;
        transact_if(&self.client, step_items(&self.table, key, step)?).await
    }

    async fn load_closed_session(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<ClosedSession, StoreError> {
        let archive = self.get(contact_pk(key), archive_sk(session)).await?;
        let (summary, summarized_until) = match archive.map(from_item::<ArchiveItem>).transpose()? {
            // Past its retention the archive is gone, and so is every message of the
            // session (they expired no later): nothing to read.
            Some(archive) if archive.expires_at <= now => return Ok(ClosedSession::default()),
            Some(archive) => (archive.summary, archive.summarized_until),
            None => (None, 0),
        };
        let messages = self
            .messages_between(key, session, summarized_until, MAX_SEQ)
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
        removals: &[FactRemoval],
    ) -> Result<bool, StoreError> {
        validate_fact_changes(writes, removals)?;
        // When an erase lands between the parts of a long batch, the later ones
        // write nothing and the answer is `Ok(false)`; the earlier ones committed
        // while the contact existed, like a whole batch committed just before it.
        let guard = FactGuard::Head(incarnation);
        for items in fact_transactions(&self.table, key, guard, writes, removals)? {
            if !transact_if(&self.client, items).await? {
                // The head's check or a fact's expectation failed: which one, the
                // head tells (an expectation is a conflict, to read again).
                let head = self.load_head(key).await?;
                if head.is_some_and(|head| head.incarnation.as_ref() == Some(incarnation)) {
                    return Err(StoreError::Conflict(
                        "a fact changed since it was read".into(),
                    ));
                }
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn facts_done(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
    ) -> Result<bool, StoreError> {
        let mut parts = UpdateParts::default();
        parts
            .remove_pending()
            .condition("incarnation = :incarnation")
            .condition("facts_pending = :session")
            .value(":incarnation", s(incarnation.as_str()))
            .value(":session", n(session));
        update_if(parts.apply(self.update_head(key))).await
    }
}

#[async_trait]
impl SweepStore for DynamoStore {
    async fn due_heads(
        &self,
        bucket: u8,
        due_by: i64,
        limit: usize,
    ) -> Result<Vec<DueHead>, StoreError> {
        // Ascending by `sweep_sk`: the heads due longest come first. No filter
        // expression, so `Limit` counts exactly the items returned.
        let query = self
            .query_index(SWEEP_INDEX)
            .key_condition_expression("sweep_pk = :bucket AND sweep_sk <= :due_by")
            .expression_attribute_values(":bucket", s(sweep_pk(bucket)))
            .expression_attribute_values(":due_by", n(due_by));
        let mut found = Vec::with_capacity(limit.min(1000));
        let mut pages = Pages::new(query);
        while found.len() < limit {
            let Some(page) = pages.next(Some(limit - found.len())).await? else {
                break;
            };
            for item in page {
                let entry: SweepEntry = from_item(item)?;
                found.push(DueHead {
                    key: parse_contact_pk(&entry.pk)?,
                    due: entry.sweep_sk,
                });
            }
        }
        found.truncate(limit);
        Ok(found)
    }

    async fn ensure_incarnation(
        &self,
        key: &ContactKey,
        candidate: &Incarnation,
    ) -> Result<Option<Incarnation>, StoreError> {
        let result = self
            .update_head(key)
            .update_expression("SET incarnation = if_not_exists(incarnation, :candidate)")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":candidate", s(candidate.as_str()))
            // ALL_NEW rather than UPDATED_NEW: an attribute the update left as it
            // was need not count as updated.
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        // No head: the condition keeps the update from creating one.
        let Some(output) = unless_condition_failed("update_item", result)? else {
            return Ok(None);
        };
        match output
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
        }
    }

    async fn settle_sweep(
        &self,
        key: &ContactKey,
        settle: &SweepSettle,
    ) -> Result<bool, StoreError> {
        // `Ok(false)`: a round, an erase (the condition keeps the update from
        // creating an item), another sweep or a finished facts job came first.
        update_if(settle_parts(settle).apply(self.update_head(key))).await
    }

    async fn defer_sweep(
        &self,
        key: &ContactKey,
        due: i64,
        next_due: i64,
    ) -> Result<bool, StoreError> {
        let mut parts = UpdateParts::default();
        parts
            .set("sweep_sk = :next_due")
            .condition("sweep_sk = :due")
            .value(":due", n(due))
            .value(":next_due", n(next_due));
        update_if(parts.apply(self.update_head(key))).await
    }
}
