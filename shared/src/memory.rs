//! The in-memory adapter of the [`Store`](crate::store::Store), [`TenantStore`]
//! and `PolicyStore` ports (feature `test-util`), for unit tests, the simulator and
//! local experiments: the same conditions as the DynamoDB adapter, checked under
//! one mutex so a commit is all or nothing. The mutex is never held across an
//! `.await` (no method here awaits). The checks on a step's and a fact batch's shape
//! live in the port module, shared with the DynamoDB adapter.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::domain::{Fact, FactKey, Head, Incarnation, StoredMessage, TenantId};
use crate::metering::UsageCounts;
use crate::recall::SessionRecord;
use crate::session::unix_now;
use crate::store::{
    AppliedStep, ClosedSession, ContactKey, Cursor, DueHead, FactRemoval, FactWrite, JobStore,
    PendingChange, RecordStore, SessionArchive, SessionFilter, StoreError, SweepSettle, SweepSlot,
    SweepStore, TranscriptPage, validate_fact_changes, validate_step,
};
use crate::tenant::{StoredConfig, TenantConfig, TenantStore};
use crate::window::after_last_gap;
use round::RoundWrite;

mod channel;
mod operator;
mod platform;
mod recall;
mod round;
pub mod sim;

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
    /// [`RecordStore::erase_contact`]).
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

#[async_trait]
impl JobStore for MemoryStore {
    async fn find_contact(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<ContactKey>, StoreError> {
        // Several heads can show one incarnation while the index lags (an erase and
        // a new head not copied yet): the first in key order, as a Query would.
        let mut found: Vec<ContactKey> = self
            .lock()
            .indexed()
            .into_iter()
            .filter(|(key, indexed)| {
                key.tenant == *tenant && indexed.incarnation.as_ref() == Some(incarnation)
            })
            .map(|(key, _)| key)
            .collect();
        found.sort_by(|a, b| a.contact.cmp(&b.contact));
        Ok(found.into_iter().next())
    }

    async fn apply_step(&self, key: &ContactKey, step: &AppliedStep) -> Result<bool, StoreError> {
        validate_step(step)?;
        self.settled(key).await?;
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return Ok(false);
        };
        // The transaction's conditions, all checked before anything changes.
        let head_holds = contact.head.as_ref().is_some_and(|head| {
            head.incarnation.as_ref() == Some(&step.incarnation)
                && head.session == step.session
                && head.summarized_until == step.seen_summarized_until
                && step.last_seq.is_none_or(|seq| head.last_seq == seq)
        });
        let messages_exist = step
            .prune
            .iter()
            .all(|decision| contact.messages.contains_key(&(step.session, decision.seq)));
        if !head_holds || !messages_exist {
            return Ok(false);
        }
        if let Some(head) = contact.head.as_mut() {
            head.summary = Some(step.summary.clone());
            head.summarized_until = step.new_summarized_until;
            head.steps += 1;
        }
        for decision in &step.prune {
            if let Some(entry) = contact.messages.get_mut(&(step.session, decision.seq)) {
                entry.message.pruned = Some(decision.pruned.clone());
            }
        }
        Ok(true)
    }

    async fn load_closed_session(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<ClosedSession, StoreError> {
        let state = self.lock();
        let Some(contact) = state.contacts.get(key) else {
            return Ok(ClosedSession::default());
        };
        let (summary, summarized_until) = match contact.archives.get(&session) {
            // Past its retention the archive is gone, and so is every message of
            // the session (they expired no later): nothing to read.
            Some(archive) if archive.expires_at <= now => {
                return Ok(ClosedSession::default());
            }
            Some(archive) => (archive.summary.clone(), archive.summarized_until),
            None => (None, 0),
        };
        let messages = contact
            .messages
            .range((session, summarized_until.saturating_add(1))..=(session, u64::MAX))
            .map(|(_, entry)| entry)
            .filter(|entry| entry.live_at(now))
            .map(|entry| entry.message.clone())
            .collect();
        Ok(ClosedSession { summary, messages })
    }

    async fn save_facts(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        writes: &[FactWrite],
        removals: &[FactRemoval],
    ) -> Result<bool, StoreError> {
        validate_fact_changes(writes, removals)?;
        self.settled(key).await?;
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key).filter(|contact| {
            contact
                .head
                .as_ref()
                .is_some_and(|head| head.incarnation.as_ref() == Some(incarnation))
        }) else {
            return Ok(false);
        };
        apply_fact_changes(contact, writes, removals)?;
        Ok(true)
    }

    async fn facts_done(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
    ) -> Result<bool, StoreError> {
        self.settled(key).await?;
        let mut state = self.lock();
        let Some(head) = state
            .contacts
            .get_mut(key)
            .and_then(|contact| contact.head.as_mut())
            .filter(|head| {
                head.incarnation.as_ref() == Some(incarnation)
                    && head.facts_pending.is_some_and(|p| p.session == session)
            })
        else {
            return Ok(false);
        };
        head.facts_pending = None;
        Ok(true)
    }
}

#[async_trait]
impl SweepStore for MemoryStore {
    async fn due_heads(
        &self,
        bucket: u8,
        due_by: i64,
        limit: usize,
    ) -> Result<Vec<DueHead>, StoreError> {
        let mut found: Vec<DueHead> = self
            .lock()
            .indexed()
            .into_iter()
            .filter_map(|(key, indexed)| {
                let slot = indexed.sweep?;
                (slot.bucket == bucket && slot.due <= due_by)
                    .then_some(DueHead { key, due: slot.due })
            })
            .collect();
        // The index's order: by `sweep_sk`; ties in a stable order of their own.
        found.sort_by(|a, b| {
            a.due
                .cmp(&b.due)
                .then_with(|| a.key.tenant.cmp(&b.key.tenant))
                .then_with(|| a.key.contact.cmp(&b.key.contact))
        });
        found.truncate(limit);
        Ok(found)
    }

    async fn ensure_incarnation(
        &self,
        key: &ContactKey,
        candidate: &Incarnation,
    ) -> Result<Option<Incarnation>, StoreError> {
        self.settled(key).await?;
        let mut state = self.lock();
        Ok(state
            .contacts
            .get_mut(key)
            .and_then(|contact| contact.head.as_mut())
            .map(|head| {
                head.incarnation
                    .get_or_insert_with(|| candidate.clone())
                    .clone()
            }))
    }

    async fn settle_sweep(
        &self,
        key: &ContactKey,
        settle: &SweepSettle,
    ) -> Result<bool, StoreError> {
        self.settled(key).await?;
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return Ok(false);
        };
        let (Some(head), Some(slot)) = (contact.head.as_mut(), contact.sweep.as_mut()) else {
            return Ok(false);
        };
        if head.incarnation.as_ref() != Some(&settle.incarnation)
            || head.last_activity != settle.last_activity
            || slot.due != settle.due
            || head.facts_pending.map(|pending| pending.since) != settle.pending_since
        {
            return Ok(false);
        }
        if let Some(session) = settle.facts_requested {
            head.facts_requested = Some(session);
        }
        match settle.pending {
            PendingChange::Keep => {}
            PendingChange::Set(pending) => head.facts_pending = Some(pending),
            PendingChange::Clear => head.facts_pending = None,
        }
        match settle.next_due {
            Some(due) => slot.due = due,
            None => contact.sweep = None,
        }
        Ok(true)
    }

    async fn defer_sweep(
        &self,
        key: &ContactKey,
        due: i64,
        next_due: i64,
    ) -> Result<bool, StoreError> {
        self.settled(key).await?;
        let mut state = self.lock();
        let Some(slot) = state
            .contacts
            .get_mut(key)
            .filter(|contact| contact.head.is_some())
            .and_then(|contact| contact.sweep.as_mut())
            .filter(|slot| slot.due == due)
        else {
            return Ok(false);
        };
        slot.due = next_due;
        Ok(true)
    }
}

#[async_trait]
impl RecordStore for MemoryStore {
    async fn load_memory(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError> {
        let state = self.lock();
        Ok(state
            .contacts
            .get(key)
            .map_or((None, Vec::new()), |contact| {
                let head = contact.head.clone().filter(|head| !head.expired_at(now));
                (head, facts_at(contact, now))
            }))
    }

    async fn transcript(
        &self,
        key: &ContactKey,
        sessions: SessionFilter,
        limit: usize,
        before: Option<Cursor>,
    ) -> Result<TranscriptPage, StoreError> {
        let state = self.lock();
        let Some(contact) = state.contacts.get(key) else {
            return Ok(TranscriptPage::default());
        };
        let now = unix_now();
        let newest_first: Vec<StoredMessage> = contact
            .messages
            .values()
            .rev()
            .filter(|entry| entry.live_at(now))
            .map(|entry| &entry.message)
            .filter(|message| match sessions {
                SessionFilter::All => true,
                SessionFilter::Only(session) => message.session == session,
            })
            .filter(|message| {
                before.is_none_or(|before| {
                    (message.session, message.seq) < (before.session, before.seq)
                })
            })
            .take(limit.saturating_add(1))
            .cloned()
            .collect();
        Ok(TranscriptPage::from_newest_first(newest_first, limit))
    }

    async fn session_records(
        &self,
        key: &ContactKey,
        limit: usize,
        now: i64,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let state = self.lock();
        Ok(state.contacts.get(key).map_or_else(Vec::new, |contact| {
            contact
                .archives
                .values()
                .rev()
                .filter(|archive| archive.expires_at > now)
                .take(limit)
                .map(SessionArchive::record)
                .collect()
        }))
    }

    async fn erase_contact(&self, key: &ContactKey, now: i64) -> Result<usize, StoreError> {
        self.settled(key).await?;
        let mut state = self.lock();
        let bucket = crate::store::erase_bucket(key);
        let last = state
            .last_erase
            .entry((key.tenant.clone(), bucket))
            .or_insert(now);
        *last = (*last).max(now);
        let own = state.contacts.remove(key).map_or(0, |c| c.item_count());
        // Under the store's lock, as one erase (a channel's store never takes it).
        let channels: usize = self.channels.all().iter().map(|c| c.erase(key, now)).sum();
        drop(state);
        Ok(own + channels)
    }
}

#[async_trait]
impl TenantStore for MemoryStore {
    async fn stored_config(&self, tenant: &TenantId) -> Result<Option<StoredConfig>, StoreError> {
        Ok(self.lock().tenants.get(tenant).cloned())
    }

    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<(), StoreError> {
        let text = config_text(config)?;
        let mut state = self.lock();
        let version = state.tenants.get(tenant).map_or(0, |stored| stored.version) + 1;
        state
            .tenants
            .insert(tenant.clone(), StoredConfig { text, version });
        Ok(())
    }

    async fn replace_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
        expected: u64,
    ) -> Result<Option<u64>, StoreError> {
        let text = config_text(config)?;
        let mut state = self.lock();
        let stored = state.tenants.get(tenant).map_or(0, |stored| stored.version);
        if stored != expected {
            return Ok(None);
        }
        let version = expected + 1;
        state
            .tenants
            .insert(tenant.clone(), StoredConfig { text, version });
        Ok(Some(version))
    }

    async fn tenant_policy(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<crate::platform::TenantPolicy>, StoreError> {
        self.read_policy(tenant)
    }
}

impl MemoryStore {
    /// Stores `text` as the tenant's `CONFIG` item as it is, read or not: a test's
    /// hand-written item (one that no longer reads, say).
    pub fn put_config_text(&self, tenant: &TenantId, text: &str) {
        let mut state = self.lock();
        let version = state.tenants.get(tenant).map_or(0, |stored| stored.version) + 1;
        state.tenants.insert(
            tenant.clone(),
            StoredConfig {
                text: text.to_owned(),
                version,
            },
        );
    }
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

fn config_text(config: &TenantConfig) -> Result<String, StoreError> {
    serde_json::to_string(config).map_err(|err| StoreError::Other(format!("tenant config: {err}")))
}
