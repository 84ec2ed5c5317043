//! What a receiver checks: the signature of each call, and the contact's pseudonym.
//!
//! **The signature** (the Stripe scheme): `Degrau-Signature: t=<unix seconds>,v1=<hex
//! HMAC-SHA256 of "<t>.<raw body>" under the webhook's secret>`. A receiver recomputes
//! it over the raw body it received, compares in constant time, and refuses a `t`
//! more than a few minutes old (a replayed call). Each attempt is signed afresh.
//!
//! **The contact** is never sent: the body carries a pseudonym,
//! `hex(HMAC-SHA256(key = the tenant's pseudonym key, "{receiver}\n{contact}"))` cut
//! to 32 hex characters (128 bits), where the receiver is named by its secret's SSM
//! parameter and the tenant's pseudonym key is `HMAC-SHA256(key = the deployment's
//! pseudonym secret, "degrau pseudonym v1\n{tenant}")`. Only degrau holds the
//! deployment's secret: a receiver holds its signing secret, which does not key the
//! pseudonym, so it cannot recover a WhatsApp contact's phone number by trying the
//! numbering plan. The pseudonym is stable for one tenant and receiver (a
//! customer's bookings can be found again, and a rotated signing secret changes
//! nothing), and unlinkable across receivers and across tenants. A receiver that
//! needs the customer's name or number asks for it in its `input_schema`, so the
//! model asks the customer.

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

/// What the tenant's pseudonym key is derived under: versioned, so a new scheme
/// can never give an old pseudonym by accident.
const PSEUDONYM_KEY_LABEL: &[u8] = b"degrau pseudonym v1\n";

/// One tenant's pseudonym key, derived from the deployment's pseudonym secret.
pub fn tenant_pseudonym_key(deployment_secret: &[u8], tenant: &str) -> [u8; 32] {
    let mut mac = mac(deployment_secret);
    mac.update(PSEUDONYM_KEY_LABEL);
    mac.update(tenant.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The contact's pseudonym for `receiver` (the SSM parameter naming the receiver's
/// signing secret), under the tenant's pseudonym key.
pub fn contact_pseudonym(tenant_key: &[u8], receiver: &str, contact: &str) -> String {
    let mut mac = mac(tenant_key);
    mac.update(receiver.as_bytes());
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

    /// The clients' `verify_signature` tests check these signatures
    /// (`clients/fixtures/webhook-signatures.json`): each is what this module signs.
    #[test]
    fn the_clients_signature_fixtures_are_what_degrau_signs() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../clients/fixtures/webhook-signatures.json"
        );
        let fixtures: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = fixtures["cases"].as_array().unwrap();
        assert!(cases.len() >= 3);
        for case in cases {
            let text = |field: &str| case[field].as_str().unwrap().as_bytes();
            let header = signature_header(
                text("secret"),
                case["timestamp"].as_u64().unwrap(),
                text("body"),
            );
            assert_eq!(header, case["header"].as_str().unwrap(), "{}", case["name"]);
        }
    }

    #[test]
    fn the_pseudonym_is_keyed_by_degrau_per_tenant_and_receiver() {
        let deployment = b"deployment-pseudonym-secret";
        let shop = tenant_pseudonym_key(deployment, "shop");
        // Computed independently (Python): k = hmac.new(b"deployment-pseudonym-secret",
        // b"degrau pseudonym v1\nshop", hashlib.sha256).digest();
        // hmac.new(k, b"/degrau/webhooks/shop/calendar\nana", hashlib.sha256).hexdigest()[:32]
        let a = contact_pseudonym(&shop, "/degrau/webhooks/shop/calendar", "ana");
        assert_eq!(a, "5603000d8b22e6ab54a9261d2ede9c91");
        assert_eq!(a.len(), PSEUDONYM_HEX_CHARS);
        assert_eq!(
            a,
            contact_pseudonym(&shop, "/degrau/webhooks/shop/calendar", "ana"),
            "stable for one tenant and receiver"
        );
        for other in [
            contact_pseudonym(&shop, "/degrau/webhooks/shop/crm", "ana"),
            contact_pseudonym(&shop, "/degrau/webhooks/shop/calendar", "bia"),
            contact_pseudonym(
                &tenant_pseudonym_key(deployment, "shop2"),
                "/degrau/webhooks/shop/calendar",
                "ana",
            ),
            contact_pseudonym(
                &tenant_pseudonym_key(b"another deployment", "shop"),
                "/degrau/webhooks/shop/calendar",
                "ana",
            ),
        ] {
            assert_ne!(a, other);
        }
        // The separator keeps "ab"+"c" and "a"+"bc" apart.
        assert_ne!(
            contact_pseudonym(&shop, "ab", "c"),
            contact_pseudonym(&shop, "a", "bc")
        );
        assert!(!a.contains("ana"));
    }

    #[test]
    fn a_receiver_holding_its_signing_secret_cannot_recompute_the_pseudonym() {
        // What the pseudonym was before: the receiver's own secret keyed it, so a
        // receiver could try every number of a numbering plan against it.
        let secret = b"whsec_receiver";
        let number = "5511987654321";
        let by_receiver = {
            let mut mac = mac(secret);
            mac.update(b"shop\n");
            mac.update(number.as_bytes());
            let mut hex = hex::encode(mac.finalize().into_bytes());
            hex.truncate(PSEUDONYM_HEX_CHARS);
            hex
        };
        let sent = contact_pseudonym(
            &tenant_pseudonym_key(b"only degrau holds this", "shop"),
            "/degrau/webhooks/shop/calendar",
            number,
        );
        assert_ne!(sent, by_receiver);
        for key in [&secret[..], b"shop", b""] {
            assert_ne!(
                sent,
                contact_pseudonym(key, "/degrau/webhooks/shop/calendar", number)
            );
        }
    }
}
