//! A recorded round that reports no usage: the context its last request held,
//! estimated from what degrau holds, so that compaction still happens.
//!
//! A client whose framework drops the model's usage (a LangChain chain that ends
//! in an output parser hands its history a bare string) would record every round
//! with a context of 0; no step would ever be due, and the window would grow back
//! into the whole transcript, silently. When a round's usage reports no context
//! (`input_tokens`, `cache_read_input_tokens` and `cache_creation_input_tokens` all
//! 0, or no `usage` at all), the context is estimated instead: the system blocks
//! and the window degrau served (`GET .../context`, cut where `ask` cuts) and the
//! round's messages before the answer, each block's JSON (without its breakpoint)
//! at [`KEEP_CHARS_PER_TOKEN`] characters a token, at least one: the offline
//! stand-in's own count, so on the local stack the estimate is its figure within
//! the few characters of framing each block's JSON differs by (the LangChain
//! tests measure it against the stand-in's usage). Against Claude's tokenizer it
//! is low for Portuguese text and JSON (more tokens a character), and it cannot see
//! what the client added itself: its tools and their definitions. The answer's
//! output is its blocks' characters at the same rate, unless the client reported it.
//!
//! The answer says so (`usage_estimated`); the estimate decides the step and is
//! the head's last context, but it is neither stored as a message's measured usage
//! (the token-sized keep then measures the message by its characters) nor counted
//! as tokens in the tenant's usage.

use serde::Serialize;

use super::context::served;
use super::{AskError, RoundRequest, Turn};
use crate::domain::ContentBlock;
use crate::plan::step_plan::KEEP_CHARS_PER_TOKEN;
use crate::tenant::Settings;
use crate::usage::Usage;

/// Tokens of one block of a request: its JSON's characters at
/// [`KEEP_CHARS_PER_TOKEN`], at least 1 (the stand-in's count of a position).
fn block_tokens<T: Serialize + ?Sized>(block: &T) -> u64 {
    let chars = serde_json::to_string(block).map_or(0, |json| json.chars().count() as u64);
    chars.div_ceil(KEEP_CHARS_PER_TOKEN).max(1)
}

fn blocks_tokens(blocks: &[ContentBlock]) -> u64 {
    blocks.iter().map(block_tokens).sum()
}

/// The usage of `request`'s round with its context estimated from `turn`, as
/// loaded (see the module documentation); the output reported, or estimated when
/// the client reported none.
pub(super) fn estimated_usage(
    settings: &Settings,
    turn: &Turn,
    request: &RoundRequest,
) -> Result<Usage, AskError> {
    let context = served(settings, turn)?;
    let system: u64 = context
        .system
        .iter()
        .map(|block| block_tokens(&serde_json::json!({"type": block.kind, "text": block.text})))
        .sum();
    let window: u64 = context
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .map(|block| block_tokens(&block.block))
        .sum();
    let (answer, before) = request
        .messages
        .split_last()
        .ok_or_else(|| AskError::Internal("a parsed round has messages".into()))?;
    let round: u64 = before.iter().map(|m| blocks_tokens(&m.content)).sum();
    let output = match request.usage.output_tokens {
        0 => blocks_tokens(&answer.content),
        reported => reported,
    };
    Ok(Usage {
        input_tokens: system + window + round,
        output_tokens: output,
        ..Usage::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_counts_a_quarter_of_its_json_rounded_up_and_at_least_one() {
        // {"type":"text","text":"abcd"} is 29 characters: the stand-in's 8.
        assert_eq!(block_tokens(&ContentBlock::text("abcd")), 8);
        assert_eq!(block_tokens(""), 1);
    }
}
