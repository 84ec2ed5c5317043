//! What the operator routes need: the tenant's contacts, most recently active
//! first, and a contact's facts with their expiry (the usage counts are
//! [`super::UsageStore`]'s).

use super::{ContactKey, StoreError};
use crate::domain::{ContactId, Fact, Head, TenantId};
use async_trait::async_trait;

/// Largest page of contacts.
pub const MAX_CONTACT_PAGE: usize = 100;

/// What the operator routes read and write of a tenant's contacts.
#[async_trait]
pub trait OperatorStore: Send + Sync {
    /// A page of the tenant's contacts with a live head, most recently active
    /// first, starting after `after`. Read from an index (eventually consistent):
    /// a round that just landed may show a moment later.
    async fn contacts(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&ContactCursor>,
        now: i64,
    ) -> Result<ContactPage, StoreError>;

    /// The contact's head and its live facts, each with its expiry.
    async fn fact_records(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<FactRecord>), StoreError>;

    /// Stores and removes facts of a contact whose head is gone while its facts
    /// live (its transcript expired first: facts are kept longer). There is no
    /// head to check: each write and removal lands only on what it expects, and
    /// the whole batch only while `anchor` (a live fact, as read) is still as read,
    /// so an erase racing it (which takes every fact) gets nothing written back.
    /// `Ok(false)`, nothing written, when no fact of the contact is left (erased or
    /// expired); [`StoreError::Conflict`] when one changed since it was read.
    async fn save_facts_headless(
        &self,
        key: &ContactKey,
        anchor: &Fact,
        writes: &[super::FactWrite],
        removals: &[super::FactRemoval],
    ) -> Result<bool, StoreError>;
}

/// A fact and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactRecord {
    /// The fact, its provenance and history.
    pub fact: Fact,
    /// Its TTL, seconds since the epoch (`None`: kept).
    pub expires_at: Option<i64>,
}

/// One contact of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactEntry {
    /// The contact.
    pub contact: ContactId,
    /// Its current (or last) session.
    pub session: u32,
    /// Its last round, seconds since the epoch.
    pub last_activity: i64,
    /// Messages in its current session.
    pub messages: u64,
    /// Its live facts.
    pub facts: usize,
}

/// A page of contacts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContactPage {
    /// Most recently active first.
    pub contacts: Vec<ContactEntry>,
    /// Where the next page starts, when there may be one.
    pub next: Option<ContactCursor>,
}

/// Where a page of contacts starts: after this activity time and contact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactCursor {
    /// The last listed contact's activity.
    pub last_activity: i64,
    /// The last listed contact.
    pub contact: ContactId,
}

impl ContactCursor {
    /// The opaque text of a cursor: hex, so it needs no escaping in a query.
    pub fn format(&self) -> String {
        hex::encode(format!("{}:{}", self.last_activity, self.contact))
    }

    /// Reads [`ContactCursor::format`]'s text; `None` when it is not one.
    pub fn parse(text: &str) -> Option<ContactCursor> {
        let bytes = hex::decode(text).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (at, contact) = text.split_once(':')?;
        Some(ContactCursor {
            last_activity: at.parse().ok()?,
            contact: ContactId::parse(contact).ok()?,
        })
    }
}
