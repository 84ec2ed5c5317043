//! The erase of a contact. At once under the mutex by default; under
//! [`Semantics::erase_passes`](super::Semantics::erase_passes) as the DynamoDB
//! adapter runs it (`adapters/src/dynamodb/records.rs`): the erase bucket dated
//! first, then the head deleted, then passes until a listing comes back empty (at
//! most [`ERASE_PASSES`]), each a listing of the partition in sort-key order and
//! deletes of what it listed in batches of [`BATCH`]. Every call takes time and
//! other work runs between them (`MemoryStore::pause`): a round, an ask, a job or TTL may
//! land in the middle of an erase, as in production. A batch meets a round's
//! transaction in flight on the contact as DynamoDB's deletes do (a
//! `TransactionConflict`, tried again, then unavailable: the erase failed half-way
//! and its client tries again).

use super::{MemoryStore, State};
use crate::store::{ContactKey, StoreError};

/// Listing passes at most (the DynamoDB adapter's `ERASE_PASSES`).
const ERASE_PASSES: usize = 4;
/// Items one batch deletes (`BatchWriteItem`'s limit).
const BATCH: usize = 25;

/// One listed item of a contact's partition (a session's recall index and text,
/// `IDX#` and `TXT#`, as one), in sort-key order:
/// `FACT# < HEAD < IDX# < REQ# < S# < SUM# < TXT#`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Listed {
    Fact(String),
    Head,
    Index(u32),
    Request(String),
    Message(u32, u64),
    Archive(u32),
}

impl MemoryStore {
    /// The erase, at once or in passes as the semantics say.
    pub(super) async fn erase(&self, key: &ContactKey, now: i64) -> Result<usize, StoreError> {
        if self.semantics().erase_passes {
            return self.erase_in_passes(key, now).await;
        }
        self.settled(key).await?;
        let mut state = self.lock();
        mark(&mut state, key, now);
        let own = state.contacts.remove(key).map_or(0, |c| c.item_count());
        // Under the store's lock, as one erase (a channel's store never takes it).
        let channels: usize = self.channels.all().iter().map(|c| c.erase(key, now)).sum();
        drop(state);
        Ok(own + channels)
    }

    async fn erase_in_passes(&self, key: &ContactKey, now: i64) -> Result<usize, StoreError> {
        mark(&mut self.lock(), key, now);
        self.pause().await;
        self.settled(key).await?;
        let mut erased = self.delete(key, &[Listed::Head]);
        for _ in 0..ERASE_PASSES {
            self.pause().await;
            let listed = self.listing(key);
            for batch in listed.chunks(BATCH) {
                self.pause().await;
                self.settled(key).await?;
                erased += self.delete(key, batch);
            }
            if listed.is_empty() {
                break;
            }
        }
        // The channels' items sort last (`WA#…`): the last batches.
        let channels: usize = self.channels.all().iter().map(|c| c.erase(key, now)).sum();
        Ok(erased + channels)
    }

    /// Every item of the contact's partition, as a Query lists it now.
    fn listing(&self, key: &ContactKey) -> Vec<Listed> {
        let state = self.lock();
        let Some(contact) = state.contacts.get(key) else {
            return Vec::new();
        };
        let mut listed: Vec<Listed> = contact.facts.keys().cloned().map(Listed::Fact).collect();
        listed.extend(contact.head.as_ref().map(|_| Listed::Head));
        listed.extend(contact.indexes.keys().map(|&s| Listed::Index(s)));
        listed.extend(contact.requests.keys().cloned().map(Listed::Request));
        listed.extend(contact.messages.keys().map(|&(s, q)| Listed::Message(s, q)));
        listed.extend(contact.archives.keys().map(|&s| Listed::Archive(s)));
        listed.sort();
        listed
    }

    /// Deletes the items by key, whatever they hold now (a batch's deletes are
    /// unconditional); how many were there.
    fn delete(&self, key: &ContactKey, items: &[Listed]) -> usize {
        let mut state = self.lock();
        let Some(contact) = state.contacts.get_mut(key) else {
            return 0;
        };
        let mut deleted = 0;
        for item in items {
            deleted += match item {
                Listed::Fact(fact) => usize::from(contact.facts.remove(fact).is_some()),
                Listed::Head => {
                    contact.sweep = None;
                    usize::from(contact.head.take().is_some())
                }
                // Two items: the index and the text.
                Listed::Index(session) => {
                    2 * usize::from(contact.indexes.remove(session).is_some())
                }
                Listed::Request(name) => usize::from(contact.requests.remove(name).is_some()),
                Listed::Message(session, seq) => {
                    usize::from(contact.messages.remove(&(*session, *seq)).is_some())
                }
                Listed::Archive(session) => usize::from(contact.archives.remove(session).is_some()),
            };
        }
        if contact.item_count() == 0 && !contact.in_flight {
            state.contacts.remove(key);
        }
        deleted
    }
}

/// Dates the contact's erase bucket with `now`; a later erase already recorded
/// stands.
fn mark(state: &mut State, key: &ContactKey, now: i64) {
    let bucket = crate::store::erase_bucket(key);
    let last = state
        .last_erase
        .entry((key.tenant.clone(), bucket))
        .or_insert(now);
    *last = (*last).max(now);
}
