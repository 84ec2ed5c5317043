//! The compactor's port in memory: finding a contact by incarnation, applying a
//! fold step, reading a closed session, and saving a fact batch, each checked
//! against the head as the DynamoDB adapter's transaction conditions check it.

use async_trait::async_trait;

use super::{MemoryStore, apply_fact_changes};
use crate::domain::{Incarnation, TenantId};
use crate::store::{
    AppliedStep, ClosedSession, ContactKey, FactRemoval, FactWrite, JobStore, StoreError,
    validate_fact_changes, validate_step,
};

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
