//! Events out: what a tenant's own systems are told about its contacts, when the
//! tenant declares an `events_webhook` (`docs/events.md`). The producers (the
//! operator's fact routes, the erase route, the handoff routes; the compactor's
//! extractions and recall index; the WhatsApp webhook's failed statuses and the
//! worker's handoffs) call [`publish`] *after* their change is committed, never
//! before, each event built by [`occurrences`]; the [`EventsOut`] port puts
//! the event on a queue (the SQS FIFO adapter, crate `degrau-adapters`,
//! `events.rs`), and the `events-out` function delivers it, signed, from there:
//! never from the request path.
//!
//! An [`Occurrence`] names the contact by its id, as the core knows it; the
//! adapter replaces the id by the receiver's pseudonym before anything leaves the
//! function, so the queue, its dead-letter queue and the receiver see only the
//! pseudonym ([`Event`]). A tenant without an events webhook costs nothing: no
//! message, and without a queue configured ([`NoEvents`]) not even the read of the
//! tenant's config.
//!
//! Delivery is at least once: the receiver dedupes by [`Event::id`], which is the
//! same for the same change published twice (a retried request).

use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tracing::warn;

use crate::domain::{ContactId, TenantId};
use crate::metrics;
use crate::tenant::TenantStore;
use crate::tools::declared::Webhook;

/// What happened, as the `type` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// A fact was set or corrected: `data` `{"key", "value", "by"}`.
    #[serde(rename = "fact.set")]
    FactSet,
    /// A fact and its history were deleted: `data` `{"key"}`.
    #[serde(rename = "fact.deleted")]
    FactDeleted,
    /// A session closed: `data` `{"session", "summary"}`.
    #[serde(rename = "session.closed")]
    SessionClosed,
    /// Every item about the contact was erased: `data` `{}`; `contact` is the
    /// pseudonym, the last time the receiver sees it.
    #[serde(rename = "contact.erased")]
    ContactErased,
    /// A person took the conversation: `data` `{"by", "since", "until"}`.
    #[serde(rename = "handoff.started")]
    HandoffStarted,
    /// The conversation went back to the agent: `data` `{}`.
    #[serde(rename = "handoff.ended")]
    HandoffEnded,
    /// A reply could not be delivered: `data` `{"error_code"}`.
    #[serde(rename = "delivery.failed")]
    DeliveryFailed,
}

impl EventType {
    /// Every type, in the documentation's order.
    pub const ALL: [EventType; 7] = [
        EventType::FactSet,
        EventType::FactDeleted,
        EventType::SessionClosed,
        EventType::ContactErased,
        EventType::HandoffStarted,
        EventType::HandoffEnded,
        EventType::DeliveryFailed,
    ];

    /// The type's name on the wire (`fact.set`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::FactSet => "fact.set",
            EventType::FactDeleted => "fact.deleted",
            EventType::SessionClosed => "session.closed",
            EventType::ContactErased => "contact.erased",
            EventType::HandoffStarted => "handoff.started",
            EventType::HandoffEnded => "handoff.ended",
            EventType::DeliveryFailed => "delivery.failed",
        }
    }
}

/// Something that happened to a contact, as the core knows it (the contact by its
/// id): what a producer publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    /// The tenant.
    pub tenant: TenantId,
    /// The contact, by id: never sent as is.
    pub contact: ContactId,
    /// What happened.
    pub kind: EventType,
    /// When, in unix seconds (the change's own time).
    pub at: i64,
    /// The type's details (see [`EventType`]); never a phone number.
    pub data: Value,
}

/// Hex characters of an event's id.
pub const EVENT_ID_HEX_CHARS: usize = 32;

impl Occurrence {
    /// The idempotency id: hex SHA-256 of the tenant, the contact, the type, the
    /// time and the data, cut to [`EVENT_ID_HEX_CHARS`]. The same change published
    /// twice has the same id (the queue and the receiver drop the copy); the id
    /// does not reveal the contact.
    pub fn id(&self) -> String {
        let text = format!(
            "{}\n{}\n{}\n{}\n{}",
            self.tenant,
            self.contact.as_str(),
            self.kind.as_str(),
            self.at,
            self.data
        );
        let mut id = hex::encode(Sha256::digest(text.as_bytes()));
        id.truncate(EVENT_ID_HEX_CHARS);
        id
    }

    /// The event as sent, with the contact's `pseudonym` in place of its id.
    pub fn event(&self, pseudonym: String) -> Event {
        Event {
            id: self.id(),
            kind: self.kind,
            tenant: self.tenant.to_string(),
            contact: pseudonym,
            at: self.at,
            data: self.data.clone(),
        }
    }
}

/// The event as the receiver gets it (the body of the signed `POST`):
/// `{"id", "type", "tenant", "contact", "at", "data"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// The idempotency id (also the `Idempotency-Key` header): the same on every
    /// delivery of one event.
    pub id: String,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The tenant.
    pub tenant: String,
    /// The contact's pseudonym for this receiver (as webhook tools get it).
    pub contact: String,
    /// When it happened, unix seconds.
    pub at: i64,
    /// The type's details.
    pub data: Value,
}

/// One queue message: the event and where it goes (the tenant's events webhook
/// when it was published).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    /// The receiver.
    pub webhook: Webhook,
    /// The event.
    pub event: Event,
}

/// An event could not be queued (the change stands; the event is lost, counted).
#[derive(Debug, thiserror::Error)]
#[error("could not publish an event: {0}")]
pub struct PublishError(pub String);

/// Where events are published.
#[async_trait]
pub trait EventsOut: Send + Sync {
    /// Whether a queue is configured at all: without one, [`publish`] does not
    /// even read the tenant's config.
    fn enabled(&self) -> bool {
        true
    }

    /// Queues `occurrence` for `webhook`.
    async fn publish(&self, webhook: &Webhook, occurrence: &Occurrence)
    -> Result<(), PublishError>;
}

/// No queue configured (`EVENTS_QUEUE_URL` unset): nothing is published.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEvents;

#[async_trait]
impl EventsOut for NoEvents {
    fn enabled(&self) -> bool {
        false
    }

    async fn publish(&self, _: &Webhook, _: &Occurrence) -> Result<(), PublishError> {
        Ok(())
    }
}

/// Events kept in memory, in order (tests, the simulator).
#[derive(Debug, Default)]
pub struct MemoryEvents(Mutex<Vec<(Webhook, Occurrence)>>);

impl MemoryEvents {
    /// What was published, in order.
    pub fn published(&self) -> Vec<(Webhook, Occurrence)> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl EventsOut for MemoryEvents {
    async fn publish(
        &self,
        webhook: &Webhook,
        occurrence: &Occurrence,
    ) -> Result<(), PublishError> {
        self.0
            .lock()
            .map_err(|_| PublishError("poisoned".into()))?
            .push((webhook.clone(), occurrence.clone()));
        Ok(())
    }
}

/// Publishes `occurrence` when its tenant declares an events webhook; a change
/// already committed is never undone by its event, so a failure (the config
/// unreadable, the queue unreachable) is logged and counted (`EventsNotPublished`),
/// not returned.
pub async fn publish(tenants: &dyn TenantStore, out: &dyn EventsOut, occurrence: Occurrence) {
    if !out.enabled() {
        return;
    }
    let kind = occurrence.kind.as_str();
    let webhook = match tenants.tenant_config(&occurrence.tenant).await {
        Ok(config) => config.and_then(|c| c.events_webhook),
        Err(error) => {
            warn!(event = kind, error = %error, "the tenant's config did not read; event not published");
            not_published(kind);
            return;
        }
    };
    let Some(webhook) = webhook else { return };
    if let Err(error) = out.publish(webhook.webhook(), &occurrence).await {
        warn!(event = kind, error = %error, "event not published");
        not_published(kind);
    }
}

/// Counts an event not published (`EventsNotPublished` by `Type`), for a
/// producer that failed before it could call [`publish`].
pub fn not_published(kind: &'static str) {
    metrics::Event::new("events")
        .dimension("Type", kind)
        .rollup()
        .count("EventsNotPublished", 1)
        .emit();
}

pub mod occurrences;

#[cfg(test)]
mod tests;
