//! One round's model and tool loop: the request from the turn's window, the model
//! call, what its stop reason asks for (see the stop reasons in [`crate::converse`]), the
//! tools it calls, until the model answers or the round fails. Nothing here writes:
//! a [`Round`] is only stored when `ask` commits it.

use crate::fairshare::ToolTime;
use std::time::Instant;

use serde_json::Value;
use tracing::{info, warn};

use super::events::Shown;
pub(super) use super::message::RoundMessage;

mod round_loop;

use super::{AskError, Converse, MIN_MODEL_CALL};
use super::{Turn, out_of_time};
use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Message, Role};
use crate::metrics::Event;
use crate::model::{ModelError, ModelResponse, StopReason, prompt_over_by};
use crate::plan::request::{Lifetimes, ModelRequest, ToolDef};
use crate::plan::sendable::sendable;
use crate::store::ContactKey;
use crate::tenant::Settings;
use crate::tools::{
    CallContext, MAX_RESULTS_CHARS_PER_MESSAGE, ToolDeclaration, ToolOutput, cap_to,
};
use crate::usage::{RoundUsage, Usage};
pub(super) use round_loop::first_cut;
use round_loop::{AfterStop, RoundLoop};

/// What the model reads for a tool call made past the round's tool time
/// (`fair_share.tool_seconds_per_round`): not run.
const TOOL_TIME_SPENT: &str =
    "not run: this round's time for tool calls is spent; answer with what you have";

/// What a round measured besides usage.
#[derive(Debug, Default)]
pub(super) struct RoundStats {
    /// Time spent in model calls.
    pub(super) model_ms: f64,
    /// Tools called.
    pub(super) tool_calls: u64,
    /// Why the model stopped on the final answer.
    pub(super) stop_reason: Option<StopReason>,
    /// The request that answered sent a window cut at the hard cap (or, after
    /// "prompt is too long", at the overflow cut).
    pub(super) hard_capped: bool,
    /// The lifetimes the round's last request gave its breakpoints.
    pub(super) lifetimes: Lifetimes,
    /// A recorded round's usage was estimated ([`super::estimate`]): it reported
    /// no context.
    pub(super) usage_estimated: bool,
}

/// Who ran a round's model calls and tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// degrau's own loop (`POST .../messages`).
    Model,
    /// A client's own loop, recorded (`POST .../rounds`).
    Client,
}

/// A finished round: the user's message first, every tool call and result, the
/// final answer last; the usage over its model calls; its stats; and who ran it.
#[derive(Debug)]
pub(super) struct Round {
    pub(super) messages: Vec<RoundMessage>,
    pub(super) usage: RoundUsage,
    pub(super) stats: RoundStats,
    pub(super) origin: Origin,
    /// Its user message is a voice note's transcript (a WhatsApp turn).
    pub(super) transcribed: bool,
}

impl Round {
    /// Whether a tool ran (a booking may exist): more than the question and the
    /// answer.
    pub(super) fn tool_ran(&self) -> bool {
        self.messages.len() > 2
    }

    /// Marks the round's assistant messages as written by a person of the
    /// business (a handoff turn), not the model.
    pub(super) fn by_person(mut self) -> Round {
        for message in &mut self.messages {
            message.by_person = message.message.role == Role::Assistant;
        }
        self
    }

    /// A round a client ran itself, as validated ([`super::RoundRequest`]): its
    /// messages, the last model call's usage (kept on the final answer, the one
    /// call the client reported, unless it was `estimated`: a message's usage is
    /// what a model measured), and whether the window it was shown was cut at the
    /// hard cap.
    pub(super) fn recorded(
        messages: Vec<Message>,
        usage: Usage,
        estimated: bool,
        hard_capped: bool,
    ) -> Round {
        let last = messages.len().saturating_sub(1);
        let tool_calls = messages
            .iter()
            .map(|m| m.tool_use_ids().count() as u64)
            .sum();
        let mut round_usage = RoundUsage::default();
        round_usage.record(usage);
        Round {
            messages: messages
                .into_iter()
                .enumerate()
                .map(|(index, message)| RoundMessage {
                    message,
                    usage: (index == last && !estimated).then_some(usage),
                    by_person: false,
                })
                .collect(),
            usage: round_usage,
            stats: RoundStats {
                tool_calls,
                hard_capped,
                usage_estimated: estimated,
                ..RoundStats::default()
            },
            origin: Origin::Client,
            transcribed: false,
        }
    }
}

/// A tool call of the model's answer.
pub(super) struct ToolCall {
    id: String,
    name: String,
    input: Value,
}

impl Converse {
    /// Runs the model and the tool loop by `deadline` on the turn's window of the
    /// contact `key`; returns the round (nothing is written here).
    pub(super) async fn run_round(
        &self,
        key: &ContactKey,
        settings: &Settings,
        turn: &Turn,
        text: &str,
        deadline: Deadline,
        shown: &Shown<'_>,
    ) -> Result<Round, AskError> {
        let tools = self.tools.definitions(&settings.tools);
        let mut state = RoundLoop::new(settings, turn, text);
        // The round's tool calls share the platform's tool time (`fairshare`).
        let fair = &settings.policy.fair_share;
        let mut tool_time = ToolTime::new(fair.tool_seconds_per_round);
        loop {
            let Some(response) = self
                .next_answer(&mut state, &tools, deadline, shown)
                .await?
            else {
                continue;
            };
            let calls = tool_calls(&response);
            state.round.messages.push(RoundMessage {
                message: response.message(),
                usage: Some(response.usage),
                by_person: false,
            });
            // A response holding tool calls needs their results whatever the stop
            // reason says, or the next request would be refused.
            if calls.is_empty() {
                return Ok(state.finish(response.stop_reason));
            }
            state.count_tool_round()?;
            state.round.stats.tool_calls += calls.len() as u64;
            let results = self
                .run_tools(
                    &calls,
                    (key, turn),
                    &settings.tools,
                    (deadline, &mut tool_time),
                    shown,
                )
                .await;
            state.round.messages.push(RoundMessage {
                message: Message {
                    role: Role::User,
                    content: results,
                },
                usage: None,
                by_person: false,
            });
        }
    }

    /// The model's next answer in the round, made sendable; `None` when the round
    /// asks again (a window cut once after "prompt is too long", or an answer asked
    /// for again: [`RoundLoop::after_stop`]).
    async fn next_answer(
        &self,
        state: &mut RoundLoop<'_>,
        tools: &[ToolDef],
        deadline: Deadline,
        shown: &Shown<'_>,
    ) -> Result<Option<ModelResponse>, AskError> {
        let call = state.calls();
        let (request, lifetimes) = state.request(tools)?;
        state.round.stats.lifetimes = lifetimes;
        if !deadline.allows(MIN_MODEL_CALL) {
            return Err(out_of_time("before a model call"));
        }
        let response = match self
            .call_model(&request, deadline, &mut state.round.stats, shown, call)
            .await
        {
            Ok(response) => response,
            Err(ModelError::PromptTooLong { message }) if !state.overflow_retried => {
                warn!(%message, "prompt too long: cutting the window once and retrying");
                state.cut_overflow(prompt_over_by(&message));
                return Ok(None);
            }
            Err(error) => return Err(error.into()),
        };
        state.answered = true;
        state.round.usage.record(response.usage);
        // What is stored and shown from here on is what the API accepts back.
        let response = ModelResponse {
            content: sendable(response.content),
            ..response
        };
        if let AfterStop::AskAgain = state.after_stop(&response, deadline)? {
            shown.restart(
                "the model's answer is asked for again",
                &state.round.messages,
            );
            return Ok(None);
        }
        Ok(Some(response))
    }

    /// One model call, timed and, when it fails, counted by kind (`ModelErrors`).
    /// A streamed round's call streams, its text shown as it arrives, as the
    /// round's `call`-th.
    async fn call_model(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
        stats: &mut RoundStats,
        shown: &Shown<'_>,
        call: u32,
    ) -> Result<ModelResponse, ModelError> {
        let started = Instant::now();
        let result = if shown.streamed() {
            let on_delta = |delta| shown.delta(delta, call);
            self.model.stream(request, deadline, &on_delta).await
        } else {
            self.model.create(request, deadline).await
        };
        stats.model_ms += started.elapsed().as_secs_f64() * 1000.0;
        if let Err(error) = &result {
            Event::new("ask")
                .dimension("ErrorType", error.kind())
                .rollup()
                .count("ModelErrors", 1)
                .emit();
        }
        result
    }

    /// Runs the answer's tool calls one after another by `deadline`, each with its
    /// declaration among the tenant's tools (a name the tenant did not declare is an
    /// error the model reads, and nothing runs); returns their results, each cut to
    /// its share of what one message may hold.
    async fn run_tools(
        &self,
        calls: &[ToolCall],
        (key, turn): (&ContactKey, &Turn),
        declared: &[ToolDeclaration],
        (deadline, tool_time): (Deadline, &mut ToolTime),
        shown: &Shown<'_>,
    ) -> Vec<ContentBlock> {
        let mut results = Vec::with_capacity(calls.len());
        let mut budget = MAX_RESULTS_CHARS_PER_MESSAGE;
        let share = MAX_RESULTS_CHARS_PER_MESSAGE / calls.len();
        for call in calls {
            shown.tool_started(&call.id, &call.name, &call.input);
            let started = Instant::now();
            let Some(deadline) = tool_time.deadline(deadline) else {
                // The round's tool time is spent: the call is not made.
                shown.tool_finished(&call.id, &call.name, true);
                results.push(ContentBlock::ToolResult {
                    tool_use_id: call.id.clone(),
                    content: TOOL_TIME_SPENT.to_owned(),
                    is_error: true,
                });
                continue;
            };
            let output = match declared.iter().find(|tool| tool.name() == call.name) {
                Some(ToolDeclaration::BuiltIn(name)) if name == crate::plan::recall::TOOL_NAME => {
                    self.run_recall(key, turn, &call.input, deadline).await
                }
                Some(tool) => {
                    let context = CallContext {
                        tool_use_id: &call.id,
                        key,
                        deadline,
                    };
                    self.tools.call(tool, &call.input, &context).await
                }
                None => ToolOutput::error(format!("unknown tool `{}`", call.name)),
            };
            tool_time.spend(started);
            let content = cap_to(output.content, share.min(budget));
            budget = budget.saturating_sub(content.chars().count());
            info!(tool = %call.name, is_error = output.is_error, chars = content.len(), "tool called");
            shown.tool_finished(&call.id, &call.name, output.is_error);
            results.push(ContentBlock::ToolResult {
                tool_use_id: call.id.clone(),
                content,
                is_error: output.is_error,
            });
        }
        results
    }
}

/// The tool calls of an answer, in order.
fn tool_calls(response: &ModelResponse) -> Vec<ToolCall> {
    response
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => Some(ToolCall {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
            }),
            _ => None,
        })
        .collect()
}
