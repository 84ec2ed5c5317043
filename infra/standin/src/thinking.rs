//! Extended thinking, the stand-in's way: signed `thinking` blocks and sealed
//! `redacted_thinking` blocks, and the check that every such block a request sends
//! back is one the stand-in produced, byte for byte, as the real API checks its
//! signatures.
//!
//! A signature is a keyed SHA-256 of the thinking text; a redacted block's `data` is
//! a random-looking payload and its keyed SHA-256. The key is a constant, so blocks
//! stay valid across stand-in restarts, as the real API's signatures do not expire.
//! (The texts of the refusals are the real API's for `thinking`; the one for
//! `redacted_thinking` follows its pattern, as the notes quote none.)

use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::wire::{Content, MessagesRequest, ResponseBlock};

/// The key of the stand-in's signatures.
const KEY: &str = "degrau-standin thinking v1";

fn mac(kind: &str, text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(KEY.as_bytes());
    hasher.update([0]);
    hasher.update(kind.as_bytes());
    hasher.update([0]);
    hasher.update(text.as_bytes());
    hex::encode(hasher.finalize())
}

/// The signature of a thinking text.
pub fn signature(thinking: &str) -> String {
    format!("standin-{}", mac("thinking", thinking))
}

/// A sealed `redacted_thinking` payload made from `seed`.
pub fn redacted_data(seed: &str) -> String {
    let payload = hex::encode(Sha256::digest(seed.as_bytes()));
    format!("{payload}.{}", mac("redacted", &payload))
}

fn data_is_sealed(data: &str) -> bool {
    data.split_once('.')
        .is_some_and(|(payload, seal)| seal == mac("redacted", payload))
}

/// A thinking block, signed.
pub fn thinking_block(thinking: String) -> ResponseBlock {
    let signature = signature(&thinking);
    ResponseBlock::Thinking {
        thinking,
        signature,
    }
}

/// Signs a scripted answer's thinking blocks that have no signature yet, and seals
/// its redacted blocks that have no data (`seed` keeps them distinct); blocks that
/// carry one are left as they are.
pub fn sign_scripted(content: &mut [ResponseBlock], seed: &str) {
    for (index, block) in content.iter_mut().enumerate() {
        match block {
            ResponseBlock::Thinking {
                thinking,
                signature: sig,
            } if sig.is_empty() => *sig = signature(thinking),
            ResponseBlock::RedactedThinking { data } if data.is_empty() => {
                *data = redacted_data(&format!("{seed}:{index}"));
            }
            _ => {}
        }
    }
}

/// Refuses a request carrying a thinking block the stand-in did not sign, or a
/// redacted block it did not seal (altered, forged, or made by another server).
pub fn verify(request: &MessagesRequest) -> Result<(), ApiError> {
    for (m, message) in request.messages.iter().enumerate() {
        for (b, block) in message.content.iter().enumerate() {
            match &block.content {
                Content::Thinking {
                    thinking,
                    signature: sig,
                } if *sig != signature(thinking) => {
                    return Err(ApiError::invalid(format!(
                        "messages.{m}.content.{b}: Invalid `signature` in `thinking` block"
                    )));
                }
                Content::RedactedThinking { data } if !data_is_sealed(data) => {
                    return Err(ApiError::invalid(format!(
                        "messages.{m}.content.{b}: Invalid `data` in `redacted_thinking` block"
                    )));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_bind_the_text_and_seals_bind_the_payload() {
        let sig = signature("check Friday");
        assert_eq!(sig, signature("check Friday"));
        assert_ne!(sig, signature("check Friday!"));
        let data = redacted_data("seed");
        assert!(data_is_sealed(&data));
        assert!(!data_is_sealed(&data.replace('a', "b")));
        assert!(!data_is_sealed("no seal"));
    }
}
