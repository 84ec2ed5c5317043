//! An SQS batch as [`degrau::fifo`] runs it, and back: the records its runner reads
//! ([`records`]) and the partial batch response naming the ones it reported
//! ([`failures`]). The compactor's, the WhatsApp worker's and events-out's handlers
//! all run their batches so.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use degrau::fifo::{Outcome, Record};

/// The batch's messages as the runner reads them, in order (see [`record`]).
pub fn records(batch: &SqsEvent) -> Vec<Record> {
    batch.records.iter().map(record).collect()
}

/// An SQS message as the runner reads it: a missing id, body or group is empty or
/// none, and a receive count that cannot be read is the first.
pub fn record(message: &SqsMessage) -> Record {
    Record {
        id: message.message_id.clone().unwrap_or_default(),
        group: message.attributes.get("MessageGroupId").cloned(),
        body: message.body.clone().unwrap_or_default(),
        receives: message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|count| count.parse().ok())
            .unwrap_or(1),
    }
}

/// The partial batch response naming the records the runner reported, in order; an
/// error when one of them has no `messageId` (never seen from SQS: the handler then
/// fails the whole batch, which comes back).
pub fn failures(outcome: &Outcome) -> Result<SqsBatchResponse, &'static str> {
    let mut response = SqsBatchResponse::default();
    for id in &outcome.reported {
        if id.is_empty() {
            return Err("a record to report has no messageId; failing the whole batch");
        }
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id.clone();
        response.batch_item_failures.push(failure);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn message(id: Option<&str>, attributes: &[(&str, &str)]) -> SqsMessage {
        let mut message = SqsMessage::default();
        message.message_id = id.map(str::to_owned);
        message.body = Some("{}".to_owned());
        message.attributes = attributes
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect::<HashMap<_, _>>();
        message
    }

    #[test]
    fn a_message_reads_as_a_record_with_sane_defaults() {
        let full = record(&message(
            Some("m-1"),
            &[("MessageGroupId", "g"), ("ApproximateReceiveCount", "3")],
        ));
        assert_eq!(
            (full.id.as_str(), full.group.as_deref(), full.receives),
            ("m-1", Some("g"), 3)
        );
        let bare = record(&message(None, &[("ApproximateReceiveCount", "many")]));
        assert_eq!((bare.id.as_str(), bare.group, bare.receives), ("", None, 1));
    }

    #[test]
    fn the_reported_records_are_named_in_order_and_a_nameless_one_fails_the_batch() {
        let mut outcome = Outcome {
            reported: vec!["b".into(), "a".into()],
            ..Outcome::default()
        };
        let named: Vec<String> = failures(&outcome)
            .unwrap()
            .batch_item_failures
            .into_iter()
            .map(|failure| failure.item_identifier)
            .collect();
        assert_eq!(named, ["b", "a"]);
        outcome.reported.push(String::new());
        assert!(failures(&outcome).is_err());
    }
}
