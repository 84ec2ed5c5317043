//! The DynamoDB side of the [`Quotas`] port: one item per tenant, kind and hour
//! in the tenant's partition (`T#{tenant}`, `QUOTA#{kind}#{hour start}`), counted
//! with one conditional `UpdateItem` (`ADD used :one` while `used < :limit`), so
//! two instances never spend the last unit twice. The item expires (`expires_at`)
//! after its hour. A round costs one small write more; a tenant's partition takes
//! about 1,000 writes a second, far above any hour's quota.
//!
//! The fair share's counters are the same conditional increment on
//! `RATE#{name}#{window}` (a tenant's in its partition, a contact's in the
//! contact's). A tenant's leases are one item (`LEASES`): a map of lease id to
//! expiry and a `version`; taking one reads it (strongly), counts the leases not
//! expired, and writes the map back without the expired ones and with the new one,
//! under `version = :read` (another taker or a release in between: read again, a
//! few times, then refuse as busy). A release removes its entry and moves the
//! version on. Only the tenant's own takers contend on its item.

use async_trait::async_trait;
use degrau::domain::TenantId;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use degrau::quota::{Counter, CounterScope, QuotaKind, Quotas};
use degrau::store::StoreError;

use super::DynamoStore;
use super::error::unless_condition_failed;
use super::items::{n, s};
use super::keys::{LEASES_SK, contact_pk, quota_sk, rate_sk, tenant_pk};

#[async_trait]
impl Quotas for DynamoStore {
    async fn try_spend(
        &self,
        tenant: &TenantId,
        kind: QuotaKind,
        period: i64,
        limit: u32,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(quota_sk(kind, period)))
            .update_expression("ADD used :one SET expires_at = :expires")
            .condition_expression("attribute_not_exists(used) OR used < :limit")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":limit", n(limit))
            .expression_attribute_values(":expires", n(expires_at))
            .send()
            .await;
        Ok(unless_condition_failed("update_item", result)?.is_some())
    }

    async fn try_count(
        &self,
        counter: &Counter,
        limit: u32,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        let pk = match &counter.scope {
            CounterScope::Tenant(tenant) => tenant_pk(tenant),
            CounterScope::Contact(key) => contact_pk(key),
        };
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(rate_sk(&counter.name, counter.window)))
            .update_expression("ADD used :one SET expires_at = :expires")
            .condition_expression("attribute_not_exists(used) OR used < :limit")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":limit", n(limit))
            .expression_attribute_values(":expires", n(expires_at))
            .send()
            .await;
        Ok(unless_condition_failed("update_item", result)?.is_some())
    }

    async fn acquire_lease(
        &self,
        tenant: &TenantId,
        lease: &str,
        limit: u32,
        now: i64,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        for attempt in 0..LEASE_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(super::error::backoff(attempt)).await;
            }
            let (version, held) = self.leases(tenant).await?;
            let mut live: HashMap<String, i64> =
                held.into_iter().filter(|(_, until)| *until > now).collect();
            if live.len() >= limit as usize {
                return Ok(false);
            }
            live.insert(lease.to_owned(), expires_at);
            if self.write_leases(tenant, version, &live).await? {
                return Ok(true);
            }
        }
        Err(StoreError::Unavailable(
            "the tenant's leases kept changing while one was taken".into(),
        ))
    }

    async fn release_lease(&self, tenant: &TenantId, lease: &str) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(LEASES_SK))
            .update_expression("REMOVE leases.#lease SET version = version + :one")
            .condition_expression("attribute_exists(version)")
            .expression_attribute_names("#lease", lease)
            .expression_attribute_values(":one", n(1))
            .send()
            .await;
        unless_condition_failed("update_item", result)?;
        Ok(())
    }
}

/// Reads of the lease item before a take gives up as busy.
const LEASE_ATTEMPTS: u32 = 6;

impl DynamoStore {
    /// The tenant's lease item: its version (0: none) and each lease's expiry.
    async fn leases(&self, tenant: &TenantId) -> Result<(u64, HashMap<String, i64>), StoreError> {
        let Some(item) = self.get(tenant_pk(tenant), LEASES_SK.to_owned()).await? else {
            return Ok((0, HashMap::new()));
        };
        let version = match item.get("version") {
            Some(AttributeValue::N(number)) => number.parse().unwrap_or(0),
            _ => 0,
        };
        let held = match item.get("leases") {
            Some(AttributeValue::M(map)) => map
                .iter()
                .filter_map(|(id, until)| Some((id.clone(), until.as_n().ok()?.parse().ok()?)))
                .collect(),
            _ => HashMap::new(),
        };
        Ok((version, held))
    }

    /// Writes the leases as the next version, only over `read` (0: none stored);
    /// false when another change landed first.
    async fn write_leases(
        &self,
        tenant: &TenantId,
        read: u64,
        leases: &HashMap<String, i64>,
    ) -> Result<bool, StoreError> {
        let map = leases
            .iter()
            .map(|(id, until)| (id.clone(), n(until)))
            .collect();
        let latest = leases.values().copied().max().unwrap_or(0);
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(LEASES_SK))
            .update_expression("SET leases = :leases, version = :next, expires_at = :expires")
            .expression_attribute_values(":leases", AttributeValue::M(map))
            .expression_attribute_values(":next", n(read + 1))
            // The item outlives its last lease by a day, then TTL takes it.
            .expression_attribute_values(":expires", n(latest + 86_400));
        let update = match read {
            0 => update.condition_expression("attribute_not_exists(version)"),
            _ => update
                .condition_expression("version = :read")
                .expression_attribute_values(":read", n(read)),
        };
        Ok(unless_condition_failed("update_item", update.send().await)?.is_some())
    }
}
