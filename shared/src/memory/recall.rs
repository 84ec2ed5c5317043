//! Recall's port in memory: each closed session's index and text (two items in
//! DynamoDB, one entry here), written under the head's incarnation, read with
//! their expiry as DynamoDB's TTL would make them; the index read bounded by
//! [`MAX_INDEX_READ_BYTES`] as a query page is, by each index's JSON size.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::{Incarnation, StoredMessage};
use crate::plan::recall::index::{SessionIndex, SessionText};
use crate::store::{
    ContactKey, FoundSession, MAX_INDEX_READ_BYTES, MAX_INDEXED_MESSAGES, RecallStore, StoreError,
};

/// A session's index and text, with their expiry.
#[derive(Debug, Clone)]
pub(super) struct Indexed {
    index: SessionIndex,
    text: SessionText,
    expires_at: i64,
}

#[async_trait]
impl RecallStore for MemoryStore {
    async fn session_messages(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<(Vec<StoredMessage>, Option<i64>), StoreError> {
        let state = self.lock();
        let Some(contact) = state.contacts.get(key) else {
            return Ok((Vec::new(), None));
        };
        let live: Vec<_> = contact
            .messages
            .range((session, 0)..=(session, u64::MAX))
            .map(|(_, entry)| entry)
            .filter(|entry| entry.live_at(now))
            .take(MAX_INDEXED_MESSAGES)
            .collect();
        let expires_at = live.iter().filter_map(|entry| entry.expires_at).max();
        Ok((
            live.into_iter()
                .map(|entry| entry.message.clone())
                .collect(),
            expires_at,
        ))
    }

    async fn save_session_index(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        index: &SessionIndex,
        text: Option<&SessionText>,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        self.settled(key).await?;
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return Ok(false);
        };
        if contact
            .head
            .as_ref()
            .is_none_or(|head| head.incarnation.as_ref() != Some(incarnation))
        {
            return Ok(false);
        }
        let text = match (text, contact.indexes.get(&index.session)) {
            (Some(text), _) => text.clone(),
            (None, Some(stored)) => stored.text.clone(),
            (None, None) => SessionText {
                session: index.session,
                lines: Vec::new(),
            },
        };
        contact.indexes.insert(
            index.session,
            Indexed {
                index: index.clone(),
                text,
                expires_at,
            },
        );
        Ok(true)
    }

    async fn session_indexes(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<SessionIndex>, StoreError> {
        let state = self.lock();
        let Some(contact) = state.contacts.get(key) else {
            return Ok(Vec::new());
        };
        let mut read = 0;
        Ok(contact
            .indexes
            .values()
            .rev()
            .take_while(|entry| {
                read += serde_json::to_string(&entry.index).map_or(0, |json| json.len());
                read <= MAX_INDEX_READ_BYTES
            })
            .filter(|entry| entry.expires_at > now)
            .map(|entry| entry.index.clone())
            .collect())
    }

    async fn found_sessions(
        &self,
        key: &ContactKey,
        sessions: &[u32],
        now: i64,
    ) -> Result<Vec<FoundSession>, StoreError> {
        let state = self.lock();
        let contact = state.contacts.get(key);
        Ok(sessions
            .iter()
            .map(|&session| FoundSession {
                session,
                text: contact
                    .and_then(|c| c.indexes.get(&session))
                    .filter(|entry| entry.expires_at > now)
                    .map(|entry| entry.text.clone()),
                record: contact
                    .and_then(|c| c.archives.get(&session))
                    .filter(|archive| archive.expires_at > now)
                    .map(crate::store::SessionArchive::record),
            })
            .collect())
    }
}
