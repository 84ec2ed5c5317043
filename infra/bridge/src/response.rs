//! Reading a function's answer the way Lambda reads a `ReportBatchItemFailures`
//! response (`{"batchItemFailures": [{"itemIdentifier": "<messageId>"}, ...]}`).
//!
//! The rules are the ones AWS documents for SQS event sources ("Success and
//! failure conditions" in the Lambda developer guide, `with-sqs`):
//!
//! - **complete success**: a null answer, an object without `batchItemFailures`
//!   (so `{}` and any other object, e.g. a forgotten `{"statusCode": 200}`), or a
//!   null or empty `batchItemFailures` list;
//! - **complete failure** (nothing deleted, the whole batch retried): an answer
//!   that cannot be a batch response (a string, a number, an array),
//!   `batchItemFailures` that is not a list, or an item whose `itemIdentifier` is
//!   missing (a bad key name), null, empty, not a string, or not the id of a
//!   message of this batch;
//! - otherwise the listed messages are retried and the others deleted.
//!
//! So "a wrongly shaped answer counts as success" holds only for answers without
//! a `batchItemFailures` key; a malformed list fails the whole batch.

use std::collections::HashSet;

use serde_json::Value;

/// The messages of a batch to leave in the queue, by message id: `Ok` with the
/// ids listed as failed (empty when the batch succeeded), or `Err` with the reason
/// the whole batch counts as failed. `batch` holds the ids of the messages sent.
pub fn items_to_retry(answer: &Value, batch: &[&str]) -> Result<HashSet<String>, String> {
    let failures = match answer {
        Value::Null => return Ok(HashSet::new()),
        Value::Object(fields) => match fields.get("batchItemFailures") {
            None | Some(Value::Null) => return Ok(HashSet::new()),
            Some(Value::Array(items)) => items,
            Some(_) => return Err("batchItemFailures is not a list".to_owned()),
        },
        _ => return Err("the answer is not a JSON object".to_owned()),
    };
    let mut ids = HashSet::new();
    for (index, item) in failures.iter().enumerate() {
        let id = match item.get("itemIdentifier") {
            Some(Value::String(id)) if !id.is_empty() => id,
            Some(Value::String(_)) => {
                return Err(format!("batchItemFailures[{index}]: empty itemIdentifier"));
            }
            Some(Value::Null) => {
                return Err(format!("batchItemFailures[{index}]: null itemIdentifier"));
            }
            Some(_) => {
                return Err(format!(
                    "batchItemFailures[{index}]: itemIdentifier is not a string"
                ));
            }
            None => {
                return Err(format!("batchItemFailures[{index}]: no itemIdentifier"));
            }
        };
        if !batch.contains(&id.as_str()) {
            return Err(format!(
                "batchItemFailures[{index}]: {id} is not a message of this batch"
            ));
        }
        ids.insert(id.clone());
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const BATCH: &[&str] = &["a", "b", "c"];

    fn retry(answer: Value) -> Result<Vec<String>, String> {
        items_to_retry(&answer, BATCH).map(|ids| {
            let mut ids: Vec<String> = ids.into_iter().collect();
            ids.sort();
            ids
        })
    }

    #[test]
    fn listed_messages_are_retried_and_the_rest_succeed() {
        let answer =
            json!({"batchItemFailures": [{"itemIdentifier": "b"}, {"itemIdentifier": "c"}]});
        assert_eq!(retry(answer).unwrap(), ["b", "c"]);
    }

    #[test]
    fn empty_or_missing_failure_lists_are_complete_successes() {
        for answer in [
            Value::Null,
            json!({}),
            json!({"batchItemFailures": null}),
            json!({"batchItemFailures": []}),
            json!({"statusCode": 200}),
        ] {
            assert_eq!(
                retry(answer.clone()).unwrap(),
                Vec::<String>::new(),
                "{answer}"
            );
        }
    }

    #[test]
    fn malformed_failure_lists_fail_the_whole_batch() {
        for answer in [
            json!("ok"),
            json!([{"itemIdentifier": "a"}]),
            json!({"batchItemFailures": "a"}),
            json!({"batchItemFailures": [{"itemIdentifier": ""}]}),
            json!({"batchItemFailures": [{"itemIdentifier": null}]}),
            json!({"batchItemFailures": [{"itemIdentifier": 7}]}),
            json!({"batchItemFailures": [{"itemIdentifer": "a"}]}),
            json!({"batchItemFailures": ["a"]}),
            json!({"batchItemFailures": [{"itemIdentifier": "z"}]}),
        ] {
            assert!(retry(answer.clone()).is_err(), "{answer}");
        }
    }
}
