//! The reads: [`Pages`], the one paging loop of the adapter, for every query that
//! may span pages; the queries and gets of the table (strongly consistent) and of
//! its indexes (which cannot be); a window's messages; the head with its facts.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;
use degrau::domain::{Fact, Head, StoredMessage};
use degrau::store::{ContactKey, FactRecord, StoreError};

use crate::dynamodb::DynamoStore;
use crate::dynamodb::error::sdk_error;
use crate::dynamodb::items::{FactItem, HeadItem, Item, from_item, message_and_expiry, s};
use crate::dynamodb::keys::{FACT_PREFIX, HEAD_SK, MAX_SEQ, contact_pk, message_sk};

/// The pages of a query, following `LastEvaluatedKey`: the one paging loop of the
/// adapter. Each call to [`Pages::next`] sends one request; after the last page it
/// sends none and answers `None`.
pub struct Pages {
    query: QueryFluentBuilder,
    start: Option<Item>,
    done: bool,
}

impl Pages {
    /// The pages of `query`, from its first.
    pub fn new(query: QueryFluentBuilder) -> Pages {
        Pages {
            query,
            start: None,
            done: false,
        }
    }

    /// The pages of `query` after the item of `start` (a previous page's last
    /// evaluated key).
    pub fn after(query: QueryFluentBuilder, start: Item) -> Pages {
        Pages {
            query,
            start: Some(start),
            done: false,
        }
    }

    /// The next page's items, asking for at most `limit` of them (`None`: as many as
    /// one page holds); `None` once the last page was read.
    pub async fn next(&mut self, limit: Option<usize>) -> Result<Option<Vec<Item>>, StoreError> {
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
    pub async fn all(mut self) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        while let Some(page) = self.next(None).await? {
            items.extend(page);
        }
        Ok(items)
    }
}

impl DynamoStore {
    /// A query on the table, strongly consistent.
    pub fn query(&self) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
    }

    /// A query on a global secondary index (eventually consistent: an index cannot
    /// be read otherwise).
    pub fn query_index(&self, index: &str) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .index_name(index)
    }

    /// A contact's items with sort keys from `from` to `to`, both included.
    pub(in crate::dynamodb) fn query_range(
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
    pub async fn get(&self, pk: String, sk: String) -> Result<Option<Item>, StoreError> {
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
    pub(in crate::dynamodb) async fn messages_between(
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
    pub(in crate::dynamodb) async fn head_and_facts(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError> {
        let (head, records) = self.head_and_fact_records(key, now).await?;
        Ok((
            head,
            records.into_iter().map(|record| record.fact).collect(),
        ))
    }

    /// [`DynamoStore::head_and_facts`], each fact with its expiry (what the
    /// operator's facts route shows).
    pub(in crate::dynamodb) async fn head_and_fact_records(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<FactRecord>), StoreError> {
        let query = self
            .query()
            .key_condition_expression("pk = :pk AND sk BETWEEN :facts AND :head")
            .expression_attribute_values(":pk", s(contact_pk(key)))
            .expression_attribute_values(":facts", s(FACT_PREFIX))
            .expression_attribute_values(":head", s(HEAD_SK));
        let mut head = None;
        let mut records = Vec::new();
        for item in Pages::new(query).all().await? {
            match item.get("sk") {
                Some(AttributeValue::S(sk)) if sk == HEAD_SK => {
                    head = Some(from_item::<HeadItem>(item)?.into());
                }
                Some(AttributeValue::S(sk)) if sk.starts_with(FACT_PREFIX) => {
                    let fact: FactItem = from_item(item)?;
                    let expires_at = fact.expires_at;
                    if expires_at.is_none_or(|expires| expires > now) {
                        records.push(FactRecord {
                            fact: fact.into(),
                            expires_at,
                        });
                    }
                }
                _ => {}
            }
        }
        Ok((head, records))
    }
}
