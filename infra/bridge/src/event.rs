//! The SQS event Lambda hands a function: one record per received message, with
//! the message's system attributes and message attributes, the queue's ARN and its
//! region. Built from `aws_lambda_events`' own types so the compactor deserializes
//! exactly what it will get in AWS.

use aws_lambda_events::encodings::Base64Data;
use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::{Message, MessageAttributeValue};

/// The region part of an ARN (`arn:aws:sqs:REGION:ACCOUNT:NAME`), if it has one.
pub fn region_of(arn: &str) -> Option<&str> {
    arn.split(':').nth(3).filter(|region| !region.is_empty())
}

/// The event for a batch received from the queue `queue_arn`, records in the
/// order SQS returned them.
pub fn sqs_event(messages: &[Message], queue_arn: &str) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = messages.iter().map(|m| record(m, queue_arn)).collect();
    event
}

fn record(message: &Message, queue_arn: &str) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = message.message_id().map(str::to_owned);
    record.receipt_handle = message.receipt_handle().map(str::to_owned);
    record.body = message.body().map(str::to_owned);
    record.md5_of_body = message.md5_of_body().map(str::to_owned);
    record.md5_of_message_attributes = message.md5_of_message_attributes().map(str::to_owned);
    record.attributes = message
        .attributes()
        .into_iter()
        .flatten()
        .map(|(name, value)| (name.as_str().to_owned(), value.clone()))
        .collect();
    record.message_attributes = message
        .message_attributes()
        .into_iter()
        .flatten()
        .map(|(name, value)| (name.clone(), attribute(value)))
        .collect();
    record.event_source = Some("aws:sqs".to_owned());
    record.event_source_arn = Some(queue_arn.to_owned());
    record.aws_region = region_of(queue_arn).map(str::to_owned);
    record
}

fn base64(bytes: &[u8]) -> Base64Data {
    // `Base64Data` is `#[non_exhaustive]`: fill a default one through `DerefMut`.
    let mut data = Base64Data::default();
    data.extend_from_slice(bytes);
    data
}

fn attribute(value: &MessageAttributeValue) -> SqsMessageAttribute {
    let mut attribute = SqsMessageAttribute::default();
    attribute.data_type = Some(value.data_type().to_owned());
    attribute.string_value = value.string_value().map(str::to_owned);
    attribute.binary_value = value.binary_value().map(|b| base64(b.as_ref()));
    attribute.string_list_values = value.string_list_values().to_vec();
    attribute.binary_list_values = value
        .binary_list_values()
        .iter()
        .map(|b| base64(b.as_ref()))
        .collect();
    attribute
}

#[cfg(test)]
mod tests {
    use aws_sdk_sqs::primitives::Blob;
    use aws_sdk_sqs::types::MessageSystemAttributeName;
    use serde_json::json;

    use super::*;

    const ARN: &str = "arn:aws:sqs:eu-west-1:123456789012:jobs.fifo";

    #[test]
    fn the_region_comes_from_the_queue_arn() {
        assert_eq!(region_of(ARN), Some("eu-west-1"));
        assert_eq!(region_of("not-an-arn"), None);
        assert_eq!(region_of("arn:aws:sqs::1:q"), None);
    }

    #[test]
    fn a_record_has_the_fields_and_names_lambda_uses() {
        let message = Message::builder()
            .message_id("m-1")
            .receipt_handle("rh-1")
            .body("{\"job\":1}")
            .md5_of_body("abc")
            .attributes(MessageSystemAttributeName::ApproximateReceiveCount, "1")
            .attributes(MessageSystemAttributeName::MessageGroupId, "g")
            .attributes(MessageSystemAttributeName::MessageDeduplicationId, "d")
            .attributes(MessageSystemAttributeName::SequenceNumber, "18")
            .message_attributes(
                "kind",
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value("step")
                    .build()
                    .unwrap(),
            )
            .message_attributes(
                "raw",
                MessageAttributeValue::builder()
                    .data_type("Binary")
                    .binary_value(Blob::new(b"1100".to_vec()))
                    .build()
                    .unwrap(),
            )
            .build();
        let event = serde_json::to_value(sqs_event(&[message], ARN)).unwrap();
        let record = &event["Records"][0];
        assert_eq!(event["Records"].as_array().unwrap().len(), 1);
        assert_eq!(record["messageId"], "m-1");
        assert_eq!(record["receiptHandle"], "rh-1");
        assert_eq!(record["body"], "{\"job\":1}");
        assert_eq!(record["md5OfBody"], "abc");
        assert_eq!(record["eventSource"], "aws:sqs");
        assert_eq!(record["eventSourceARN"], ARN);
        assert_eq!(record["awsRegion"], "eu-west-1");
        assert_eq!(
            record["attributes"],
            json!({
                "ApproximateReceiveCount": "1",
                "MessageGroupId": "g",
                "MessageDeduplicationId": "d",
                "SequenceNumber": "18"
            })
        );
        assert_eq!(record["messageAttributes"]["kind"]["stringValue"], "step");
        assert_eq!(record["messageAttributes"]["kind"]["dataType"], "String");
        assert_eq!(
            record["messageAttributes"]["raw"]["binaryValue"],
            "MTEwMA=="
        );
        // And the compactor's own type reads it back.
        let back: SqsEvent = serde_json::from_value(event).unwrap();
        assert_eq!(back.records[0].message_id.as_deref(), Some("m-1"));
    }

    #[test]
    fn no_attributes_serialize_as_empty_maps() {
        let message = Message::builder().message_id("m").body("b").build();
        let event = serde_json::to_value(sqs_event(&[message], ARN)).unwrap();
        assert_eq!(event["Records"][0]["attributes"], json!({}));
        assert_eq!(event["Records"][0]["messageAttributes"], json!({}));
    }
}
