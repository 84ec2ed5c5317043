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
use super::{AskError, Converse, MAX_RETRY_MAX_TOKENS, MAX_TOOL_ITERATIONS, MIN_MODEL_CALL};
use super::{Turn, out_of_time};
use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Message, Role};
use crate::metrics::Event;
use crate::model::{ModelError, ModelResponse, StopReason, prompt_over_by};
use crate::plan::request::{
    BuildError, Lifetimes, ModelRequest, RequestParts, ToolDef, build_request,
};
use crate::plan::sendable::{readable, sendable};
use crate::plan::step_plan::{WindowCut, request_window, retry_cut};
use crate::plan::validate::validate_request;
use crate::plan::window::safe_window_start;
use crate::store::ContactKey;
use crate::tenant::{ContextPolicy, Settings};
use crate::tools::{
    CallContext, MAX_RESULTS_CHARS_PER_MESSAGE, ToolDeclaration, ToolOutput, cap_to,
};
use crate::usage::{RoundUsage, Usage};

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
struct ToolCall {
    id: String,
    name: String,
    input: Value,
}

/// What the loop does after reading an answer's stop reason.
enum AfterStop {
    /// Send the request again (on a cut window, or with a larger `max_tokens`).
    AskAgain,
    /// Go on with the answer: store it, and run its tool calls if it has any.
    Continue,
}

/// The loop's state between model calls.
struct RoundLoop<'a> {
    settings: &'a Settings,
    turn: &'a Turn,
    /// Where the window sent starts, and whether the hard cap cut it.
    cut: WindowCut,
    /// The window was cut once after "prompt is too long" (or a context window
    /// filled up while the model wrote): a second time is an error.
    overflow_retried: bool,
    /// The output limit of the next request: thinking tokens count against it, so
    /// the answer keeps its own budget on top of the thinking budget.
    max_tokens: u32,
    /// A tool call cut off at `max_tokens` was asked again once.
    truncation_retried: bool,
    /// An empty answer was asked again once.
    empty_retried: bool,
    /// The model has answered once: from here on the round is never read again
    /// (a tool may have run), and a request that breaks the API's rules is
    /// degrau's own defect ([`AskError::UnsendableRound`]), not a torn read.
    answered: bool,
    /// Model answers with tool calls so far.
    tool_rounds: usize,
    round: Round,
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
            let call = state.calls();
            let (request, lifetimes) = state.request(&tools)?;
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
                    continue;
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
                continue;
            }
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

impl<'a> RoundLoop<'a> {
    fn new(settings: &'a Settings, turn: &'a Turn, text: &str) -> Self {
        RoundLoop {
            settings,
            turn,
            cut: first_cut(settings, turn),
            overflow_retried: false,
            max_tokens: settings
                .max_tokens
                .saturating_add(settings.thinking_budget_tokens.unwrap_or(0)),
            truncation_retried: false,
            empty_retried: false,
            answered: false,
            tool_rounds: 0,
            round: Round {
                messages: vec![RoundMessage {
                    message: Message::user_text(text),
                    usage: None,
                    by_person: false,
                }],
                usage: RoundUsage::default(),
                stats: RoundStats::default(),
                origin: Origin::Model,
                transcribed: false,
            },
        }
    }

    /// The next request: the window from the cut, then the round so far, its
    /// breakpoints' lifetimes chosen by the tenant's cache TTL policy over the
    /// contact's recent gaps (this round's included) and the request's sizes (see
    /// [`crate::plan::cache_ttl`]).
    fn request(&self, tools: &[ToolDef]) -> Result<(ModelRequest, Lifetimes), AskError> {
        if self.cut.hard_capped {
            warn!(
                start = self.cut.start,
                "window cut at the hard cap: a compaction step is late"
            );
        }
        let plan = &self.turn.plan;
        let messages: Vec<Message> = self
            .round
            .messages
            .iter()
            .map(|m| m.message.clone())
            .collect();
        let mut request = build_request(&RequestParts {
            model: &self.settings.model,
            max_tokens: self.max_tokens,
            thinking: self.settings.thinking_budget_tokens,
            tools,
            instructions: &self.settings.instructions,
            facts: &self.turn.facts,
            summary: plan.summary.as_deref(),
            last_session: self.turn.digest.as_deref(),
            window: &plan.window[self.cut.start..],
            round: &messages,
            lifetimes: Lifetimes::FiveMinutes,
        })
        .map_err(|e| match e {
            BuildError::EmptyInstructions | BuildError::EmptyRound => {
                AskError::Internal(e.to_string())
            }
            broken => self.broken(broken.to_string()),
        })?;
        let lifetimes = self
            .settings
            .cache_ttl
            .lifetimes(&plan.gaps, request.sizes());
        request.set_lifetimes(lifetimes);
        // The head and the window are two reads: between them an erase and a new
        // first round can land, and the window read is then another incarnation's,
        // cut at the old head's last message (a tool call without its result, say).
        // Checked as the API checks, the request is never sent so; read again.
        validate_request(&request).map_err(|v| self.broken(v.message))?;
        Ok((request, lifetimes))
    }

    /// A request that breaks the API's rules. Before the model answered, the
    /// window was read while a round landed: `ask` reads it again. After, the
    /// round holds what the model said and may hold what a tool did: it is never
    /// run again, and the request is degrau's own defect.
    fn broken(&self, why: String) -> AskError {
        if self.answered {
            warn!(reason = %why, "a request after the model's answer breaks the API's rules");
            Event::new("ask").count("UnsendableRounds", 1).emit();
            AskError::UnsendableRound(why)
        } else {
            AskError::BrokenWindow(why)
        }
    }

    /// Cuts the window once at the overflow cut (a safe start near its end), and
    /// further when the API said by how much the prompt was over ([`retry_cut`]).
    fn cut_overflow(&mut self, over_by: Option<u64>) {
        self.overflow_retried = true;
        self.cut = retry_cut(
            &self.turn.plan.window,
            &self.settings.compaction,
            self.cut.start,
            over_by,
        );
    }

    /// What the answer's stop reason asks for: a cut window after the context
    /// filled up, an error for a refusal or a pause, a larger `max_tokens` for a
    /// tool call cut off (see the stop reasons in [`crate::converse`]); and an answer
    /// with something a person can read.
    fn after_stop(
        &mut self,
        response: &ModelResponse,
        deadline: Deadline,
    ) -> Result<AfterStop, AskError> {
        match response.stop_reason {
            Some(StopReason::ModelContextWindowExceeded) if !self.overflow_retried => {
                // The context filled up while the model wrote: like a prompt that
                // is too long, cut the window once and ask again.
                warn!("the context window filled up: cutting the window once and retrying");
                self.cut_overflow(None);
                return Ok(AfterStop::AskAgain);
            }
            Some(StopReason::ModelContextWindowExceeded) => {
                return Err(AskError::Model(ModelError::PromptTooLong {
                    message: "the context window filled up during generation \
                              (stop_reason model_context_window_exceeded)"
                        .to_owned(),
                }));
            }
            Some(StopReason::Refusal) => {
                warn!("the model declined to answer; nothing is stored");
                Event::new("ask").count("ModelRefusals", 1).emit();
                return Err(AskError::Refused);
            }
            Some(StopReason::PauseTurn) => {
                warn!("the model paused its turn; degrau defines no server tools");
                return Err(AskError::UnexpectedStop("pause_turn"));
            }
            _ => {}
        }
        let has_tool_use = response
            .content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        if response.stop_reason == Some(StopReason::MaxTokens) && has_tool_use {
            self.retry_cut_off_tool_call(deadline)?;
            return Ok(AfterStop::AskAgain);
        }
        if !readable(&response.content) {
            // Nothing, thinking alone, or only whitespace: nothing a person could
            // read. Asked once more (the model samples again), then the error.
            Event::new("ask").count("EmptyAnswers", 1).emit();
            if self.empty_retried || !deadline.allows(MIN_MODEL_CALL) {
                return Err(AskError::EmptyAnswer);
            }
            warn!("the model's answer is empty: asking again once");
            self.empty_retried = true;
            return Ok(AfterStop::AskAgain);
        }
        Ok(AfterStop::Continue)
    }

    /// The output limit cut a tool call: its input may be incomplete, so it never
    /// runs. The request goes once more with twice the budget, when there is one
    /// and time for it; else the cut-off call is the error.
    fn retry_cut_off_tool_call(&mut self, deadline: Deadline) -> Result<(), AskError> {
        Event::new("ask").count("TruncatedToolCalls", 1).emit();
        let larger = retry_max_tokens(self.max_tokens);
        if self.truncation_retried || larger <= self.max_tokens {
            return Err(AskError::TruncatedToolCall);
        }
        if !deadline.allows(MIN_MODEL_CALL) {
            return Err(AskError::TruncatedToolCall);
        }
        warn!(
            max_tokens = self.max_tokens,
            larger, "a tool call was cut off at max_tokens: asking again"
        );
        self.truncation_retried = true;
        self.max_tokens = larger;
        Ok(())
    }

    /// The model calls the round keeps so far: the next one's number.
    fn calls(&self) -> u32 {
        let answers = self.round.messages.iter();
        answers
            .filter(|m| m.message.role == Role::Assistant)
            .count() as u32
    }

    /// Counts a model answer with tool calls; more than [`MAX_TOOL_ITERATIONS`] is
    /// an endless loop.
    fn count_tool_round(&mut self) -> Result<(), AskError> {
        self.tool_rounds += 1;
        if self.tool_rounds > MAX_TOOL_ITERATIONS {
            return Err(AskError::ToolLoop);
        }
        Ok(())
    }

    /// The finished round, with why the model stopped and whether the window it saw
    /// was cut at the hard cap.
    fn finish(mut self, stop_reason: Option<StopReason>) -> Round {
        self.round.stats.stop_reason = stop_reason;
        self.round.stats.hard_capped = self.cut.hard_capped;
        self.round
    }
}

/// Where the window sent starts before any retry: a sliding window keeps its last
/// messages; degrau's steps send the window since the last step, cut at the hard
/// cap when a step is late; a full history, or a new session, sends it all.
pub(super) fn first_cut(settings: &Settings, turn: &Turn) -> WindowCut {
    let plan = &turn.plan;
    match (settings.context_policy, turn.expected.as_ref()) {
        (ContextPolicy::SlidingWindow, _) => WindowCut {
            start: safe_window_start(&plan.window, settings.compaction.keep_messages),
            hard_capped: false,
        },
        (ContextPolicy::Stepped, Some(head)) if head.session == plan.session => {
            request_window(head, &plan.window, &settings.compaction)
        }
        _ => WindowCut {
            start: 0,
            hard_capped: false,
        },
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

/// `max_tokens` of the one retry of a tool call cut off at `max_tokens`: twice as
/// much, at most [`MAX_RETRY_MAX_TOKENS`].
fn retry_max_tokens(max_tokens: u32) -> u32 {
    max_tokens.saturating_mul(2).min(MAX_RETRY_MAX_TOKENS)
}
