//! The operator routes' port in memory: the listing reads the live heads (no index
//! lag), the usage counts are a map by tenant and day.

use async_trait::async_trait;

use super::{MemoryStore, facts_at};
use crate::domain::{Fact, Head, TenantId};
use crate::metering::UsageCounts;
use crate::store::{
    ContactCursor, ContactEntry, ContactKey, ContactPage, FactRecord, FactRemoval, FactWrite,
    OperatorStore, StoreError, UsageStore, validate_fact_changes,
};

#[async_trait]
impl OperatorStore for MemoryStore {
    async fn contacts(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&ContactCursor>,
        now: i64,
    ) -> Result<ContactPage, StoreError> {
        let state = self.lock();
        let mut entries: Vec<ContactEntry> = state
            .contacts
            .iter()
            .filter(|(key, _)| &key.tenant == tenant)
            .filter_map(|(key, contact)| {
                let head = contact.head.as_ref().filter(|head| !head.expired_at(now))?;
                Some(ContactEntry {
                    contact: key.contact.clone(),
                    session: head.session,
                    last_activity: head.last_activity,
                    messages: head.last_seq,
                    facts: facts_at(contact, now).len(),
                })
            })
            .collect();
        // The index's order: by activity, newest first, then by contact id.
        let order = |e: &ContactEntry| {
            (
                std::cmp::Reverse(e.last_activity),
                std::cmp::Reverse(e.contact.as_str().to_owned()),
            )
        };
        entries.sort_by_key(order);
        if let Some(after) = after {
            let from = (
                std::cmp::Reverse(after.last_activity),
                std::cmp::Reverse(after.contact.as_str().to_owned()),
            );
            entries.retain(|entry| order(entry) > from);
        }
        let more = entries.len() > limit;
        entries.truncate(limit);
        let next = more
            .then(|| entries.last())
            .flatten()
            .map(|last| ContactCursor {
                last_activity: last.last_activity,
                contact: last.contact.clone(),
            });
        Ok(ContactPage {
            contacts: entries,
            next,
        })
    }

    async fn fact_records(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<FactRecord>), StoreError> {
        let state = self.lock();
        let Some(contact) = state.contacts.get(key) else {
            return Ok((None, Vec::new()));
        };
        let head = contact.head.clone().filter(|head| !head.expired_at(now));
        let records = contact
            .facts
            .values()
            .filter(|(_, expires)| expires.is_none_or(|at| at > now))
            .map(|(fact, expires_at)| FactRecord {
                fact: fact.clone(),
                expires_at: *expires_at,
            })
            .collect();
        Ok((head, records))
    }

    async fn save_facts_headless(
        &self,
        key: &ContactKey,
        anchor: &Fact,
        writes: &[FactWrite],
        removals: &[FactRemoval],
    ) -> Result<bool, StoreError> {
        validate_fact_changes(writes, removals)?;
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return Ok(false);
        };
        let now = anchor.updated_at;
        let anchored = contact
            .facts
            .get(anchor.key.as_str())
            .is_some_and(|(fact, _)| fact.updated_at == anchor.updated_at);
        if !anchored {
            let any_left = contact
                .facts
                .values()
                .any(|(_, expires)| expires.is_none_or(|at| at > now));
            return match any_left {
                true => Err(StoreError::Conflict(
                    "a fact changed since it was read".into(),
                )),
                false => Ok(false),
            };
        }
        super::apply_fact_changes(contact, writes, removals)?;
        Ok(true)
    }
}

#[async_trait]
impl UsageStore for MemoryStore {
    async fn add_usage(
        &self,
        tenant: &TenantId,
        day: i64,
        counts: &UsageCounts,
    ) -> Result<(), StoreError> {
        let mut state = self.lock();
        let total = state.usage.entry((tenant.clone(), day)).or_default();
        for (name, count) in counts.counters() {
            let now = total
                .counters()
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |(_, c)| *c);
            total.set(name, now.saturating_add(count));
        }
        for (model, tokens) in &counts.tokens {
            let entry = total.tokens.entry(model.clone()).or_default();
            *entry = entry.add(tokens);
        }
        Ok(())
    }

    async fn usage(
        &self,
        tenant: &TenantId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, UsageCounts)>, StoreError> {
        Ok(self
            .lock()
            .usage
            .range((tenant.clone(), from)..=(tenant.clone(), to))
            .map(|((_, day), counts)| (*day, counts.clone()))
            .collect())
    }
}
