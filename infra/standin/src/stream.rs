//! Streamed answers (`"stream": true`, and Bedrock's
//! `invoke-with-response-stream`): a whole answer cut into the Messages API's
//! events, in the API's order and shape ([`events`]), written as Server-Sent Events
//! ([`sse`]) or as AWS event-stream frames ([`chunk_frame`], [`exception_frame`],
//! the framing written here from AWS's description so that the SDK's decoder checks
//! an encoder it did not write), and sent at a pace with the faults a stream can
//! meet ([`Plan`], [`body`]).
//!
//! The events of an answer, in order:
//!
//! ```text
//! message_start        {"type":"message_start","message":{"id","type":"message","role":"assistant",
//!                        "model","content":[],"stop_reason":null,"stop_sequence":null,
//!                        "usage":{input and cache fields as the whole answer's,"output_tokens":1}}}
//! per block i:
//!   content_block_start {"type":"content_block_start","index":i,"content_block":
//!                        {"type":"text","text":""} | {"type":"tool_use","id","name","input":{}}
//!                        | {"type":"thinking","thinking":"","signature":""}
//!                        | {"type":"redacted_thinking","data"}}
//!   ping                {"type":"ping"}                       (once, after the first block's start)
//!   content_block_delta {"type":"content_block_delta","index":i,"delta":
//!                        {"type":"text_delta","text"} | {"type":"input_json_delta","partial_json"}
//!                        | {"type":"thinking_delta","thinking"} | {"type":"signature_delta","signature"}}
//!   content_block_stop  {"type":"content_block_stop","index":i}
//! message_delta        {"type":"message_delta","delta":{"stop_reason","stop_sequence":null},
//!                        "usage":{"output_tokens": the whole answer's}}
//! message_stop         {"type":"message_stop"}
//! ```
//!
//! Text is cut every [`TEXT_PIECE`] characters, thinking every [`THINKING_PIECE`]
//! (then one `signature_delta`), a tool's input JSON every [`INPUT_PIECE`] (an
//! empty input, `{}`, sends no `input_json_delta`: the client reads `{}`); a
//! redacted block has no delta. No piece is empty.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::{bedrock_exception, kind_for_status};
use crate::wire::{MessagesResponse, ResponseBlock};

/// Characters per `text_delta`.
pub const TEXT_PIECE: usize = 12;
/// Characters per `thinking_delta`.
pub const THINKING_PIECE: usize = 24;
/// Characters of the input's JSON per `input_json_delta`.
pub const INPUT_PIECE: usize = 10;

/// `text` cut into pieces of at most `size` characters (never inside a
/// character); none when it is empty.
pub fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|piece| piece.iter().collect())
        .collect()
}

/// The events of a whole answer, each the JSON of its `data:` (its `type` is
/// the event's name).
pub fn events(response: &MessagesResponse) -> Vec<Value> {
    let usage = &response.usage;
    let mut events = vec![json!({"type": "message_start", "message": {
    "id": response.id, "type": "message", "role": "assistant", "model": response.model,
    "content": [], "stop_reason": null, "stop_sequence": null,
    "usage": {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation": usage.cache_creation,
        "output_tokens": usage.output_tokens.min(1),
    }}})];
    for (index, block) in response.content.iter().enumerate() {
        let (start, deltas) = block_events(index, block);
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        if index == 0 {
            events.push(json!({"type": "ping"}));
        }
        events.extend(deltas);
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta",
        "delta": {"stop_reason": response.stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": usage.output_tokens}}));
    events.push(json!({"type": "message_stop"}));
    events
}

/// A block's `content_block_start` (its empty shell) and its deltas: text and
/// thinking in pieces (a thinking's signature last), a tool's input as pieces of
/// its JSON (none when empty), a redacted thinking whole in its start.
fn block_events(index: usize, block: &ResponseBlock) -> (Value, Vec<Value>) {
    let delta =
        |delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
    match block {
        ResponseBlock::Text { text } => (
            json!({"type": "text", "text": ""}),
            pieces(text, TEXT_PIECE)
                .into_iter()
                .map(|text| delta(json!({"type": "text_delta", "text": text})))
                .collect(),
        ),
        ResponseBlock::ToolUse { id, name, input } => {
            let json = if input.as_object().is_some_and(serde_json::Map::is_empty) {
                String::new()
            } else {
                input.to_string()
            };
            (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                pieces(&json, INPUT_PIECE)
                    .into_iter()
                    .map(|partial_json| {
                        delta(json!({"type": "input_json_delta", "partial_json": partial_json}))
                    })
                    .collect(),
            )
        }
        ResponseBlock::Thinking {
            thinking,
            signature,
        } => {
            let mut deltas: Vec<Value> = pieces(thinking, THINKING_PIECE)
                .into_iter()
                .map(|thinking| delta(json!({"type": "thinking_delta", "thinking": thinking})))
                .collect();
            if !signature.is_empty() {
                deltas.push(delta(
                    json!({"type": "signature_delta", "signature": signature}),
                ));
            }
            (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                deltas,
            )
        }
        ResponseBlock::RedactedThinking { data } => (
            json!({"type": "redacted_thinking", "data": data}),
            Vec::new(),
        ),
    }
}

/// The `error` event of an injected mid-stream error.
pub fn error_event(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// One event as Server-Sent Event text: `event: {type}`, `data: {json}`, a blank
/// line.
pub fn sse(event: &Value) -> Bytes {
    let name = event["type"].as_str().unwrap_or("message");
    Bytes::from(format!("event: {name}\ndata: {event}\n\n"))
}

// ---- AWS event-stream framing --------------------------------------------------------

/// CRC-32 (IEEE 802.3, as zlib's), the checksum of event-stream frames.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            *group.get(1).unwrap_or(&0),
            *group.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One event-stream message: a prelude (total length, headers length, the
/// prelude's CRC, each a big-endian u32), the headers (each a name length byte,
/// the name, type 7 = string, a big-endian u16 length, the value), the payload and
/// the CRC of everything before it.
pub fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Bytes {
    let mut encoded = Vec::new();
    for (name, value) in headers {
        // Names and values here are short constants and exception names.
        encoded.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
        encoded.extend_from_slice(name.as_bytes());
        encoded.push(7);
        encoded.extend_from_slice(&u16::try_from(value.len()).unwrap_or(u16::MAX).to_be_bytes());
        encoded.extend_from_slice(value.as_bytes());
    }
    let total = 12 + encoded.len() + payload.len() + 4;
    let mut message = Vec::with_capacity(total);
    message.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_be_bytes());
    message.extend_from_slice(
        &u32::try_from(encoded.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    let prelude_crc = crc32(&message);
    message.extend_from_slice(&prelude_crc.to_be_bytes());
    message.extend_from_slice(&encoded);
    message.extend_from_slice(payload);
    let message_crc = crc32(&message);
    message.extend_from_slice(&message_crc.to_be_bytes());
    Bytes::from(message)
}

/// A `chunk` event carrying one Messages API event: `{"bytes": base64(json)}`.
pub fn chunk_frame(event: &Value) -> Bytes {
    let payload = json!({"bytes": base64(event.to_string().as_bytes())}).to_string();
    frame(
        &[
            (":event-type", "chunk"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.as_bytes(),
    )
}

/// The status the Messages API answers an error `type` with.
pub fn status_of_kind(kind: &str) -> u16 {
    (400..=599)
        .find(|status| kind_for_status(*status) == kind)
        .unwrap_or(500)
}

/// The exception Bedrock ends a stream with for an error of the given type: the
/// exception Bedrock answers the same error with before a stream
/// (`throttlingException`, `serviceUnavailableException`, …) when a stream may
/// end with it, else `modelStreamErrorException` with the model's status and text
/// (`originalStatusCode`, `originalMessage`).
pub fn exception_frame(kind: &str, message: &str) -> Bytes {
    let status = status_of_kind(kind);
    let (_, name) = bedrock_exception(status, kind);
    let streamable = [
        "ThrottlingException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelTimeoutException",
        "ValidationException",
        "ModelStreamErrorException",
    ];
    let (name, payload) = if streamable.contains(&name.as_str()) {
        (name, json!({"message": message}))
    } else {
        (
            "ModelStreamErrorException".to_owned(),
            json!({"message": message, "originalStatusCode": status, "originalMessage": message}),
        )
    };
    let mut chars = name.chars();
    let name: String = chars
        .next()
        .map(|c| c.to_ascii_lowercase())
        .into_iter()
        .chain(chars)
        .collect();
    frame(
        &[
            (":exception-type", &name),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        payload.to_string().as_bytes(),
    )
}

// ---- the paced body ------------------------------------------------------------------

/// How a stream ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// After its last event.
    Whole,
    /// After the events, one more frame (an `error` event or an exception), then the
    /// body ends.
    Error(Bytes),
    /// After the events, the connection breaks.
    Drop,
}

/// What a streamed body sends: its frames, the pause between two of them, and how
/// it ends.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The frames, in order.
    pub frames: Vec<Bytes>,
    /// Pause before every frame but the first.
    pub pause: Duration,
    /// The end.
    pub end: End,
}

/// A body stream fed by a task that sends the plan's frames at its pace; the task
/// stops when the client goes away.
pub struct Paced {
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
}

/// Starts sending `plan`; the stream to answer with.
pub fn body(plan: Plan) -> Paced {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut frames: VecDeque<Bytes> = plan.frames.into();
        let drop = plan.end == End::Drop;
        if let End::Error(frame) = plan.end {
            frames.push_back(frame);
        }
        let mut first = true;
        while let Some(frame) = frames.pop_front() {
            if !first && !plan.pause.is_zero() {
                tokio::time::sleep(plan.pause).await;
            }
            first = false;
            if tx.send(Ok(frame)).await.is_err() {
                return;
            }
        }
        if drop {
            // Let the client read what was sent before the break.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx
                .send(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "stream dropped by an injected fault (offline stand-in)",
                )))
                .await;
        }
    });
    Paced { rx }
}

impl futures_core::Stream for Paced {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests;
