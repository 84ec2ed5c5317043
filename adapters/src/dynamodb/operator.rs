//! The operator routes' port and the tenant configuration, on DynamoDB.
//!
//! **Contacts.** Every round writes `tenant_pk` = `T#{tenant}` and `tenant_sk` = its
//! `last_activity` on the head: the sparse index [`TENANT_INDEX`] (`by-tenant`) lists
//! a tenant's heads, most recently active first. Each round moves its head's entry
//! (a delete and a put in the index: two writes of under 200 bytes), so one tenant's
//! index partition takes about 500 rounds a second before DynamoDB throttles it
//! (1,000 write units a second per partition key): the ceiling `README.md` states.
//! The fact count of each listed contact is one `Select=COUNT` query on its
//! `FACT#` items (a page of 20 costs 20 small queries).
//!
//! **Usage.** A tenant's counts of a day are one item, `T#{tenant}` / `USAGE#{day}`,
//! each counter an attribute (`rounds`, `tok#{kind}#{model}`…) added to with `ADD`
//! (one write per piece of work, at most one write unit: the item stays far below
//! 1 KB for a few models). All of a tenant's work of one day writes that item: about
//! 1,000 writes a second before it throttles, and a count that fails is only logged.
//!
//! **Configuration.** `CONFIG` carries a `version` moved on by every write;
//! [`TenantStore::replace_config`] writes under `version = :expected`.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use degrau::domain::{ContactId, Fact, Head, TenantId};
use degrau::metering::{TokenCounts, UsageCounts};
use degrau::platform::TenantPolicy;
use degrau::store::{
    ContactCursor, ContactEntry, ContactKey, ContactPage, FactRecord, FactRemoval, FactWrite,
    OperatorStore, StoreError, UsageStore, validate_fact_changes,
};
use degrau::tenant::{StoredConfig, TenantConfig, TenantStore};

use super::DynamoStore;
use super::error::{sdk_error, transact_if, unless_condition_failed};
use super::items::{ConfigItem, from_item, n, s};
use super::keys::{
    CONFIG_SK, FACT_PREFIX, HEAD_SK, TENANT_INDEX, contact_pk, parse_contact_pk, tenant_pk,
};
use super::queries::{FactGuard, Pages, fact_transactions};

/// A head as the tenant index projects it: what the listing shows.
#[derive(serde::Deserialize)]
struct TenantIndexEntry {
    session: u32,
    last_seq: u64,
    last_activity: i64,
    #[serde(default)]
    expires_at: Option<i64>,
}

/// The prefix of a tenant's usage items' sort keys (in its partition, beside its
/// config and quota counts).
const USAGE_PREFIX: &str = "USAGE#";

/// A usage item's sort key: the day's number, zero-padded so days sort in order.
fn usage_sk(day: i64) -> String {
    format!("{USAGE_PREFIX}{day:08}")
}

/// The attribute of a model's token count of `kind`.
fn token_attribute(kind: &str, model: &str) -> String {
    format!("tok#{kind}#{model}")
}

#[async_trait]
impl OperatorStore for DynamoStore {
    async fn contacts(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&ContactCursor>,
        now: i64,
    ) -> Result<ContactPage, StoreError> {
        let query = self
            .query_index(TENANT_INDEX)
            .key_condition_expression("tenant_pk = :tenant")
            .expression_attribute_values(":tenant", s(tenant_pk(tenant)))
            .scan_index_forward(false);
        let mut pages = match after {
            None => Pages::new(query),
            Some(after) => Pages::after(query, tenant_index_start(tenant, after)),
        };
        let (mut heads, more) = live_heads(&mut pages, limit, now).await?;
        heads.truncate(limit);
        let mut contacts = Vec::with_capacity(heads.len());
        for (contact, head) in heads {
            let key = ContactKey {
                tenant: tenant.clone(),
                contact: contact.clone(),
            };
            contacts.push(ContactEntry {
                facts: self.fact_count(&key, now).await?,
                contact,
                session: head.session,
                last_activity: head.last_activity,
                messages: head.last_seq,
            });
        }
        let next = more
            .then(|| contacts.last())
            .flatten()
            .map(|last| ContactCursor {
                last_activity: last.last_activity,
                contact: last.contact.clone(),
            });
        Ok(ContactPage { contacts, next })
    }

    async fn fact_records(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<FactRecord>), StoreError> {
        let (head, records) = self.head_and_fact_records(key, now).await?;
        Ok((head.filter(|head| !head.expired_at(now)), records))
    }

    async fn save_facts_headless(
        &self,
        key: &ContactKey,
        anchor: &Fact,
        writes: &[FactWrite],
        removals: &[FactRemoval],
    ) -> Result<bool, StoreError> {
        validate_fact_changes(writes, removals)?;
        // The anchor is checked on its own unless the batch writes or removes it
        // (its own expectation then holds it; a transaction touches an item once).
        let touched = writes
            .iter()
            .map(|write| &write.fact.key)
            .chain(removals.iter().map(|removal| &removal.key))
            .any(|key| *key == anchor.key);
        let guard = FactGuard::Fact((!touched).then_some((&anchor.key, anchor.updated_at)));
        for items in fact_transactions(&self.table, key, guard, writes, removals)? {
            if !transact_if(&self.client, items).await? {
                // A fact changed (a conflict), or none is left (erased: nothing to do).
                let (_, left) = self.head_and_fact_records(key, anchor.updated_at).await?;
                return match left.is_empty() {
                    true => Ok(false),
                    false => Err(StoreError::Conflict(
                        "a fact changed since it was read".into(),
                    )),
                };
            }
        }
        Ok(true)
    }
}

#[async_trait]
impl UsageStore for DynamoStore {
    async fn add_usage(
        &self,
        tenant: &TenantId,
        day: i64,
        counts: &UsageCounts,
    ) -> Result<(), StoreError> {
        let mut adds = Vec::new();
        let mut names = HashMap::new();
        let mut values = HashMap::new();
        let mut add = |attribute: String, count: u64| {
            if count == 0 {
                return;
            }
            let i = names.len();
            adds.push(format!("#a{i} :v{i}"));
            names.insert(format!("#a{i}"), attribute);
            values.insert(format!(":v{i}"), n(count));
        };
        for (name, count) in counts.counters() {
            add(name.to_owned(), count);
        }
        for (model, tokens) in &counts.tokens {
            for (kind, count) in tokens.kinds() {
                add(token_attribute(kind, model), count);
            }
        }
        if adds.is_empty() {
            return Ok(());
        }
        let old = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(usage_sk(day)))
            .update_expression(format!("ADD {}", adds.join(", ")))
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedOld)
            .send()
            .await
            .map_err(|err| sdk_error("update_item", err))?;
        // None of these counters counted yet today: the tenant is put on the
        // platform's list (see `platform.rs`).
        if old.attributes.is_none_or(|old| old.is_empty()) {
            self.register_tenant(tenant).await?;
        }
        Ok(())
    }

    async fn usage(
        &self,
        tenant: &TenantId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, UsageCounts)>, StoreError> {
        let query = self
            .query()
            .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(tenant_pk(tenant)))
            .expression_attribute_values(":from", s(usage_sk(from)))
            .expression_attribute_values(":to", s(usage_sk(to)));
        let mut days = Vec::new();
        for item in Pages::new(query).all().await? {
            let day = match item.get("sk") {
                Some(AttributeValue::S(sk)) => {
                    sk.strip_prefix(USAGE_PREFIX).and_then(|d| d.parse().ok())
                }
                _ => None,
            }
            .ok_or_else(|| StoreError::Corrupt("a usage item's sort key".into()))?;
            days.push((day, usage_counts(&item)?));
        }
        Ok(days)
    }
}

/// A usage item's counters, read back.
fn usage_counts(item: &HashMap<String, AttributeValue>) -> Result<UsageCounts, StoreError> {
    let mut counts = UsageCounts::default();
    for (attribute, value) in item {
        let AttributeValue::N(number) = value else {
            continue;
        };
        let count: u64 = number
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("usage count `{attribute}`")))?;
        match attribute
            .strip_prefix("tok#")
            .and_then(|rest| rest.split_once('#'))
        {
            Some((kind, model)) => counts
                .tokens
                .entry(model.to_owned())
                .or_insert_with(TokenCounts::default)
                .set(kind, count),
            None => counts.set(attribute, count),
        }
    }
    Ok(counts)
}

/// Where a page of a tenant's contacts resumes: the index key of the cursor's head.
fn tenant_index_start(tenant: &TenantId, after: &ContactCursor) -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("tenant_pk".to_owned(), s(tenant_pk(tenant))),
        ("tenant_sk".to_owned(), n(after.last_activity)),
        (
            "pk".to_owned(),
            s(contact_pk(&ContactKey {
                tenant: tenant.clone(),
                contact: after.contact.clone(),
            })),
        ),
        ("sk".to_owned(), s(HEAD_SK)),
    ])
}

/// Up to `limit + 1` live heads from the tenant index (the one past `limit` says
/// there are more), and whether there are more.
async fn live_heads(
    pages: &mut Pages,
    limit: usize,
    now: i64,
) -> Result<(Vec<(ContactId, TenantIndexEntry)>, bool), StoreError> {
    let mut heads: Vec<(ContactId, TenantIndexEntry)> = Vec::new();
    let mut more = false;
    // Expired heads the TTL has not deleted yet are read past, so a page may
    // take more than one read to fill.
    while let Some(items) = pages.next(Some(limit + 1 - heads.len())).await? {
        for item in items {
            let Some(AttributeValue::S(pk)) = item.get("pk") else {
                continue;
            };
            let key = parse_contact_pk(pk)?;
            let entry: TenantIndexEntry = from_item(item)?;
            if entry.expires_at.is_none_or(|at| at > now) {
                heads.push((key.contact, entry));
            }
        }
        if heads.len() > limit {
            more = true;
            break;
        }
    }
    Ok((heads, more))
}

impl DynamoStore {
    /// How many live facts the contact has: one `Select=COUNT` query.
    async fn fact_count(&self, key: &ContactKey, now: i64) -> Result<usize, StoreError> {
        let mut total = 0;
        let query = self
            .query()
            .key_condition_expression("pk = :pk AND begins_with(sk, :facts)")
            .filter_expression("attribute_not_exists(expires_at) OR expires_at > :now")
            .expression_attribute_values(":pk", s(contact_pk(key)))
            .expression_attribute_values(":facts", s(FACT_PREFIX))
            .expression_attribute_values(":now", n(now))
            .select(Select::Count);
        let mut start = None;
        loop {
            let page = query
                .clone()
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|err| sdk_error("query", err))?;
            total += usize::try_from(page.count).unwrap_or(0);
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(total),
            }
        }
    }

    /// Writes the config as the next version, under `condition` (its values
    /// included); `None` when the condition failed.
    async fn write_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
        condition: Option<(&str, u64)>,
    ) -> Result<Option<u64>, StoreError> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(CONFIG_SK))
            .update_expression(
                "SET config = :config, version = if_not_exists(version, :one) + :one",
            )
            .expression_attribute_values(":config", s(ConfigItem::config_text(config)?))
            .expression_attribute_values(":one", n(1))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew);
        if let Some((expression, expected)) = condition {
            update = update
                .condition_expression(expression)
                .expression_attribute_values(":expected", n(expected));
        }
        let Some(output) = unless_condition_failed("update_item", update.send().await)? else {
            return Ok(None);
        };
        let version = output
            .attributes
            .as_ref()
            .and_then(|a| a.get("version"))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| StoreError::Corrupt("tenant config version".into()))?;
        Ok(Some(version))
    }
}

#[async_trait]
impl TenantStore for DynamoStore {
    async fn stored_config(&self, tenant: &TenantId) -> Result<Option<StoredConfig>, StoreError> {
        let Some(item) = self.get(tenant_pk(tenant), CONFIG_SK.to_owned()).await? else {
            return Ok(None);
        };
        let item: ConfigItem = from_item(item)?;
        Ok(Some(StoredConfig {
            text: item.config,
            version: item.version,
        }))
    }

    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<(), StoreError> {
        self.write_config(tenant, config, None).await?;
        self.register_tenant(tenant).await
    }

    async fn replace_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
        expected: u64,
    ) -> Result<Option<u64>, StoreError> {
        // An item from before versions counts as version 1 (`if_not_exists` then
        // writes 2).
        let condition = match expected {
            0 => None,
            1 => Some(
                "attribute_exists(pk) AND (attribute_not_exists(version) OR version = :expected)",
            ),
            _ => Some("version = :expected"),
        };
        let written = match condition {
            None => self.write_config_absent(tenant, config).await?,
            Some(condition) => {
                self.write_config(tenant, config, Some((condition, expected)))
                    .await?
            }
        };
        if written.is_some() {
            self.register_tenant(tenant).await?;
        }
        Ok(written)
    }

    async fn tenant_policy(&self, tenant: &TenantId) -> Result<Option<TenantPolicy>, StoreError> {
        self.read_policy(tenant).await
    }
}

impl DynamoStore {
    /// The first version of a config, only while none is stored.
    async fn write_config_absent(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<Option<u64>, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(CONFIG_SK))
            .update_expression("SET config = :config, version = :one")
            .condition_expression("attribute_not_exists(pk)")
            .expression_attribute_values(":config", s(ConfigItem::config_text(config)?))
            .expression_attribute_values(":one", n(1));
        Ok(unless_condition_failed("update_item", update.send().await)?.map(|_| 1))
    }
}
