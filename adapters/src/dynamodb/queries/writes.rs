//! The single writes: a claim's conditional put, the head's update, and the batched
//! deletes (and tombstones) of an erase.

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{DeleteRequest, PutRequest, WriteRequest};
use degrau::domain::IdempotencyKey;
use degrau::store::{ContactKey, StoreError};

use crate::dynamodb::DynamoStore;
use crate::dynamodb::error::{backoff, sdk_error, unless_condition_failed};
use crate::dynamodb::items::{Item, RequestItem, RequestStatus, n, s, to_item};
use crate::dynamodb::keys::{HEAD_SK, contact_pk};

/// `BatchWriteItem` takes at most this many requests.
const BATCH_WRITE_CHUNK: usize = 25;
/// Attempts at writing a batch's unprocessed items before giving up.
const BATCH_WRITE_ATTEMPTS: u32 = 8;

impl DynamoStore {
    /// The conditional put that claims a key; `Ok(false)` when its condition failed.
    pub(in crate::dynamodb) async fn put_claim(
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
    pub(in crate::dynamodb) fn update_head(&self, key: &ContactKey) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(contact_pk(key)))
            .key("sk", s(HEAD_SK))
    }

    /// Deletes the items of `keys` (their `pk` and `sk`; any other attribute of a
    /// listing is left out), 25 a `BatchWriteItem`.
    pub(in crate::dynamodb) async fn delete_keys(&self, keys: Vec<Item>) -> Result<(), StoreError> {
        let requests = keys
            .into_iter()
            .map(|item| {
                let key = item
                    .into_iter()
                    .filter(|(name, _)| name == "pk" || name == "sk")
                    .collect();
                let delete = DeleteRequest::builder()
                    .set_key(Some(key))
                    .build()
                    .map_err(|err| StoreError::Other(format!("delete request: {err}")))?;
                Ok(WriteRequest::builder().delete_request(delete).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.write_batches(requests).await
    }

    /// Puts `items` (unconditionally), 25 a `BatchWriteItem`.
    pub(in crate::dynamodb) async fn put_items(&self, items: Vec<Item>) -> Result<(), StoreError> {
        let requests = items
            .into_iter()
            .map(|item| {
                let put = PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .map_err(|err| StoreError::Other(format!("put request: {err}")))?;
                Ok(WriteRequest::builder().put_request(put).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.write_batches(requests).await
    }

    /// Sends `requests` in batches of 25, retrying each batch's unprocessed items.
    async fn write_batches(&self, requests: Vec<WriteRequest>) -> Result<(), StoreError> {
        for chunk in requests.chunks(BATCH_WRITE_CHUNK) {
            let mut requests = chunk.to_vec();
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
