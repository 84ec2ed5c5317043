//! The in-memory adapter of the [`Store`] and [`TenantStore`] ports, for unit tests
//! and local experiments: the same conditions as the DynamoDB adapter, checked under
//! one mutex so a commit is all or nothing. The mutex is never held across an
//! `.await` (no method here awaits).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::{
    Claim, ContactKey, Cursor, RoundCommit, SessionFilter, Store, StoreError, TenantStore,
    TranscriptPage, TurnState,
};
use crate::domain::{Fact, Head, IdempotencyKey, StoredMessage, TenantId};
use crate::tenant::TenantConfig;

/// How long an idempotency record lives, in seconds (as in DynamoDB's TTL).
const REQUEST_TTL_SECONDS: i64 = 24 * 60 * 60;

/// Everything in one process's memory; cheap to create, one per test.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    contacts: HashMap<ContactKey, Contact>,
    tenants: HashMap<TenantId, TenantConfig>,
}

/// The items of one contact's partition.
#[derive(Debug, Default)]
struct Contact {
    head: Option<Head>,
    /// By key, each with its optional expiry (seconds since the epoch).
    facts: BTreeMap<String, (Fact, Option<i64>)>,
    /// By (session, seq): the sort key's order.
    messages: BTreeMap<(u32, u64), StoredMessage>,
    requests: HashMap<String, Request>,
}

impl Contact {
    fn item_count(&self) -> usize {
        usize::from(self.head.is_some())
            + self.facts.len()
            + self.messages.len()
            + self.requests.len()
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
    /// messages, idempotency records), as a raw query would count them.
    pub fn item_count(&self, key: &ContactKey) -> usize {
        self.lock().contacts.get(key).map_or(0, Contact::item_count)
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

#[async_trait]
impl Store for MemoryStore {
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError> {
        let state = self.lock();
        let Some(contact) = state.contacts.get(key) else {
            return Ok(TurnState::default());
        };
        let window = match &contact.head {
            Some(head) => contact
                .messages
                .range(
                    (head.session, head.summarized_until.saturating_add(1))
                        ..=(head.session, u64::MAX),
                )
                .map(|(_, message)| message.clone())
                .collect(),
            None => Vec::new(),
        };
        Ok(TurnState {
            head: contact.head.clone(),
            facts: facts_at(contact, now),
            window,
        })
    }

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
                (contact.head.clone(), facts_at(contact, now))
            }))
    }

    async fn commit_round(&self, commit: &RoundCommit) -> Result<(), StoreError> {
        let mut state = self.lock();
        let contact = state.contacts.entry(commit.key.clone()).or_default();
        // Every check first, as the transaction's conditions: nothing changes on failure.
        let head_matches = match (&contact.head, &commit.expected) {
            (None, None) => true,
            (Some(stored), Some(expected)) => {
                stored.session == expected.session && stored.last_seq == expected.last_seq
            }
            _ => false,
        };
        if !head_matches {
            return Err(StoreError::Conflict("the contact's head changed".into()));
        }
        if commit.messages.iter().any(|message| {
            contact
                .messages
                .contains_key(&(message.session, message.seq))
        }) {
            return Err(StoreError::Conflict("a message of the round exists".into()));
        }

        let new_session = commit
            .expected
            .as_ref()
            .is_none_or(|expected| expected.session != commit.head.session);
        let head = contact.head.get_or_insert_with(Head::default);
        head.session = commit.head.session;
        head.last_seq = commit.head.last_seq;
        head.last_context_tokens = commit.head.last_context_tokens;
        head.last_activity = commit.head.last_activity;
        if new_session {
            head.summarized_until = 0;
            head.steps = 0;
            head.summary = None;
        }
        for message in &commit.messages {
            contact
                .messages
                .insert((message.session, message.seq), message.clone());
        }
        if let Some(done) = &commit.idempotency {
            contact.requests.insert(
                done.key.as_str().to_owned(),
                Request {
                    completed: true,
                    payload_hash: done.payload_hash.clone(),
                    lease_until: 0,
                    response: Some(done.response.clone()),
                    expires_at: done.expires_at,
                },
            );
        }
        Ok(())
    }

    async fn claim_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Result<Claim, StoreError> {
        let mut state = self.lock();
        let contact = state.contacts.entry(key.clone()).or_default();
        if let Some(existing) = contact.requests.get(idempotency.as_str()) {
            let free = existing.expires_at <= now
                || (!existing.completed
                    && existing.lease_until <= now
                    && existing.payload_hash == payload_hash);
            if !free {
                return Ok(if existing.payload_hash != payload_hash {
                    Claim::Mismatch
                } else if existing.completed {
                    Claim::Completed {
                        response: existing.response.clone().unwrap_or_default(),
                    }
                } else {
                    Claim::InProgress
                });
            }
        }
        contact.requests.insert(
            idempotency.as_str().to_owned(),
            Request {
                completed: false,
                payload_hash: payload_hash.to_owned(),
                lease_until: now.saturating_add(lease_seconds),
                response: None,
                expires_at: now.saturating_add(REQUEST_TTL_SECONDS),
            },
        );
        Ok(Claim::Started)
    }

    async fn release_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
    ) -> Result<(), StoreError> {
        let mut state = self.lock();
        if let Some(contact) = state.contacts.get_mut(key)
            && contact
                .requests
                .get(idempotency.as_str())
                .is_some_and(|request| !request.completed)
        {
            contact.requests.remove(idempotency.as_str());
        }
        Ok(())
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
        let mut newest_first: Vec<StoredMessage> = contact
            .messages
            .values()
            .rev()
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
        let more = limit > 0 && newest_first.len() > limit;
        newest_first.truncate(limit);
        newest_first.reverse();
        let next_before = if more {
            newest_first.first().map(|oldest| Cursor {
                session: oldest.session,
                seq: oldest.seq,
            })
        } else {
            None
        };
        Ok(TranscriptPage {
            messages: newest_first,
            next_before,
        })
    }

    async fn erase_contact(&self, key: &ContactKey) -> Result<usize, StoreError> {
        Ok(self
            .lock()
            .contacts
            .remove(key)
            .map_or(0, |contact| contact.item_count()))
    }

    // TEMPORARY: replaced by the compactor work on the store adapters.
    async fn apply_step(&self, _: &ContactKey, _: &super::AppliedStep) -> Result<bool, StoreError> {
        Err(StoreError::Other(
            "apply_step is not implemented yet".into(),
        ))
    }

    async fn load_closed_session(
        &self,
        _: &ContactKey,
        _: u32,
        _: i64,
    ) -> Result<super::ClosedSession, StoreError> {
        Err(StoreError::Other(
            "load_closed_session is not implemented yet".into(),
        ))
    }

    async fn save_facts(
        &self,
        _: &ContactKey,
        _: &[super::FactWrite],
        _: &[crate::domain::FactKey],
    ) -> Result<bool, StoreError> {
        Err(StoreError::Other(
            "save_facts is not implemented yet".into(),
        ))
    }
}

#[async_trait]
impl TenantStore for MemoryStore {
    async fn tenant_config(&self, tenant: &TenantId) -> Result<Option<TenantConfig>, StoreError> {
        Ok(self.lock().tenants.get(tenant).cloned())
    }

    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<(), StoreError> {
        self.lock().tenants.insert(tenant.clone(), config.clone());
        Ok(())
    }
}
