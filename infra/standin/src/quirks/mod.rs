//! The quirks corpus: the ways a real Claude answer differs from the tidy answers
//! the stand-in gives, each a named transformation ([`Quirk`]) of an answer. The
//! real API sends these; a client that stores an answer and sends it back must
//! survive every one (issue 38).
//!
//! | quirk | what the client receives |
//! |---|---|
//! | `empty_text_before_tool_use` | `{"type":"text","text":""}` before the first `tool_use` (refused when sent back) |
//! | `newlines_before_tool_use` | `{"type":"text","text":"\n\n"}` before the first `tool_use` (accepted back) |
//! | `whitespace_final_text` | a final answer whose only text is `" "` |
//! | `text_after_tool_use` | a short text block after the `tool_use` blocks, `stop_reason` still `tool_use` |
//! | `tool_use_empty_input` | the first `tool_use` with input `{}`; streamed, `"input": {}` then one `input_json_delta` with `"partial_json": ""` |
//! | `max_tokens_in_tool_input` | cut inside the first tool's input, `stop_reason` `max_tokens`: streamed, the `input_json_delta`s stop mid-JSON; whole, the input holds the fields complete so far (possibly `{}`) |
//! | `max_tokens_in_text` | a text answer cut half-way, `stop_reason` `max_tokens` |
//! | `refusal_after_text` | half of the first text, then `stop_reason` `refusal` with `stop_details` |
//! | `thinking_blocks` | (thinking on) a signed `thinking` and a sealed `redacted_thinking` block first |
//! | `null_citations` | `"citations": null` on every text block |
//! | `unknown_fields` | fields degrau does not read: on the message, in `usage`, on `tool_use` blocks, on stream events |
//! | `ping_mid_stream` | (streamed) `ping` events between content events |
//! | `error_event_mid_stream` | (streamed) after the first delta, an `overloaded_error` `error` event, and the end |
//!
//! Each quirk says whether it applies to an answer ([`Quirk::applies`]: e.g. the
//! `tool_use` ones only to an answer holding one, the stream-only ones only to a
//! streamed call, `thinking_blocks` only when the request enabled thinking), and
//! gives what it makes of it: the answer a client assembles ([`Quirk::apply`]), the
//! whole JSON body ([`Quirk::body`]) and the stream's events ([`Quirk::events`],
//! to be written as [`crate::stream::sse`] or event-stream frames). Both of the
//! last take the answer *before* the quirk (a stream cut mid-JSON needs the input
//! it cut). [`draw`] picks one at random among those that apply, from a seeded
//! [`Rng`].
//!
//! These are pure functions over the stand-in's wire types ([`crate::wire`]), so
//! that other crates (the simulator) can draw their model answers from the same
//! corpus. An answer gets one quirk at most: the stand-in applies the first queued
//! quirk that applies to it, else maybe a drawn one ([`crate::control`]).

mod answer;
mod events;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer::Answer;
use crate::wire::{MessagesResponse, ResponseBlock, StopReason};

pub use self::answer::{TEXT_AFTER_TOOL_USE, cut_input, half_text};
pub use self::events::refusal_details;

/// One way a real answer differs from a tidy one (its wire name in `snake_case`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quirk {
    /// An empty text block before the first `tool_use`.
    EmptyTextBeforeToolUse,
    /// A `"\n\n"` text block before the first `tool_use`.
    NewlinesBeforeToolUse,
    /// A final answer whose only text is `" "`.
    WhitespaceFinalText,
    /// A short text block after the `tool_use` blocks.
    TextAfterToolUse,
    /// A `tool_use` whose input is `{}`.
    ToolUseEmptyInput,
    /// A `max_tokens` stop inside a tool's input.
    MaxTokensInToolInput,
    /// A `max_tokens` stop inside a text block.
    MaxTokensInText,
    /// Some text, then a `refusal` stop.
    RefusalAfterText,
    /// Signed thinking and sealed redacted thinking (thinking on).
    ThinkingBlocks,
    /// `"citations": null` on every text block.
    NullCitations,
    /// Fields degrau does not read, everywhere.
    UnknownFields,
    /// `ping` events between content events (streamed).
    PingMidStream,
    /// An `overloaded_error` event mid-stream, then the end (streamed).
    ErrorEventMidStream,
}

impl Quirk {
    /// Every quirk, in the corpus's order.
    pub const ALL: [Quirk; 13] = [
        Quirk::EmptyTextBeforeToolUse,
        Quirk::NewlinesBeforeToolUse,
        Quirk::WhitespaceFinalText,
        Quirk::TextAfterToolUse,
        Quirk::ToolUseEmptyInput,
        Quirk::MaxTokensInToolInput,
        Quirk::MaxTokensInText,
        Quirk::RefusalAfterText,
        Quirk::ThinkingBlocks,
        Quirk::NullCitations,
        Quirk::UnknownFields,
        Quirk::PingMidStream,
        Quirk::ErrorEventMidStream,
    ];

    /// Its wire name.
    pub fn name(self) -> &'static str {
        match self {
            Quirk::EmptyTextBeforeToolUse => "empty_text_before_tool_use",
            Quirk::NewlinesBeforeToolUse => "newlines_before_tool_use",
            Quirk::WhitespaceFinalText => "whitespace_final_text",
            Quirk::TextAfterToolUse => "text_after_tool_use",
            Quirk::ToolUseEmptyInput => "tool_use_empty_input",
            Quirk::MaxTokensInToolInput => "max_tokens_in_tool_input",
            Quirk::MaxTokensInText => "max_tokens_in_text",
            Quirk::RefusalAfterText => "refusal_after_text",
            Quirk::ThinkingBlocks => "thinking_blocks",
            Quirk::NullCitations => "null_citations",
            Quirk::UnknownFields => "unknown_fields",
            Quirk::PingMidStream => "ping_mid_stream",
            Quirk::ErrorEventMidStream => "error_event_mid_stream",
        }
    }

    /// True for the quirks of a stream only (a whole answer cannot show them).
    pub fn streamed_only(self) -> bool {
        matches!(self, Quirk::PingMidStream | Quirk::ErrorEventMidStream)
    }

    /// Whether the quirk changes this answer, to a call that is `streamed` or not,
    /// whose request enabled `thinking` or not.
    pub fn applies(self, answer: &Answer, streamed: bool, thinking: bool) -> bool {
        let content = &answer.content;
        let calls_tools = content
            .iter()
            .any(|b| matches!(b, ResponseBlock::ToolUse { .. }));
        match self {
            Quirk::EmptyTextBeforeToolUse
            | Quirk::NewlinesBeforeToolUse
            | Quirk::TextAfterToolUse
            | Quirk::ToolUseEmptyInput
            | Quirk::MaxTokensInToolInput => calls_tools,
            Quirk::WhitespaceFinalText => !calls_tools && answer.stop_reason == StopReason::EndTurn,
            Quirk::MaxTokensInText => !calls_tools && answer::first_cut_text(content).is_some(),
            Quirk::RefusalAfterText => answer::first_cut_text(content).is_some(),
            Quirk::ThinkingBlocks => thinking && !answer::has_both_thinking_kinds(content),
            Quirk::NullCitations => content
                .iter()
                .any(|b| matches!(b, ResponseBlock::Text { .. })),
            Quirk::UnknownFields => true,
            Quirk::PingMidStream | Quirk::ErrorEventMidStream => streamed && !content.is_empty(),
        }
    }

    /// The answer a client assembles (the blocks and the stop reason; what a quirk
    /// adds to the JSON alone, such as `citations`, is [`Quirk::body`]'s). A quirk
    /// that does not change the blocks returns the answer as it is.
    pub fn apply(self, answer: Answer) -> Answer {
        answer::apply(self, answer)
    }

    /// The whole (not streamed) JSON body of `response`, the answer before the
    /// quirk: the quirk's answer with the fields it adds.
    pub fn body(self, response: &MessagesResponse) -> Value {
        events::body(self, response)
    }

    /// The stream of `response`, the answer before the quirk: its events (each the
    /// JSON of a `data:`, as [`crate::stream::events`]), as the quirk has them.
    pub fn events(self, response: &MessagesResponse) -> Vec<Value> {
        events::events(self, response)
    }
}

impl fmt::Display for Quirk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Quirk {
    type Err = String;

    /// Reads a wire name; the error names every quirk.
    fn from_str(name: &str) -> Result<Quirk, String> {
        Quirk::ALL
            .into_iter()
            .find(|quirk| quirk.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Quirk::ALL.iter().map(|q| q.name()).collect();
                format!(
                    "unknown quirk `{name}`; the quirks are {}",
                    names.join(", ")
                )
            })
    }
}

/// The random mode's setting: `{"seed": 7, "per_mille": 250}` gives each answer,
/// with probability 250/1000, one quirk drawn among those that apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Random {
    /// The seed of the draws.
    pub seed: u64,
    /// Chance, out of 1,000, that an answer gets a quirk (at most 1,000).
    pub per_mille: u16,
}

impl Random {
    /// Why the setting cannot be used, if it cannot.
    pub fn problem(&self) -> Option<String> {
        (self.per_mille > 1000).then(|| format!("per_mille must be 0–1000, got {}", self.per_mille))
    }
}

/// A small seeded generator (SplitMix64): the same seed, the same draws, on every
/// machine, with no dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `bound` (0 when `bound` is 0); the bias is negligible for
    /// the small bounds used here.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64().checked_rem(bound).unwrap_or(0)
    }
}

/// One draw for one answer: with probability `per_mille`/1000, one quirk chosen
/// uniformly among those that apply to it (none when none applies). Every draw
/// takes two numbers from `rng`, so which answers get a quirk depends only on the
/// seed and the answer's rank, not on the answers before it.
pub fn draw(
    rng: &mut Rng,
    per_mille: u16,
    answer: &Answer,
    streamed: bool,
    thinking: bool,
) -> Option<Quirk> {
    let chance = rng.below(1000);
    let pick = rng.next_u64();
    if chance >= u64::from(per_mille) {
        return None;
    }
    let applicable: Vec<Quirk> = Quirk::ALL
        .into_iter()
        .filter(|quirk| quirk.applies(answer, streamed, thinking))
        .collect();
    let count = u64::try_from(applicable.len()).unwrap_or(u64::MAX);
    let index = usize::try_from(pick.checked_rem(count)?).unwrap_or_default();
    applicable.get(index).copied()
}

#[cfg(test)]
mod tests;
