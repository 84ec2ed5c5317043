//! What a round answers: the body of a successful ask (stored as it is for an
//! idempotent replay), its reply, its sequence numbers and its usage; and whether
//! it was answered now or replayed.

use serde::{Deserialize, Serialize};

use crate::domain::ContentBlock;
use crate::model::StopReason;

/// The body of a successful ask (stored as-is for idempotent replays).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskResponse {
    /// Session the round belongs to.
    pub session: u32,
    /// The final answer.
    pub reply: Reply,
    /// Sequence numbers of the round's first and last messages.
    pub round: RoundSpan,
    /// Usage over the round's model calls; `context_tokens` is the last call's.
    pub usage: UsageSummary,
    /// True when the round's context passed the threshold and a step was requested.
    pub compaction_queued: bool,
}

/// The final answer of a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Text blocks joined.
    pub text: String,
    /// All blocks of the final assistant message.
    pub content: Vec<ContentBlock>,
    /// Why the model stopped: `end_turn`, or `max_tokens` when the text was cut off
    /// by the output limit (stored as it is); `null` when the API did not say.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
}

/// Sequence numbers of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundSpan {
    /// The user's message.
    pub first_seq: u64,
    /// The final reply.
    pub last_seq: u64,
}

/// Usage of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageSummary {
    /// Uncached input tokens, summed.
    pub input_tokens: u64,
    /// Cache reads, summed.
    pub cache_read_input_tokens: u64,
    /// Cache writes, summed.
    pub cache_creation_input_tokens: u64,
    /// Output tokens, summed.
    pub output_tokens: u64,
    /// Context size of the round's last request.
    pub context_tokens: u64,
}

/// The outcome of an ask.
#[derive(Debug, Clone, PartialEq)]
pub enum AskOutcome {
    /// A new round was answered and stored.
    Answered(AskResponse),
    /// An idempotent retry: the stored response, byte for byte.
    Replayed(String),
}
