//! What a channel's own DynamoDB adapter (in its crate: `degrau-whatsapp`'s `aws`
//! feature) uses of this one: its items live in the same table, a contact's in the
//! contact's partition (so an erase takes them, see `tombstone`), under the key
//! layout of [`keys`](super::keys). The client and table are
//! [`DynamoStore::client`](super::DynamoStore::client) and
//! [`DynamoStore::table`](super::DynamoStore::table); this module gives the item
//! conversions, the conditional writes' error mapping and the one paging helper,
//! so a channel's adapter reads like this one.

pub use super::error::{sdk_error, transact_if, unless_condition_failed};
pub use super::items::{IndexedKey, Item, from_item, n, s, to_item};
pub use super::queries::Pages;
pub use super::tombstone::TombstoneItem;
