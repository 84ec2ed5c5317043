//! The in-memory [`RoundStore`]: a round's conditions and writes, applied all at
//! once under the mutex (or item by item, torn, when the simulation asks).

use async_trait::async_trait;

use super::{
    Contact, MemoryStore, MessageEntry, REQUEST_TTL_SECONDS, Request, facts_at, window_of,
};
use crate::domain::{Head, IdempotencyKey, Incarnation};
use crate::store::{
    Claim, ContactKey, MAX_REFRESH_PER_ROUND, MAX_ROUND_ITEMS, RoundCommit, RoundStore, StoreError,
    TurnState,
};

/// A round's conditions: the head as loaded (or none for a new contact), no
/// message of the round stored yet, and its idempotency key not completed by
/// another attempt.
pub(super) fn round_conditions(
    contact: &Contact,
    last_erase: Option<i64>,
    commit: &RoundCommit,
) -> Result<(), StoreError> {
    // An item past its TTL may be replaced: DynamoDB deletes it eventually anyway.
    let now = commit.head.last_activity;
    after_last_erase(last_erase, commit, now)?;
    if !head_matches(contact, commit, now) {
        return Err(StoreError::Conflict("the contact's head changed".into()));
    }
    no_message_stored(contact, commit, now)?;
    not_completed_elsewhere(contact, commit, now)?;
    fits_one_transaction(commit)?;
    refreshed_messages_exist(contact, commit)
}

/// A new life begins only after the tenant's last erase: a round begun before
/// it may be of a contact the erase took (see `RecordStore::erase_contact`).
fn after_last_erase(
    last_erase: Option<i64>,
    commit: &RoundCommit,
    now: i64,
) -> Result<(), StoreError> {
    if commit.expected.is_none()
        && last_erase.is_some_and(|erased| erased >= commit.head.born_at.unwrap_or(now))
    {
        return Err(StoreError::Conflict(
            "a round begun before an erase cannot begin a contact's life after it".into(),
        ));
    }
    Ok(())
}

/// Whether the stored head is the one the round loaded: none (or one past its
/// TTL) for a new contact, else the same session, last seq and incarnation.
fn head_matches(contact: &Contact, commit: &RoundCommit, now: i64) -> bool {
    match (&contact.head, &commit.expected) {
        (None, None) => true,
        (Some(stored), None) => stored.expired_at(now),
        (Some(stored), Some(expected)) => {
            stored.session == expected.session
                && stored.last_seq == expected.last_seq
                && stored.incarnation == expected.incarnation
        }
        _ => false,
    }
}

/// No message of the round is stored and live. A message older than the round's
/// own retention may be replaced too (see `RoundCommit::stale_before`).
fn no_message_stored(contact: &Contact, commit: &RoundCommit, now: i64) -> Result<(), StoreError> {
    let stale = commit.stale_before();
    if commit.messages.iter().any(|message| {
        contact
            .messages
            .get(&(message.session, message.seq))
            .is_some_and(|entry| {
                entry.live_at(now) && stale.is_none_or(|stale| entry.message.created_at >= stale)
            })
    }) {
        return Err(StoreError::Conflict("a message of the round exists".into()));
    }
    Ok(())
}

/// A key another attempt of the request completed: that attempt's round
/// stands, and this one would store the message twice.
fn not_completed_elsewhere(
    contact: &Contact,
    commit: &RoundCommit,
    now: i64,
) -> Result<(), StoreError> {
    if let Some(done) = &commit.idempotency
        && contact
            .requests
            .get(done.key.as_str())
            .is_some_and(|request| request.completed && request.expires_at > now)
    {
        return Err(StoreError::Conflict(
            "another attempt of the request completed it".into(),
        ));
    }
    Ok(())
}

/// The round's items fit one transaction.
fn fits_one_transaction(commit: &RoundCommit) -> Result<(), StoreError> {
    // The new head's check of the tenant's last erase is one action too.
    let items = RoundWrite::all(commit).len() + usize::from(commit.expected.is_none());
    if items > MAX_ROUND_ITEMS {
        return Err(StoreError::Other(format!(
            "a round of {items} items does not fit one transaction"
        )));
    }
    Ok(())
}

/// Every window message whose TTL the round refreshes is still stored.
fn refreshed_messages_exist(contact: &Contact, commit: &RoundCommit) -> Result<(), StoreError> {
    if let Some(seq) = commit
        .refresh
        .iter()
        .find(|seq| !contact.messages.contains_key(&(commit.head.session, **seq)))
    {
        return Err(StoreError::Conflict(format!(
            "message {seq} to refresh is gone"
        )));
    }
    Ok(())
}

/// One item a round's transaction writes.
#[derive(Debug, Clone, Copy)]
pub(super) enum RoundWrite {
    /// The head (and its sweep index entry, attributes of the same item).
    Head,
    /// The round's message at this index.
    Message(usize),
    /// The closed session's archive.
    Archive,
    /// The completed idempotency record.
    Request,
    /// The new TTL of the window message at this index of the refresh.
    Refresh(usize),
}

impl RoundWrite {
    /// Every item the round writes.
    pub(super) fn all(commit: &RoundCommit) -> Vec<RoundWrite> {
        let mut writes = vec![RoundWrite::Head];
        writes.extend((0..commit.messages.len()).map(RoundWrite::Message));
        if commit.archive.is_some() {
            writes.push(RoundWrite::Archive);
        }
        if commit.idempotency.is_some() {
            writes.push(RoundWrite::Request);
        }
        writes.extend((0..commit.refresh.len()).map(RoundWrite::Refresh));
        writes
    }

    /// Writes this item of `commit` into `contact`.
    pub(super) fn apply(self, contact: &mut Contact, commit: &RoundCommit) {
        match self {
            RoundWrite::Head => write_head(contact, commit),
            RoundWrite::Message(index) => {
                let message = &commit.messages[index];
                contact.messages.insert(
                    (message.session, message.seq),
                    MessageEntry {
                        message: message.clone(),
                        expires_at: Some(commit.messages_expire_at),
                    },
                );
            }
            RoundWrite::Archive => {
                if let Some(archive) = &commit.archive {
                    contact.archives.insert(archive.session, archive.clone());
                }
            }
            RoundWrite::Refresh(index) => {
                let seq = commit.refresh[index];
                if let Some(entry) = contact.messages.get_mut(&(commit.head.session, seq)) {
                    entry.expires_at = Some(commit.messages_expire_at);
                }
            }
            RoundWrite::Request => write_request(contact, commit),
        }
    }
}

/// Writes the round's head (and its sweep index entry) into `contact`.
fn write_head(contact: &mut Contact, commit: &RoundCommit) {
    if commit.expected.is_none() {
        // A new head, or one over a head past its TTL: nothing of it stays,
        // and the new life is dated.
        contact.head = Some(Head {
            born_at: commit.head.born_at,
            ..Head::default()
        });
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
    head.facts_requested = commit.head.facts_requested;
    head.last_round.clone_from(&commit.head.last_round);
    head.hard_cap_at = commit.head.hard_cap_at;
    head.expires_at = commit.head.expires_at;
    head.recent_gaps.clone_from(&commit.head.recent_gaps);
    head.cache_hour = commit.head.cache_hour;
    head.client_round = commit.head.client_round;
    if commit.head.facts_pending.is_some() {
        head.facts_pending = commit.head.facts_pending;
    }
    // Set once, when the head has none (a new head, or one from before
    // incarnations): the condition already holds it equal otherwise.
    if head.incarnation.is_none() {
        head.incarnation.clone_from(&commit.head.incarnation);
    }
    if new_session {
        head.summarized_until = 0;
        head.steps = 0;
        head.summary = None;
    }
    contact.sweep = Some(commit.sweep);
}

/// Writes the round's completed idempotency record into `contact`.
fn write_request(contact: &mut Contact, commit: &RoundCommit) {
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
}

#[async_trait]
impl RoundStore for MemoryStore {
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError> {
        if let Some(work) = self.before_load_turn.take() {
            work.await;
        }
        // Two reads, as the DynamoDB adapter's two Queries: the head and facts, then
        // the window. Under torn semantics other work runs between them (see `sim`).
        let (head, facts) = {
            let state = self.lock();
            let Some(contact) = state.contacts.get(key) else {
                return Ok(TurnState::default());
            };
            let head = contact.head.clone().filter(|head| !head.expired_at(now));
            (head, facts_at(contact, now))
        };
        let Some(head) = head else {
            return Ok(TurnState {
                facts,
                ..TurnState::default()
            });
        };
        if self.semantics().torn {
            self.pause().await;
        }
        let (window, window_expires_at) = {
            let state = self.lock();
            window_of(state.contacts.get(key), &head, now)
        };
        Ok(TurnState {
            head: Some(head),
            facts,
            window,
            window_expires_at,
        })
    }

    async fn load_head(&self, key: &ContactKey) -> Result<Option<Head>, StoreError> {
        Ok(self
            .lock()
            .contacts
            .get(key)
            .and_then(|contact| contact.head.clone()))
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

    async fn commit_round(&self, commit: &RoundCommit) -> Result<(), StoreError> {
        self.settled(&commit.key).await?;
        let mut writes = {
            let mut state = self.lock();
            let torn = state.semantics.torn;
            let bucket = (
                commit.key.tenant.clone(),
                crate::store::erase_bucket(&commit.key),
            );
            let last_erase = state.last_erase.get(&bucket).copied();
            let contact = state.contacts.entry(commit.key.clone()).or_default();
            // Every check first, as the transaction's conditions: nothing changes on
            // failure.
            round_conditions(contact, last_erase, commit)?;
            let writes = RoundWrite::all(commit);
            if !torn {
                for write in writes {
                    write.apply(contact, commit);
                }
                return Ok(());
            }
            writes
        };
        // Torn semantics: the transaction lands in two halves, in any order, and a
        // read in between sees the first (see `sim`).
        fastrand::shuffle(&mut writes);
        let rest = writes.split_off(fastrand::usize(..=writes.len()));
        self.apply_half(commit, writes, true);
        // Accepted is accepted: the second half lands even when the caller goes
        // away in between (its process died), as DynamoDB finishes a
        // transaction whatever became of the connection that sent it.
        let landing = Landing {
            store: self,
            commit,
            rest: Some(rest),
        };
        // The halves are a transaction's few milliseconds apart (under call
        // latency): a caller's process may die between them.
        self.transaction_time().await;
        drop(landing);
        Ok(())
    }

    async fn refresh_expiry(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
        seqs: &[u64],
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        if seqs.len() > MAX_REFRESH_PER_ROUND {
            return Err(StoreError::Other(format!(
                "a refresh of {} messages exceeds the limit of {MAX_REFRESH_PER_ROUND}",
                seqs.len()
            )));
        }
        self.settled(key).await?;
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return Ok(false);
        };
        let holds = contact
            .head
            .as_ref()
            .is_some_and(|head| head.incarnation.as_ref() == Some(incarnation))
            && seqs
                .iter()
                .all(|seq| contact.messages.contains_key(&(session, *seq)));
        if !holds {
            return Ok(false);
        }
        for seq in seqs {
            if let Some(entry) = contact.messages.get_mut(&(session, *seq)) {
                entry.expires_at = Some(expires_at);
            }
        }
        Ok(true)
    }
}

/// The rest of a torn round's transaction, applied when dropped: after the
/// interleaving point, or when the caller's future is dropped there.
struct Landing<'a> {
    store: &'a MemoryStore,
    commit: &'a RoundCommit,
    rest: Option<Vec<RoundWrite>>,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if let Some(rest) = self.rest.take() {
            self.store.apply_half(self.commit, rest, false);
        }
    }
}
