//! What a simulation asks of the in-memory store beyond the port's contract:
//! behaviours of DynamoDB that production meets and an example test never does.
//! All are off by default, so the store contract suite keeps both adapters equal
//! on everything else (`docs/DESIGN.md`, "The simulator").
//!
//! - **TTL.** Nothing is deleted by itself (reads only treat expired items as
//!   gone): [`MemoryStore::expired_items`] lists what DynamoDB's TTL may delete,
//!   and [`MemoryStore::ttl_delete`] deletes one, in whatever order and as late as
//!   the simulation chooses (the head before its messages, or after).
//! - **Index lag** ([`Semantics::index_lag`]). The two global secondary indexes
//!   (`find_contact`'s and `due_heads`') show each contact's head as it was when
//!   [`MemoryStore::sync_index`] last copied it: a job may arrive before the index
//!   shows its head, and an erased head may still show.
//! - **Torn reads** ([`Semantics::torn`]). `load_turn` reads the head and then the
//!   window (two Queries) with other work in between; a round's transaction lands
//!   in two halves, in any order, with other work (and, under call latency, a few
//!   milliseconds) in between, so a Query may see part of it. Meanwhile another
//!   write on the contact meets a `TransactionConflict`, tried again a few times
//!   after the DynamoDB adapter's backoff, then unavailable.
//!
//! - **Erase passes** ([`Semantics::erase_passes`]). An erase is the DynamoDB
//!   adapter's calls: its erase bucket dated, the head deleted, then passes of a
//!   listing and batch deletes, with other work in between (see `erase`).
//! - **Call latency** ([`Semantics::call_latency`]). The calls inside one port
//!   call (a turn's two Queries, an erase's calls) take time, so the clock moves
//!   between them.
//!
//! The interleaving points yield to the executor; a simulation that runs several
//! operations at once on one thread (joined futures) decides what runs in
//! between, from its seed (`fastrand`'s thread-local generator, which it seeds).

use std::future::Future;
use std::pin::Pin;

use super::{Contact, MemoryStore, RoundWrite, State};
use crate::domain::{Fact, FactKey, Head, Incarnation, StoredMessage};
use crate::store::{ContactKey, RoundCommit, SessionArchive, StoreError, SweepSlot};

/// Attempts at a write that meets a transaction in flight on its contact, as the
/// DynamoDB adapter tries a `TransactionConflict` again.
const CONFLICT_ATTEMPTS: u32 = 4;

/// DynamoDB behaviours the in-memory store models when asked (see the module
/// documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Semantics {
    /// The indexes lag behind the items until [`MemoryStore::sync_index`].
    pub index_lag: bool,
    /// Reads and round transactions interleave with other work.
    pub torn: bool,
    /// An erase runs as the DynamoDB adapter's calls (the bucket dated, the head
    /// deleted, then listings and batch deletes), with other work between them
    /// (see `erase`).
    pub erase_passes: bool,
    /// The calls inside one port call take DynamoDB's time (`MemoryStore::pause`):
    /// a turn's two Queries and an erase's calls are apart in time, not only in
    /// order, so the clock and the seconds an erase dated move between them.
    pub call_latency: bool,
}

/// A contact's head as an index shows it.
#[derive(Debug, Clone, Default)]
pub(super) struct Indexed {
    /// The incarnation (`by-incarnation`).
    pub(super) incarnation: Option<Incarnation>,
    /// The sweep entry (`by-activity`).
    pub(super) sweep: Option<SweepSlot>,
}

/// One item of a contact's partition, as TTL deletes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ItemRef {
    /// The head.
    Head,
    /// A fact.
    Fact(FactKey),
    /// A message.
    Message {
        /// Its session.
        session: u32,
        /// Its sequence number.
        seq: u64,
    },
    /// A closed session's archive.
    Archive(u32),
    /// An idempotency record, by key.
    Request(String),
}

/// Everything stored about a contact, expired or not, as a raw read sees it.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The head.
    pub head: Option<Head>,
    /// Its sweep index entry.
    pub sweep: Option<SweepSlot>,
    /// The facts, with their TTL.
    pub facts: Vec<(Fact, Option<i64>)>,
    /// The messages in key order, with their TTL.
    pub messages: Vec<(StoredMessage, Option<i64>)>,
    /// The closed sessions' archives.
    pub archives: Vec<SessionArchive>,
    /// How many idempotency records.
    pub requests: usize,
}

/// Lets other work run: a point where the simulation interleaves (one to three
/// yields, as its seed decides).
pub(super) async fn interleave() {
    for _ in 0..fastrand::usize(1..=3) {
        tokio::task::yield_now().await;
    }
}

/// A DynamoDB call's time: mostly a few milliseconds, now and then most of a
/// second, and now and then a throttled call the SDK tries again for seconds.
fn call_time() -> std::time::Duration {
    std::time::Duration::from_millis(match fastrand::u8(0..100) {
        0..=89 => fastrand::u64(1..25),
        90..=96 => fastrand::u64(100..1_200),
        _ => fastrand::u64(1_200..3_000),
    })
}

impl State {
    /// Every contact's head as the indexes show it: the live items, or under index
    /// lag what was last copied.
    pub(super) fn indexed(&self) -> Vec<(ContactKey, Indexed)> {
        if self.semantics.index_lag {
            return self
                .index
                .iter()
                .map(|(key, indexed)| (key.clone(), indexed.clone()))
                .collect();
        }
        self.contacts
            .iter()
            .filter_map(|(key, contact)| Some((key.clone(), live_entry(contact)?)))
            .collect()
    }
}

/// What the indexes would show of a contact now; `None` without a head.
fn live_entry(contact: &Contact) -> Option<Indexed> {
    let head = contact.head.as_ref()?;
    Some(Indexed {
        incarnation: head.incarnation.clone(),
        sweep: contact.sweep,
    })
}

impl MemoryStore {
    /// Turns the modelled behaviours on or off; turning index lag on starts the
    /// indexes from the items as they are.
    pub fn set_semantics(&self, semantics: Semantics) {
        let mut state = self.lock();
        if semantics.index_lag && !state.semantics.index_lag {
            let keys: Vec<ContactKey> = state.contacts.keys().cloned().collect();
            for key in keys {
                sync(&mut state, &key);
            }
        }
        state.semantics = semantics;
    }

    /// The behaviours turned on.
    pub fn semantics(&self) -> Semantics {
        self.lock().semantics
    }

    /// Between two DynamoDB calls of one port call: other work runs (under torn
    /// semantics or the erase's passes), and the call's time passes (under
    /// [`Semantics::call_latency`]).
    pub(super) async fn pause(&self) {
        let semantics = self.semantics();
        if semantics.torn || semantics.erase_passes {
            interleave().await;
        }
        if semantics.call_latency {
            tokio::time::sleep(call_time()).await;
        }
    }

    /// Between a torn transaction's two halves: other work runs, and (under
    /// [`Semantics::call_latency`]) the few milliseconds DynamoDB takes to apply
    /// a transaction pass, so a caller's process may die in between.
    pub(super) async fn transaction_time(&self) {
        interleave().await;
        if self.semantics().call_latency {
            tokio::time::sleep(std::time::Duration::from_millis(fastrand::u64(1..25))).await;
        }
    }

    /// Waits (a few milliseconds at most) until no round's transaction is
    /// half-landed: a simulation's checks read the store as a consistent read
    /// would, never inside a transaction (a late write's, say, landing while its
    /// caller's event ended).
    pub async fn transactions_landed(&self) {
        for _ in 0..1_000 {
            if !self
                .lock()
                .contacts
                .values()
                .any(|contact| contact.in_flight)
            {
                return;
            }
            interleave().await;
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// Index lag: the indexes catch up with the contact's head.
    pub fn sync_index(&self, key: &ContactKey) {
        sync(&mut self.lock(), key);
    }

    /// Index lag: the indexes catch up with every head.
    pub fn sync_indexes(&self) {
        let mut state = self.lock();
        let keys: Vec<ContactKey> = state
            .contacts
            .keys()
            .chain(state.index.keys())
            .cloned()
            .collect();
        for key in keys {
            sync(&mut state, &key);
        }
    }

    /// Every contact with an item, in key order.
    pub fn contact_keys(&self) -> Vec<ContactKey> {
        let mut keys: Vec<ContactKey> = self.lock().contacts.keys().cloned().collect();
        keys.sort_by(|a, b| (&a.tenant, &a.contact).cmp(&(&b.tenant, &b.contact)));
        keys
    }

    /// The items DynamoDB's TTL may delete at `now` (their `expires_at` passed), in
    /// key order.
    pub fn expired_items(&self, now: i64) -> Vec<(ContactKey, ItemRef)> {
        let state = self.lock();
        let mut found = Vec::new();
        for (key, contact) in &state.contacts {
            let expired = |at: Option<i64>| at.is_some_and(|at| at <= now);
            if contact.head.as_ref().is_some_and(|h| expired(h.expires_at)) {
                found.push((key.clone(), ItemRef::Head));
            }
            for (fact, at) in contact.facts.values() {
                if expired(*at) {
                    found.push((key.clone(), ItemRef::Fact(fact.key.clone())));
                }
            }
            for (&(session, seq), entry) in &contact.messages {
                if expired(entry.expires_at) {
                    found.push((key.clone(), ItemRef::Message { session, seq }));
                }
            }
            for archive in contact.archives.values() {
                if expired(Some(archive.expires_at)) {
                    found.push((key.clone(), ItemRef::Archive(archive.session)));
                }
            }
            for (name, request) in &contact.requests {
                if expired(Some(request.expires_at)) {
                    found.push((key.clone(), ItemRef::Request(name.clone())));
                }
            }
        }
        found.sort_by(|(a, x), (b, y)| (&a.tenant, &a.contact, x).cmp(&(&b.tenant, &b.contact, y)));
        found
    }

    /// Deletes one item as DynamoDB's TTL does: unconditionally (the head takes its
    /// index entries with it).
    pub fn ttl_delete(&self, key: &ContactKey, item: &ItemRef) {
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return;
        };
        match item {
            ItemRef::Head => {
                contact.head = None;
                contact.sweep = None;
            }
            ItemRef::Fact(fact) => {
                contact.facts.remove(fact.as_str());
            }
            ItemRef::Message { session, seq } => {
                contact.messages.remove(&(*session, *seq));
            }
            ItemRef::Archive(session) => {
                contact.archives.remove(session);
            }
            ItemRef::Request(name) => {
                contact.requests.remove(name);
            }
        }
        if contact.item_count() == 0 {
            state.contacts.remove(key);
        }
    }

    /// Everything stored about the contact, expired or not.
    pub fn snapshot(&self, key: &ContactKey) -> Snapshot {
        let state = self.lock();
        let Some(contact) = state.contacts.get(key) else {
            return Snapshot::default();
        };
        Snapshot {
            head: contact.head.clone(),
            sweep: contact.sweep,
            facts: contact.facts.values().cloned().collect(),
            messages: contact
                .messages
                .values()
                .map(|entry| (entry.message.clone(), entry.expires_at))
                .collect(),
            archives: contact.archives.values().cloned().collect(),
            requests: contact.requests.len(),
        }
    }

    /// Waits out a round's transaction in flight on the contact (torn semantics),
    /// a few times, as the DynamoDB adapter tries a `TransactionConflict` again;
    /// then the write is unavailable, and wrote nothing.
    pub(super) async fn settled(&self, key: &ContactKey) -> Result<(), StoreError> {
        for attempt in 1..=CONFLICT_ATTEMPTS {
            let in_flight = self
                .lock()
                .contacts
                .get(key)
                .is_some_and(|contact| contact.in_flight);
            if !in_flight {
                return Ok(());
            }
            interleave().await;
            if self.semantics().call_latency {
                tokio::time::sleep(crate::store::retry_backoff(attempt)).await;
            }
        }
        Err(StoreError::Unavailable(
            "transaction conflict: another transaction on the contact is in flight".into(),
        ))
    }

    /// Lands part of a round's transaction; `in_flight` tells whether the rest is
    /// still to come.
    pub(super) fn apply_half(
        &self,
        commit: &RoundCommit,
        writes: Vec<RoundWrite>,
        in_flight: bool,
    ) {
        let mut state = self.lock();
        let contact = state.contacts.entry(commit.key.clone()).or_default();
        for write in writes {
            write.apply(contact, commit);
        }
        contact.in_flight = in_flight;
    }
}

/// Copies the contact's head into the lagging indexes (or takes it out).
fn sync(state: &mut State, key: &ContactKey) {
    match state.contacts.get(key).and_then(live_entry) {
        Some(entry) => {
            state.index.insert(key.clone(), entry);
        }
        None => {
            state.index.remove(key);
        }
    }
}

/// Work a test runs at the start of the next `load_turn`, before its first read:
/// a round landing between a service's earlier read and this one.
#[derive(Default)]
pub(super) struct BeforeLoadTurn(
    std::sync::Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
);

impl std::fmt::Debug for BeforeLoadTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeLoadTurn")
    }
}

impl BeforeLoadTurn {
    /// The work set, taken (a `load_turn` the work makes itself finds none).
    pub(super) fn take(&self) -> Option<Pin<Box<dyn Future<Output = ()> + Send>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl MemoryStore {
    /// Runs `work` at the start of the next `load_turn`, before it reads anything
    /// (once): a round or an erase landing between a service's earlier read and
    /// its window read.
    pub fn before_next_load_turn(&self, work: impl Future<Output = ()> + Send + 'static) {
        *self
            .before_load_turn
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Box::pin(work));
    }
}
