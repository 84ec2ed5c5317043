//! The in-memory adapter of the [`Store`](crate::store::Store), [`TenantStore`](crate::tenant::TenantStore)
//! and `PolicyStore` ports (feature `test-util`), for unit tests, the simulator and
//! local experiments: the same conditions as the DynamoDB adapter, checked under
//! one mutex so a commit is all or nothing. The mutex is never held across an
//! `.await` (no method here awaits). The checks on a step's and a fact batch's shape
//! live in the port module, shared with the DynamoDB adapter.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::domain::{Fact, FactKey, Head, StoredMessage, TenantId};
use crate::metering::UsageCounts;
use crate::plan::window::after_last_gap;
use crate::store::{ContactKey, FactRemoval, FactWrite, SessionArchive, StoreError, SweepSlot};
use crate::tenant::StoredConfig;
use round::RoundWrite;

mod channel;
mod config;
mod erase;
mod jobs;
mod operator;
mod platform;
mod recall;
mod records;
mod round;
pub mod sim;
mod sweep;

pub use channel::ChannelPartition;
use channel::Channels;
pub use sim::{ItemRef, Semantics, Snapshot};

/// How long an idempotency record lives, in seconds (as in DynamoDB's TTL).
const REQUEST_TTL_SECONDS: i64 = 24 * 60 * 60;

/// Everything in one process's memory; cheap to create, one per test.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    /// A test's work before the next `load_turn` (see `sim`).
    before_load_turn: sim::BeforeLoadTurn,
    /// The channels' in-memory stores whose items live in a contact's partition
    /// (see [`ChannelPartition`]).
    channels: Channels,
}

#[derive(Debug, Default)]
struct State {
    contacts: HashMap<ContactKey, Contact>,
    tenants: HashMap<TenantId, StoredConfig>,
    /// DynamoDB's behaviours a simulation turns on (see `sim`); all off by default.
    semantics: Semantics,
    /// The two indexes as they show each contact's head while `index_lag` is on
    /// (see `sim`): copied from the live items by `sync_index`.
    index: HashMap<ContactKey, sim::Indexed>,
    /// The tenants' usage counts, by tenant and day.
    usage: BTreeMap<(TenantId, i64), UsageCounts>,
    /// The platform's policy items, by tenant (see `platform`).
    policies: HashMap<TenantId, crate::platform::StoredPolicy>,
    /// Each tenant's last erase by bucket (`T#{tenant}`, `ERASED#{bucket}`): a new
    /// head's round that began at or before it is refused (see
    /// [`RecordStore::erase_contact`](crate::store::RecordStore::erase_contact)).
    last_erase: HashMap<(TenantId, u8), i64>,
}

/// The items of one contact's partition.
#[derive(Debug, Default)]
struct Contact {
    head: Option<Head>,
    /// The head's sweep index entry while it is in the index: set by every round,
    /// moved or cleared by `settle_sweep`.
    sweep: Option<SweepSlot>,
    /// By key, each with its optional expiry (seconds since the epoch).
    facts: BTreeMap<String, (Fact, Option<i64>)>,
    /// By (session, seq): the sort key's order.
    messages: BTreeMap<(u32, u64), MessageEntry>,
    /// Closed sessions' summaries (`SUM#{session}`), by session.
    archives: BTreeMap<u32, SessionArchive>,
    /// Closed sessions' recall indexes and texts (`IDX#`, `TXT#`), by session.
    indexes: BTreeMap<u32, recall::Indexed>,
    requests: HashMap<String, Request>,
    /// A round's transaction is landing in two halves (torn semantics, see `sim`):
    /// other writes on the contact meet a `TransactionConflict` meanwhile.
    in_flight: bool,
}

impl Contact {
    fn item_count(&self) -> usize {
        usize::from(self.head.is_some())
            + self.facts.len()
            + self.messages.len()
            + self.archives.len()
            + 2 * self.indexes.len()
            + self.requests.len()
    }
}

/// A stored message and its TTL (`None` for messages stored before rounds carried one).
#[derive(Debug, Clone)]
struct MessageEntry {
    message: StoredMessage,
    expires_at: Option<i64>,
}

impl MessageEntry {
    fn live_at(&self, now: i64) -> bool {
        self.expires_at.is_none_or(|expires| expires > now)
    }
}

#[derive(Debug, Clone)]
struct Request {
    completed: bool,
    payload_hash: String,
    lease_until: i64,
    response: Option<String>,
    expires_at: i64,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied commit: every
        // check runs before the first change.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Test and compactor helper: records a compaction step on the head (messages up
    /// to `summarized_until` folded into `summary`) and counts it in `steps`. Does
    /// nothing for a contact without a head.
    pub fn set_summarized_until(
        &self,
        key: &ContactKey,
        summarized_until: u64,
        summary: Option<String>,
    ) {
        let mut state = self.lock();
        if let Some(head) = state
            .contacts
            .get_mut(key)
            .and_then(|contact| contact.head.as_mut())
        {
            head.summarized_until = summarized_until;
            head.summary = summary;
            head.steps += 1;
        }
    }

    /// Test helper: stores (replaces) a fact, expiring at `expires_at` (seconds since
    /// the epoch) when given.
    pub fn put_fact(&self, key: &ContactKey, fact: Fact, expires_at: Option<i64>) {
        let mut state = self.lock();
        state
            .contacts
            .entry(key.clone())
            .or_default()
            .facts
            .insert(fact.key.as_str().to_owned(), (fact, expires_at));
    }

    /// Test helper: how many items the contact's partition holds (head, facts,
    /// messages, session archives, idempotency records), as a raw query would count
    /// them.
    pub fn item_count(&self, key: &ContactKey) -> usize {
        let own = self.lock().contacts.get(key).map_or(0, Contact::item_count);
        let channels: usize = self.channels.all().iter().map(|c| c.item_count(key)).sum();
        own + channels
    }

    /// Test helper: the TTL stored with a message (`None` when the message is absent
    /// or has none), as a raw read of its `expires_at` attribute would see it.
    pub fn message_expires_at(&self, key: &ContactKey, session: u32, seq: u64) -> Option<i64> {
        self.lock()
            .contacts
            .get(key)
            .and_then(|contact| contact.messages.get(&(session, seq)))
            .and_then(|entry| entry.expires_at)
    }

    /// Test helper: the head's sweep index entry as (bucket, `sweep_sk`), `None`
    /// when the head is not in the index, as a raw read of `sweep_pk`/`sweep_sk`
    /// would see it.
    pub fn sweep_entry(&self, key: &ContactKey) -> Option<(u8, i64)> {
        self.lock()
            .contacts
            .get(key)
            .filter(|contact| contact.head.is_some())
            .and_then(|contact| contact.sweep)
            .map(|slot| (slot.bucket, slot.due))
    }

    /// Test helper: deletes a message, as DynamoDB's TTL would once it expired.
    pub fn delete_message(&self, key: &ContactKey, session: u32, seq: u64) {
        if let Some(contact) = self.lock().contacts.get_mut(key) {
            contact.messages.remove(&(session, seq));
        }
    }

    /// Test helper: replaces a stored message's blocks, as a message an earlier
    /// version stored differently (an answer kept exactly as the model sent it).
    pub fn replace_content(
        &self,
        key: &ContactKey,
        session: u32,
        seq: u64,
        content: Vec<crate::domain::ContentBlock>,
    ) {
        if let Some(entry) = self
            .lock()
            .contacts
            .get_mut(key)
            .and_then(|contact| contact.messages.get_mut(&(session, seq)))
        {
            entry.message.content = content;
        }
    }

    /// Test helper: removes the head's incarnation, as on a head written before
    /// incarnations existed.
    pub fn forget_incarnation(&self, key: &ContactKey) {
        if let Some(head) = self
            .lock()
            .contacts
            .get_mut(key)
            .and_then(|contact| contact.head.as_mut())
        {
            head.incarnation = None;
        }
    }

    /// Test helper: a closed session's archive item as stored, expired or not.
    pub fn archive(&self, key: &ContactKey, session: u32) -> Option<SessionArchive> {
        self.lock()
            .contacts
            .get(key)
            .and_then(|contact| contact.archives.get(&session))
            .cloned()
    }
}

fn facts_at(contact: &Contact, now: i64) -> Vec<Fact> {
    contact
        .facts
        .values()
        .filter(|(_, expires_at)| expires_at.is_none_or(|expires| expires > now))
        .map(|(fact, _)| fact.clone())
        .collect()
}

/// The window of `head`'s session as a read now finds it, with each message's TTL:
/// as in the DynamoDB adapter, expired messages count as gone, and the window
/// starts after the last hole.
fn window_of(
    contact: Option<&Contact>,
    head: &Head,
    now: i64,
) -> (Vec<StoredMessage>, Vec<Option<i64>>) {
    // Bounded by the head's `last_seq`, as the DynamoDB adapter's Query: a round
    // landing after the head was read is not part of the window it describes.
    let Some(contact) = contact.filter(|_| head.last_seq > head.summarized_until) else {
        return (Vec::new(), Vec::new());
    };
    let live: Vec<&MessageEntry> = contact
        .messages
        .range((head.session, head.summarized_until + 1)..=(head.session, head.last_seq))
        .map(|(_, entry)| entry)
        .filter(|entry| entry.live_at(now))
        .collect();
    let messages: Vec<StoredMessage> = live.iter().map(|entry| entry.message.clone()).collect();
    let start = after_last_gap(&messages, head.summarized_until, head.last_seq);
    (
        messages[start..].to_vec(),
        live[start..].iter().map(|entry| entry.expires_at).collect(),
    )
}

/// A fact batch on `contact`, like a transaction: every write's and removal's
/// expectation holds, or nothing is written (a conflict). A fact past its TTL
/// counts as absent (DynamoDB may not have deleted it yet).
fn apply_fact_changes(
    contact: &mut Contact,
    writes: &[FactWrite],
    removals: &[FactRemoval],
) -> Result<(), StoreError> {
    let stored = |key: &FactKey, now: i64| {
        contact
            .facts
            .get(key.as_str())
            .filter(|(_, expires)| expires.is_none_or(|at| at > now))
            .map(|(fact, _)| fact)
    };
    let now = writes.first().map_or(0, |write| write.fact.updated_at);
    let expected = writes.iter().all(|write| {
        write
            .expect
            .holds(stored(&write.fact.key, write.fact.updated_at))
    }) && removals
        .iter()
        .all(|removal| removal.expect.holds(stored(&removal.key, now)));
    if !expected {
        return Err(StoreError::Conflict(
            "a fact changed since it was read".into(),
        ));
    }
    for write in writes {
        contact.facts.insert(
            write.fact.key.as_str().to_owned(),
            (write.fact.clone(), Some(write.expires_at)),
        );
    }
    for removal in removals {
        contact.facts.remove(removal.key.as_str());
    }
    Ok(())
}
