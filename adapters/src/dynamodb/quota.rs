//! The DynamoDB side of the [`Quotas`] port: one item per tenant, kind and hour
//! in the tenant's partition (`T#{tenant}`, `QUOTA#{kind}#{hour start}`), counted
//! with one conditional `UpdateItem` (`ADD used :one` while `used < :limit`), so
//! two instances never spend the last unit twice. The item expires (`expires_at`)
//! after its hour. A round costs one small write more; a tenant's partition takes
//! about 1,000 writes a second, far above any hour's quota.

use async_trait::async_trait;
use degrau::domain::TenantId;
use degrau::quota::{QuotaKind, Quotas};
use degrau::store::StoreError;

use super::DynamoStore;
use super::error::unless_condition_failed;
use super::items::{n, s};
use super::keys::{quota_sk, tenant_pk};

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
}
