//! A round's loop state between model calls: the window it sends, the cut made
//! once for "prompt is too long", the tool rounds counted, what a stop reason
//! means for the round ([`AfterStop`]), and the round's end.

use tracing::warn;

use super::super::Turn;
use super::super::message::RoundMessage;
use super::super::{AskError, MAX_RETRY_MAX_TOKENS, MAX_TOOL_ITERATIONS, MIN_MODEL_CALL};
use super::{Origin, Round, RoundStats};
use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Message, Role};
use crate::metrics::Event;
use crate::model::{ModelError, ModelResponse, StopReason};
use crate::plan::policy::window_cut;
use crate::plan::request::{
    BuildError, Lifetimes, ModelRequest, RequestParts, ToolDef, build_request,
};
use crate::plan::sendable::readable;
use crate::plan::step_plan::{WindowCut, retry_cut};
use crate::plan::validate::validate_request;
use crate::tenant::Settings;
use crate::usage::RoundUsage;

/// What the loop does after reading an answer's stop reason.
pub(super) enum AfterStop {
    /// Send the request again (on a cut window, or with a larger `max_tokens`).
    AskAgain,
    /// Go on with the answer: store it, and run its tool calls if it has any.
    Continue,
}

/// The loop's state between model calls.
pub(super) struct RoundLoop<'a> {
    pub(super) settings: &'a Settings,
    pub(super) turn: &'a Turn,
    /// Where the window sent starts, and whether the hard cap cut it.
    pub(super) cut: WindowCut,
    /// The window was cut once after "prompt is too long" (or a context window
    /// filled up while the model wrote): a second time is an error.
    pub(super) overflow_retried: bool,
    /// The output limit of the next request: thinking tokens count against it, so
    /// the answer keeps its own budget on top of the thinking budget.
    pub(super) max_tokens: u32,
    /// A tool call cut off at `max_tokens` was asked again once.
    pub(super) truncation_retried: bool,
    /// An empty answer was asked again once.
    pub(super) empty_retried: bool,
    /// The model has answered once: from here on the round is never read again
    /// (a tool may have run), and a request that breaks the API's rules is
    /// degrau's own defect ([`AskError::UnsendableRound`]), not a torn read.
    pub(super) answered: bool,
    /// Model answers with tool calls so far.
    pub(super) tool_rounds: usize,
    pub(super) round: Round,
}

impl<'a> RoundLoop<'a> {
    pub(super) fn new(settings: &'a Settings, turn: &'a Turn, text: &str) -> Self {
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
    pub(super) fn request(&self, tools: &[ToolDef]) -> Result<(ModelRequest, Lifetimes), AskError> {
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
    pub(super) fn broken(&self, why: String) -> AskError {
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
    pub(super) fn cut_overflow(&mut self, over_by: Option<u64>) {
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
    pub(super) fn after_stop(
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
    pub(super) fn retry_cut_off_tool_call(&mut self, deadline: Deadline) -> Result<(), AskError> {
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
    pub(super) fn calls(&self) -> u32 {
        let answers = self.round.messages.iter();
        answers
            .filter(|m| m.message.role == Role::Assistant)
            .count() as u32
    }

    /// Counts a model answer with tool calls; more than [`MAX_TOOL_ITERATIONS`] is
    /// an endless loop.
    pub(super) fn count_tool_round(&mut self) -> Result<(), AskError> {
        self.tool_rounds += 1;
        if self.tool_rounds > MAX_TOOL_ITERATIONS {
            return Err(AskError::ToolLoop);
        }
        Ok(())
    }

    /// The finished round, with why the model stopped and whether the window it saw
    /// was cut at the hard cap.
    pub(super) fn finish(mut self, stop_reason: Option<StopReason>) -> Round {
        self.round.stats.stop_reason = stop_reason;
        self.round.stats.hard_capped = self.cut.hard_capped;
        self.round
    }
}

/// Where the window sent starts before any retry: a sliding window keeps its last
/// messages; degrau's steps send the window since the last step, cut at the hard
/// cap when a step is late; a full history, or a new session, sends it all.
pub(in crate::converse) fn first_cut(settings: &Settings, turn: &Turn) -> WindowCut {
    window_cut(
        settings.context_policy,
        &settings.compaction,
        turn.expected.as_ref(),
        turn.plan.session,
        &turn.plan.window,
    )
}

/// `max_tokens` of the one retry of a tool call cut off at `max_tokens`: twice as
/// much, at most [`MAX_RETRY_MAX_TOKENS`].
fn retry_max_tokens(max_tokens: u32) -> u32 {
    max_tokens.saturating_mul(2).min(MAX_RETRY_MAX_TOKENS)
}
