//! The events the WhatsApp functions publish ([`degrau::events`]): a reply that
//! Meta reports `failed` (the webhook), and a handoff the owner starts with an
//! echo or ends with the hand-back word (the worker), worded as the API's
//! handoff routes word theirs.

use serde_json::json;

use super::store::{DeliveryRecord, Handoff};
use degrau::events::occurrences::of;
use degrau::events::{EventType, Occurrence};
use degrau::store::ContactKey;

/// `delivery.failed`: the reply `record` (now `failed`) did not reach the
/// customer; `session` and `seq` name the reply as `GET .../messages` shows it.
pub fn delivery_failed(key: &ContactKey, record: &DeliveryRecord) -> Occurrence {
    let data = json!({
        "error_code": record.error_code,
        "session": record.session,
        "seq": record.seq,
    });
    of(key, EventType::DeliveryFailed, record.updated_at, data)
}

/// `handoff.started`: a person has the conversation until `handoff.until`.
pub fn handoff_started(key: &ContactKey, handoff: &Handoff) -> Occurrence {
    let data = json!({"by": handoff.by.as_str(), "since": handoff.since, "until": handoff.until});
    of(key, EventType::HandoffStarted, handoff.since, data)
}

/// `handoff.ended`: the agent has the conversation again, from `at`.
pub fn handoff_ended(key: &ContactKey, at: i64) -> Occurrence {
    of(key, EventType::HandoffEnded, at, json!({}))
}
