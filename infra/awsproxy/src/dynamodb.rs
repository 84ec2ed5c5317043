//! What one DynamoDB call read and wrote, and the capacity units DynamoDB would
//! charge for it on demand, from the request and response bodies (DynamoDB JSON).
//!
//! | operation | items and bytes | units |
//! |---|---|---|
//! | `GetItem` | the item returned | ⌈size / 4 KB⌉ (min 1, also when nothing is found); ½ unless `ConsistentRead` |
//! | `BatchGetItem` | the items returned | per item, as `GetItem`, with its table's `ConsistentRead` |
//! | `Query`, `Scan` | the items returned | ⌈Σ sizes / 4 KB⌉ (min 1); ½ unless `ConsistentRead` |
//! | `TransactGetItems` | the items returned | per item ⌈size / 4 KB⌉ × 2 |
//! | `PutItem` | the item sent | ⌈size / 1 KB⌉ |
//! | `UpdateItem` | the item after the update (see below) | ⌈size / 1 KB⌉ |
//! | `DeleteItem` | the old item when `ReturnValues` = `ALL_OLD`, else the key | ⌈size / 1 KB⌉ |
//! | `BatchWriteItem` | per put its item, per delete its key | per item ⌈size / 1 KB⌉ |
//! | `TransactWriteItems` | per action as above; a `ConditionCheck` reads its key | per action ⌈size / 1 KB⌉ × 2 |
//!
//! Approximations, each a lower bound of what DynamoDB charges, flagged with
//! `estimated` in the [`Usage`]:
//! - An update is charged by the larger of the item before and after it. The proxy
//!   sizes the item *after* the update: from `Attributes` when the caller asked
//!   for `ALL_NEW`, else by reading the item back (a "shadow" `GetItem` sent
//!   upstream right after a successful update, not logged, not faulted; see
//!   [`crate::Config::shadow_reads`]). Without that read, the size is the request's
//!   key plus its `ExpressionAttributeValues`.
//! - A put that replaces an item is charged by the larger of the two; the proxy
//!   sees only the new one (the old one too when `ReturnValues` = `ALL_OLD`).
//! - A delete is sized by its key unless the old item is returned.
//! - Reads that a `FilterExpression` dropped, and attributes a
//!   `ProjectionExpression` left out, are charged by DynamoDB but not seen here.
//!
//! Failed calls read and write nothing. They cost nothing either, except writes
//! refused by their condition (`ConditionalCheckFailedException`, and
//! `TransactionCanceledException` for a transaction), which DynamoDB still
//! charges: they count the write units of what they tried to write.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::size::{item_size, read_units, write_units};

/// What one DynamoDB call read and wrote, and what it costs in capacity units.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Items returned.
    pub items_read: u64,
    /// Items put, updated or deleted (0 when the call failed).
    pub items_written: u64,
    /// Bytes of the items returned (DynamoDB's item-size rules).
    pub bytes_read: u64,
    /// Bytes of the items written.
    pub bytes_written: u64,
    /// Read capacity units, on-demand rules (transactions double).
    pub rcu: f64,
    /// Write capacity units, on-demand rules (transactions double).
    pub wcu: f64,
    /// True when some size is a lower-bound estimate (see the module docs).
    pub estimated: bool,
}

/// An item whose size after a successful write only a read can tell: the
/// `index` of the action (0 for `UpdateItem`), its table and key.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    /// The action's index in `TransactItems` (0 for `UpdateItem`).
    pub index: usize,
    /// The table.
    pub table: String,
    /// The item's key, in DynamoDB JSON.
    pub key: Value,
}

/// The updates of a request that no returned value sizes: read them back after
/// the call succeeded to know their size.
pub fn read_backs(operation: &str, request: &Value) -> Vec<ReadBack> {
    match operation {
        "UpdateItem" if !returns_all_new(request) => {
            update_read_back(0, request).into_iter().collect()
        }
        "TransactWriteItems" => transact_items(request)
            .iter()
            .enumerate()
            .filter_map(|(index, action)| update_read_back(index, action.get("Update")?))
            .collect(),
        _ => Vec::new(),
    }
}

fn update_read_back(index: usize, update: &Value) -> Option<ReadBack> {
    Some(ReadBack {
        index,
        table: update.get("TableName")?.as_str()?.to_owned(),
        key: update.get("Key")?.clone(),
    })
}

fn returns_all_new(request: &Value) -> bool {
    request.get("ReturnValues").and_then(Value::as_str) == Some("ALL_NEW")
}

/// The table a call is about: `TableName`, the first table of `RequestItems`, or
/// the first action's table of a transaction.
pub fn table_of(request: &Value) -> Option<String> {
    if let Some(name) = request.get("TableName").and_then(Value::as_str) {
        return Some(name.to_owned());
    }
    if let Some(name) = request
        .get("RequestItems")
        .and_then(Value::as_object)
        .and_then(|tables| tables.keys().next())
    {
        return Some(name.clone());
    }
    transact_items(request).iter().find_map(|action| {
        action
            .as_object()?
            .values()
            .find_map(|inner| inner.get("TableName")?.as_str().map(str::to_owned))
    })
}

fn transact_items(request: &Value) -> &[Value] {
    request
        .get("TransactItems")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// How a call ended, as far as accounting goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx: everything counts.
    Done,
    /// A write refused by its condition: charged, nothing written.
    ConditionFailed,
    /// Any other error: nothing counts.
    Failed,
}

impl Outcome {
    /// The outcome of a call answered with `status` and error type `error_type`
    /// (short form, e.g. `ConditionalCheckFailedException`).
    pub fn of(status: u16, error_type: Option<&str>) -> Outcome {
        if (200..300).contains(&status) {
            Outcome::Done
        } else if matches!(
            error_type,
            Some("ConditionalCheckFailedException" | "TransactionCanceledException")
        ) {
            Outcome::ConditionFailed
        } else {
            Outcome::Failed
        }
    }
}

/// The usage of one call. `read_back` gives the size read back for an action
/// index of [`read_backs`], if it was read.
///
/// One arm per operation degrau calls, each function below it with DynamoDB's own
/// sizing and rounding rule, in this order, so they can be checked against the
/// documentation together. Reads count only when done; a write refused by its
/// condition is charged its units but writes nothing.
pub fn account(
    operation: &str,
    request: &Value,
    response: &Value,
    outcome: Outcome,
    read_back: &dyn Fn(usize) -> Option<u64>,
) -> Usage {
    if outcome == Outcome::Failed {
        return Usage::default();
    }
    let done = outcome == Outcome::Done;
    match operation {
        "GetItem" if done => get_item(request, response),
        "BatchGetItem" if done => batch_get_item(request, response),
        "Query" | "Scan" if done => query(request, response),
        "TransactGetItems" if done => transact_get_items(response),
        "PutItem" => put_item(request, response, done),
        "UpdateItem" => update_item(request, response, done, read_back),
        "DeleteItem" => delete_item(request, response, done),
        "BatchWriteItem" => batch_write_item(request, done),
        "TransactWriteItems" => transact_write_items(request, done, read_back),
        _ => Usage::default(),
    }
}

/// GetItem: the item found, strongly or eventually consistent.
fn get_item(request: &Value, response: &Value) -> Usage {
    let mut usage = Usage::default();
    let item = response.get("Item");
    let size = item.map_or(0, item_size);
    usage.items_read = u64::from(item.is_some());
    usage.bytes_read = size;
    usage.rcu = read_units(size, consistent(request));
    usage
}

/// BatchGetItem: each item found, rounded on its own, each table consistent or not.
fn batch_get_item(request: &Value, response: &Value) -> Usage {
    let mut usage = Usage::default();
    let tables = response.get("Responses").and_then(Value::as_object);
    for (table, items) in tables.into_iter().flatten() {
        let consistent = request
            .get("RequestItems")
            .and_then(|r| r.get(table))
            .is_some_and(consistent);
        for item in items.as_array().into_iter().flatten() {
            let size = item_size(item);
            usage.items_read += 1;
            usage.bytes_read += size;
            usage.rcu += read_units(size, consistent);
        }
    }
    usage
}

/// Query and Scan: the items returned, their sizes summed before rounding.
fn query(request: &Value, response: &Value) -> Usage {
    let mut usage = Usage::default();
    let items = response.get("Items").and_then(Value::as_array);
    let sizes: u64 = items.into_iter().flatten().map(item_size).sum();
    usage.items_read = items.map_or(0, |i| i.len() as u64);
    usage.bytes_read = sizes;
    usage.rcu = read_units(sizes, consistent(request));
    // Filtered-out or projected-away bytes are charged but unseen.
    let scanned = response.get("ScannedCount").and_then(Value::as_u64);
    usage.estimated = scanned.is_some_and(|s| s > usage.items_read)
        || request.get("ProjectionExpression").is_some()
        || request.get("Select").and_then(Value::as_str) == Some("COUNT");
    usage
}

/// TransactGetItems: each item found, strongly consistent, at twice the units.
fn transact_get_items(response: &Value) -> Usage {
    let mut usage = Usage::default();
    for entry in response
        .get("Responses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let item = entry.get("Item");
        let size = item.map_or(0, item_size);
        usage.items_read += u64::from(item.is_some());
        usage.bytes_read += size;
        usage.rcu += 2.0 * read_units(size, true);
    }
    usage
}

/// PutItem: the larger of the new item and the one it replaced (when returned).
fn put_item(request: &Value, response: &Value, done: bool) -> Usage {
    let mut usage = Usage::default();
    let mut size = request.get("Item").map_or(0, item_size);
    if let Some(old) = response.get("Attributes") {
        size = size.max(item_size(old));
    }
    usage.wcu = write_units(size);
    if done {
        usage.items_written = 1;
        usage.bytes_written = request.get("Item").map_or(0, item_size);
    }
    usage
}

/// UpdateItem: the item after the update, returned or read back; else estimated
/// from the request.
fn update_item(
    request: &Value,
    response: &Value,
    done: bool,
    read_back: &dyn Fn(usize) -> Option<u64>,
) -> Usage {
    let mut usage = Usage::default();
    let (size, estimated) = match response.get("Attributes") {
        Some(new) if done && returns_all_new(request) => (item_size(new), false),
        _ => match read_back(0) {
            Some(size) if done => (size, false),
            _ => (update_estimate(request), true),
        },
    };
    usage.wcu = write_units(size);
    usage.estimated = estimated;
    if done {
        usage.items_written = 1;
        usage.bytes_written = size;
    }
    usage
}

/// DeleteItem: the item deleted when returned; else estimated from its key.
fn delete_item(request: &Value, response: &Value, done: bool) -> Usage {
    let mut usage = Usage::default();
    let (size, estimated) = match response.get("Attributes") {
        Some(old) => (item_size(old), false),
        None => (request.get("Key").map_or(0, item_size), true),
    };
    usage.wcu = write_units(size);
    usage.estimated = estimated;
    if done {
        usage.items_written = 1;
        usage.bytes_written = size;
    }
    usage
}

/// BatchWriteItem: each put at its item's size, each delete estimated from its key.
fn batch_write_item(request: &Value, done: bool) -> Usage {
    let mut usage = Usage::default();
    let tables = request.get("RequestItems").and_then(Value::as_object);
    for request in tables
        .into_iter()
        .flatten()
        .flat_map(|(_, r)| r.as_array().map_or(&[] as &[Value], Vec::as_slice).iter())
    {
        let (size, estimated) = if let Some(put) = request.get("PutRequest") {
            (put.get("Item").map_or(0, item_size), false)
        } else if let Some(delete) = request.get("DeleteRequest") {
            (delete.get("Key").map_or(0, item_size), true)
        } else {
            continue;
        };
        usage.wcu += write_units(size);
        usage.estimated |= estimated;
        if done {
            usage.items_written += 1;
            usage.bytes_written += size;
        }
    }
    usage
}

/// TransactWriteItems: each action at twice the units; an update read back or
/// estimated, a delete or a condition check estimated from its key (a check
/// writes nothing).
fn transact_write_items(
    request: &Value,
    done: bool,
    read_back: &dyn Fn(usize) -> Option<u64>,
) -> Usage {
    let mut usage = Usage::default();
    for (index, action) in transact_items(request).iter().enumerate() {
        let (size, estimated, writes) = if let Some(put) = action.get("Put") {
            (put.get("Item").map_or(0, item_size), false, true)
        } else if let Some(update) = action.get("Update") {
            match read_back(index) {
                Some(size) if done => (size, false, true),
                _ => (update_estimate(update), true, true),
            }
        } else if let Some(delete) = action.get("Delete") {
            (delete.get("Key").map_or(0, item_size), true, true)
        } else if let Some(check) = action.get("ConditionCheck") {
            (check.get("Key").map_or(0, item_size), true, false)
        } else {
            continue;
        };
        usage.wcu += 2.0 * write_units(size);
        usage.estimated |= estimated;
        if done && writes {
            usage.items_written += 1;
            usage.bytes_written += size;
        }
    }
    usage
}

/// `ConsistentRead: true` in a request (or a table's part of a batch).
fn consistent(request: &Value) -> bool {
    request.get("ConsistentRead").and_then(Value::as_bool) == Some(true)
}

/// The size an update request shows: its key plus its expression values (a lower
/// bound of the item after the update).
fn update_estimate(update: &Value) -> u64 {
    let key = update.get("Key").map_or(0, item_size);
    let values: u64 = update
        .get("ExpressionAttributeValues")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(_, value)| crate::size::value_size(value))
        .sum();
    key + values
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn none(_: usize) -> Option<u64> {
        None
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_query_sums_its_items_before_rounding() {
        let item = json!({"pk": {"S": "a".repeat(98)}});
        let response = json!({"Items": [item, item, item], "Count": 3, "ScannedCount": 3});
        let usage = account(
            "Query",
            &json!({"ConsistentRead": true}),
            &response,
            Outcome::Done,
            &none,
        );
        assert_eq!(usage.items_read, 3);
        assert_eq!(usage.bytes_read, 300);
        assert!(close(usage.rcu, 1.0));
        let eventual = account("Query", &json!({}), &response, Outcome::Done, &none);
        assert!(close(eventual.rcu, 0.5));
        assert!(!usage.estimated);
    }

    #[test]
    fn a_transaction_costs_double_per_item_and_reads_back_updates() {
        let request = json!({"TransactItems": [
            {"Update": {"TableName": "t", "Key": {"pk": {"S": "k"}}, "UpdateExpression": "SET a = :a",
                        "ExpressionAttributeValues": {":a": {"N": "1"}}}},
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "k"}, "body": {"S": "x".repeat(1500)}}}},
            {"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": "z"}}}}
        ]});
        assert_eq!(read_backs("TransactWriteItems", &request).len(), 1);
        let usage = account(
            "TransactWriteItems",
            &request,
            &json!({}),
            Outcome::Done,
            &|i| (i == 0).then_some(3000),
        );
        assert_eq!(usage.items_written, 2);
        assert_eq!(usage.bytes_written, 3000 + 2 + 1 + 4 + 1500);
        // update 3 KB → 3 units, put 1.5 KB → 2 units, check → 1 unit; all × 2.
        assert!(close(usage.wcu, 12.0));
        assert!(usage.estimated, "the condition check is sized by its key");
        let cancelled = account(
            "TransactWriteItems",
            &request,
            &json!({}),
            Outcome::ConditionFailed,
            &none,
        );
        assert_eq!(cancelled.items_written, 0);
        assert!(close(cancelled.wcu, 2.0 * (1.0 + 2.0 + 1.0)));
    }

    #[test]
    fn failed_calls_cost_nothing() {
        let usage = account(
            "PutItem",
            &json!({"Item": {"pk": {"S": "k"}}}),
            &json!({}),
            Outcome::of(400, Some("ProvisionedThroughputExceededException")),
            &none,
        );
        assert_eq!(usage, Usage::default());
        assert_eq!(
            Outcome::of(400, Some("ConditionalCheckFailedException")),
            Outcome::ConditionFailed
        );
    }

    #[test]
    fn the_table_comes_from_any_request_shape() {
        assert_eq!(table_of(&json!({"TableName": "a"})).unwrap(), "a");
        assert_eq!(table_of(&json!({"RequestItems": {"b": []}})).unwrap(), "b");
        assert_eq!(
            table_of(&json!({"TransactItems": [{"Put": {"TableName": "c"}}]})).unwrap(),
            "c"
        );
    }
}
