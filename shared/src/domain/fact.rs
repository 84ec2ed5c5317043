//! A contact's facts: a value under one of the tenant's keys, the message that
//! supports it, and the few values it replaced.

use serde::{Deserialize, Serialize};

use super::FactKey;

/// Where a fact came from: the message that supports it. Ordered by position in
/// the conversation (session, then message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FactSource {
    /// Session of the supporting message.
    pub session: u32,
    /// Sequence number of the supporting message.
    pub seq: u64,
}

/// A structured fact about a contact, from the tenant's closed list of keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// The key, one of the tenant's allowed keys.
    pub key: FactKey,
    /// The value, validated by [`crate::plan::facts::FactPolicy::check`].
    pub value: String,
    /// The supporting message.
    pub source: FactSource,
    /// Last change, seconds since the Unix epoch.
    #[serde(default)]
    pub updated_at: i64,
    /// The operator who set this value, when one did (`PUT .../facts/{key}`); then
    /// `source` is the contact's last message at that time, and an extraction
    /// replaces the value only citing a later message (see
    /// [`crate::plan::facts::reconcile`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// Earlier values, newest first: at most [`MAX_FACT_HISTORY`], none replaced
    /// longer ago than the tenant's fact retention.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<FactRevision>,
}

/// Most earlier values a fact keeps.
pub const MAX_FACT_HISTORY: usize = 5;

/// An earlier value of a fact: what it was, who set it, and when it was replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactRevision {
    /// The value then.
    pub value: String,
    /// Its supporting message (or the last message when an operator set it).
    pub source: FactSource,
    /// The operator who set it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// When it was set, seconds since the epoch.
    pub updated_at: i64,
    /// When it was replaced, seconds since the epoch.
    pub replaced_at: i64,
}

impl Fact {
    /// A fact the model's extraction set, with no history.
    pub fn extracted(key: FactKey, value: String, source: FactSource, updated_at: i64) -> Fact {
        Fact {
            key,
            value,
            source,
            updated_at,
            operator: None,
            history: Vec::new(),
        }
    }

    /// `next` replacing this fact at `now`: `next` keeps this value in its history
    /// (when the value changes), newest first, at most [`MAX_FACT_HISTORY`], and
    /// drops revisions replaced before `oldest_kept`.
    pub fn succeeded_by(&self, mut next: Fact, now: i64, oldest_kept: i64) -> Fact {
        let mut history = self.history.clone();
        if self.value != next.value {
            history.insert(
                0,
                FactRevision {
                    value: self.value.clone(),
                    source: self.source,
                    operator: self.operator.clone(),
                    updated_at: self.updated_at,
                    replaced_at: now,
                },
            );
        }
        history.retain(|revision| revision.replaced_at >= oldest_kept);
        history.truncate(MAX_FACT_HISTORY);
        next.history = history;
        next
    }
}
