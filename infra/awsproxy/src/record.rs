//! The log: one [`Call`] per request the proxy received (control endpoints
//! excluded), and [`Summary`], their totals.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dynamodb::Usage;
use crate::fault::Fault;

/// Bytes of payload SQS bills as one request.
pub const SQS_BILLING_CHUNK_BYTES: u64 = 64 * 1024;

/// One call as the proxy saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Call {
    /// Order of arrival, from 0; never reused, not even after a reset.
    pub seq: u64,
    /// `dynamodb` (`X-Amz-Target: DynamoDB_20120810.*`), `sqs` (`AmazonSQS.*`)
    /// or `other`.
    pub service: String,
    /// The operation: the part of `X-Amz-Target` after the dot, else the
    /// `Action` of a query-protocol form, else the HTTP method and path.
    pub operation: String,
    /// The table (DynamoDB) or the queue's name (SQS), when the request names one.
    pub resource: Option<String>,
    /// HTTP status the client got (the fault's for an injected error; 502 when the
    /// upstream could not be reached; the upstream's for a `drop: after`, whose
    /// body was cut; 0 for a `drop: before`, which broke the connection first).
    pub status: u16,
    /// The error's short type (`ConditionalCheckFailedException`, ...), if any.
    pub error_type: Option<String>,
    /// The fault applied to this call, if any.
    pub fault: Option<Fault>,
    /// Wall time in the proxy, milliseconds: what the client waited (upstream
    /// latency, injected delays, the shadow read of an update).
    pub duration_ms: f64,
    /// Request body bytes.
    pub request_bytes: u64,
    /// Response body bytes.
    pub response_bytes: u64,
    /// DynamoDB: what it read and wrote, and its capacity units.
    #[serde(flatten)]
    pub usage: Usage,
    /// SQS: messages sent, received or deleted by this call (entries of a batch).
    pub messages: u64,
    /// SQS: requests billed for it (one per started 64 KB of payload).
    pub sqs_billed_requests: u64,
}

/// Totals over calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// Calls, all services.
    pub calls: u64,
    /// DynamoDB calls.
    pub dynamodb_calls: u64,
    /// SQS calls.
    pub sqs_calls: u64,
    /// SQS calls that moved at least one message (sends, non-empty receives,
    /// deletes): empty polls are excluded.
    pub sqs_message_calls: u64,
    /// Billed SQS requests of those calls.
    pub sqs_billed_requests: u64,
    /// SQS messages sent, received or deleted.
    pub sqs_messages: u64,
    /// Calls answered with a status ≥ 400 (injected ones included).
    pub errors: u64,
    /// Calls a fault was applied to.
    pub faulted: u64,
    /// DynamoDB items returned.
    pub items_read: u64,
    /// DynamoDB items written.
    pub items_written: u64,
    /// DynamoDB bytes returned.
    pub bytes_read: u64,
    /// DynamoDB bytes written.
    pub bytes_written: u64,
    /// Read capacity units.
    pub rcu: f64,
    /// Write capacity units.
    pub wcu: f64,
    /// True when a size behind these totals is a lower-bound estimate.
    pub estimated: bool,
    /// Wall time the clients waited on the proxy, summed, ms (upstream latency,
    /// injected delays, shadow reads).
    pub duration_ms: f64,
    /// The same for the DynamoDB calls only.
    pub dynamodb_duration_ms: f64,
    /// Calls per `service.operation`.
    pub operations: BTreeMap<String, u64>,
}

impl Summary {
    /// The totals of `calls`.
    pub fn of<'a>(calls: impl IntoIterator<Item = &'a Call>) -> Summary {
        let mut summary = Summary::default();
        for call in calls {
            summary.add(call);
        }
        summary
    }

    /// Adds one call.
    pub fn add(&mut self, call: &Call) {
        self.calls += 1;
        match call.service.as_str() {
            "dynamodb" => {
                self.dynamodb_calls += 1;
                self.dynamodb_duration_ms += call.duration_ms;
            }
            "sqs" => {
                self.sqs_calls += 1;
                if call.messages > 0 {
                    self.sqs_message_calls += 1;
                    self.sqs_billed_requests += call.sqs_billed_requests;
                }
                self.sqs_messages += call.messages;
            }
            _ => {}
        }
        self.errors += u64::from(call.status >= 400);
        self.faulted += u64::from(call.fault.is_some());
        self.items_read += call.usage.items_read;
        self.items_written += call.usage.items_written;
        self.bytes_read += call.usage.bytes_read;
        self.bytes_written += call.usage.bytes_written;
        self.rcu += call.usage.rcu;
        self.wcu += call.usage.wcu;
        self.estimated |= call.usage.estimated;
        self.duration_ms += call.duration_ms;
        *self
            .operations
            .entry(format!("{}.{}", call.service, call.operation))
            .or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_summary_adds_up_and_skips_empty_polls() {
        let calls = [
            Call {
                service: "dynamodb".into(),
                operation: "Query".into(),
                status: 200,
                usage: Usage {
                    items_read: 3,
                    bytes_read: 300,
                    rcu: 1.0,
                    ..Usage::default()
                },
                ..Call::default()
            },
            Call {
                service: "sqs".into(),
                operation: "ReceiveMessage".into(),
                status: 200,
                sqs_billed_requests: 1,
                ..Call::default()
            },
            Call {
                service: "sqs".into(),
                operation: "SendMessage".into(),
                status: 200,
                messages: 1,
                sqs_billed_requests: 1,
                ..Call::default()
            },
        ];
        let summary = Summary::of(&calls);
        assert_eq!(summary.calls, 3);
        assert_eq!(summary.sqs_calls, 2);
        assert_eq!(summary.sqs_message_calls, 1);
        assert_eq!(summary.sqs_billed_requests, 1);
        assert_eq!(summary.items_read, 3);
        assert_eq!(summary.operations["dynamodb.Query"], 1);
        let json = serde_json::to_value(&calls[0]).unwrap();
        assert_eq!(json["rcu"], 1.0, "usage is flattened into the call");
    }
}
