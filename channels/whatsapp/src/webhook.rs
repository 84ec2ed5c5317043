//! The webhook service: what the `whatsapp-webhook` function does with a delivery
//! whose signature it checked. It never runs the model: for each inbound message of
//! a bound number it writes the record (once per message id), enqueues it for the
//! worker and marks it enqueued, then answers. Meta's retries find the record and
//! enqueue again only a message that never was (an earlier attempt died between the
//! put and the send). Status callbacks move the replies' delivery records and are
//! counted by status, failures logged with their error codes only and published
//! to the tenant's events webhook (`delivery.failed`) when they fail a stored
//! reply; reactions and other events are counted and dropped.
//!
//! A message to a number bound to no tenant is counted (`UnknownNumber`) and
//! dropped: the delivery still answers 200, since a non-2xx is retried by Meta and
//! in the end disables the subscription. So is a message whose timestamp is older
//! than its tenant's records live (`MessagesTooOld`): its record, if it had one,
//! may be gone, and a replayed delivery must not make a new turn.
//!
//! Each record gets the tenant's record life ([`super::record_life_seconds`]) and
//! an incarnation, which its queue message names instead of the contact, and its
//! tombstone ([`super::keyed`]): a delivery replayed after its contact was erased
//! finds the tombstone and is dropped (`MessagesErased`), stored and answered never.

use std::collections::HashMap;
use std::sync::Arc;

use tracing::{info, warn};

use super::event::{Body, Delivery, Inbound};
use super::events::delivery_failed;
use super::inbox::{Inbox, QueuedMessage};
use super::keyed::ChannelKeys;
use super::store::{NewInbound, Recorded, WhatsAppStore};
use super::{MAX_CLOCK_SKEW_SECONDS, PhoneNumberId, record_life_seconds};
use degrau::domain::{Incarnation, TenantId};
use degrau::events::{self, EventType, EventsOut};
use degrau::jobs::EnqueueError;
use degrau::metrics::Event;
use degrau::plan::session::Clock;
use degrau::store::{ContactKey, StoreError};
use degrau::tenant::TenantStore;

/// The metrics' `Function` dimension.
pub const FUNCTION: &str = "whatsapp-webhook";

/// The webhook service and its ports.
#[derive(Clone)]
pub struct WebhookService {
    /// Bindings and records.
    pub store: Arc<dyn WhatsAppStore>,
    /// The worker's queue.
    pub inbox: Arc<dyn Inbox>,
    /// The tenants' configs (their transcript retention bounds the records').
    pub tenants: Arc<dyn TenantStore>,
    /// The clock (receive times).
    pub clock: Clock,
    /// The keyed names of the channel (each record's tombstone).
    pub keys: Arc<ChannelKeys>,
    /// Events out: a reply Meta reports `failed` (`delivery.failed`).
    pub events: Arc<dyn EventsOut>,
}

/// What a delivery came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accepted {
    /// New messages recorded and enqueued.
    pub recorded: usize,
    /// Redeliveries of recorded messages (enqueued again only when they never were).
    pub duplicates: usize,
    /// Messages to a number bound to no tenant, dropped.
    pub unknown_number: usize,
    /// Messages older than their tenant's records live, dropped.
    pub too_old: usize,
    /// Redeliveries of messages whose contact was erased since, dropped.
    pub erased: usize,
    /// Status callbacks counted.
    pub statuses: usize,
    /// Reactions and other events dropped, and messages refused alone.
    pub ignored: usize,
}

/// Why a delivery could not be accepted: nothing is lost, since Meta delivers it
/// again (the webhook answers 500) and the records already written are found.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue refused the message.
    #[error(transparent)]
    Enqueue(#[from] EnqueueError),
}

impl WebhookService {
    /// Records and enqueues a delivery's inbound messages, counts the rest.
    pub async fn accept(&self, delivery: &Delivery) -> Result<Accepted, WebhookError> {
        let mut accepted = Accepted {
            statuses: delivery.statuses.len(),
            ignored: delivery.ignored.len() + delivery.refused.len(),
            ..Accepted::default()
        };
        self.count_the_rest(delivery);
        let mut tenants: HashMap<PhoneNumberId, Option<TenantId>> = HashMap::new();
        let mut lives: HashMap<TenantId, i64> = HashMap::new();
        for message in &delivery.inbound {
            let Some(tenant) = self
                .tenant_of(&mut tenants, &message.phone_number_id)
                .await?
            else {
                accepted.unknown_number += 1;
                continue;
            };
            let life = self.life_of(&mut lives, &tenant).await?;
            let now = (self.clock)();
            if message.sent_at.is_some_and(|sent| {
                now.saturating_add(MAX_CLOCK_SKEW_SECONDS) >= sent.saturating_add(life)
            }) {
                accepted.too_old += 1;
                continue;
            }
            let key = ContactKey {
                tenant,
                contact: message.from.contact(),
            };
            self.record(&key, message, (now, life), &mut accepted)
                .await?;
        }
        self.follow_statuses(delivery).await?;
        report(&accepted);
        Ok(accepted)
    }

    /// The tenant `phone` is bound to (`None`: no one's), read once a delivery.
    async fn tenant_of(
        &self,
        tenants: &mut HashMap<PhoneNumberId, Option<TenantId>>,
        phone: &PhoneNumberId,
    ) -> Result<Option<TenantId>, StoreError> {
        if let Some(tenant) = tenants.get(phone) {
            return Ok(tenant.clone());
        }
        let tenant = self.store.binding(phone).await?;
        tenants.insert(phone.clone(), tenant.clone());
        Ok(tenant)
    }

    /// How long the tenant's records live, read once a delivery.
    async fn life_of(
        &self,
        lives: &mut HashMap<TenantId, i64>,
        tenant: &TenantId,
    ) -> Result<i64, StoreError> {
        if let Some(life) = lives.get(tenant) {
            return Ok(*life);
        }
        let config = self.tenants.tenant_config(tenant).await?;
        let life = record_life_seconds(config.as_ref());
        lives.insert(tenant.clone(), life);
        Ok(life)
    }

    /// Records one inbound message received at `now`, living `life` seconds, and
    /// enqueues it unless an earlier delivery did (or its contact was erased).
    async fn record(
        &self,
        key: &ContactKey,
        message: &Inbound,
        (now, life): (i64, i64),
        accepted: &mut Accepted,
    ) -> Result<(), WebhookError> {
        let record = NewInbound {
            id: message.id.clone(),
            incarnation: Some(Incarnation::random()),
            phone_number_id: message.phone_number_id.clone(),
            text: message.body.turn_text(),
            bare_note: message.body.is_bare_note(),
            by_business: message.by_business,
            audio: match &message.body {
                Body::Audio(audio) if !message.by_business => Some(audio.clone()),
                _ => None,
            },
            received_at: now,
            expires_at: now.saturating_add(life),
            tombstone: Some(self.keys.tombstone(&key.tenant, &message.id)),
        };
        let enqueue = match self.store.record_inbound(key, &record).await? {
            Recorded::New => {
                accepted.recorded += 1;
                record.incarnation
            }
            Recorded::Erased => {
                accepted.erased += 1;
                None
            }
            Recorded::Existing {
                enqueued,
                incarnation,
            } => {
                accepted.duplicates += 1;
                incarnation.filter(|_| !enqueued)
            }
        };
        if let Some(incarnation) = enqueue {
            let queued = QueuedMessage {
                tenant: key.tenant.clone(),
                record: incarnation,
                queued_at: now,
            };
            self.inbox.enqueue(key, &message.id, &queued).await?;
            if !self.store.mark_enqueued(key, &message.id).await? {
                info!("the record went (erased) before it was marked enqueued");
            }
        }
        Ok(())
    }

    /// Moves the delivery records the status callbacks name (a callback for a
    /// message degrau keeps no record of, or one already further along, changes
    /// nothing). A failed callback is counted by the caller either way.
    async fn follow_statuses(&self, delivery: &Delivery) -> Result<(), WebhookError> {
        let mut moved = 0u64;
        for status in &delivery.statuses {
            let (Some(id), Some(recipient)) = (&status.id, &status.recipient) else {
                continue;
            };
            if !matches!(status.status, "sent" | "delivered" | "read" | "failed") {
                continue;
            }
            let Some(tenant) = self.store.binding(&status.phone_number_id).await? else {
                continue;
            };
            let key = ContactKey {
                tenant,
                contact: recipient.contact(),
            };
            let code = status.error_codes.first().copied();
            let now = (self.clock)();
            if self
                .store
                .update_delivery(&key, id, status.status, code, now)
                .await?
            {
                moved += 1;
                if status.status == "failed" {
                    self.publish_failure(&key, id, now).await;
                }
            }
        }
        Event::new(FUNCTION)
            .count("DeliveriesUpdated", moved)
            .emit();
        Ok(())
    }

    /// Publishes `delivery.failed` for the reply `id` that just moved to `failed`
    /// (only then: Meta's redelivery of the callback moves nothing). Never the
    /// delivery's failure: a record that cannot be read is logged and counted.
    async fn publish_failure(&self, key: &ContactKey, id: &super::WaMessageId, now: i64) {
        if !self.events.enabled() {
            return;
        }
        let record = match self.store.deliveries(key, now).await {
            Ok(records) => records.into_iter().find(|record| &record.id == id),
            Err(error) => {
                warn!(%error, "the failed reply's record did not read; event not published");
                events::not_published(EventType::DeliveryFailed.as_str());
                return;
            }
        };
        if let Some(record) = record {
            let failed = delivery_failed(key, &record);
            events::publish(self.tenants.as_ref(), self.events.as_ref(), failed).await;
        }
    }

    /// Status callbacks by status (failures logged with their codes, nothing
    /// personal), and what is ignored or refused, by kind.
    fn count_the_rest(&self, delivery: &Delivery) {
        let mut by_status: HashMap<&str, u64> = HashMap::new();
        for status in &delivery.statuses {
            *by_status.entry(status.status).or_default() += 1;
            if status.status == "failed" {
                warn!(codes = ?status.error_codes, "a sent message failed");
            }
        }
        for (status, count) in by_status {
            Event::new(FUNCTION)
                .dimension("Status", status)
                .rollup()
                .count("StatusCallbacks", count)
                .emit();
        }
        let mut by_kind: HashMap<&str, u64> = HashMap::new();
        for kind in &delivery.ignored {
            *by_kind.entry(kind.as_str()).or_default() += 1;
        }
        for reason in &delivery.refused {
            *by_kind.entry(reason).or_default() += 1;
        }
        for (kind, count) in by_kind {
            Event::new(FUNCTION)
                .dimension("Kind", kind)
                .rollup()
                .count("EventsIgnored", count)
                .emit();
        }
    }
}

/// The delivery's counts, logged and emitted as metrics.
fn report(accepted: &Accepted) {
    info!(
        recorded = accepted.recorded,
        duplicates = accepted.duplicates,
        unknown_number = accepted.unknown_number,
        too_old = accepted.too_old,
        erased = accepted.erased,
        statuses = accepted.statuses,
        ignored = accepted.ignored,
        "delivery accepted"
    );
    let event = Event::new(FUNCTION)
        .count("MessagesRecorded", accepted.recorded as u64)
        .count("MessagesDuplicate", accepted.duplicates as u64)
        .count("UnknownNumber", accepted.unknown_number as u64)
        .count("MessagesTooOld", accepted.too_old as u64)
        .count("MessagesErased", accepted.erased as u64);
    event.emit();
}
