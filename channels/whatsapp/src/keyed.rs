//! Keyed names of what the channel keeps about a conversation outside the contact's
//! partition: the inbound queue's message group and de-duplication ids, and the
//! tombstone an erase leaves of each message id. Each is an HMAC-SHA256 under a key
//! derived from the deployment's pseudonym secret (the one that keys webhook tools'
//! contact pseudonyms; only degrau holds it), never an unkeyed hash: a phone number
//! has few enough digits that hashing the numbering plan would recover it from an
//! unkeyed SHA-256 of `T#{tenant}#C#{number}`, and a group id shows in the console
//! and stays in the dead-letter queue for 14 days. Each name has its own derived key
//! (a label per use, versioned), so no one of them can stand for another.

use hmac::{KeyInit, Mac};
use sha2::Sha256;

use super::WaMessageId;
use degrau::domain::TenantId;
use degrau::store::ContactKey;

type HmacSha256 = hmac::Hmac<Sha256>;

/// What each key is derived under.
const GROUP_LABEL: &[u8] = b"degrau whatsapp group v1\n";
const DEDUPLICATION_LABEL: &[u8] = b"degrau whatsapp deduplication v1\n";
const TOMBSTONE_LABEL: &[u8] = b"degrau whatsapp erased v1\n";

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC takes a key of any length.
    #[allow(clippy::expect_used)]
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC accepts any key length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// The channel's keys, derived once from the deployment's pseudonym secret.
#[derive(Clone)]
pub struct ChannelKeys {
    group: [u8; 32],
    deduplication: [u8; 32],
    tombstone: [u8; 32],
}

// Never the keys in a Debug line.
impl std::fmt::Debug for ChannelKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChannelKeys(<redacted>)")
    }
}

impl ChannelKeys {
    /// The keys of a deployment whose pseudonym secret is `secret`.
    pub fn derive(secret: &[u8]) -> ChannelKeys {
        ChannelKeys {
            group: hmac(secret, &[GROUP_LABEL]),
            deduplication: hmac(secret, &[DEDUPLICATION_LABEL]),
            tombstone: hmac(secret, &[TOMBSTONE_LABEL]),
        }
    }

    /// The queue's message group of a conversation: 64 hex digits.
    pub fn group_id(&self, key: &ContactKey) -> String {
        let name = format!("T#{}#C#{}", key.tenant, key.contact);
        hex::encode(hmac(&self.group, &[name.as_bytes()]))
    }

    /// The queue's de-duplication id of a message: 64 hex digits.
    pub fn deduplication_id(&self, id: &WaMessageId) -> String {
        hex::encode(hmac(&self.deduplication, &[id.as_str().as_bytes()]))
    }

    /// The tombstone of a message of `tenant` whose contact was erased.
    pub fn tombstone(&self, tenant: &TenantId, id: &WaMessageId) -> Tombstone {
        let name = format!("{tenant}\n{id}");
        Tombstone(hex::encode(hmac(&self.tombstone, &[name.as_bytes()])))
    }
}

/// What an erase leaves of one WhatsApp message id: its keyed hash (64 hex digits),
/// naming no one, kept as long as Meta may deliver the message again, so that a
/// signed delivery replayed after the erase stores and answers nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tombstone(String);

impl Tombstone {
    /// The 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A tombstone as stored (64 lowercase hex digits), `None` for anything else.
    pub fn parse(text: &str) -> Option<Tombstone> {
        (text.len() == 64 && text.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')))
            .then(|| Tombstone(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::domain::ContactId;

    #[test]
    fn each_name_is_keyed_stable_and_distinct_and_names_no_one() {
        let keys = ChannelKeys::derive(b"the deployment's pseudonym secret");
        let other = ChannelKeys::derive(b"another deployment's secret");
        let key = ContactKey {
            tenant: TenantId::parse("barber").unwrap(),
            contact: ContactId::parse("15550000001").unwrap(),
        };
        let id = WaMessageId::parse("wamid.HBgLMTU1NTAwMDAwMDE=").unwrap();
        let group = keys.group_id(&key);
        assert_eq!(group, keys.group_id(&key), "stable");
        assert_eq!(group.len(), 64);
        assert_ne!(group, other.group_id(&key), "keyed");
        // Not the unkeyed hash a first version used.
        let unkeyed = hex::encode(<Sha256 as sha2::Digest>::digest(b"T#barber#C#15550000001"));
        assert_ne!(group, unkeyed);
        let dedup = keys.deduplication_id(&id);
        let tomb = keys.tombstone(&key.tenant, &id);
        assert_ne!(dedup, tomb.as_str(), "a key per use");
        assert_ne!(
            tomb,
            keys.tombstone(&TenantId::parse("florist").unwrap(), &id)
        );
        for name in [&group, &dedup, &tomb.0] {
            assert!(!name.contains("1555") && !name.contains("HBgL"));
        }
        assert!(!format!("{keys:?}").contains(&hex::encode(keys.group)));
    }
}
