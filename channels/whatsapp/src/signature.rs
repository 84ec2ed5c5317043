//! Meta's two checks: every `POST` carries `X-Hub-Signature-256: sha256=<hex>`, the
//! HMAC-SHA256 of the raw body under the app secret; the one-time `GET` of the
//! verification handshake carries the verify token set in the app dashboard. Both
//! are compared in constant time (`hmac`'s `verify_slice`, `subtle`), so the time
//! an answer takes tells nothing about how much of a guess was right.

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Why a body's signature was refused (the webhook answers 401 either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `X-Hub-Signature-256` header.
    #[error("the X-Hub-Signature-256 header is missing")]
    Missing,
    /// Not `sha256=` and 64 hex digits.
    #[error("the X-Hub-Signature-256 header is not `sha256=` and 64 hex digits")]
    Malformed,
    /// Well formed, but not the body's HMAC under the app secret.
    #[error("the X-Hub-Signature-256 header does not match the body")]
    Mismatch,
}

impl SignatureError {
    /// A short name for logs and metrics.
    pub fn code(self) -> &'static str {
        match self {
            SignatureError::Missing => "missing",
            SignatureError::Malformed => "malformed",
            SignatureError::Mismatch => "mismatch",
        }
    }
}

/// Checks `header` (the value of `X-Hub-Signature-256`) against the HMAC-SHA256 of
/// `body` under `app_secret`, in constant time.
pub fn verify_signature(
    app_secret: &[u8],
    body: &[u8],
    header: Option<&str>,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?.trim();
    let hex_digest = header
        .strip_prefix("sha256=")
        .filter(|hex| hex.len() == 64)
        .ok_or(SignatureError::Malformed)?;
    let given = hex::decode(hex_digest).map_err(|_| SignatureError::Malformed)?;
    let mut mac = HmacSha256::new_from_slice(app_secret).map_err(|_| SignatureError::Mismatch)?;
    mac.update(body);
    mac.verify_slice(&given)
        .map_err(|_| SignatureError::Mismatch)
}

/// True when `given` is the configured verify token, compared in constant time
/// (over the two tokens' SHA-256, so their lengths do not show either).
pub fn token_matches(expected: &str, given: &str) -> bool {
    let expected = Sha256::digest(expected.as_bytes());
    let given = Sha256::digest(given.as_bytes());
    bool::from(expected.as_slice().ct_eq(given.as_slice()))
}

/// Longest `hub.challenge` echoed: Meta sends a short number.
pub const MAX_CHALLENGE_CHARS: usize = 128;

/// The answer to Meta's verification `GET`: the challenge to echo, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// Echo this challenge (200, text/plain).
    Echo(String),
    /// The mode is not `subscribe` or the token is wrong (403).
    Forbidden,
    /// A parameter is missing or the challenge is not a short plain token (400).
    Invalid(&'static str),
}

/// Meta's verification handshake: `hub.mode=subscribe`, `hub.verify_token` equal to
/// the configured token, and `hub.challenge` echoed back. The challenge is echoed
/// only when it is 1–128 of `[A-Za-z0-9._-]` (Meta's is a number), so the endpoint
/// never reflects markup.
pub fn handshake(
    verify_token: &str,
    mode: Option<&str>,
    token: Option<&str>,
    challenge: Option<&str>,
) -> Handshake {
    let (Some(mode), Some(token), Some(challenge)) = (mode, token, challenge) else {
        return Handshake::Invalid("hub.mode, hub.verify_token and hub.challenge are all required");
    };
    if mode != "subscribe" || !token_matches(verify_token, token) {
        return Handshake::Forbidden;
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if challenge.is_empty()
        || challenge.len() > MAX_CHALLENGE_CHARS
        || !challenge.chars().all(plain)
    {
        return Handshake::Invalid("hub.challenge must be 1-128 of A-Z a-z 0-9 . _ -");
    }
    Handshake::Echo(challenge.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
    const RFC4231_2: &str = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";

    #[test]
    fn a_signature_is_the_bodys_hmac_sha256_under_the_app_secret() {
        let body = b"what do ya want for nothing?";
        let header = format!("sha256={RFC4231_2}");
        assert_eq!(verify_signature(b"Jefe", body, Some(&header)), Ok(()));
        let upper = format!("sha256={}", RFC4231_2.to_uppercase());
        assert_eq!(verify_signature(b"Jefe", body, Some(&upper)), Ok(()));
        assert_eq!(
            verify_signature(b"Jefe", b"what do ya want for nothing!", Some(&header)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(b"jefe", body, Some(&header)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(b"Jefe", body, None),
            Err(SignatureError::Missing)
        );
        for bad in [
            RFC4231_2.to_owned(),
            format!("sha1={RFC4231_2}"),
            format!("sha256={}", &RFC4231_2[..63]),
            format!("sha256={}zz", &RFC4231_2[..62]),
            "sha256=".to_owned(),
        ] {
            assert_eq!(
                verify_signature(b"Jefe", body, Some(&bad)),
                Err(SignatureError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_handshake_echoes_the_challenge_only_for_the_right_token() {
        let ok = handshake("tok", Some("subscribe"), Some("tok"), Some("1158201444"));
        assert_eq!(ok, Handshake::Echo("1158201444".into()));
        for (mode, token) in [
            ("subscribe", "tok2"),
            ("subscribe", ""),
            ("unsubscribe", "tok"),
        ] {
            assert_eq!(
                handshake("tok", Some(mode), Some(token), Some("1")),
                Handshake::Forbidden
            );
        }
        assert!(matches!(
            handshake("tok", Some("subscribe"), None, Some("1")),
            Handshake::Invalid(_)
        ));
        for challenge in ["", "<script>", &"1".repeat(129)] {
            assert!(matches!(
                handshake("tok", Some("subscribe"), Some("tok"), Some(challenge)),
                Handshake::Invalid(_)
            ));
        }
        assert!(token_matches("a", "a") && !token_matches("a", "ab"));
    }
}
