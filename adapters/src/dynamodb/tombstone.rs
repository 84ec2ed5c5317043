//! What an erase leaves of a channel's record (an item of the contact's partition
//! carrying a `tombstone` attribute, as WhatsApp's inbound records do): a
//! tombstone item, `WA#ERASED#{hash}` / `TOMBSTONE`, living as long as the record
//! would have, so a delivery of its message replayed later is recognised. The
//! channel reads it back (`degrau-whatsapp`'s `aws::dynamodb`).

use degrau::store::StoreError;
use serde::{Deserialize, Serialize};

use super::DynamoStore;
use super::items::{Item, to_item};
use super::keys::{TOMBSTONE_SK, tombstone_pk};

/// What an erase leaves of an inbound record (`WA#ERASED#{hash}` / `TOMBSTONE`),
/// living as long as the record would have.
#[derive(Serialize, Deserialize)]
pub struct TombstoneItem {
    /// [`tombstone_pk`] of the record's tombstone.
    pub pk: String,
    /// [`TOMBSTONE_SK`].
    pub sk: String,
    /// When the record would have expired.
    pub expires_at: i64,
}

/// A tombstone as a channel stores it on its record: 64 lowercase hex digits (a
/// keyed hash naming no one); anything else is no tombstone.
fn is_tombstone(text: &str) -> bool {
    text.len() == 64 && text.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
}

impl DynamoStore {
    /// The tombstones of the inbound records among `items` (an erase's listing,
    /// with each record's `tombstone` and `expires_at`).
    pub(super) fn tombstones_of(items: &[Item]) -> Result<Vec<Item>, StoreError> {
        items
            .iter()
            .filter_map(|item| {
                let tombstone = item.get("tombstone")?.as_s().ok()?;
                if !is_tombstone(tombstone) {
                    return None;
                }
                let expires_at = item.get("expires_at")?.as_n().ok()?.parse().ok()?;
                Some(to_item(&TombstoneItem {
                    pk: tombstone_pk(tombstone),
                    sk: TOMBSTONE_SK.to_owned(),
                    expires_at,
                }))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_64_lowercase_hex_digits_are_a_tombstone() {
        assert!(is_tombstone(&"a1".repeat(32)));
        for other in [
            "",
            "A1",
            &"a1".repeat(31),
            &"g1".repeat(32),
            &"A1".repeat(32),
        ] {
            assert!(!is_tombstone(other), "{other}");
        }
    }
}
