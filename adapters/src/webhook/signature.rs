//! What a receiver checks: the signature of each call, and the contact's pseudonym.
//!
//! **The signature** (the Stripe scheme): `Degrau-Signature: t=<unix seconds>,v1=<hex
//! HMAC-SHA256 of "<t>.<raw body>" under the webhook's secret>`. A receiver recomputes
//! it over the raw body it received, compares in constant time, and refuses a `t`
//! more than a few minutes old (a replayed call). Each attempt is signed afresh.
//!
//! **The contact** is never sent: the body carries `hex(HMAC-SHA256(key = the
//! secret, "{tenant}\n{contact}"))` cut to 32 hex characters (128 bits). It is
//! stable for one receiver (a customer's bookings can be found again), unlinkable
//! across receivers with different secrets, and not reversible without the secret.
//! A receiver that needs the customer's name or number asks for it in its
//! `input_schema`, so the model asks the customer.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "Degrau-Signature";

/// Hex characters of the contact's pseudonym.
pub const PSEUDONYM_HEX_CHARS: usize = 32;

fn mac(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    #[allow(clippy::expect_used)]
    Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts any key length")
}

/// The `Degrau-Signature` value of `body` sent at `timestamp` (unix seconds).
pub fn signature_header(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// The contact's pseudonym for the receiver holding `secret`.
pub fn contact_pseudonym(secret: &[u8], tenant: &str, contact: &str) -> String {
    let mut mac = mac(secret);
    mac.update(tenant.as_bytes());
    mac.update(b"\n");
    mac.update(contact.as_bytes());
    let mut hex = hex::encode(mac.finalize().into_bytes());
    hex.truncate(PSEUDONYM_HEX_CHARS);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_the_timestamp_a_dot_and_the_body() {
        // RFC 4231's first test case's key and data, framed as "<t>.<body>": the value
        // below was computed independently (Python: hmac.new(b"\x0b" * 20,
        // b"1700000000.Hi There", hashlib.sha256).hexdigest()).
        let header = signature_header(&[0x0b; 20], 1_700_000_000, b"Hi There");
        assert_eq!(
            header,
            "t=1700000000,v1=931b0eed568d243adecea23bdfaea1fa89ca9581f28abf24320ee9d0944d98bb"
        );
    }

    #[test]
    fn the_pseudonym_is_stable_per_secret_and_differs_across_secrets_and_contacts() {
        let a = contact_pseudonym(b"secret-a", "shop", "ana");
        // Computed independently: hmac.new(b"secret-a", b"shop\nana",
        // hashlib.sha256).hexdigest()[:32].
        assert_eq!(a, "3cd41e49bddd1dbb349dc939ad83d283");
        assert_eq!(a.len(), PSEUDONYM_HEX_CHARS);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(a, contact_pseudonym(b"secret-a", "shop", "ana"));
        assert_ne!(a, contact_pseudonym(b"secret-b", "shop", "ana"));
        assert_ne!(a, contact_pseudonym(b"secret-a", "shop", "bia"));
        assert_ne!(a, contact_pseudonym(b"secret-a", "shop2", "ana"));
        // The separator keeps "ab"+"c" and "a"+"bc" apart.
        assert_ne!(
            contact_pseudonym(b"k", "ab", "c"),
            contact_pseudonym(b"k", "a", "bc")
        );
        assert!(!a.contains("ana"));
    }
}
