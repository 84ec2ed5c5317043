//! Recall's port on DynamoDB: a closed session's messages read whole (one
//! paginated query), its index and text written in one transaction that checks the
//! head's incarnation, every index of a contact read newest first in one query page
//! (at most 1 MB: [`MAX_INDEX_READ_BYTES`]), and the texts and archives of the
//! sessions a recall returns in one `BatchGetItem`.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use degrau::domain::{Incarnation, StoredMessage};
use degrau::plan::recall::index::{SessionIndex, SessionText};
use degrau::store::{ContactKey, FoundSession, MAX_INDEXED_MESSAGES, RecallStore, StoreError};

use super::DynamoStore;
use super::error::{backoff, sdk_error, transact_if};
use super::items::{ArchiveItem, IndexItem, Item, TextItem, from_item, s};
use super::keys::{MAX_SEQ, MAX_SESSION, archive_sk, contact_pk, index_sk, text_sk};
use super::queries::{Pages, index_items};

/// Rounds of `BatchGetItem` for the keys DynamoDB left unprocessed (throttling).
const BATCH_ATTEMPTS: u32 = 5;

/// The item an index is stored as in the contact `key`'s partition: what the
/// recall benchmark weighs a recall's read by.
pub fn index_item(
    key: &ContactKey,
    index: &SessionIndex,
    expires_at: i64,
) -> Result<HashMap<String, AttributeValue>, StoreError> {
    super::items::to_item(&IndexItem::new(&contact_pk(key), index, expires_at))
}

/// The item a session's text is stored as in the contact `key`'s partition.
pub fn text_item(
    key: &ContactKey,
    text: &SessionText,
    expires_at: i64,
) -> Result<HashMap<String, AttributeValue>, StoreError> {
    super::items::to_item(&TextItem::new(&contact_pk(key), text, expires_at)?)
}

#[async_trait]
impl RecallStore for DynamoStore {
    async fn session_messages(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<(Vec<StoredMessage>, Option<i64>), StoreError> {
        let live: Vec<(StoredMessage, Option<i64>)> = self
            .messages_between(key, session, 0, MAX_SEQ)
            .await?
            .into_iter()
            .filter(|(_, expires)| expires.is_none_or(|at| at > now))
            .take(MAX_INDEXED_MESSAGES)
            .collect();
        let expires_at = live.iter().filter_map(|(_, at)| *at).max();
        Ok((live.into_iter().map(|(m, _)| m).collect(), expires_at))
    }

    async fn save_session_index(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        index: &SessionIndex,
        text: Option<&SessionText>,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        let pk = contact_pk(key);
        let items = index_items(
            &self.table,
            key,
            incarnation,
            IndexItem::new(&pk, index, expires_at),
            text.map(|text| TextItem::new(&pk, text, expires_at))
                .transpose()?,
        )?;
        transact_if(&self.client, items).await
    }

    async fn session_indexes(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<SessionIndex>, StoreError> {
        // One page, newest first: DynamoDB stops a page at 1 MB, the bound. An
        // eventually consistent read is enough (the index is written by a job
        // after the session closed) and costs half.
        let query = self
            .query_range(key, index_sk(0), index_sk(MAX_SESSION))
            .consistent_read(false)
            .scan_index_forward(false);
        let page = Pages::new(query).next(None).await?.unwrap_or_default();
        let mut indexes = Vec::with_capacity(page.len());
        for item in page {
            let item = from_item::<IndexItem>(item)?;
            if item.expires_at > now {
                indexes.push(item.index()?);
            }
        }
        Ok(indexes)
    }

    async fn found_sessions(
        &self,
        key: &ContactKey,
        sessions: &[u32],
        now: i64,
    ) -> Result<Vec<FoundSession>, StoreError> {
        let pk = contact_pk(key);
        let keys: Vec<HashMap<String, AttributeValue>> = sessions
            .iter()
            .flat_map(|&session| [text_sk(session), archive_sk(session)])
            .map(|sk| HashMap::from([("pk".to_owned(), s(&pk)), ("sk".to_owned(), s(sk))]))
            .collect();
        let items = self.batch_get(keys).await?;
        let mut found: Vec<FoundSession> = sessions
            .iter()
            .map(|&session| FoundSession {
                session,
                ..FoundSession::default()
            })
            .collect();
        for item in items {
            let sk = match item.get("sk") {
                Some(AttributeValue::S(sk)) => sk.clone(),
                _ => continue,
            };
            if sk.starts_with("TXT#") {
                let text = from_item::<TextItem>(item)?;
                if text.expires_at > now
                    && let Some(entry) = found.iter_mut().find(|f| f.session == text.session)
                {
                    entry.text = Some(text.text()?);
                }
            } else {
                let archive = from_item::<ArchiveItem>(item)?;
                if archive.expires_at > now
                    && let Some(entry) = found.iter_mut().find(|f| f.session == archive.session)
                {
                    entry.record = Some(archive.record());
                }
            }
        }
        Ok(found)
    }
}

impl DynamoStore {
    /// The items of `keys` (at most 100), strongly consistent, in any order; the
    /// keys DynamoDB leaves unprocessed are asked again a few times with backoff.
    async fn batch_get(&self, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut pending = keys;
        for attempt in 0..BATCH_ATTEMPTS {
            if pending.is_empty() {
                return Ok(items);
            }
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true)
                .build()
                .map_err(|err| StoreError::Other(format!("batch get: {err}")))?;
            let answer = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send()
                .await
                .map_err(|err| sdk_error("batch_get_item", err))?;
            if let Some(mut found) = answer.responses {
                items.extend(found.remove(&self.table).unwrap_or_default());
            }
            pending = answer
                .unprocessed_keys
                .and_then(|mut left| left.remove(&self.table))
                .map(|left| left.keys)
                .unwrap_or_default();
        }
        if pending.is_empty() {
            Ok(items)
        } else {
            Err(StoreError::Unavailable(
                "DynamoDB left keys of a batch read unprocessed".into(),
            ))
        }
    }
}
