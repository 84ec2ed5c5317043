//! The items as stored, and their conversions to and from the domain with
//! `serde_dynamo`. Message blocks are kept as their exact Messages-API JSON in a
//! string attribute, free of DynamoDB's quirks with empty strings and maps; the
//! tenant config likewise, so that unknown fields are refused by serde exactly as in
//! any other JSON. Every item but the config carries the TTL attribute `expires_at`.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use degrau::converse::IDEMPOTENCY_TTL_SECONDS;
use degrau::domain::IdempotencyKey;
use degrau::domain::{
    ContentBlock, Fact, FactKey, FactRevision, FactSource, Head, Incarnation, PendingFacts, Role,
    StoredMessage,
};
use degrau::store::{CompletedRequest, FactWrite, SessionArchive, StoreError};
use degrau::tenant::TenantConfig;
use degrau::usage::Usage;
use serde::{Deserialize, Serialize};

use super::keys::{archive_sk, fact_sk, message_sk, request_sk};

mod recall;

pub(super) use recall::{IndexItem, TextItem};

/// An item as the SDK carries it.
pub type Item = HashMap<String, AttributeValue>;

/// The head as stored; written only through `UpdateItem`, so only read here.
#[derive(Deserialize)]
pub(super) struct HeadItem {
    pub(super) session: u32,
    #[serde(default)]
    pub(super) last_seq: u64,
    #[serde(default)]
    pub(super) summarized_until: u64,
    #[serde(default)]
    pub(super) summary: Option<String>,
    #[serde(default)]
    pub(super) last_context_tokens: u64,
    #[serde(default)]
    pub(super) last_activity: i64,
    #[serde(default)]
    pub(super) steps: u32,
    #[serde(default)]
    pub(super) facts_requested: Option<u32>,
    #[serde(default)]
    pub(super) last_round: Option<String>,
    #[serde(default)]
    pub(super) incarnation: Option<Incarnation>,
    #[serde(default)]
    pub(super) facts_pending: Option<u32>,
    #[serde(default)]
    pub(super) facts_pending_since: i64,
    #[serde(default)]
    pub(super) facts_attempts: u32,
    #[serde(default)]
    pub(super) hard_cap_at: Option<u64>,
    #[serde(default)]
    pub(super) expires_at: Option<i64>,
    /// A list of numbers; absent on heads written before rounds recorded gaps.
    #[serde(default)]
    pub(super) recent_gaps: Vec<u32>,
    /// Absent on heads written before rounds recorded it (five minutes).
    #[serde(default)]
    pub(super) cache_hour: bool,
    /// Absent on heads written before rounds recorded it, and on heads whose last
    /// round was degrau's own.
    #[serde(default)]
    pub(super) client_round: bool,
    /// Absent on heads written before lives were dated.
    #[serde(default)]
    pub(super) born_at: Option<i64>,
}

/// A head as the sweep index has it: `sweep_sk` is when the head is due. (The
/// index also projects `session`, which the sweep no longer needs: it reads each
/// due head itself. A GSI's projection cannot change in place.)
#[derive(Deserialize)]
pub(super) struct SweepEntry {
    pub(super) pk: String,
    pub(super) sweep_sk: i64,
}

/// An item's table keys, as a keys-only index projects them.
#[derive(Deserialize)]
pub struct IndexedKey {
    /// The partition key.
    pub pk: String,
    /// The sort key.
    pub sk: String,
}

impl From<HeadItem> for Head {
    fn from(item: HeadItem) -> Head {
        Head {
            session: item.session,
            last_seq: item.last_seq,
            summarized_until: item.summarized_until,
            summary: item.summary,
            last_context_tokens: item.last_context_tokens,
            last_activity: item.last_activity,
            steps: item.steps,
            facts_requested: item.facts_requested,
            last_round: item.last_round,
            incarnation: item.incarnation,
            facts_pending: item.facts_pending.map(|session| PendingFacts {
                session,
                since: item.facts_pending_since,
                attempts: item.facts_attempts,
            }),
            hard_cap_at: item.hard_cap_at,
            expires_at: item.expires_at,
            recent_gaps: item.recent_gaps,
            cache_hour: item.cache_hour,
            client_round: item.client_round,
            born_at: item.born_at,
        }
    }
}

/// A message as stored. `content` and `pruned` are the blocks as JSON strings: the
/// exact Messages-API JSON, free of DynamoDB's quirks with empty strings and maps.
#[derive(Serialize, Deserialize)]
pub(super) struct MessageItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) session: u32,
    pub(super) seq: u64,
    pub(super) role: Role,
    pub(super) content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) pruned: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) usage: Option<Usage>,
    #[serde(default)]
    pub(super) created_at: i64,
    /// Absent on the model's messages and on messages from before people wrote any.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) written_by_person: bool,
    /// A voice note's transcript; absent on every other message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) transcribed: bool,
    /// TTL; absent on messages stored before rounds carried one (kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) expires_at: Option<i64>,
}

impl MessageItem {
    pub(super) fn new(
        pk: &str,
        message: &StoredMessage,
        expires_at: Option<i64>,
    ) -> Result<Self, StoreError> {
        Ok(MessageItem {
            pk: pk.to_owned(),
            sk: message_sk(message.session, message.seq),
            session: message.session,
            seq: message.seq,
            role: message.role,
            content: blocks_json(&message.content)?,
            pruned: message.pruned.as_deref().map(blocks_json).transpose()?,
            usage: message.usage,
            created_at: message.created_at,
            written_by_person: message.written_by_person,
            transcribed: message.transcribed,
            expires_at,
        })
    }
}

/// Blocks as stored in `content` and `pruned`: their Messages-API JSON.
pub(super) fn blocks_json(blocks: &[ContentBlock]) -> Result<String, StoreError> {
    serde_json::to_string(blocks).map_err(|err| StoreError::Other(format!("message blocks: {err}")))
}

/// A message item read back, with its TTL.
pub(super) fn message_and_expiry(item: Item) -> Result<(StoredMessage, Option<i64>), StoreError> {
    let item: MessageItem = from_item(item)?;
    let blocks = |json: &str| {
        serde_json::from_str(json)
            .map_err(|err| StoreError::Corrupt(format!("message {}: {err}", item.sk)))
    };
    let message = StoredMessage {
        session: item.session,
        seq: item.seq,
        role: item.role,
        content: blocks(&item.content)?,
        pruned: item.pruned.as_deref().map(blocks).transpose()?,
        usage: item.usage,
        created_at: item.created_at,
        written_by_person: item.written_by_person,
        transcribed: item.transcribed,
    };
    Ok((message, item.expires_at))
}

/// A closed session's archive (`SUM#{session:06}`); `expires_at` is its TTL.
#[derive(Serialize, Deserialize)]
pub(super) struct ArchiveItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) session: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) summary: Option<String>,
    #[serde(default)]
    pub(super) summarized_until: u64,
    #[serde(default)]
    pub(super) last_seq: u64,
    pub(super) expires_at: i64,
    /// The record's excerpt, ids and end (absent on archives written before
    /// recall: their record is the summary alone).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(super) excerpt: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) ids: Vec<String>,
    #[serde(default)]
    pub(super) ended_at: i64,
}

impl ArchiveItem {
    /// What recall reads of it.
    pub(super) fn record(self) -> degrau::plan::recall::SessionRecord {
        degrau::plan::recall::SessionRecord {
            session: self.session,
            summary: self.summary,
            excerpt: self.excerpt,
            ids: self.ids,
            messages: self.last_seq,
            ended_at: self.ended_at,
        }
    }

    pub(super) fn new(pk: &str, archive: &SessionArchive) -> Self {
        ArchiveItem {
            pk: pk.to_owned(),
            sk: archive_sk(archive.session),
            session: archive.session,
            summary: archive.summary.clone(),
            summarized_until: archive.summarized_until,
            last_seq: archive.last_seq,
            expires_at: archive.expires_at,
            excerpt: archive.excerpt.clone(),
            ids: archive.ids.clone(),
            ended_at: archive.ended_at,
        }
    }
}

/// A fact as stored; `expires_at` is the TTL attribute (absent: kept).
#[derive(Serialize, Deserialize)]
pub(super) struct FactItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) key: FactKey,
    pub(super) value: String,
    pub(super) source_session: u32,
    pub(super) source_seq: u64,
    #[serde(default)]
    pub(super) updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) expires_at: Option<i64>,
    /// The operator who set the value, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) operator: Option<String>,
    /// Earlier values, newest first (a list of maps; at most five).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) history: Vec<FactRevision>,
}

impl FactItem {
    pub(super) fn new(pk: &str, write: &FactWrite) -> Self {
        let fact = &write.fact;
        FactItem {
            pk: pk.to_owned(),
            sk: fact_sk(&fact.key),
            key: fact.key.clone(),
            value: fact.value.clone(),
            source_session: fact.source.session,
            source_seq: fact.source.seq,
            updated_at: fact.updated_at,
            expires_at: Some(write.expires_at),
            operator: fact.operator.clone(),
            history: fact.history.clone(),
        }
    }
}

impl From<FactItem> for Fact {
    fn from(item: FactItem) -> Fact {
        Fact {
            key: item.key,
            value: item.value,
            source: FactSource {
                session: item.source_session,
                seq: item.source_seq,
            },
            updated_at: item.updated_at,
            operator: item.operator,
            history: item.history,
        }
    }
}

/// The state of an idempotency record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RequestStatus {
    InProgress,
    Completed,
}

impl RequestStatus {
    pub(super) const IN_PROGRESS: &str = "in_progress";
}

/// An idempotency record (`REQ#{key}`); `expires_at` is its TTL.
#[derive(Serialize, Deserialize)]
pub(super) struct RequestItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) status: RequestStatus,
    pub(super) payload_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) lease_until: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) response: Option<String>,
    pub(super) expires_at: i64,
}

impl RequestItem {
    /// A claim of `idempotency` in progress, leased for `lease_seconds`; the record
    /// lives a day (its TTL), like a completed one.
    pub(super) fn in_progress(
        pk: &str,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Self {
        RequestItem {
            pk: pk.to_owned(),
            sk: request_sk(idempotency),
            status: RequestStatus::InProgress,
            payload_hash: payload_hash.to_owned(),
            lease_until: Some(now.saturating_add(lease_seconds)),
            response: None,
            expires_at: now.saturating_add(IDEMPOTENCY_TTL_SECONDS),
        }
    }

    /// A completed request, with the response to replay.
    pub(super) fn completed(pk: &str, done: &CompletedRequest) -> Self {
        RequestItem {
            pk: pk.to_owned(),
            sk: request_sk(&done.key),
            status: RequestStatus::Completed,
            payload_hash: done.payload_hash.clone(),
            lease_until: None,
            response: Some(done.response.clone()),
            expires_at: done.expires_at,
        }
    }
}

/// The tenant's `CONFIG` item: the config as a JSON string, so that unknown fields
/// are refused by serde exactly as in any other JSON.
#[derive(Serialize, Deserialize)]
pub(super) struct ConfigItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) config: String,
    /// 1 for the first write, one more for each (absent on items from before
    /// versions: read as 1).
    #[serde(default = "first_version")]
    pub(super) version: u64,
}

fn first_version() -> u64 {
    1
}

impl ConfigItem {
    /// The config's JSON as it is stored.
    pub(super) fn config_text(config: &TenantConfig) -> Result<String, StoreError> {
        serde_json::to_string(config)
            .map_err(|err| StoreError::Other(format!("tenant config: {err}")))
    }
}

/// A string attribute.
pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute.
pub fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// An item from its type.
pub fn to_item<T: Serialize>(value: &T) -> Result<Item, StoreError> {
    serde_dynamo::to_item(value).map_err(|err| StoreError::Other(format!("serialise item: {err}")))
}

/// A type from its item; an item that does not read back is [`StoreError::Corrupt`].
pub fn from_item<T: for<'de> Deserialize<'de>>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item).map_err(|err| StoreError::Corrupt(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_in_conditions_is_the_status_items_hold() {
        let stored: AttributeValue =
            serde_dynamo::to_attribute_value(RequestStatus::InProgress).unwrap();
        assert_eq!(stored, s(RequestStatus::IN_PROGRESS));
    }

    #[test]
    fn message_items_keep_the_blocks_as_json_strings() {
        let message = StoredMessage {
            session: 1,
            seq: 2,
            role: Role::Assistant,
            content: vec![ContentBlock::text("")],
            pruned: None,
            usage: Some(Usage {
                input_tokens: 3,
                ..Usage::default()
            }),
            created_at: 7,
            written_by_person: false,
            transcribed: false,
        };
        let item = to_item(&MessageItem::new("T#t#C#c", &message, Some(9)).unwrap()).unwrap();
        assert_eq!(item["content"], s(r#"[{"type":"text","text":""}]"#));
        assert!(!item.contains_key("pruned"));
        assert_eq!(item["expires_at"], n(9));
        assert_eq!(message_and_expiry(item).unwrap(), (message, Some(9)));
    }
}
