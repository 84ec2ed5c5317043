//! The DynamoDB side of the replies' delivery records (`WA#OUT#{sent message id}`
//! in the contact's partition, after its other items, so an erase takes them):
//! written once when the Graph API takes a reply, moved forward only by status
//! callbacks (a conditional update on the status's rank, kept beside it).

use crate::WaMessageId;
use crate::delivery::rank;
use crate::store::DeliveryRecord;
use degrau::store::{ContactKey, StoreError};
use serde::{Deserialize, Serialize};

use degrau_adapters::dynamodb::DynamoStore;
use degrau_adapters::dynamodb::channel::Pages;
use degrau_adapters::dynamodb::channel::unless_condition_failed;
use degrau_adapters::dynamodb::channel::{Item, from_item, n, s, to_item};
use degrau_adapters::dynamodb::keys::contact_pk;

/// The prefix of a delivery record's sort key.
pub const WA_OUT_PREFIX: &str = "WA#OUT#";

#[derive(Serialize, Deserialize)]
struct DeliveryItem {
    pk: String,
    sk: String,
    #[serde(flatten)]
    record: DeliveryRecord,
    rank: u8,
}

pub(super) async fn put_delivery(
    store: &DynamoStore,
    key: &ContactKey,
    record: &DeliveryRecord,
) -> Result<(), StoreError> {
    let item = DeliveryItem {
        pk: contact_pk(key),
        sk: format!("{WA_OUT_PREFIX}{}", record.id),
        rank: rank(&record.status),
        record: record.clone(),
    };
    let put = store
        .client()
        .put_item()
        .table_name(store.table())
        .set_item(Some(to_item(&item)?))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await;
    unless_condition_failed("put_item", put).map(|_| ())
}

pub(super) async fn move_delivery(
    store: &DynamoStore,
    key: &ContactKey,
    id: &WaMessageId,
    (status, error_code): (&str, Option<i64>),
    now: i64,
) -> Result<bool, StoreError> {
    let mut update = store
        .client()
        .update_item()
        .table_name(store.table())
        .key("pk", s(contact_pk(key)))
        .key("sk", s(format!("{WA_OUT_PREFIX}{id}")))
        .condition_expression("attribute_exists(pk) AND #rank < :rank")
        .expression_attribute_names("#rank", "rank")
        .expression_attribute_names("#status", "status")
        .expression_attribute_values(":rank", n(rank(status)))
        .expression_attribute_values(":status", s(status))
        .expression_attribute_values(":now", n(now));
    update = match error_code {
        Some(code) => update
            .update_expression(
                "SET #status = :status, #rank = :rank, updated_at = :now, error_code = :code",
            )
            .expression_attribute_values(":code", n(code)),
        None => update.update_expression(
            "SET #status = :status, #rank = :rank, updated_at = :now REMOVE error_code",
        ),
    };
    Ok(unless_condition_failed("update_item", update.send().await)?.is_some())
}

pub(super) async fn delivery_records(
    store: &DynamoStore,
    key: &ContactKey,
    now: i64,
) -> Result<Vec<DeliveryRecord>, StoreError> {
    let query = store
        .query()
        .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
        .filter_expression("expires_at > :now")
        .expression_attribute_values(":pk", s(contact_pk(key)))
        .expression_attribute_values(":prefix", s(WA_OUT_PREFIX))
        .expression_attribute_values(":now", n(now));
    Pages::new(query)
        .all()
        .await?
        .into_iter()
        .map(|item: Item| Ok(from_item::<DeliveryItem>(item)?.record))
        .collect()
}
