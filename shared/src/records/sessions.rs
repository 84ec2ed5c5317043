//! Recall's reads: the search (the `recall` tool's, during a round, and the
//! search route's) and the list of sessions, over the contact's session indexes
//! over the contact's session indexes (the session a round is closing included,
//! from the turn's read, though its index is written only after the round's
//! commit), and the list of sessions; the queries typed at the edge
//! ([`RecallQuery`], [`RecordLimit`]). The ranking and the passages are
//! [`crate::plan::recall`]'s. A search is two reads: every index of the contact (one
//! query), then the texts and records of the sessions it returns (one batch read).

use serde::Serialize;

use super::{Records, records_of_life};
pub use crate::plan::recall::SessionHit;
use crate::plan::recall::index::{SessionIndex, SessionText};
use crate::plan::recall::passages::passages;
use crate::plan::recall::rank::{query_terms, rank};
use crate::plan::recall::tokenize::StemmingTokenizer;
use crate::plan::recall::{MAX_RECORDS, SessionRecord, check_query};
use crate::service::AskError;
use crate::store::{ContactKey, FoundSession, RecallStore, StoreError};

/// Records the search route returns when no `limit` is asked for.
pub const DEFAULT_RECORDS: usize = 5;

/// A search route's query (`q`): non-blank, at most
/// [`crate::plan::recall::MAX_QUERY_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallQuery(String);

impl RecallQuery {
    /// Reads `q`.
    pub fn parse(text: &str) -> Result<Self, AskError> {
        check_query(text)
            .map(|query| RecallQuery(query.to_owned()))
            .map_err(|problem| AskError::InvalidRequest(format!("`q`: {problem}")))
    }
}

/// How many records the search route returns: 1 to [`MAX_RECORDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLimit(usize);

impl RecordLimit {
    /// Reads a whole number from 1 to [`MAX_RECORDS`].
    pub fn parse(text: &str) -> Result<Self, AskError> {
        match text.parse::<usize>() {
            Ok(n) if (1..=MAX_RECORDS as usize).contains(&n) => Ok(RecordLimit(n)),
            _ => Err(AskError::InvalidRequest(format!(
                "`limit` must be a whole number from 1 to {MAX_RECORDS}"
            ))),
        }
    }
}

impl Default for RecordLimit {
    fn default() -> Self {
        RecordLimit(DEFAULT_RECORDS)
    }
}

/// The search route's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionsView {
    /// The sessions: best match first with a query, newest first without.
    pub sessions: Vec<SessionHit>,
}

/// The session a round is closing, indexed from what its turn read (its summary
/// and the messages after it): searched before its own index is written.
pub type Closing = (SessionIndex, SessionText);

impl Records {
    /// The contact's sessions: those matching `query`, best first with their
    /// passages, or the newest records without one; at most `limit`. A contact
    /// with none (or never seen) has an empty list.
    pub async fn sessions(
        &self,
        key: &ContactKey,
        query: Option<&RecallQuery>,
        limit: RecordLimit,
    ) -> Result<SessionsView, AskError> {
        let now = (self.clock)();
        let (head, _) = self.store.load_memory(key, now).await?;
        let born = super::born_of(head.as_ref(), now);
        let sessions = match query {
            None => records_of_life(self.store.as_ref(), key, limit.0, now, born)
                .await?
                .into_iter()
                .map(|record| SessionHit {
                    record,
                    score: None,
                    search_summary: None,
                    passages: Vec::new(),
                })
                .collect(),
            Some(RecallQuery(query)) => {
                search(self.recall.as_ref(), key, query, limit.0, None, (now, born)).await?
            }
        };
        Ok(SessionsView { sessions })
    }
}

/// The at most `limit` sessions that best match `query`, with the session a
/// round is closing (`closing`) among them: every index read, ranked, then
/// the found ones' texts and records read for their passages. Sessions of an
/// earlier life (ended before `born`) are not searched.
pub async fn search(
    store: &dyn RecallStore,
    key: &ContactKey,
    query: &str,
    limit: usize,
    closing: Option<&Closing>,
    (now, born): (i64, Option<i64>),
) -> Result<Vec<SessionHit>, StoreError> {
    let mut indexes = store.session_indexes(key, now).await?;
    // Only this life's sessions (see `life`).
    indexes.retain(|index| born.is_none_or(|born| index.ended_at >= born));
    if let Some((index, _)) = closing
        && !indexes.iter().any(|stored| stored.session == index.session)
    {
        indexes.push(index.clone());
    }
    let tokenizer = StemmingTokenizer::default();
    let scored = rank(&indexes, query, limit, &tokenizer);
    let wanted: Vec<u32> = scored
        .iter()
        .map(|found| found.session)
        .filter(|session| closing.is_none_or(|(index, _)| index.session != *session))
        .collect();
    let mut found = if wanted.is_empty() {
        Vec::new()
    } else {
        store.found_sessions(key, &wanted, now).await?
    };
    if let Some((index, text)) = closing {
        found.push(FoundSession {
            session: index.session,
            text: Some(text.clone()),
            record: None,
        });
    }
    let terms = query_terms(query, &tokenizer);
    Ok(scored
        .iter()
        .filter_map(|scored| {
            let index = indexes.iter().find(|i| i.session == scored.session)?;
            let stored = found.iter().find(|f| f.session == scored.session);
            Some(SessionHit {
                record: stored
                    .and_then(|f| f.record.clone())
                    .unwrap_or_else(|| record_of_index(index)),
                score: Some(scored.score as f32),
                search_summary: index.summary.clone(),
                passages: stored
                    .and_then(|f| f.text.as_ref())
                    .map(|text| passages(text, &terms, &tokenizer))
                    .unwrap_or_default(),
            })
        })
        .collect())
}

/// A session's record from its index alone (its archive is gone).
fn record_of_index(index: &SessionIndex) -> SessionRecord {
    SessionRecord {
        session: index.session,
        summary: None,
        excerpt: String::new(),
        ids: index.ids.clone(),
        messages: index.messages,
        ended_at: index.ended_at,
    }
}
