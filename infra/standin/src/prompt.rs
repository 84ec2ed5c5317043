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

use degrau::domain::Role;
use degrau::request::{ModelRequest, SystemBlock};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Hash of a canonical prefix.
pub type PrefixHash = [u8; 32];

/// Lifetime of a cache entry: `cache_control.ttl`, `"5m"` (the default) or `"1h"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Ttl {
    /// Five minutes; a write costs 1.25× a base input token.
    #[default]
    FiveMinutes,
    /// One hour; a write costs 2×.
    OneHour,
}

impl Ttl {
    /// The lifetime, in milliseconds.
    pub fn ms(self) -> u64 {
        match self {
            Ttl::FiveMinutes => 5 * 60 * 1000,
            Ttl::OneHour => 60 * 60 * 1000,
        }
    }

    /// Reads the API's spelling.
    pub fn parse(text: &str) -> Option<Ttl> {
        match text {
            "5m" => Some(Ttl::FiveMinutes),
            "1h" => Some(Ttl::OneHour),
            _ => None,
        }
    }
}

/// The `cache_control` of every place of a request that can carry one, with its
/// lifetime: degrau's request types keep neither a tool's breakpoint nor `ttl`,
/// so the parser reads them from the JSON and keeps them here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// Per tool.
    pub tools: Vec<Option<Ttl>>,
    /// Per system block.
    pub system: Vec<Option<Ttl>>,
    /// Per message, per content block.
    pub messages: Vec<Vec<Option<Ttl>>>,
}

impl Marks {
    /// Breakpoints on tools.
    pub fn tool_breakpoints(&self) -> usize {
        self.tools.iter().flatten().count()
    }

    fn system(&self, index: usize) -> Ttl {
        self.system
            .get(index)
            .copied()
            .flatten()
            .unwrap_or_default()
    }

    fn message(&self, message: usize, block: usize) -> Ttl {
        self.messages
            .get(message)
            .and_then(|m| m.get(block))
            .copied()
            .flatten()
            .unwrap_or_default()
    }
}

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
    /// Flattens a request. `marks` holds the breakpoints of the tools and the
    /// lifetime of every breakpoint (a system or message block's `cache_control`
    /// without a mark is a five-minute one); `prelude` is the canonical JSON of the
    /// request options that invalidate the messages part of the cache when they
    /// change (`tool_choice`, the output format).
    pub fn flatten(request: &ModelRequest, marks: &Marks, prelude: &str) -> Self {
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

        for (index, tool) in request.tools.iter().enumerate() {
            let marked = marks.tools.get(index).copied().flatten();
            push(&mut hash, "tool", canonical(tool), marked);
        }
        for (index, block) in request.system.iter().enumerate() {
            let bare = SystemBlock {
                cache_control: None,
                ..block.clone()
            };
            push(
                &mut hash,
                "system",
                canonical(&bare),
                block.cache_control.map(|_| marks.system(index)),
            );
        }
        hash = chain(&hash, "prelude", prelude);
        for (number, message) in request.messages.iter().enumerate() {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
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
                    canonical(&block.block),
                    block.cache_control.map(|_| marks.message(number, index)),
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
    use degrau::domain::ContentBlock;
    use degrau::request::{CacheControl, RequestBlock, RequestMessage, ToolDef};
    use serde_json::json;

    fn request(texts: &[&str]) -> ModelRequest {
        ModelRequest {
            model: "claude-sonnet-5".into(),
            max_tokens: 100,
            thinking: None,
            tools: vec![ToolDef {
                name: "t".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            }],
            tool_choice: None,
            system: vec![SystemBlock {
                kind: "text".into(),
                text: "be brief".into(),
                cache_control: Some(CacheControl::EPHEMERAL),
            }],
            messages: vec![RequestMessage {
                role: Role::User,
                content: texts
                    .iter()
                    .map(|t| RequestBlock {
                        block: ContentBlock::text(*t),
                        cache_control: None,
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn counts_a_quarter_of_the_canonical_json_rounded_up_and_at_least_one() {
        assert_eq!(tokens_for_chars(0), 1);
        assert_eq!(tokens_for_chars(4), 1);
        assert_eq!(tokens_for_chars(5), 2);
        // {"type":"text","text":"abcd"} is 29 characters.
        assert_eq!(tokens_of(&ContentBlock::text("abcd")), 8);
        let prompt = Prompt::flatten(&request(&["abcd"]), &Marks::default(), "");
        assert_eq!(prompt.positions().len(), 3);
        assert_eq!(prompt.positions()[2].tokens, 8);
        assert_eq!(
            prompt.total_tokens(),
            prompt.positions().iter().map(|p| p.tokens).sum::<u64>()
        );
    }

    #[test]
    fn breakpoints_do_not_change_hashes_but_content_and_options_do() {
        let plain = Prompt::flatten(&request(&["a", "b"]), &Marks::default(), "");
        let mut marked_request = request(&["a", "b"]);
        marked_request.system[0].cache_control = None;
        marked_request.messages[0].content[0].cache_control = Some(CacheControl::EPHEMERAL);
        let marks = Marks {
            tools: vec![Some(Ttl::OneHour)],
            ..Marks::default()
        };
        let marked = Prompt::flatten(&marked_request, &marks, "");
        let hashes = |p: &Prompt| -> Vec<PrefixHash> {
            p.positions().iter().map(|x| x.prefix_hash).collect()
        };
        assert_eq!(hashes(&plain), hashes(&marked));
        assert_eq!(marked.positions()[0].breakpoint, Some(Ttl::OneHour));
        assert_eq!(marked.positions()[1].breakpoint, None);
        assert_eq!(marked.positions()[2].breakpoint, Some(Ttl::FiveMinutes));

        let edited = Prompt::flatten(&request(&["a", "c"]), &Marks::default(), "");
        assert_eq!(
            plain.positions()[2].prefix_hash,
            edited.positions()[2].prefix_hash
        );
        assert_ne!(
            plain.positions()[3].prefix_hash,
            edited.positions()[3].prefix_hash
        );

        let forced = Prompt::flatten(
            &request(&["a", "b"]),
            &Marks::default(),
            r#"{"tool_choice":"none"}"#,
        );
        assert_eq!(
            plain.positions()[1].prefix_hash,
            forced.positions()[1].prefix_hash
        );
        assert_ne!(
            plain.positions()[2].prefix_hash,
            forced.positions()[2].prefix_hash
        );
    }

    #[test]
    fn marks_give_each_breakpoint_its_lifetime() {
        let mut req = request(&["a", "b"]);
        req.messages[0].content[1].cache_control = Some(CacheControl::EPHEMERAL);
        let marks = Marks {
            system: vec![Some(Ttl::OneHour)],
            ..Marks::default()
        };
        let prompt = Prompt::flatten(&req, &marks, "");
        let lifetimes: Vec<Option<Ttl>> = prompt.positions().iter().map(|p| p.breakpoint).collect();
        assert_eq!(
            lifetimes,
            [None, Some(Ttl::OneHour), None, Some(Ttl::FiveMinutes)]
        );
        assert_eq!(Ttl::parse("1h"), Some(Ttl::OneHour));
        assert_eq!(Ttl::parse("5m"), Some(Ttl::FiveMinutes));
        assert_eq!(Ttl::parse("10m"), None);
        assert_eq!(Ttl::OneHour.ms(), 12 * Ttl::FiveMinutes.ms());
    }

    #[test]
    fn another_model_shares_no_prefix() {
        let a = Prompt::flatten(&request(&["a"]), &Marks::default(), "");
        let mut other = request(&["a"]);
        other.model = "claude-haiku-4-5".into();
        let b = Prompt::flatten(&other, &Marks::default(), "");
        assert_ne!(a.positions()[0].prefix_hash, b.positions()[0].prefix_hash);
        assert_ne!(a.fingerprint(), b.fingerprint());
    }
}
