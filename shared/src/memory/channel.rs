//! The channels' in-memory stores attached to a [`MemoryStore`]: a channel crate's
//! double (WhatsApp's `MemoryWhatsApp`) keeps its own items, and this store's
//! erase of a contact takes them too, as DynamoDB's erase takes every item of the
//! contact's partition.

use std::sync::{Arc, Mutex, PoisonError};

use super::MemoryStore;
use crate::store::ContactKey;

/// A channel's in-memory store (its crate's `test-util`) whose items live in a
/// contact's partition, as the DynamoDB adapter keeps them: an erase of the
/// contact takes them with the rest, and they count among the partition's items.
pub trait ChannelPartition: Send + Sync {
    /// Erases the contact's items at `now` (leaving what the channel keeps of an
    /// erase, such as tombstones); how many there were.
    fn erase(&self, key: &ContactKey, now: i64) -> usize;

    /// How many items the contact's partition holds of the channel's.
    fn item_count(&self, key: &ContactKey) -> usize;
}

/// The channels attached to a store (see [`MemoryStore::attach`]).
#[derive(Default)]
pub(super) struct Channels(Mutex<Vec<Arc<dyn ChannelPartition>>>);

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Channels")
    }
}

impl Channels {
    pub(super) fn all(&self) -> Vec<Arc<dyn ChannelPartition>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl MemoryStore {
    /// Attaches a channel's in-memory store: an erase of a contact takes its items
    /// too, and [`MemoryStore::item_count`] counts them.
    pub fn attach(&self, channel: Arc<dyn ChannelPartition>) {
        self.channels
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(channel);
    }
}
