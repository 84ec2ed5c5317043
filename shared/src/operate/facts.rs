//! An operator's facts: read with their provenance, set or corrected, deleted. An
//! operator's value goes through the same [`FactPolicy`] as the model's, and is
//! stored with the contact's last message as its position, so that the next
//! extraction does not undo it (`crate::plan::facts::reconcile`).
//!
//! Facts are kept longer than the transcript (`fact_retention_days`), so the routes
//! work whenever facts live: with the head, each write is checked against the
//! head's incarnation; once the head is gone (the transcript expired), against a
//! live fact as read ([`OperatorStore::save_facts_headless`]), so an erase racing
//! either gets nothing written back. Every write and removal lands only on the fact
//! it read.
//!
//! [`OperatorStore::save_facts_headless`]: crate::store::OperatorStore::save_facts_headless

use super::Operate;
use crate::domain::{Fact, FactKey, FactSource, Head};
use crate::metering::DAY;
use crate::plan::facts::FactPolicy;
use crate::service::{AskError, not_found};
use crate::store::{ContactKey, FactExpectation, FactRecord, FactRemoval, FactWrite, StoreError};

impl Operate {
    /// The contact's live facts, with provenance, expiry and history; 404 when it
    /// has neither a head nor a live fact.
    pub async fn facts(&self, key: &ContactKey) -> Result<Vec<FactRecord>, AskError> {
        let now = (self.clock)();
        let (head, records) = self.store.fact_records(key, now).await?;
        if head.is_none() && records.is_empty() {
            return Err(not_found());
        }
        Ok(records)
    }

    /// Sets `fact` to `value` as `operator` would have it, under the tenant's fact
    /// policy (a refusal names the rule, never the value). The fact's position is
    /// the contact's last message (none once the transcript expired); its earlier
    /// value goes to its history.
    pub async fn set_fact(
        &self,
        key: &ContactKey,
        fact: &FactKey,
        value: &str,
        operator: &str,
    ) -> Result<FactRecord, AskError> {
        let settings = self.operator_settings(&key.tenant).await?;
        let policy = FactPolicy::new(settings.allowed_fact_keys.iter().cloned());
        policy.check(fact, value).map_err(|refusal| {
            AskError::InvalidRequest(format!("{refusal} ({})", refusal.code()))
        })?;
        let now = (self.clock)();
        let (head, records) = self.store.fact_records(key, now).await?;
        if head.is_none() && records.is_empty() {
            return Err(not_found());
        }
        let retention = i64::from(settings.fact_retention_days) * DAY;
        let position = head
            .as_ref()
            .map_or(FactSource { session: 0, seq: 0 }, |head| FactSource {
                session: head.session,
                seq: head.last_seq,
            });
        let next = Fact {
            operator: Some(operator.to_owned()),
            ..Fact::extracted(fact.clone(), value.to_owned(), position, now)
        };
        let stored = records.iter().find(|record| &record.fact.key == fact);
        let (fact, expect) = match stored {
            Some(old) => (
                old.fact.succeeded_by(next, now, now - retention),
                FactExpectation::UpdatedAt(old.fact.updated_at),
            ),
            None => (next, FactExpectation::Absent),
        };
        let write = FactWrite {
            fact,
            expires_at: now + retention,
            expect,
        };
        let changes = (std::slice::from_ref(&write), &[][..]);
        match self
            .change_facts(key, head.as_ref(), &records, changes)
            .await
        {
            Ok(true) => Ok(FactRecord {
                fact: write.fact,
                expires_at: Some(write.expires_at),
            }),
            Ok(false) => Err(not_found()),
            Err(StoreError::Conflict(_)) => Err(AskError::Conflict(
                "the fact changed while it was being set; read it again and retry".into(),
            )),
            Err(error) => Err(error.into()),
        }
    }

    /// Deletes a fact and its history, as read (a correction landing meanwhile is
    /// 409). `NotFound` when the contact has no such fact.
    pub async fn delete_fact(&self, key: &ContactKey, fact: &FactKey) -> Result<(), AskError> {
        let now = (self.clock)();
        let (head, records) = self.store.fact_records(key, now).await?;
        let missing = || AskError::NotFound(format!("the contact has no fact `{fact}`"));
        let stored = records
            .iter()
            .find(|record| &record.fact.key == fact)
            .ok_or_else(missing)?;
        let removal = FactRemoval::of(&stored.fact);
        let changes = (&[][..], std::slice::from_ref(&removal));
        match self
            .change_facts(key, head.as_ref(), &records, changes)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(missing()),
            Err(StoreError::Conflict(_)) => Err(AskError::Conflict(
                "the fact changed while it was being deleted; read it again and retry".into(),
            )),
            Err(error) => Err(error.into()),
        }
    }

    /// Writes an operator's changes: checked against the head's incarnation while
    /// there is a head, else against a live fact as read (the first of `records`).
    async fn change_facts(
        &self,
        key: &ContactKey,
        head: Option<&Head>,
        records: &[FactRecord],
        (writes, removals): (&[FactWrite], &[FactRemoval]),
    ) -> Result<bool, StoreError> {
        match (head, records.first()) {
            (Some(head), _) => {
                let incarnation = head.incarnation.clone().ok_or_else(|| {
                    StoreError::Conflict(
                        "the contact's memory predates fact corrections; send a message first"
                            .into(),
                    )
                })?;
                self.facts
                    .save_facts(key, &incarnation, writes, removals)
                    .await
            }
            (None, Some(anchor)) => {
                self.store
                    .save_facts_headless(key, &anchor.fact, writes, removals)
                    .await
            }
            (None, None) => Ok(false),
        }
    }
}
