//! The answer to a valid request: the script's or the heuristics' (cut to
//! `max_tokens` as the real API cuts), its quirk, and the usage it reports.

use serde_json::Value;

use crate::StandIn;
use crate::answer::{Answer, answer};
use crate::control::ScriptedAnswer;
use crate::prompt::tokens_for_chars;
use crate::quirks::Quirk;
use crate::stream;
use crate::wire::{MessagesRequest, MessagesResponse, ResponseBlock, StopReason, Usage};

/// A successful call: the response (before its quirk), its usage and its quirk.
pub(super) struct Answered {
    pub(super) response: MessagesResponse,
    pub(super) usage: Usage,
    pub(super) quirk: Option<Quirk>,
}

impl Answered {
    /// The JSON body and the stream's events, the quirk's if there is one.
    pub(super) fn wire(&self) -> (Value, Vec<Value>) {
        match self.quirk {
            Some(quirk) => (quirk.body(&self.response), quirk.events(&self.response)),
            // Serialising these plain data types cannot fail.
            None => (
                serde_json::to_value(&self.response).unwrap_or(Value::Null),
                stream::events(&self.response),
            ),
        }
    }
}

/// The answer to a valid request (the script's, else the heuristics' cut to
/// `max_tokens`), its quirk (queued or drawn) and its usage (`cached`'s input
/// counts, and the output of what is sent).
pub(super) fn answered(
    standin: &StandIn,
    request: MessagesRequest,
    fingerprint: &str,
    scripted: Option<ScriptedAnswer>,
    cached: Usage,
    id: String,
    streamed: bool,
) -> Answered {
    let (content, stop_reason, output_tokens) = match scripted {
        Some(mut script) => {
            let stop = script.stop_reason();
            crate::thinking::sign_scripted(&mut script.content, fingerprint);
            let tokens = output_tokens(&script.content);
            (script.content, stop, tokens)
        }
        None => fit(answer(&request, fingerprint), request.max_tokens),
    };
    let answer = Answer {
        content,
        stop_reason,
    };
    let thinking = request.thinking_budget().is_some();
    let quirk = standin.take_quirk(&answer, streamed, thinking);
    // A cut answer spent its whole budget.
    let output_tokens = match quirk.map(|quirk| quirk.apply(answer.clone())) {
        Some(sent) if sent.stop_reason == StopReason::MaxTokens => request.max_tokens,
        Some(sent) => self::output_tokens(&sent.content),
        None => output_tokens,
    };
    let usage = Usage {
        output_tokens,
        ..cached
    };
    let response = MessagesResponse {
        id,
        kind: "message",
        role: "assistant",
        model: request.model,
        content: answer.content,
        stop_reason: answer.stop_reason,
        stop_sequence: None,
        usage,
    };
    Answered {
        response,
        usage,
        quirk,
    }
}

/// Output tokens of a reply: a quarter of its characters (text as is, tool calls
/// as JSON), rounded up.
fn output_tokens(content: &[ResponseBlock]) -> u64 {
    let chars: usize = content
        .iter()
        .map(|block| match block {
            ResponseBlock::Text { text } => text.chars().count(),
            other => serde_json::to_string(other).map_or(0, |j| j.chars().count()),
        })
        .sum();
    tokens_for_chars(chars)
}

/// Cuts a heuristic reply to `max_tokens` like the real API: the thinking and the
/// text survive (no tool call), and the stop reason says why.
fn fit(reply: Answer, max_tokens: u64) -> (Vec<ResponseBlock>, StopReason, u64) {
    let tokens = output_tokens(&reply.content);
    if tokens <= max_tokens {
        return (reply.content, reply.stop_reason, tokens);
    }
    let mut content: Vec<ResponseBlock> = reply
        .content
        .iter()
        .filter(|b| b.is_thinking())
        .cloned()
        .collect();
    // Thinking comes first and spends the budget first; the text gets what is left.
    let thought = usize::try_from(output_tokens(&content))
        .unwrap_or(usize::MAX)
        .saturating_mul(4);
    let keep = usize::try_from(max_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(4)
        .saturating_sub(if content.is_empty() { 0 } else { thought });
    let text: String = reply
        .content
        .iter()
        .filter_map(|b| match b {
            ResponseBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
        .chars()
        .take(keep)
        .collect();
    if !text.trim().is_empty() {
        content.push(ResponseBlock::text(text));
    }
    // What is kept fits `max_tokens * 4` characters, so the budget is never passed.
    let tokens = if content.is_empty() {
        max_tokens
    } else {
        output_tokens(&content).min(max_tokens)
    };
    (content, StopReason::MaxTokens, tokens)
}
