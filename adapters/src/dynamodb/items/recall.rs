//! A closed session's recall items as stored: its index of term counts
//! (`IDX#{session:06}`) and its text for recall's passages (`TXT#{session:06}`).

use degrau::plan::recall::index::{SessionIndex, SessionText, decode_terms, encode_terms};
use degrau::store::StoreError;
use serde::{Deserialize, Serialize};

use crate::dynamodb::keys::{index_sk, text_sk};

/// A closed session's recall index (`IDX#{session:06}`): its term counts as one
/// string each ([`degrau::plan::recall::index::encode_terms`]), so the item stays small;
/// `expires_at` is its TTL.
#[derive(Serialize, Deserialize)]
pub(in crate::dynamodb) struct IndexItem {
    pub(in crate::dynamodb) pk: String,
    pub(in crate::dynamodb) sk: String,
    pub(in crate::dynamodb) session: u32,
    pub(in crate::dynamodb) ended_at: i64,
    pub(in crate::dynamodb) messages: u64,
    pub(in crate::dynamodb) terms: String,
    pub(in crate::dynamodb) length: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(in crate::dynamodb) ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::dynamodb) summary: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(in crate::dynamodb) summary_terms: String,
    #[serde(default)]
    pub(in crate::dynamodb) summary_length: u32,
    pub(in crate::dynamodb) expires_at: i64,
}

impl IndexItem {
    pub(in crate::dynamodb) fn new(pk: &str, index: &SessionIndex, expires_at: i64) -> Self {
        IndexItem {
            pk: pk.to_owned(),
            sk: index_sk(index.session),
            session: index.session,
            ended_at: index.ended_at,
            messages: index.messages,
            terms: encode_terms(&index.terms),
            length: index.length,
            ids: index.ids.clone(),
            summary: index.summary.clone(),
            summary_terms: encode_terms(&index.summary_terms),
            summary_length: index.summary_length,
            expires_at,
        }
    }

    pub(in crate::dynamodb) fn index(self) -> Result<SessionIndex, StoreError> {
        let corrupt = || StoreError::Corrupt(format!("index {}: its terms do not read", self.sk));
        Ok(SessionIndex {
            session: self.session,
            ended_at: self.ended_at,
            messages: self.messages,
            terms: decode_terms(&self.terms).ok_or_else(corrupt)?,
            length: self.length,
            ids: self.ids.clone(),
            summary: self.summary.clone(),
            summary_terms: decode_terms(&self.summary_terms).ok_or_else(corrupt)?,
            summary_length: self.summary_length,
        })
    }
}

/// A closed session's text for recall's passages (`TXT#{session:06}`): its lines
/// as JSON; `expires_at` is its TTL.
#[derive(Serialize, Deserialize)]
pub(in crate::dynamodb) struct TextItem {
    pub(in crate::dynamodb) pk: String,
    pub(in crate::dynamodb) sk: String,
    pub(in crate::dynamodb) session: u32,
    pub(in crate::dynamodb) lines: String,
    pub(in crate::dynamodb) expires_at: i64,
}

impl TextItem {
    pub(in crate::dynamodb) fn new(
        pk: &str,
        text: &SessionText,
        expires_at: i64,
    ) -> Result<Self, StoreError> {
        Ok(TextItem {
            pk: pk.to_owned(),
            sk: text_sk(text.session),
            session: text.session,
            lines: serde_json::to_string(&text.lines)
                .map_err(|err| StoreError::Other(format!("text lines: {err}")))?,
            expires_at,
        })
    }

    pub(in crate::dynamodb) fn text(self) -> Result<SessionText, StoreError> {
        Ok(SessionText {
            session: self.session,
            lines: serde_json::from_str(&self.lines)
                .map_err(|err| StoreError::Corrupt(format!("text {}: {err}", self.sk)))?,
        })
    }
}
