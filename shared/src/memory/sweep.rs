//! The sweeper's port in memory: the heads due in a bucket of the sweep index, in
//! the index's order, and the conditional writes that settle or defer one.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::Incarnation;
use crate::store::{ContactKey, DueHead, PendingChange, StoreError, SweepSettle, SweepStore};

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
