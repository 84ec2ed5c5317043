//! Recall in the ask service: the `recall` tool's run over the contact's records
//! (the session a round is closing included, though its archive lands only with the
//! round's commit), and the search route's read, its query typed at the edge
//! ([`RecallQuery`], [`RecordLimit`]). The ranking itself is [`crate::recall`]'s.

use serde::Serialize;
use serde_json::Value;

use super::turn::Turn;
use super::{AskError, AskService, by};
use crate::deadline::Deadline;
use crate::metrics::Event;
use crate::recall::{MAX_RECORDS, SessionRecord, check_query, rank, with_closing};
use crate::store::ContactKey;
use crate::tools::{ToolOutput, recall};

/// Records the search route returns when no `limit` is asked for.
pub const DEFAULT_RECORDS: usize = 5;

/// A search route's query (`q`): non-blank, at most
/// [`crate::recall::MAX_QUERY_CHARS`] characters.
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
    /// The records: best match first with a query, newest first without.
    pub sessions: Vec<SessionHit>,
}

/// One record in the search route's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionHit {
    /// The record.
    #[serde(flatten)]
    pub record: SessionRecord,
    /// Its BM25 score for the query (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
}

impl AskService {
    /// The `recall` tool's call during a round: the contact's records and the one
    /// the round is closing, ranked for the input's query. A store that fails or
    /// does not answer in time is an error the model reads.
    pub(super) async fn run_recall(
        &self,
        key: &ContactKey,
        turn: &Turn,
        input: &Value,
        deadline: Deadline,
    ) -> ToolOutput {
        let born = super::life::born_of(turn.expected.as_ref(), turn.now);
        let records = self.records_of_life(key, MAX_RECORDS as usize, turn.now, born);
        let read = by(deadline, records).await;
        let output = match read {
            Ok(stored) => {
                let records = with_closing(stored, turn.closing.as_ref());
                recall::run(input, &records)
            }
            Err(error) => {
                tracing::warn!(%error, "recall could not read the records");
                ToolOutput::error("earlier sessions cannot be searched right now")
            }
        };
        Event::new("ask")
            .dimension("Tool", crate::recall::TOOL_NAME)
            .count("ToolCalls", 1)
            .count("ToolErrors", u64::from(output.is_error))
            .emit();
        output
    }

    /// The contact's session records: those matching `query`, best first, or the
    /// newest without one; at most `limit`. A contact with none (or never seen)
    /// has an empty list.
    pub async fn sessions(
        &self,
        key: &ContactKey,
        query: Option<&RecallQuery>,
        limit: RecordLimit,
    ) -> Result<SessionsView, AskError> {
        let now = (self.clock)();
        let (head, _) = self.store.load_memory(key, now).await?;
        let born = super::life::born_of(head.as_ref(), now);
        let sessions = match query {
            None => self
                .records_of_life(key, limit.0, now, born)
                .await?
                .into_iter()
                .map(|record| SessionHit {
                    record,
                    score: None,
                })
                .collect(),
            Some(RecallQuery(query)) => {
                let records = self
                    .records_of_life(key, MAX_RECORDS as usize, now, born)
                    .await?;
                rank(&records, query, limit.0)
                    .into_iter()
                    .map(|ranked| SessionHit {
                        record: ranked.record.clone(),
                        score: Some(ranked.score),
                    })
                    .collect()
            }
        };
        Ok(SessionsView { sessions })
    }
}
