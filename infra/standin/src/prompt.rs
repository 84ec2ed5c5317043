//! The stand-in's view of a prompt: an ordered list of *cacheable positions* (each
//! tool, each system block, each message content block, in the API's prefix order
//! tools → system → messages), each with its own token count and the hash of the
//! whole prefix up to and including it.
//!
//! Token counting is the stand-in's own and deterministic: a position costs
//! `ceil(chars of its canonical JSON without cache_control / 4)`, at least 1. It is
//! not Claude's tokenizer, and nothing in degrau may depend on the exact numbers;
//! what matters is that they are stable, add up, and grow with the text.
//!
//! Hashes are chained SHA-256 and ignore `cache_control`, so moving a breakpoint
//! (or changing its `ttl`) does not change a prefix, while changing any byte of an
//! earlier position does.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::wire::MessagesRequest;
pub use crate::wire::Ttl;

/// Hash of a canonical prefix.
pub type PrefixHash = [u8; 32];

/// One cacheable position of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// Tokens of this position alone.
    pub tokens: u64,
    /// Hash of the canonical prefix up to and including this position.
    pub prefix_hash: PrefixHash,
    /// The position's `cache_control`, by its lifetime (none: not a breakpoint).
    pub breakpoint: Option<Ttl>,
}

/// A request flattened into cacheable positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    positions: Vec<Position>,
    fingerprint: PrefixHash,
}

/// Tokens of a text of `chars` characters: a quarter, rounded up, at least 1.
pub fn tokens_for_chars(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

/// Tokens of a value's canonical JSON (serde writes struct fields in declaration
/// order and, without `preserve_order`, map keys sorted).
pub fn tokens_of<T: Serialize>(value: &T) -> u64 {
    tokens_for_chars(canonical(value).chars().count())
}

fn canonical<T: Serialize>(value: &T) -> String {
    // Serialising these plain data types cannot fail; an empty string would only
    // make the count smaller, never panic a handler.
    serde_json::to_string(value).unwrap_or_default()
}

fn chain(previous: &PrefixHash, tag: &str, json: &str) -> PrefixHash {
    let mut hasher = Sha256::new();
    hasher.update(previous);
    hasher.update(tag.as_bytes());
    hasher.update([0]);
    hasher.update(json.as_bytes());
    hasher.finalize().into()
}

impl Prompt {
    /// Flattens a request. Each block's breakpoint is its own `cache_control`;
    /// `prelude` is the canonical JSON of the request options that invalidate the
    /// messages part of the cache when they change (`tool_choice`, the output
    /// format, `thinking`).
    pub fn flatten(request: &MessagesRequest, prelude: &str) -> Self {
        // Caches are per model: the model id seeds the chain.
        let mut hash = chain(&[0; 32], "degrau-standin/v1 model", &request.model);
        let mut positions = Vec::new();
        let mut push = |hash: &mut PrefixHash, tag: &str, json: String, breakpoint: Option<Ttl>| {
            *hash = chain(hash, tag, &json);
            positions.push(Position {
                tokens: tokens_for_chars(json.chars().count()),
                prefix_hash: *hash,
                breakpoint,
            });
        };

        for tool in &request.tools {
            push(&mut hash, "tool", canonical(tool), tool.cache_control);
        }
        for block in &request.system {
            push(&mut hash, "system", canonical(block), block.cache_control);
        }
        hash = chain(&hash, "prelude", prelude);
        for message in &request.messages {
            let role = message.role.as_str();
            for (index, block) in message.content.iter().enumerate() {
                // The tag keeps message boundaries and roles in the prefix.
                let tag = if index == 0 {
                    format!("message {role}")
                } else {
                    format!("block {role}")
                };
                push(
                    &mut hash,
                    &tag,
                    canonical(&block.content),
                    block.cache_control,
                );
            }
        }
        Prompt {
            positions,
            fingerprint: hash,
        }
    }

    /// A prompt made of given positions (for tests of the cache arithmetic).
    #[cfg(test)]
    pub(crate) fn from_positions(positions: Vec<Position>) -> Self {
        Prompt {
            positions,
            fingerprint: [0; 32],
        }
    }

    /// The positions, in prefix order.
    pub fn positions(&self) -> &[Position] {
        &self.positions
    }

    /// Tokens of the whole prompt.
    pub fn total_tokens(&self) -> u64 {
        self.positions.iter().map(|p| p.tokens).sum()
    }

    /// Hex hash of the whole prompt, options included: a deterministic seed for the
    /// ids the stand-in invents (the same request always gets the same ids).
    pub fn fingerprint(&self) -> String {
        hex::encode(self.fingerprint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_request;
    use crate::wire::{Content, SystemBlock};
    use serde_json::{Value, json};

    /// A request with one tool, a marked system block and one user message of
    /// `texts`, with `extra` fields merged in at the top level.
    fn body(texts: &[&str], extra: Value) -> Value {
        let blocks: Vec<Value> = texts
            .iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect();
        let mut body = json!({
            "model": "claude-sonnet-5", "max_tokens": 100,
            "tools": [{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": blocks}],
        });
        if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
        }
        body
    }

    fn prompt(body: &Value) -> Prompt {
        let parsed = parse_request(body.to_string().as_bytes()).unwrap();
        Prompt::flatten(&parsed.request, &parsed.prelude)
    }

    fn hashes(prompt: &Prompt) -> Vec<PrefixHash> {
        prompt.positions().iter().map(|p| p.prefix_hash).collect()
    }

    #[test]
    fn counts_a_quarter_of_the_canonical_json_rounded_up_and_at_least_one() {
        assert_eq!(tokens_for_chars(0), 1);
        assert_eq!(tokens_for_chars(4), 1);
        assert_eq!(tokens_for_chars(5), 2);
        // {"type":"text","text":"abcd"} is 29 characters.
        let block = Content::Text {
            text: "abcd".into(),
        };
        assert_eq!(tokens_of(&block), 8);
        // {"type":"text","text":"be brief"}: 33, without its cache_control.
        assert_eq!(tokens_of(&SystemBlock::text("be brief")), 9);
        let prompt = prompt(&body(&["abcd"], json!({})));
        assert_eq!(prompt.positions().len(), 3);
        assert_eq!(prompt.positions()[1].tokens, 9);
        assert_eq!(prompt.positions()[2].tokens, 8);
        assert_eq!(
            prompt.total_tokens(),
            prompt.positions().iter().map(|p| p.tokens).sum::<u64>()
        );
    }

    #[test]
    fn breakpoints_do_not_change_hashes_but_content_and_options_do() {
        let plain = prompt(&body(&["a", "b"], json!({})));
        let mut marked_body = body(&["a", "b"], json!({}));
        marked_body["tools"][0]["cache_control"] = json!({"type": "ephemeral", "ttl": "1h"});
        marked_body["system"][0]
            .as_object_mut()
            .unwrap()
            .remove("cache_control");
        marked_body["messages"][0]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        let marked = prompt(&marked_body);
        assert_eq!(hashes(&plain), hashes(&marked));
        let lifetimes: Vec<Option<Ttl>> = marked.positions().iter().map(|p| p.breakpoint).collect();
        assert_eq!(
            lifetimes,
            [Some(Ttl::OneHour), None, Some(Ttl::FiveMinutes), None]
        );

        let edited = prompt(&body(&["a", "c"], json!({})));
        assert_eq!(hashes(&plain)[2], hashes(&edited)[2]);
        assert_ne!(hashes(&plain)[3], hashes(&edited)[3]);

        let forced = prompt(&body(&["a", "b"], json!({"tool_choice": {"type": "none"}})));
        assert_eq!(hashes(&plain)[1], hashes(&forced)[1]);
        assert_ne!(hashes(&plain)[2], hashes(&forced)[2]);
    }

    #[test]
    fn reads_the_api_spelling_of_lifetimes() {
        assert_eq!(Ttl::parse("1h"), Some(Ttl::OneHour));
        assert_eq!(Ttl::parse("5m"), Some(Ttl::FiveMinutes));
        assert_eq!(Ttl::parse("10m"), None);
        assert_eq!(Ttl::OneHour.ms(), 12 * Ttl::FiveMinutes.ms());
    }

    #[test]
    fn another_model_shares_no_prefix() {
        let a = prompt(&body(&["a"], json!({})));
        let b = prompt(&body(&["a"], json!({"model": "claude-haiku-4-5"})));
        assert_ne!(a.positions()[0].prefix_hash, b.positions()[0].prefix_hash);
        assert_ne!(a.fingerprint(), b.fingerprint());
    }
}
