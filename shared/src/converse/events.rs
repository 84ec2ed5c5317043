//! What a streamed round shows while it runs ([`Converse::ask_streamed`]): the
//! answer's text as the model writes it, each tool call as it starts and ends, and a
//! restart when what was shown no longer holds. Nothing here writes: the round is
//! stored as a whole, or not at all, exactly as a round that is not streamed.
//!
//! **Restarts.** Two things make a round go back on what it showed: an answer the
//! loop asks for again (a tool call cut off at `max_tokens`, a context window that
//! filled up while the model wrote), and a commit race lost with no tool run, which
//! answers again on the fresh history. Either way a [`RoundEvent::Restart`] says
//! that everything shown so far is void, and the round's events start over: the
//! calls the round keeps are shown again before the new answer's text.
//!
//! [`Converse::ask_streamed`]: super::Converse::ask_streamed

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use serde_json::Value;

use super::message::RoundMessage;
use crate::domain::ContentBlock;
use crate::model::ModelDelta;

/// One thing a streamed round shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RoundEvent {
    /// Answer text, as the model writes it.
    Delta {
        /// The new text.
        text: String,
        /// Which model call of the round wrote it (0 first; a tool round's next
        /// call is 1).
        call: u32,
    },
    /// A tool call is about to run.
    ToolStarted {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The call's input, only when the tenant shows it
        /// (`stream_tool_input`).
        #[serde(skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
    },
    /// A tool call ran.
    ToolFinished {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// Whether it failed.
        is_error: bool,
    },
    /// Everything shown so far is void; the round's events start over.
    Restart {
        /// Why, in a sentence.
        reason: String,
    },
}

/// The reply a stream showed: the text of the round's last model call since the
/// last restart, its deltas joined (what `done`'s `reply.text` holds).
pub fn shown_reply(events: &[RoundEvent]) -> String {
    let start = events
        .iter()
        .rposition(|e| matches!(e, RoundEvent::Restart { .. }))
        .map_or(0, |at| at + 1);
    let shown = &events[start..];
    let last = shown
        .iter()
        .filter_map(|e| match e {
            RoundEvent::Delta { call, .. } => Some(*call),
            _ => None,
        })
        .max();
    shown
        .iter()
        .filter_map(|e| match e {
            RoundEvent::Delta { text, call } if Some(*call) == last => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Where a streamed round's events go, as they happen. Called from the round's
/// task: an implementation hands the event on and returns at once.
pub trait RoundEvents: Send + Sync {
    /// One event.
    fn event(&self, event: RoundEvent);
}

/// A round's view of its listener: none for a round that is not streamed, and
/// whether anything was shown since the last restart.
pub(super) struct Shown<'a> {
    listener: Option<&'a dyn RoundEvents>,
    any: AtomicBool,
    show_tool_input: bool,
    /// The call and text block the last text came from: a new text block of the
    /// same call is shown after a line break, as the reply joins its blocks.
    last_text: Mutex<Option<(u32, usize)>>,
}

impl<'a> Shown<'a> {
    /// A round that shows nothing (the JSON route, the WhatsApp worker).
    pub(super) fn nothing() -> Shown<'static> {
        Shown {
            listener: None,
            any: AtomicBool::new(false),
            show_tool_input: false,
            last_text: Mutex::new(None),
        }
    }

    /// A round that shows its events to `listener`.
    pub(super) fn to(listener: &'a dyn RoundEvents) -> Self {
        Shown {
            listener: Some(listener),
            any: AtomicBool::new(false),
            show_tool_input: false,
            last_text: Mutex::new(None),
        }
    }

    /// Whether tool calls show their input (the tenant's `stream_tool_input`).
    pub(super) fn with_tool_input(mut self, show: bool) -> Self {
        self.show_tool_input = show;
        self
    }

    /// Whether the round is streamed: its model calls then stream too.
    pub(super) fn streamed(&self) -> bool {
        self.listener.is_some()
    }

    fn emit(&self, event: RoundEvent) {
        if let Some(listener) = self.listener {
            self.any.store(true, Ordering::Relaxed);
            listener.event(event);
        }
    }

    /// A model call's piece: its text is shown, tool calls show when they run,
    /// thinking never. A call's text blocks are shown one after another with a
    /// line break between them, so a call's deltas joined are its text as the
    /// reply holds it.
    pub(super) fn delta(&self, delta: ModelDelta, call: u32) {
        let ModelDelta::Text { index, text } = delta else {
            return;
        };
        let previous = {
            let mut last = self
                .last_text
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            last.replace((call, index))
        };
        let text = match previous {
            Some((before, block)) if before == call && block != index => format!("\n{text}"),
            _ => text,
        };
        self.emit(RoundEvent::Delta { text, call });
    }

    /// A tool call about to run.
    pub(super) fn tool_started(&self, id: &str, name: &str, input: &Value) {
        self.emit(RoundEvent::ToolStarted {
            id: id.to_owned(),
            name: name.to_owned(),
            input: self.show_tool_input.then(|| input.clone()),
        });
    }

    /// A tool call that ran.
    pub(super) fn tool_finished(&self, id: &str, name: &str, is_error: bool) {
        self.emit(RoundEvent::ToolFinished {
            id: id.to_owned(),
            name: name.to_owned(),
            is_error,
        });
    }

    /// What was shown is void, and an earlier attempt's stored reply stands
    /// instead (see `Converse::replay_of`): a restart, then that reply.
    pub(super) fn replaced_by(&self, reply: &str) {
        self.restart(
            "an earlier attempt of this message was stored; its answer stands",
            &[],
        );
        self.delta(
            ModelDelta::Text {
                index: 0,
                text: reply.to_owned(),
            },
            0,
        );
    }

    /// What was shown is void: a restart, when anything was shown, then the
    /// round's `kept` messages shown again (their text and tool calls, the first
    /// being the user's message).
    pub(super) fn restart(&self, reason: &str, kept: &[RoundMessage]) {
        if !self.any.swap(false, Ordering::Relaxed) {
            return;
        }
        *self
            .last_text
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        self.emit(RoundEvent::Restart {
            reason: reason.to_owned(),
        });
        self.replay(kept);
    }

    fn replay(&self, kept: &[RoundMessage]) {
        let mut call = 0;
        let mut names = Vec::new();
        for kept in kept.iter().skip(1) {
            for (index, block) in kept.message.content.iter().enumerate() {
                match block {
                    ContentBlock::Text { text } => self.delta(
                        ModelDelta::Text {
                            index,
                            text: text.clone(),
                        },
                        call,
                    ),
                    ContentBlock::ToolUse { id, name, input } => {
                        names.push((id.as_str(), name.as_str()));
                        self.tool_started(id, name, input);
                    }
                    ContentBlock::ToolResult {
                        tool_use_id,
                        is_error,
                        ..
                    } => {
                        let name = names
                            .iter()
                            .find(|(id, _)| id == tool_use_id)
                            .map_or("", |(_, name)| name);
                        self.tool_finished(tool_use_id, name, *is_error);
                    }
                    ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
                }
            }
            if kept.message.role == crate::domain::Role::Assistant {
                call += 1;
            }
        }
    }
}
