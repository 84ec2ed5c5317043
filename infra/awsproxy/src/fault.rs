//! Injected faults: a FIFO queue of [`Fault`]s, each consumed by the next call
//! that matches it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One injected fault. Queued with `POST /proxy/faults` (a JSON list) or
/// [`crate::Running::faults`]; the first queued fault that matches a call is
/// applied to it and used up (after `times` matches).
///
/// What it does, in order: wait `delay_ms`; then
/// - with `status`: answer that error in the service's JSON error shape
///   (`{"__type": "com.amazonaws.dynamodb.v20120810#<type>", "message": ...}`,
///   content type `application/x-amz-json-1.0`) without forwarding the call;
/// - with `drop: "before"`: break the connection without forwarding the call;
/// - with `drop: "after"` (or `true`): forward the call (it takes effect
///   upstream), then send the status line, the headers and half of the body and
///   break the connection: the client cannot know the call succeeded;
/// - with none of them: forward the call after the delay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// `dynamodb`, `sqs` or `other`; any service when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The operation (`TransactWriteItems`, `Query`, `SendMessage`, ...); any
    /// operation of the service when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Only calls whose request body contains this text (a table, a key, a queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_contains: Option<String>,
    /// HTTP status of the error to answer (400–599).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The error's type, e.g. `ProvisionedThroughputExceededException`; the
    /// service's namespace is prefixed unless it holds a `#`. Defaults from the
    /// status: 500 `InternalServerError`, 503 `ServiceUnavailable`, 400
    /// `ValidationException`, else `InternalFailure`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The error's message; defaults to a text naming the injected fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Milliseconds to wait before anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Break the connection, before or after forwarding the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop: Option<DropPoint>,
    /// How many matching calls the fault hits before it is used up (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
}

/// When a `drop` fault breaks the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropPoint {
    /// Without forwarding the call.
    Before,
    /// After the upstream handled it, half-way through the response body.
    After,
}

impl Serialize for DropPoint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            DropPoint::Before => "before",
            DropPoint::After => "after",
        })
    }
}

impl<'de> Deserialize<'de> for DropPoint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Bool(true) => Ok(DropPoint::After),
            serde_json::Value::String(s) if s == "after" => Ok(DropPoint::After),
            serde_json::Value::String(s) if s == "before" => Ok(DropPoint::Before),
            other => Err(serde::de::Error::custom(format!(
                "drop is \"before\", \"after\" or true, not {other}"
            ))),
        }
    }
}

impl Fault {
    /// Why the fault cannot be queued, if it cannot.
    pub fn problem(&self) -> Option<String> {
        if let Some(status) = self.status
            && !(400..=599).contains(&status)
        {
            return Some(format!("status must be 400–599, got {status}"));
        }
        if self.status.is_some() && self.drop.is_some() {
            return Some("a fault sets `status` or `drop`, not both".into());
        }
        if self.status.is_none() && self.drop.is_none() && self.delay_ms.is_none() {
            return Some("a fault needs `status`, `drop` or `delay_ms`".into());
        }
        if self.times == Some(0) {
            return Some("`times` must be at least 1".into());
        }
        if let Some(service) = &self.service
            && !["dynamodb", "sqs", "other"].contains(&service.as_str())
        {
            return Some(format!(
                "service is dynamodb, sqs or other, not {service:?}"
            ));
        }
        None
    }

    /// True when the fault applies to this call.
    pub fn matches(&self, service: &str, operation: &str, body: &[u8]) -> bool {
        self.service.as_deref().is_none_or(|s| s == service)
            && self.operation.as_deref().is_none_or(|o| o == operation)
            && self.body_contains.as_deref().is_none_or(|needle| {
                !needle.is_empty()
                    && body
                        .windows(needle.len())
                        .any(|window| window == needle.as_bytes())
            })
    }

    /// The error type with the service's namespace, as `__type` carries it.
    pub fn qualified_type(&self, service: &str) -> String {
        let short = self.kind.clone().unwrap_or_else(|| {
            match self.status {
                Some(500) => "InternalServerError",
                Some(503) => "ServiceUnavailable",
                Some(400) => "ValidationException",
                _ => "InternalFailure",
            }
            .to_owned()
        });
        if short.contains('#') {
            return short;
        }
        let namespace = match service {
            "dynamodb" => "com.amazonaws.dynamodb.v20120810",
            "sqs" => "com.amazonaws.sqs",
            _ => "com.amazonaws.degrau.awsproxy",
        };
        format!("{namespace}#{short}")
    }

    /// The error's message.
    pub fn message_text(&self) -> String {
        self.message
            .clone()
            .unwrap_or_else(|| "injected by degrau-awsproxy".to_owned())
    }
}

/// The queue: takes the first fault matching a call, counting down `times`.
#[derive(Debug, Default)]
pub struct FaultQueue {
    pending: Vec<(Fault, u32)>,
}

impl FaultQueue {
    /// Appends faults, in order.
    pub fn push(&mut self, faults: impl IntoIterator<Item = Fault>) {
        for fault in faults {
            let times = fault.times.unwrap_or(1).max(1);
            self.pending.push((fault, times));
        }
    }

    /// The first fault matching the call, used once.
    pub fn take(&mut self, service: &str, operation: &str, body: &[u8]) -> Option<Fault> {
        let index = self
            .pending
            .iter()
            .position(|(fault, _)| fault.matches(service, operation, body))?;
        let (fault, left) = &mut self.pending[index];
        let fault = fault.clone();
        *left -= 1;
        if *left == 0 {
            self.pending.remove(index);
        }
        Some(fault)
    }

    /// The faults not used up yet, with `times` set to what is left.
    pub fn pending(&self) -> Vec<Fault> {
        self.pending
            .iter()
            .map(|(fault, left)| Fault {
                times: Some(*left),
                ..fault.clone()
            })
            .collect()
    }

    /// Forgets every pending fault.
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn faults_parse_from_the_documented_shapes() {
        let faults: Vec<Fault> = serde_json::from_value(json!([
            {"service": "dynamodb", "operation": "TransactWriteItems", "status": 400,
             "type": "ProvisionedThroughputExceededException", "message": "slow down"},
            {"service": "dynamodb", "operation": "Query", "status": 500, "type": "InternalServerError"},
            {"service": "dynamodb", "operation": "Query", "delay_ms": 3000},
            {"service": "sqs", "operation": "ReceiveMessage", "drop": "after"},
            {"drop": true, "times": 2},
            {"drop": "before", "body_contains": "T#acme"}
        ]))
        .unwrap();
        assert!(faults.iter().all(|f| f.problem().is_none()));
        assert_eq!(faults[4].drop, Some(DropPoint::After));
        assert_eq!(faults[5].drop, Some(DropPoint::Before));
        assert!(Fault::default().problem().is_some());
        assert!(serde_json::from_value::<Fault>(json!({"statuss": 500})).is_err());
        assert!(serde_json::from_value::<Fault>(json!({"drop": "later"})).is_err());
        assert_eq!(
            faults[0].qualified_type("dynamodb"),
            "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"
        );
    }

    #[test]
    fn the_queue_hands_out_the_first_match_and_counts_down() {
        let mut queue = FaultQueue::default();
        queue.push(
            serde_json::from_value::<Vec<Fault>>(json!([
                {"operation": "Query", "status": 500, "times": 2},
                {"operation": "PutItem", "status": 400, "body_contains": "tbl-b"}
            ]))
            .unwrap(),
        );
        assert!(
            queue
                .take("dynamodb", "PutItem", b"{\"TableName\":\"tbl-a\"}")
                .is_none()
        );
        assert!(queue.take("dynamodb", "GetItem", b"{}").is_none());
        assert!(queue.take("dynamodb", "Query", b"{}").is_some());
        assert_eq!(queue.pending()[0].times, Some(1));
        assert!(queue.take("dynamodb", "Query", b"{}").is_some());
        assert!(queue.take("dynamodb", "Query", b"{}").is_none());
        assert!(
            queue
                .take("dynamodb", "PutItem", b"{\"TableName\":\"tbl-b\"}")
                .is_some()
        );
        assert!(queue.pending().is_empty());
    }
}
