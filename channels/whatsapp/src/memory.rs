//! The in-memory adapter of the [`WhatsAppStore`] port (feature `test-util`): the
//! records and turns live in the contact's partition of the core
//! [`MemoryStore`] it extends (so `erase_contact` takes them with the rest,
//! leaving their tombstones), the bindings beside the tenants' configs. The same
//! conditions as the DynamoDB adapter, checked under one mutex.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use degrau::domain::{Incarnation, TenantId};
use degrau::memory::{ChannelPartition, MemoryStore};
use degrau::store::{ContactKey, StoreError};

use crate::delivery::rank;
use crate::store::{
    DeliveryRecord, Handoff, InboundRecord, NewInbound, Outgoing, RecordState, Recorded, TurnId,
    TurnRecord, TurnStatus, WhatsAppStore, validate_turn,
};
use crate::{PhoneNumberId, WaMessageId};

/// The WhatsApp store in memory, one per test, over the core's in-memory store it
/// extends (and derefs to, so a test reaches both through one value).
#[derive(Debug)]
pub struct MemoryWhatsApp {
    core: Arc<MemoryStore>,
    records: Arc<Partition>,
}

/// The WhatsApp items, attached to the core store as a [`ChannelPartition`].
#[derive(Debug, Default)]
struct Partition(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// Each contact's WhatsApp items, by contact.
    contacts: HashMap<ContactKey, Records>,
    /// WhatsApp business numbers bound to tenants.
    bindings: HashMap<PhoneNumberId, TenantId>,
    /// Erased WhatsApp messages' tombstones and when each expires: outside every
    /// contact's partition, as in DynamoDB.
    tombstones: HashMap<String, i64>,
}

impl MemoryWhatsApp {
    /// An empty WhatsApp store over `core`: an erase of a contact there takes the
    /// contact's records here, and `core.item_count` counts them.
    pub fn on(core: Arc<MemoryStore>) -> Arc<Self> {
        let records = Arc::new(Partition::default());
        core.attach(records.clone());
        Arc::new(MemoryWhatsApp { core, records })
    }

    /// An empty WhatsApp store over a new, empty core store.
    pub fn new() -> Arc<Self> {
        Self::on(Arc::new(MemoryStore::new()))
    }

    /// The core store under it (for the ask service and the tenant store).
    pub fn core(&self) -> Arc<MemoryStore> {
        self.core.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.records.lock()
    }
}

impl std::ops::Deref for MemoryWhatsApp {
    type Target = MemoryStore;

    fn deref(&self) -> &MemoryStore {
        &self.core
    }
}

impl Partition {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ChannelPartition for Partition {
    fn erase(&self, key: &ContactKey, _now: i64) -> usize {
        let mut state = self.lock();
        let Some(records) = state.contacts.remove(key) else {
            return 0;
        };
        let tombstones: Vec<(String, i64)> = records.tombstones().collect();
        state.tombstones.extend(tombstones);
        records.item_count()
    }

    fn item_count(&self, key: &ContactKey) -> usize {
        self.lock().contacts.get(key).map_or(0, Records::item_count)
    }
}

/// A contact's WhatsApp items.
#[derive(Debug, Default)]
struct Records {
    /// The last arrival number given.
    arrivals: u64,
    inbound: HashMap<WaMessageId, InboundRecord>,
    turns: BTreeMap<String, TurnRecord>,
    /// A person has the conversation (an item of its own in DynamoDB).
    handoff: Option<Handoff>,
    /// The replies' delivery records, by sent message id.
    deliveries: HashMap<WaMessageId, DeliveryRecord>,
}

impl Records {
    fn item_count(&self) -> usize {
        // The arrival counter is an item of its own in DynamoDB.
        usize::from(self.arrivals > 0)
            + self.inbound.len()
            + self.turns.len()
            + usize::from(self.handoff.is_some())
            + self.deliveries.len()
    }

    /// What an erase of the contact leaves: each record's tombstone, kept as long
    /// as the record would have lived.
    fn tombstones(&self) -> impl Iterator<Item = (String, i64)> + '_ {
        self.inbound.values().filter_map(|record| {
            let message = &record.message;
            let tombstone = message.tombstone.as_ref()?;
            Some((tombstone.as_str().to_owned(), message.expires_at))
        })
    }
}

#[async_trait]
impl WhatsAppStore for MemoryWhatsApp {
    async fn binding(&self, phone: &PhoneNumberId) -> Result<Option<TenantId>, StoreError> {
        Ok(self.lock().bindings.get(phone).cloned())
    }

    async fn bind(&self, phone: &PhoneNumberId, tenant: &TenantId) -> Result<(), StoreError> {
        self.lock().bindings.insert(phone.clone(), tenant.clone());
        Ok(())
    }

    async fn record_inbound(
        &self,
        key: &ContactKey,
        message: &NewInbound,
    ) -> Result<Recorded, StoreError> {
        let mut state = self.lock();
        let erased = message.tombstone.as_ref().is_some_and(|tombstone| {
            state
                .tombstones
                .get(tombstone.as_str())
                .is_some_and(|expires| *expires > message.received_at)
        });
        if erased {
            return Ok(Recorded::Erased);
        }
        let records = &mut state.contacts.entry(key.clone()).or_default();
        // As in DynamoDB, the arrival counter moves before the conditional put.
        records.arrivals += 1;
        let arrival = records.arrivals;
        if let Some(existing) = records.inbound.get(&message.id) {
            return Ok(Recorded::Existing {
                enqueued: existing.enqueued,
                incarnation: existing.message.incarnation.clone(),
            });
        }
        records.inbound.insert(
            message.id.clone(),
            InboundRecord {
                message: message.clone(),
                arrival,
                state: RecordState::Pending,
                enqueued: false,
            },
        );
        Ok(Recorded::New)
    }

    async fn find_inbound(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<(ContactKey, WaMessageId)>, StoreError> {
        let state = self.lock();
        Ok(state
            .contacts
            .iter()
            .filter(|(key, _)| key.tenant == *tenant)
            .find_map(|(key, contact)| {
                contact
                    .inbound
                    .values()
                    .find(|r| r.message.incarnation.as_ref() == Some(incarnation))
                    .map(|r| (key.clone(), r.message.id.clone()))
            }))
    }

    async fn mark_enqueued(&self, key: &ContactKey, id: &WaMessageId) -> Result<bool, StoreError> {
        let mut state = self.lock();
        let record = state
            .contacts
            .get_mut(key)
            .and_then(|c| c.inbound.get_mut(id));
        Ok(record.map(|r| r.enqueued = true).is_some())
    }

    async fn inbound(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        now: i64,
    ) -> Result<Option<InboundRecord>, StoreError> {
        let state = self.lock();
        Ok(state
            .contacts
            .get(key)
            .and_then(|c| c.inbound.get(id))
            .filter(|r| r.message.expires_at > now)
            .cloned())
    }

    async fn unhandled(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<InboundRecord>, StoreError> {
        let state = self.lock();
        let mut found: Vec<InboundRecord> = state
            .contacts
            .get(key)
            .map(|c| {
                c.inbound
                    .values()
                    .filter(|r| r.message.expires_at > now)
                    .filter(|r| !matches!(r.state, RecordState::Handled(_)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        found.sort_by_key(|r| r.arrival);
        found.truncate(crate::store::MAX_UNHANDLED);
        Ok(found)
    }

    async fn take(&self, key: &ContactKey, turn: &TurnRecord) -> Result<bool, StoreError> {
        validate_turn(turn)?;
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return Ok(false);
        };
        let records = contact;
        let all_pending = turn.messages.iter().all(|id| {
            records
                .inbound
                .get(id)
                .is_some_and(|r| r.state == RecordState::Pending)
        });
        if !all_pending || records.turns.contains_key(turn.id.as_str()) {
            return Ok(false);
        }
        for id in &turn.messages {
            if let Some(record) = records.inbound.get_mut(id) {
                record.state = RecordState::Taken(turn.id.clone());
            }
        }
        let mut stored = turn.clone();
        stored.status = TurnStatus::Taken;
        records.turns.insert(turn.id.as_str().to_owned(), stored);
        Ok(true)
    }

    async fn turn(
        &self,
        key: &ContactKey,
        id: &TurnId,
        now: i64,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let state = self.lock();
        Ok(state
            .contacts
            .get(key)
            .and_then(|c| c.turns.get(id.as_str()))
            .filter(|t| t.expires_at > now)
            .cloned())
    }

    async fn settle(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        outgoing: &Outgoing,
    ) -> Result<bool, StoreError> {
        validate_turn(turn)?;
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return Ok(false);
        };
        let records = contact;
        let taken = RecordState::Taken(turn.id.clone());
        let holds = records
            .turns
            .get(turn.id.as_str())
            .is_some_and(|t| t.status == TurnStatus::Taken)
            && turn
                .messages
                .iter()
                .all(|id| records.inbound.get(id).is_some_and(|r| r.state == taken));
        if !holds {
            return Ok(false);
        }
        for id in &turn.messages {
            if let Some(record) = records.inbound.get_mut(id) {
                record.state = RecordState::Handled(turn.id.clone());
            }
        }
        if let Some(stored) = records.turns.get_mut(turn.id.as_str()) {
            stored.status = TurnStatus::Sending {
                outgoing: outgoing.clone(),
                sent: 0,
            };
        }
        Ok(true)
    }

    async fn handoff(&self, key: &ContactKey, now: i64) -> Result<Option<Handoff>, StoreError> {
        let state = self.lock();
        Ok(state
            .contacts
            .get(key)
            .and_then(|c| c.handoff)
            .filter(|handoff| handoff.until > now))
    }

    async fn set_handoff(
        &self,
        key: &ContactKey,
        handoff: Option<&Handoff>,
    ) -> Result<(), StoreError> {
        let mut state = self.lock();
        match handoff {
            Some(handoff) => {
                state.contacts.entry(key.clone()).or_default().handoff = Some(*handoff);
            }
            None => {
                if let Some(contact) = state.contacts.get_mut(key) {
                    contact.handoff = None;
                }
            }
        }
        Ok(())
    }

    async fn record_delivery(
        &self,
        key: &ContactKey,
        record: &DeliveryRecord,
    ) -> Result<(), StoreError> {
        let mut state = self.lock();
        let contact = state.contacts.entry(key.clone()).or_default();
        contact
            .deliveries
            .entry(record.id.clone())
            .or_insert_with(|| record.clone());
        Ok(())
    }

    async fn update_delivery(
        &self,
        key: &ContactKey,
        id: &WaMessageId,
        status: &str,
        error_code: Option<i64>,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut state = self.lock();
        let Some(record) = state
            .contacts
            .get_mut(key)
            .and_then(|c| c.deliveries.get_mut(id))
        else {
            return Ok(false);
        };
        if rank(status) <= rank(&record.status) {
            return Ok(false);
        }
        record.status = status.to_owned();
        record.error_code = error_code;
        record.updated_at = now;
        Ok(true)
    }

    async fn deliveries(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let state = self.lock();
        Ok(state
            .contacts
            .get(key)
            .map(|c| {
                c.deliveries
                    .values()
                    .filter(|d| d.expires_at > now)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn mark_sent(
        &self,
        key: &ContactKey,
        turn: &TurnId,
        sent: usize,
        done: bool,
    ) -> Result<bool, StoreError> {
        let mut state = self.lock();
        let Some(stored) = state
            .contacts
            .get_mut(key)
            .and_then(|c| c.turns.get_mut(turn.as_str()))
        else {
            return Ok(false);
        };
        let outgoing = match &stored.status {
            TurnStatus::Sending { outgoing, .. } | TurnStatus::Done { outgoing } => {
                outgoing.clone()
            }
            TurnStatus::Taken => return Ok(false),
        };
        stored.status = if done {
            TurnStatus::Done { outgoing }
        } else {
            TurnStatus::Sending { outgoing, sent }
        };
        Ok(true)
    }
}
