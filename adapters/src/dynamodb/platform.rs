//! The platform's port on DynamoDB: a tenant's policy item (`T#{tenant}` /
//! `POLICY`, beside its `CONFIG`, versioned the same way), and the platform's list
//! of tenants (`PLATFORM` / `TENANT#{tenant}`, one small item each), which a query
//! of one partition pages through in id order: nothing scans.
//!
//! A tenant is put on the list by every write of its config or its policy, and by
//! the first usage count of each day's counters (`add_usage` reads the counters'
//! old values back: none means the day's first). The list's partition takes a few
//! writes a tenant a day, far below its 1,000 a second.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use degrau::domain::TenantId;
use degrau::platform::{PolicyStore, StoredPolicy, TenantPage, TenantPolicy};
use degrau::store::StoreError;

use super::DynamoStore;
use super::error::{sdk_error, unless_condition_failed};
use super::items::{from_item, n, s};
use super::keys::{PLATFORM_PK, PLATFORM_TENANT_PREFIX, POLICY_SK, platform_tenant_sk, tenant_pk};
use super::queries::Pages;

/// A tenant's policy item as stored.
#[derive(serde::Deserialize)]
struct PolicyItem {
    policy: String,
    version: u64,
}

#[async_trait]
impl PolicyStore for DynamoStore {
    async fn stored_policy(&self, tenant: &TenantId) -> Result<Option<StoredPolicy>, StoreError> {
        let Some(item) = self.get(tenant_pk(tenant), POLICY_SK.to_owned()).await? else {
            return Ok(None);
        };
        let item: PolicyItem = from_item(item)?;
        Ok(Some(StoredPolicy {
            text: item.policy,
            version: item.version,
        }))
    }

    async fn replace_policy(
        &self,
        tenant: &TenantId,
        policy: &TenantPolicy,
        expected: u64,
    ) -> Result<Option<u64>, StoreError> {
        let text = serde_json::to_string(policy)
            .map_err(|err| StoreError::Other(format!("tenant policy: {err}")))?;
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(POLICY_SK))
            .update_expression("SET policy = :policy, version = :next")
            .expression_attribute_values(":policy", s(text))
            .expression_attribute_values(":next", n(expected + 1));
        update = match expected {
            0 => update.condition_expression("attribute_not_exists(pk)"),
            _ => update
                .condition_expression("version = :expected")
                .expression_attribute_values(":expected", n(expected)),
        };
        if unless_condition_failed("update_item", update.send().await)?.is_none() {
            return Ok(None);
        }
        self.register_tenant(tenant).await?;
        Ok(Some(expected + 1))
    }

    async fn tenants(
        &self,
        limit: usize,
        after: Option<&TenantId>,
    ) -> Result<TenantPage, StoreError> {
        // The partition holds only tenant entries, each after the bare prefix.
        let after = after.map_or_else(|| PLATFORM_TENANT_PREFIX.to_owned(), platform_tenant_sk);
        let query = self
            .query()
            .key_condition_expression("pk = :pk AND sk > :after")
            .expression_attribute_values(":pk", s(PLATFORM_PK))
            .expression_attribute_values(":after", s(after));
        let mut pages = Pages::new(query);
        let mut tenants = Vec::new();
        while tenants.len() <= limit {
            let Some(items) = pages.next(Some(limit + 1 - tenants.len())).await? else {
                break;
            };
            for item in items {
                let Some(AttributeValue::S(sk)) = item.get("sk") else {
                    continue;
                };
                let id = sk
                    .strip_prefix(PLATFORM_TENANT_PREFIX)
                    .and_then(|id| TenantId::parse(id).ok())
                    .ok_or_else(|| StoreError::Corrupt("a platform tenant entry".into()))?;
                tenants.push(id);
            }
        }
        let more = tenants.len() > limit;
        tenants.truncate(limit);
        let next = more.then(|| tenants.last().cloned()).flatten();
        Ok(TenantPage { tenants, next })
    }
}

impl DynamoStore {
    /// Puts the tenant on the platform's list (idempotent).
    pub(super) async fn register_tenant(&self, tenant: &TenantId) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(PLATFORM_PK))
            .item("sk", s(platform_tenant_sk(tenant)))
            .send()
            .await
            .map_err(|err| sdk_error("put_item", err))?;
        Ok(())
    }

    /// The tenant's policy item, read (the `TenantStore` side).
    pub(super) async fn read_policy(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<TenantPolicy>, StoreError> {
        self.stored_policy(tenant)
            .await?
            .map(|stored| stored.read().map_err(StoreError::InvalidConfig))
            .transpose()
    }
}
