//! The records' port in memory: a contact's memory, transcript pages and closed
//! sessions as reads find them (expired items count as gone), and the erase.

use async_trait::async_trait;

use super::{MemoryStore, facts_at};
use crate::domain::{Fact, Head, StoredMessage};
use crate::plan::recall::SessionRecord;
use crate::plan::session::unix_now;
use crate::store::{
    ContactKey, Cursor, RecordStore, SessionArchive, SessionFilter, StoreError, TranscriptPage,
};

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
        // At once, or in DynamoDB's passes (see `erase`).
        self.erase(key, now).await
    }
}
