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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use degrau::deadline::Deadline;
use degrau::domain::{ContentBlock, Role};
use degrau::model::{
    DeltaSink, Model, ModelDelta, ModelError, ModelResponse, StopReason, deltas_of,
};
use degrau::plan::request::ModelRequest;
use degrau::usage::Usage;
use degrau_standin::quirks::{Quirk, Rng as QuirkRng, draw};
use serde_json::json;

use crate::world::Counts;
use std::sync::Arc;

/// A contact's token for its `n`th message.
pub fn token(contact: usize, n: u64) -> String {
    format!("tok{contact}x{n}")
}

/// Every token in `text`, in order.
pub fn tokens(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find("tok") {
        let start = at + offset;
        let mut end = start + 3;
        let digits = |from: usize| {
            let mut to = from;
            while to < bytes.len() && bytes[to].is_ascii_digit() {
                to += 1;
            }
            to
        };
        let contact_end = digits(end);
        if contact_end > end && bytes.get(contact_end) == Some(&b'x') {
            let n_end = digits(contact_end + 1);
            if n_end > contact_end + 1 {
                end = n_end;
                found.push(text[start..end].to_owned());
            }
        }
        at = end.max(start + 3);
    }
    found
}

/// The contact a token belongs to.
pub fn token_contact(token: &str) -> Option<usize> {
    token.strip_prefix("tok")?.split('x').next()?.parse().ok()
}

/// The marker the first line of a summary request's system prompt carries.
const SUMMARY_MARKER: &str = "degrau:summarize";
/// The marker of a fact-extraction request.
const FACTS_MARKER: &str = "degrau:extract-facts";

/// The invariant of the model's requests: every one passes the API's rules.
pub const API_RULES: &str = "every request passes the API's rules";
/// The invariant of the tools: one run per `tool_use` the model emitted, and a
/// round that ran a tool is never run again without it.
pub const TOOL_ONCE: &str = "a tool runs once per tool_use";

/// The marker of a closed session's summary for recall.
const SEARCH_MARKER: &str = "degrau:search-summary";

/// Whether `request` is a round's (not a summary's, a fact extraction's or a
/// recall summary's).
fn answering(request: &ModelRequest) -> bool {
    let system = request
        .system
        .first()
        .map_or("", |block| block.text.as_str());
    ![SUMMARY_MARKER, FACTS_MARKER, SEARCH_MARKER]
        .iter()
        .any(|marker| system.starts_with(marker))
}

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
}

/// A request's size in tokens as the simulated API counts it: its JSON's
/// characters over four.
pub fn estimate(request: &ModelRequest) -> u64 {
    serde_json::to_string(request).map_or(0, |json| json.len() as u64 / 4)
}

/// A JSON value's size in tokens, as [`estimate`] counts.
pub fn estimate_json(value: &serde_json::Value) -> u64 {
    value.to_string().len() as u64 / 4
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

    /// A tool ran the call `id` (the simulation's tools say so before running
    /// it): a violation when that call ran before, or when no answer emitted it.
    pub fn tool_ran(&self, id: &str) {
        let mut state = lock(&self.state);
        if !state.ran.insert(id.to_owned()) {
            state
                .violations
                .push((TOOL_ONCE, format!("the tool call {id} ran twice")));
            return;
        }
        match state.emitted.get(id).cloned() {
            Some(round) => state.ran_in.entry(round).or_default().push(id.to_owned()),
            None => state.violations.push((
                TOOL_ONCE,
                format!("a tool ran for the call {id}, which no answer of the model held"),
            )),
        }
    }

    /// A violation when `request` is a round's and leaves out a tool call that
    /// already ran in the same attempt: the round was run again after a tool ran
    /// (the tool then runs again for a call the model makes anew).
    fn check_tools_kept(&self, request: &ModelRequest) {
        if !answering(request) {
            return;
        }
        let Some(token) = round_token(request) else {
            return;
        };
        let mut state = lock(&self.state);
        let attempt = state.attempts.get(&token).copied().unwrap_or(0);
        let Some(ran) = state.ran_in.get(&(token.clone(), attempt)) else {
            return;
        };
        let sent: HashSet<&str> = request
            .messages
            .iter()
            .flat_map(|message| message.content.iter())
            .filter_map(|block| match &block.block {
                ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        if let Some(forgotten) = ran.iter().find(|id| !sent.contains(id.as_str())).cloned() {
            state.violations.push((
                TOOL_ONCE,
                format!(
                    "the round of {token} asked the model again without the call {forgotten}, \
                     which had already run: the round was run again after a tool ran"
                ),
            ));
        }
    }

    /// Records the `tool_use` blocks of a round's answer, with its round and
    /// attempt.
    fn record_calls(&self, request: &ModelRequest, answer: &ModelResponse) {
        if !answering(request) {
            return;
        }
        let Some(token) = round_token(request) else {
            return;
        };
        let mut state = lock(&self.state);
        let attempt = state.attempts.get(&token).copied().unwrap_or(0);
        for block in &answer.content {
            if let ContentBlock::ToolUse { id, .. } = block {
                state.emitted.insert(id.clone(), (token.clone(), attempt));
            }
        }
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
        let system = request
            .system
            .first()
            .map_or("", |block| block.text.as_str());
        if system.starts_with(SUMMARY_MARKER) || system.starts_with(FACTS_MARKER) {
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
        let system = request
            .system
            .first()
            .map_or("", |block| block.text.as_str());
        if system.starts_with(SUMMARY_MARKER) || system.starts_with(FACTS_MARKER) {
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
        let system = request
            .system
            .first()
            .map_or("", |block| block.text.as_str());
        if system.starts_with(SUMMARY_MARKER) {
            return Ok(summary(request));
        }
        if system.starts_with(FACTS_MARKER) {
            return Ok(facts(request));
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
        let system = request
            .system
            .first()
            .map_or("", |block| block.text.as_str());
        if system.starts_with(SUMMARY_MARKER) || system.starts_with(FACTS_MARKER) {
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

/// The answer as the stand-in's wire types hold it.
fn to_wire(answer: &ModelResponse) -> Option<degrau_standin::answer::Answer> {
    let content = serde_json::from_value(serde_json::to_value(&answer.content).ok()?).ok()?;
    let stop_reason =
        serde_json::from_value(serde_json::to_value(answer.stop_reason.as_ref()?).ok()?).ok()?;
    Some(degrau_standin::answer::Answer {
        content,
        stop_reason,
    })
}

/// `answer` with the blocks and stop reason of `wire`.
fn from_wire(
    wire: degrau_standin::answer::Answer,
    mut answer: ModelResponse,
) -> Option<ModelResponse> {
    answer.content = serde_json::from_value(serde_json::to_value(&wire.content).ok()?).ok()?;
    answer.stop_reason =
        Some(serde_json::from_value(serde_json::to_value(wire.stop_reason).ok()?).ok()?);
    Some(answer)
}

/// The request as the Messages API reads it, by the stand-in's own rules: the
/// 400 it would answer, if any.
fn judge(request: &ModelRequest) -> Result<(), String> {
    let body = serde_json::to_value(request).map_err(|e| e.to_string())?;
    degrau_standin::parse::parse_value(&body)
        .map(|_| ())
        .map_err(|error| error.message)
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

/// An answer's pieces as a stream hands them over: each text in two halves.
fn pieces(answer: &ModelResponse) -> Vec<ModelDelta> {
    deltas_of(answer)
        .into_iter()
        .flat_map(|delta| match delta {
            ModelDelta::Text { index, text } => {
                let half = text
                    .char_indices()
                    .map(|(at, _)| at)
                    .nth(text.chars().count() / 2)
                    .unwrap_or(text.len());
                let (first, second) = text.split_at(half);
                [first, second]
                    .into_iter()
                    .filter(|part| !part.is_empty())
                    .map(|part| ModelDelta::Text {
                        index,
                        text: part.to_owned(),
                    })
                    .collect::<Vec<_>>()
            }
            other => vec![other],
        })
        .collect()
}

/// The contact whose conversation a main request is: the token of its last user
/// text.
/// The token of the round's own message: the request's newest user text that
/// carries one.
fn round_token(request: &ModelRequest) -> Option<String> {
    request
        .messages
        .iter()
        .rev()
        .filter(|message| message.role == Role::User)
        .flat_map(|message| message.content.iter())
        .find_map(|block| match &block.block {
            ContentBlock::Text { text } => tokens(text).first().cloned(),
            _ => None,
        })
}

/// The request's user text, joined.
fn user_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .flat_map(|message| message.content.iter())
        .filter_map(|block| match &block.block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A summary that keeps every token of the previous record and the new messages.
fn summary(request: &ModelRequest) -> ModelResponse {
    let kept: BTreeSet<String> = tokens(&user_text(request)).into_iter().collect();
    let text = format!("record: {}", kept.into_iter().collect::<Vec<_>>().join(" "));
    let output = text.len() as u64 / 4;
    response(
        vec![ContentBlock::text(text)],
        StopReason::EndTurn,
        Usage {
            input_tokens: estimate(request),
            output_tokens: output,
            ..Usage::default()
        },
    )
}

/// A `record_facts` call naming the first customer message with a token: its
/// token as the `name` fact, citing its sequence number.
fn facts(request: &ModelRequest) -> ModelResponse {
    let text = user_text(request);
    let proposal = text.lines().find_map(|line| {
        let rest = line.strip_prefix("[seq ")?;
        let (seq, said) = rest.split_once("] user: ")?;
        let token = tokens(said).into_iter().next()?;
        Some(json!({"key": "name", "value": token, "seq": seq.parse::<u64>().ok()?}))
    });
    let facts: Vec<_> = proposal.into_iter().collect();
    response(
        vec![ContentBlock::tool_use(
            "toolu_facts",
            "record_facts",
            json!({"facts": facts}),
        )],
        StopReason::ToolUse,
        Usage {
            input_tokens: estimate(request),
            output_tokens: 20,
            ..Usage::default()
        },
    )
}

fn response(content: Vec<ContentBlock>, stop: StopReason, usage: Usage) -> ModelResponse {
    ModelResponse {
        id: "msg_sim".into(),
        model: "sim".into(),
        role: Role::Assistant,
        content,
        stop_reason: Some(stop),
        usage,
    }
}

/// Words of lowercase letters, about `chars` long.
pub fn filler(chars: usize) -> String {
    const WORDS: &[&str] = &[
        "corte", "barba", "amanha", "horario", "cliente", "agenda", "sexta", "manha", "tarde",
        "obrigado", "pode", "sim", "nao", "talvez", "depois",
    ];
    let mut out = String::with_capacity(chars + 10);
    while out.len() < chars {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(WORDS[fastrand::usize(..WORDS.len())]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_wherever_they_stand() {
        assert_eq!(
            tokens("tok3x17 said tok12x1, and tokx9 tok4x is not one; stok5x2"),
            ["tok3x17", "tok12x1", "tok5x2"]
        );
        assert_eq!(token_contact("tok12x1"), Some(12));
        assert_eq!(token(4, 9), "tok4x9");
    }
}
