//! The simulated model: answers every request the core sends, as the Messages API
//! would, from the seed. It refuses what the API refuses, judged by the stand-in's
//! reading of the API's rules (`degrau_standin::parse`, its own wire types, not
//! the core's validator), and records the refusal as a broken invariant; a tenth
//! of its answers come with a quirk of the corpus real answers show
//! (`degrau_standin::quirks`: an empty or whitespace text beside a `tool_use`, a
//! whitespace-only final text, text after the calls, an empty input, a cut); every
//! call takes time (a few hundred milliseconds to seconds); it answers
//! "prompt is too long" past a context window the seed chose; it calls the tenant's
//! tools now and then; and while faults are on it fails as the API does (overload,
//! timeouts, refusals, answers cut at `max_tokens`, a context filled while writing).
//!
//! Every user message of the simulation carries a token (`tok{contact}x{n}`), so
//! the model can tell whose conversation a request is, and the summariser keeps
//! every token it is shown: a token missing from a summary was never folded into it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use degrau::deadline::Deadline;
use degrau::domain::ContentBlock;
use degrau::jobs::Job;
use degrau::model::{DeltaSink, Model, ModelError, ModelResponse, StopReason};
use degrau::plan::request::ModelRequest;
use degrau::usage::Usage;
use degrau_standin::quirks::{Quirk, Rng as QuirkRng, draw};
use serde_json::json;

use crate::counts::Counts;

mod answers;
mod carried;
mod request;
mod tool_calls;

pub use answers::filler;
pub use carried::Carried;
pub use request::{estimate, estimate_json, token, token_contact, tokens};

use answers::{facts, from_wire, judge, pieces, response, shown, summary, to_wire};
use request::{Kind, kind, round_token};

/// The invariant of the model's requests: every one passes the API's rules.
pub const API_RULES: &str = "every request passes the API's rules";
/// The invariant of the tools: one run per `tool_use` the model emitted, and a
/// round that ran a tool is never run again without it.
pub const TOOL_ONCE: &str = "a tool runs once per tool_use";

/// The simulated Messages API.
#[derive(Debug)]
pub struct SimModel {
    state: Mutex<State>,
    counts: Arc<Counts>,
}

/// Answers out of a thousand that come with a quirk.
const QUIRKS_PER_MILLE: u16 = 100;

#[derive(Debug, Default)]
struct State {
    /// The context window, in estimated tokens.
    window: u64,
    /// The chance that a call fails (0: faults are off).
    fault_rate: f64,
    /// Calls take time (up to a few seconds of the simulation's paused clock).
    slow: bool,
    /// Whether a round's last request was over the window, by the round's own
    /// message (its token): concurrent rounds of one contact each learn of the
    /// window only from their own refusal.
    over: HashMap<String, bool>,
    /// Broken invariants seen, each with the invariant's name (requests the API
    /// would refuse, windows exceeded twice in a row, a tool run twice).
    violations: Vec<(&'static str, String)>,
    next_tool_id: u64,
    /// Each message's attempt (by its token): a client's retry is a new one.
    attempts: HashMap<String, u32>,
    /// Every `tool_use` a main round's answer held, with the round (its
    /// message's token) and attempt it was emitted in.
    emitted: HashMap<String, (String, u32)>,
    /// The tool calls that ran, by `tool_use` id.
    ran: HashSet<String>,
    /// The calls that ran in each round's attempt, in order.
    ran_in: HashMap<(String, u32), Vec<String>>,
    calls: u64,
    /// No quirky answers (see [`SimModel::set_quirks`]).
    quirks_off: bool,
    /// What the rounds' requests carried, for the oracle (see `carried.rs`).
    carried: Vec<carried::Carried>,
    /// What each fact extraction was shown, by the session whose job asked (see
    /// [`serving`]): each customer message as its sequence number and token.
    facts_read: Vec<(u32, Vec<(u64, String)>)>,
}

tokio::task_local! {
    /// The session whose facts job is running, while the queue runs one.
    static FACTS_OF: u32;
}

/// Runs `work` (the compactor running `job`) so that the model knows, for a facts
/// job, which session's extraction each of its requests serves.
pub async fn serving<T>(job: &Job, work: impl Future<Output = T>) -> T {
    match job {
        Job::Facts { session, .. } => FACTS_OF.scope(*session, work).await,
        _ => work.await,
    }
}

fn lock(mutex: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SimModel {
    /// A model whose context window is `window` estimated tokens.
    pub fn new(window: u64, counts: Arc<Counts>) -> Self {
        SimModel {
            state: Mutex::new(State {
                window,
                ..State::default()
            }),
            counts,
        }
    }

    /// Faults on (`rate` of the calls fail, and calls take time) or off (0).
    pub fn set_faults(&self, rate: f64) {
        let mut state = lock(&self.state);
        state.fault_rate = rate;
        state.slow = rate > 0.0;
    }

    /// Quirky answers on (as real answers come) or off (while the liveness
    /// invariants are checked: a refusal is the model's to give, not a stuck
    /// contact).
    pub fn set_quirks(&self, on: bool) {
        lock(&self.state).quirks_off = !on;
    }

    /// A client's new attempt at the message of `token` (its retry after an
    /// error): it learns of the window from its own refusals, as the first did.
    pub fn new_attempt(&self, token: &str) {
        let mut state = lock(&self.state);
        state.over.remove(token);
        *state.attempts.entry(token.to_owned()).or_default() += 1;
    }

    /// The broken invariants seen so far (the invariant's name, what broke it),
    /// taken.
    pub fn take_violations(&self) -> Vec<(&'static str, String)> {
        std::mem::take(&mut lock(&self.state).violations)
    }

    /// What each fact extraction since the last call was shown (the session whose
    /// job asked; each customer message's sequence number and token), taken.
    pub fn take_facts_read(&self) -> Vec<(u32, Vec<(u64, String)>)> {
        std::mem::take(&mut lock(&self.state).facts_read)
    }

    /// Calls answered or refused so far.
    pub fn calls(&self) -> u64 {
        lock(&self.state).calls
    }

    /// The context window.
    pub fn window(&self) -> u64 {
        lock(&self.state).window
    }

    fn fault(&self) -> Option<Fault> {
        let rate = lock(&self.state).fault_rate;
        (rate > 0.0 && fastrand::f64() < rate).then(|| match fastrand::u8(0..8) {
            0 | 1 => Fault::Error(ModelError::Unavailable { status: 529 }),
            2 => Fault::Error(ModelError::Connection("connection reset".into())),
            3 => Fault::Error(ModelError::RateLimited {
                retry_after: Some(1),
            }),
            4 => Fault::Timeout,
            5 => Fault::Stop(StopReason::Refusal),
            6 => Fault::Stop(StopReason::MaxTokens),
            _ => Fault::Stop(StopReason::ModelContextWindowExceeded),
        })
    }

    /// The time a call takes while calls are slow: up to six seconds, or until the
    /// deadline, which is then a timeout.
    async fn take_time(&self, deadline: Deadline) -> Result<(), ModelError> {
        let took = Duration::from_millis(if lock(&self.state).slow {
            fastrand::u64(0..6_000)
        } else {
            fastrand::u64(150..2_500)
        });
        if took >= deadline.remaining() {
            tokio::time::sleep(deadline.remaining()).await;
            return Err(ModelError::Timeout);
        }
        tokio::time::sleep(took).await;
        Ok(())
    }

    /// Records whether `request` is over the window for its contact, and a
    /// violation when the contact's previous request was over too.
    fn track_window(&self, request: &ModelRequest) {
        if kind(request).compacting() {
            return;
        }
        let Some(round) = round_token(request) else {
            return;
        };
        let size = estimate(request);
        let mut state = lock(&self.state);
        let window = state.window;
        let over = size > window;
        let before = state.over.insert(round.clone(), over).unwrap_or(false);
        if over && before {
            state.violations.push((
                API_RULES,
                format!(
                    "the requests of the round of {round} exceeded the model's window \
                     ({window} tokens) twice in a row: {size} tokens",
                ),
            ));
        }
    }

    /// "prompt is too long" for an answering request over the window.
    fn check_window(&self, request: &ModelRequest) -> Result<(), ModelError> {
        if kind(request).compacting() {
            return Ok(());
        }
        let size = estimate(request);
        let window = lock(&self.state).window;
        if size > window {
            return Err(ModelError::PromptTooLong {
                message: format!("prompt is too long: {size} tokens > {window} maximum"),
            });
        }
        Ok(())
    }

    fn answer(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        match kind(request) {
            Kind::Summary => return Ok(summary(request)),
            Kind::Facts => {
                if let Ok(session) = FACTS_OF.try_with(|session| *session) {
                    lock(&self.state).facts_read.push((session, shown(request)));
                }
                return Ok(facts(request));
            }
            Kind::Round | Kind::Search => {}
        }
        let size = estimate(request);
        let usage = |output: u64| Usage {
            input_tokens: size,
            output_tokens: output,
            ..Usage::default()
        };
        let after_results = request.messages.last().is_some_and(|message| {
            message
                .content
                .iter()
                .any(|block| matches!(block.block, ContentBlock::ToolResult { .. }))
        });
        if !request.tools.is_empty() && !after_results && fastrand::f64() < 0.35 {
            let tool = &request.tools[fastrand::usize(..request.tools.len())];
            let id = {
                let mut state = lock(&self.state);
                state.next_tool_id += 1;
                format!("toolu_sim{}", state.next_tool_id)
            };
            let input = json!({"day": "2026-12-10", "time": "10:00", "service": "cut"});
            return Ok(response(
                vec![
                    ContentBlock::text("Let me check."),
                    ContentBlock::tool_use(id, tool.name.clone(), input),
                ],
                StopReason::ToolUse,
                usage(30),
            ));
        }
        let text = format!("ok {}", filler(fastrand::usize(10..300)));
        let output = text.len() as u64 / 4;
        Ok(response(
            vec![ContentBlock::text(text)],
            StopReason::EndTurn,
            usage(output),
        ))
    }
}

impl SimModel {
    /// `answer`, maybe with one quirk of the corpus that applies to it (a main
    /// round's answers only: the summary and the facts calls read their own).
    fn with_quirk(&self, request: &ModelRequest, answer: ModelResponse) -> ModelResponse {
        if kind(request).compacting() {
            return answer;
        }
        if lock(&self.state).quirks_off {
            return answer;
        }
        let Some(wire) = to_wire(&answer) else {
            return answer;
        };
        let mut rng = QuirkRng::new(fastrand::u64(..));
        let Some(quirk) = draw(&mut rng, QUIRKS_PER_MILLE, &wire, false, false) else {
            return answer;
        };
        if matches!(quirk, Quirk::UnknownFields | Quirk::NullCitations) {
            // The JSON alone differs: the adapters' reading, not the core's.
            return answer;
        }
        let Some(quirky) = from_wire(quirk.apply(wire), answer.clone()) else {
            return answer;
        };
        Counts::bump(&self.counts.quirks);
        quirky
    }
}

enum Fault {
    Error(ModelError),
    Timeout,
    Stop(StopReason),
}

#[async_trait]
impl Model for SimModel {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        lock(&self.state).calls += 1;
        if let Err(refused) = judge(request) {
            lock(&self.state).violations.push((
                API_RULES,
                format!("a request the Messages API refuses: {refused}"),
            ));
            return Err(ModelError::InvalidRequest { message: refused });
        }
        self.check_tools_kept(request);
        self.keep_carried(request);
        // Every request that reaches the API counts, whatever befalls it after
        // (a fault, the answer): two over the window in a row is the violation.
        self.track_window(request);
        self.take_time(deadline).await?;
        // The API refuses a prompt too long when it reads it, before any capacity
        // fault could answer instead.
        self.check_window(request)?;
        let answered = match self.fault() {
            None => {
                let answer = self.answer(request)?;
                Ok(self.with_quirk(request, answer))
            }
            Some(Fault::Error(error)) => Err(error),
            Some(Fault::Timeout) => {
                tokio::time::sleep(deadline.remaining()).await;
                Err(ModelError::Timeout)
            }
            Some(Fault::Stop(stop)) => {
                let mut answer = self.answer(request)?;
                if stop == StopReason::MaxTokens {
                    // A cut answer keeps what was written: a text, or a tool call
                    // whose input may be incomplete.
                    answer.stop_reason = Some(StopReason::MaxTokens);
                } else {
                    answer.content = vec![ContentBlock::text("…")];
                    answer.stop_reason = Some(stop);
                }
                Ok(answer)
            }
        };
        if let Ok(answer) = &answered {
            self.record_calls(request, answer);
        }
        answered
    }

    /// A streamed call: the answer as [`Model::create`] gives it, handed over in
    /// pieces (each text cut in two); while faults are on, a stream may break after
    /// its first piece, as a dropped connection or an overload mid-stream does,
    /// which no adapter retries.
    async fn stream(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let answer = self.create(request, deadline).await?;
        let rate = lock(&self.state).fault_rate;
        let breaks = rate > 0.0 && fastrand::f64() < rate;
        for (shown, delta) in pieces(&answer).into_iter().enumerate() {
            on_delta(delta);
            if breaks && shown == 0 {
                return Err(ModelError::Unavailable { status: 529 });
            }
        }
        Ok(answer)
    }
}
