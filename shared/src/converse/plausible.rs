//! A recorded round's usage, held against what its last request can have held.
//! The usage drives compaction (its context decides when a step is due), so a
//! client reporting a context its request cannot have had would make steps
//! (summary-model calls) at will. A token of the Messages API stands for at least
//! one byte of what was sent, so the last request's context is at most the bytes
//! of what degrau served it (`GET .../context`: the system blocks and the window),
//! plus the round's messages before the answer, plus what the client may have
//! added itself: its tools' definitions and the API's own framing
//! ([`CLIENT_ALLOWANCE_TOKENS`]). A figure above that is refused, 400
//! `invalid_request`, with nothing written.

use super::context::served;
use super::{AskError, RoundRequest, Turn};
use crate::tenant::Settings;

/// Tokens a client's last request may hold beyond the bytes degrau knows of: its
/// own tool definitions (a catalogue of a hundred tools is some 30,000 tokens), an
/// image or two, and the API's framing of roles, tools and blocks.
pub const CLIENT_ALLOWANCE_TOKENS: u64 = 64_000;

/// The most tokens the round's last request can have held, on `turn` as loaded.
pub(super) fn most_context_tokens(
    settings: &Settings,
    turn: &Turn,
    request: &RoundRequest,
) -> Result<u64, AskError> {
    let context = served(settings, turn)?;
    let bytes = |value: serde_json::Result<String>| {
        value
            .map(|json| json.len() as u64)
            .map_err(|e| AskError::Internal(e.to_string()))
    };
    let served = bytes(serde_json::to_string(&context))?;
    let before_answer = &request.messages[..request.messages.len().saturating_sub(1)];
    let round = bytes(serde_json::to_string(before_answer))?;
    Ok(served + round + CLIENT_ALLOWANCE_TOKENS)
}

/// Refuses a usage whose context is more than the round's last request can have
/// held.
pub(super) fn check_usage(
    settings: &Settings,
    turn: &Turn,
    request: &RoundRequest,
) -> Result<(), AskError> {
    let reported = request.usage.context_tokens();
    let most = most_context_tokens(settings, turn, request)?;
    if reported > most {
        return Err(AskError::InvalidRequest(format!(
            "usage reports a context of {reported} tokens (input_tokens + \
             cache_read_input_tokens + cache_creation_input_tokens), more than the last \
             request can have held: at most {most} (the context served, the round's \
             messages before the answer, and {CLIENT_ALLOWANCE_TOKENS} for the client's own \
             tools and the API's framing); send the last model call's usage as the API \
             returned it"
        )));
    }
    Ok(())
}
