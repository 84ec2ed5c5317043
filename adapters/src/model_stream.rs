//! A streamed Messages API answer, read as it arrives: [`SseParser`] cuts a
//! `text/event-stream` body into events whatever the chunks it comes in, and
//! [`Assembler`] turns the API's events (`message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`,
//! `ping`, `error`) into the pieces handed to the caller at once ([`ModelDelta`])
//! and, at `message_stop`, the whole answer exactly as a non-streamed call returns
//! it. The Anthropic adapter feeds it SSE events; the Bedrock adapter feeds it the
//! same event JSON out of `InvokeModelWithResponseStream`'s chunks.
//!
//! Unknown event types, block types, delta types and fields are ignored (the API
//! adds them); `ping` is ignored. (`docs/DESIGN.md`: "Streamed replies".)

use serde::Deserialize;
use serde_json::Value;

use degrau::domain::{ContentBlock, Role};
use degrau::model::{ModelDelta, ModelError, ModelResponse, StopReason};
use degrau::usage::{CacheCreation, Usage};

mod sse;

pub use sse::{SseEvent, SseParser};

// ---- the Messages API's events ------------------------------------------------------

/// A streamed event, by its `type` (unknown types read as [`Event::Other`]).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Piece,
    },
    /// A block's end: nothing to do (a block is whole at `message_stop`).
    ContentBlockStop,
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<UsageDelta>,
    },
    MessageStop,
    Error {
        error: ErrorBody,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct StartMessage {
    id: String,
    model: String,
    #[serde(default)]
    usage: Usage,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
/// A `content_block_delta`'s `delta`, by its `type`.
enum Piece {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<StopReason>,
}

/// `message_delta`'s usage: `output_tokens` cumulative; the input and cache fields
/// only on newer API versions.
#[derive(Debug, Default, Deserialize)]
struct UsageDelta {
    output_tokens: Option<u64>,
    input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation: Option<CacheCreation>,
}

/// `{"type", "message"}` of an `error` event (and of an HTTP error's envelope).
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    /// `overloaded_error`, `api_error`, …
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The API's text.
    #[serde(default)]
    pub message: String,
}

/// The error a streamed `error` event stands for: mapped as the HTTP errors of the
/// same type are.
pub fn stream_error(kind: &str, message: String) -> ModelError {
    match kind {
        "overloaded_error" => ModelError::Unavailable { status: 529 },
        "api_error" => ModelError::Unavailable { status: 500 },
        "rate_limit_error" => ModelError::RateLimited { retry_after: None },
        "invalid_request_error" if message.starts_with("prompt is too long") => {
            ModelError::PromptTooLong { message }
        }
        "invalid_request_error" => ModelError::InvalidRequest { message },
        "authentication_error" => ModelError::Authentication { status: 401 },
        "permission_error" => ModelError::Authentication { status: 403 },
        _ => ModelError::Unavailable { status: 500 },
    }
}

/// A block being assembled.
#[derive(Debug)]
enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Option<Value>,
        json: String,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    /// A block of a type this version does not know (a server tool's, say): its
    /// deltas are read and dropped, and so is the block.
    Skipped,
}

/// What one event did.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Nothing for the caller (`message_start`, a block's end, `ping`, an unknown
    /// event, an empty delta).
    Nothing,
    /// A piece to hand over at once.
    Delta(ModelDelta),
    /// `message_stop`: the whole answer.
    Done(Box<ModelResponse>),
}

/// Assembles one streamed answer from its events, in order.
#[derive(Debug, Default)]
pub struct Assembler {
    id: Option<String>,
    model: String,
    usage: Usage,
    stop_reason: Option<StopReason>,
    blocks: Vec<Option<Partial>>,
}

fn protocol(what: &str) -> ModelError {
    ModelError::Protocol(format!("a streamed answer {what}"))
}

impl Assembler {
    /// Reads one event's JSON. An `error` event is its [`ModelError`]; JSON that is
    /// not an event, or an event out of order, is a [`ModelError::Protocol`] (whose
    /// text never quotes the answer).
    pub fn event(&mut self, data: &[u8]) -> Result<Step, ModelError> {
        let event: Event = serde_json::from_slice(data)
            .map_err(|_| protocol("holds an event that is not the Messages API's"))?;
        if self.id.is_none()
            && !matches!(
                event,
                Event::MessageStart { .. } | Event::Error { .. } | Event::Other
            )
        {
            return Err(protocol("does not begin with message_start"));
        }
        match event {
            Event::MessageStart { message } => {
                self.id = Some(message.id);
                self.model = message.model;
                self.usage = message.usage;
                Ok(Step::Nothing)
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start(index, content_block),
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta),
            Event::ContentBlockStop | Event::Other => Ok(Step::Nothing),
            Event::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = usage {
                    self.merge(usage);
                }
                Ok(Step::Nothing)
            }
            Event::MessageStop => self.finish().map(|r| Step::Done(Box::new(r))),
            Event::Error { error } => Err(stream_error(&error.kind, error.message)),
        }
    }

    fn merge(&mut self, delta: UsageDelta) {
        let usage = &mut self.usage;
        if let Some(n) = delta.output_tokens {
            usage.output_tokens = n;
        }
        if let Some(n) = delta.input_tokens {
            usage.input_tokens = n;
        }
        if let Some(n) = delta.cache_creation_input_tokens {
            usage.cache_creation_input_tokens = n;
        }
        if let Some(n) = delta.cache_read_input_tokens {
            usage.cache_read_input_tokens = n;
        }
        if delta.cache_creation.is_some() {
            usage.cache_creation = delta.cache_creation;
        }
    }

    fn start(&mut self, index: usize, block: StartBlock) -> Result<Step, ModelError> {
        if self.blocks.get(index).is_some_and(Option::is_some) {
            return Err(protocol("starts a block twice"));
        }
        let (partial, step) = match block {
            StartBlock::Text { text } => {
                let step = text_step(index, &text, |index, text| ModelDelta::Text { index, text });
                (Partial::Text(text), step)
            }
            StartBlock::ToolUse { id, name, input } => {
                let step = Step::Delta(ModelDelta::ToolUse {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
                let partial = Partial::ToolUse {
                    id,
                    name,
                    start_input: input,
                    json: String::new(),
                };
                (partial, step)
            }
            StartBlock::Thinking {
                thinking,
                signature,
            } => {
                let step = text_step(index, &thinking, |index, text| ModelDelta::Thinking {
                    index,
                    text,
                });
                (
                    Partial::Thinking {
                        thinking,
                        signature,
                    },
                    step,
                )
            }
            StartBlock::RedactedThinking { data } => (Partial::Redacted(data), Step::Nothing),
            // A block type this version does not know: nothing degrau could store.
            StartBlock::Other => (Partial::Skipped, Step::Nothing),
        };
        if self.blocks.len() <= index {
            self.blocks.resize_with(index + 1, || None);
        }
        self.blocks[index] = Some(partial);
        Ok(step)
    }

    fn delta(&mut self, index: usize, delta: Piece) -> Result<Step, ModelError> {
        let Some(Some(block)) = self.blocks.get_mut(index) else {
            return Err(protocol("has a delta for a block that did not start"));
        };
        match (block, delta) {
            (Partial::Text(text), Piece::TextDelta { text: piece }) => {
                text.push_str(&piece);
                Ok(text_step(index, &piece, |index, text| ModelDelta::Text {
                    index,
                    text,
                }))
            }
            (Partial::ToolUse { json, .. }, Piece::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
                Ok(Step::Nothing)
            }
            (Partial::Thinking { thinking, .. }, Piece::ThinkingDelta { thinking: piece }) => {
                thinking.push_str(&piece);
                Ok(text_step(index, &piece, |index, text| {
                    ModelDelta::Thinking { index, text }
                }))
            }
            (Partial::Thinking { signature, .. }, Piece::SignatureDelta { signature: piece }) => {
                signature.push_str(&piece);
                Ok(Step::Nothing)
            }
            (Partial::Skipped, _) | (_, Piece::Other) => Ok(Step::Nothing),
            _ => Err(protocol("has a delta of another block's type")),
        }
    }

    fn finish(&mut self) -> Result<ModelResponse, ModelError> {
        // The output limit can stop a tool call inside its input: the pieces then
        // do not make JSON. The call is never run (the core asks again with more
        // room), so it is handed over with an empty input, as a call not streamed
        // would be: both routes then do the same.
        let cut = self.stop_reason == Some(StopReason::MaxTokens);
        let mut content = Vec::with_capacity(self.blocks.len());
        for partial in std::mem::take(&mut self.blocks).into_iter().flatten() {
            content.push(match partial {
                Partial::Text(text) => ContentBlock::Text { text },
                Partial::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => {
                    let input = if json.trim().is_empty() {
                        match start_input {
                            Some(Value::Object(object)) if !object.is_empty() => {
                                Value::Object(object)
                            }
                            _ => Value::Object(serde_json::Map::new()),
                        }
                    } else {
                        match serde_json::from_str(&json) {
                            Ok(input) => input,
                            Err(_) if cut => Value::Object(serde_json::Map::new()),
                            Err(_) => return Err(protocol("has a tool input that is not JSON")),
                        }
                    };
                    ContentBlock::ToolUse { id, name, input }
                }
                Partial::Thinking {
                    thinking,
                    signature,
                } => ContentBlock::Thinking {
                    thinking,
                    signature,
                },
                Partial::Redacted(data) => ContentBlock::RedactedThinking { data },
                Partial::Skipped => continue,
            });
        }
        Ok(ModelResponse {
            id: self.id.take().unwrap_or_default(),
            model: std::mem::take(&mut self.model),
            role: Role::Assistant,
            content,
            stop_reason: self.stop_reason.take(),
            usage: self.usage,
        })
    }
}

/// A delta for non-empty text, else nothing.
fn text_step(index: usize, text: &str, delta: impl Fn(usize, String) -> ModelDelta) -> Step {
    if text.is_empty() {
        Step::Nothing
    } else {
        Step::Delta(delta(index, text.to_owned()))
    }
}

#[cfg(test)]
mod tests;
