//! degrau-standin: an offline stand-in for the Anthropic Messages API.
//!
//! It is both the local chat's model when no `ANTHROPIC_API_KEY` is set and the
//! strict model double of degrau's integration tests and benchmarks (one
//! component, not two). degrau's real HTTP client talks to it unchanged through
//! `ANTHROPIC_BASE_URL`, and its Bedrock client (`MODEL_PROVIDER=bedrock`) through
//! `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, on Bedrock Runtime's `InvokeModel` route. It
//!
//! - reads requests into its own types for the API's JSON ([`wire`]), written from
//!   the API's documentation rather than borrowed from degrau's core, so a field the
//!   core serialises wrongly is refused, not read back by the code that wrote it;
//! - refuses what the real API refuses, with the same texts ([`parse`], [`rules`]);
//! - counts tokens its own deterministic way and simulates prompt caching the
//!   documented way, so `usage` behaves like the real one ([`prompt`], [`cache`]);
//! - answers deterministically, every text reply marked `[offline stand-in]`, and
//!   calls the scheduling demo's tools when asked ([`answer`]);
//! - streams when asked (`"stream": true`, Bedrock's
//!   `invoke-with-response-stream`): the same answer cut into the API's events,
//!   at a pace tests set, with faults mid-stream ([`stream`]);
//! - thinks when asked (`thinking`), with signed blocks it checks when they come
//!   back, like the real API ([`thinking`]);
//! - answers, when asked, the way a real Claude answer differs from a tidy one: an
//!   empty text block before a `tool_use`, a cut at `max_tokens` inside a tool's
//!   input, a `ping` or an `error` mid-stream… ([`quirks`], a corpus other crates
//!   can use as a library), queued one by one or drawn at random from a seed;
//! - lets tests inject faults, script answers, queue quirks, read the calls it
//!   received and move the cache clock ([`control`], and the `/stand-in/` endpoints
//!   of [`http`]); with
//!   [`Clock::Manual`] only those moves make time pass, so a benchmark can play a
//!   day of pauses in seconds, and nothing in the stand-in ever waits for its clock.
//!
//! Run it in-process with [`spawn`] (or [`serve`] on a listener of your own), or
//! as the `degrau-standin` binary. It does not depend on degrau's crates (its tests
//! do, to send what degrau sends); `docs/DESIGN.md` says where it sits.
//!
//! # Layout
//!
//! Read [`http`] (the routes) first, then a request's way through: [`wire`] (the
//! API's JSON), [`parse`], [`rules`] and [`error`] (its shapes, rules and error
//! envelope), [`prompt`] and [`cache`] (token
//! counts and prompt caching), [`thinking`], [`answer`], [`quirks`], [`stream`]; then
//! [`control`] (faults, scripts, quirks, the call log) and [`cli`] (the binary's flags). [`graph`] stands in for
//! the Graph API's WhatsApp send endpoint, for the WhatsApp worker, [`graph_media`] for its
//! media (voice notes) and [`speech`] for speech-to-text.

pub mod answer;
pub mod cache;
pub mod cli;
pub mod control;
pub mod error;
pub mod graph;
pub mod graph_media;
pub mod http;
pub mod parse;
pub mod prompt;
pub mod quirks;
pub mod rules;
pub mod speech;
pub mod stream;
pub mod thinking;
pub mod wire;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::answer::Answer;
use crate::cache::Cache;
use crate::control::{Fault, LoggedCall, ScriptedAnswer};
use crate::quirks::{Quirk, Random, Rng};

/// How the cache clock runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Clock {
    /// Real time since the stand-in started, plus every advance (the default: a
    /// local chat's cache expires as Claude's would).
    #[default]
    Real,
    /// Only the advances (`POST /stand-in/clock`) move it: a benchmark that drives
    /// time itself gets the same expiries however long each request takes.
    Manual,
}

impl std::str::FromStr for Clock {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        match text {
            "real" => Ok(Clock::Real),
            "manual" => Ok(Clock::Manual),
            _ => Err(()),
        }
    }
}

/// Tunables of a stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Largest prompt accepted, in the stand-in's tokens (default 200,000).
    pub context_limit: u64,
    /// Smallest prefix that is cached, in tokens (default 1,024; the real minimum
    /// depends on the model, 512 to 4,096).
    pub min_cacheable_tokens: u64,
    /// Calls kept in the log; the oldest go first (default 10,000).
    pub log_capacity: usize,
    /// How the cache clock runs (default: real time plus advances).
    pub clock: Clock,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            context_limit: 200_000,
            min_cacheable_tokens: 1_024,
            log_capacity: 10_000,
            clock: Clock::Real,
        }
    }
}

impl Config {
    /// Sets the context limit.
    pub fn with_context_limit(mut self, tokens: u64) -> Self {
        self.context_limit = tokens;
        self
    }

    /// Sets the minimum cacheable prefix.
    pub fn with_min_cacheable_tokens(mut self, tokens: u64) -> Self {
        self.min_cacheable_tokens = tokens;
        self
    }

    /// Sets how many calls the log keeps.
    pub fn with_log_capacity(mut self, calls: usize) -> Self {
        self.log_capacity = calls;
        self
    }

    /// Sets how the cache clock runs.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }
}

/// A stand-in: its configuration and all its state behind one lock. Cloning
/// shares the state. The lock is a std `Mutex`, never held across an `.await`.
#[derive(Debug, Clone)]
pub struct StandIn {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: Config,
    started: Instant,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    cache: Cache,
    faults: VecDeque<Fault>,
    script: VecDeque<ScriptedAnswer>,
    quirks: VecDeque<Quirk>,
    random: Option<(Random, Rng)>,
    log: VecDeque<LoggedCall>,
    requests: u64,
    messages: u64,
    clock_offset_ms: u64,
    delta_ms: u64,
}

impl Default for StandIn {
    fn default() -> Self {
        StandIn::new(Config::default())
    }
}

impl StandIn {
    /// A fresh stand-in.
    pub fn new(config: Config) -> Self {
        StandIn {
            shared: Arc::new(Shared {
                config,
                started: Instant::now(),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> Config {
        self.shared.config
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        // A panic elsewhere cannot leave this state half-updated in a way that
        // matters more than losing the stand-in, so poisoning is ignored.
        let mut state = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }

    fn now_ms_of(&self, state: &State) -> u64 {
        let elapsed = match self.shared.config.clock {
            Clock::Real => {
                u64::try_from(self.shared.started.elapsed().as_millis()).unwrap_or(u64::MAX)
            }
            Clock::Manual => 0,
        };
        elapsed.saturating_add(state.clock_offset_ms)
    }

    /// The cache clock, in milliseconds: every advance, plus real time since start
    /// unless the clock is [`Clock::Manual`].
    pub fn now_ms(&self) -> u64 {
        self.with(|state| self.now_ms_of(state))
    }

    /// Moves the cache clock forward.
    pub fn advance_clock(&self, seconds: u64) -> u64 {
        self.with(|state| {
            state.clock_offset_ms = state
                .clock_offset_ms
                .saturating_add(seconds.saturating_mul(1000));
            self.now_ms_of(state)
        })
    }

    /// Queues faults for the next calls; returns how many are queued.
    pub fn push_faults(&self, faults: impl IntoIterator<Item = Fault>) -> usize {
        self.with(|state| {
            state.faults.extend(faults);
            state.faults.len()
        })
    }

    /// Queues scripted answers for the next valid calls; returns how many are queued.
    pub fn push_script(&self, answers: impl IntoIterator<Item = ScriptedAnswer>) -> usize {
        self.with(|state| {
            state.script.extend(answers);
            state.script.len()
        })
    }

    /// Queues quirks: each is applied to the next answer it applies to (one quirk
    /// per answer, the first queued that applies; the others wait). Returns how many
    /// are queued.
    pub fn push_quirks(&self, quirks: impl IntoIterator<Item = Quirk>) -> usize {
        self.with(|state| {
            state.quirks.extend(quirks);
            state.quirks.len()
        })
    }

    /// The quirks still queued, in order.
    pub fn queued_quirks(&self) -> Vec<Quirk> {
        self.with(|state| state.quirks.iter().copied().collect())
    }

    /// Turns the random mode on (each answer that takes no queued quirk gets, with
    /// the setting's probability, one drawn among those that apply) or off
    /// (`None`). Setting it again restarts its draws from the seed.
    pub fn set_random_quirks(&self, random: Option<Random>) {
        self.with(|state| state.random = random.map(|r| (r, Rng::new(r.seed))));
    }

    /// The random mode's setting, when it is on.
    pub fn random_quirks(&self) -> Option<Random> {
        self.with(|state| state.random.as_ref().map(|(random, _)| *random))
    }

    /// The quirk for an answer: the first queued one that applies (taken from the
    /// queue), else a draw of the random mode, if on.
    fn take_quirk(&self, answer: &Answer, streamed: bool, thinking: bool) -> Option<Quirk> {
        self.with(|state| {
            let queued = state
                .quirks
                .iter()
                .position(|quirk| quirk.applies(answer, streamed, thinking));
            if let Some(position) = queued {
                return state.quirks.remove(position);
            }
            let (random, rng) = state.random.as_mut()?;
            quirks::draw(rng, random.per_mille, answer, streamed, thinking)
        })
    }

    /// The calls received, oldest first.
    pub fn requests(&self) -> Vec<LoggedCall> {
        self.with(|state| state.log.iter().cloned().collect())
    }

    /// Clears faults, script, quirks (queued and random), log, cache and clock
    /// advances (ids keep counting, so they stay unique for the process's life).
    pub fn reset(&self) {
        self.with(|state| {
            state.faults.clear();
            state.script.clear();
            state.quirks.clear();
            state.random = None;
            state.log.clear();
            state.cache.clear();
            state.clock_offset_ms = 0;
            state.delta_ms = 0;
        });
    }

    /// Sets the pause between two events of a streamed answer.
    pub fn set_delta_ms(&self, delta_ms: u64) {
        self.with(|state| state.delta_ms = delta_ms);
    }

    /// The pause between two events of a streamed answer, in milliseconds.
    pub fn delta_ms(&self) -> u64 {
        self.with(|state| state.delta_ms)
    }

    /// Live cache entries now.
    pub fn cache_entries(&self) -> usize {
        self.with(|state| state.cache.live_entries(self.now_ms_of(state)))
    }

    fn next_request_id(&self) -> String {
        self.with(|state| {
            state.requests += 1;
            format!("req_standin_{}", state.requests)
        })
    }

    fn take_fault(&self) -> Option<Fault> {
        self.with(|state| state.faults.pop_front())
    }

    fn record(&self, call: LoggedCall) {
        let capacity = self.shared.config.log_capacity;
        self.with(|state| {
            state.log.push_back(call);
            while state.log.len() > capacity {
                state.log.pop_front();
            }
        });
    }
}

/// Serves the stand-in on a bound listener until the task is dropped.
pub async fn serve(listener: TcpListener, standin: StandIn) -> std::io::Result<()> {
    axum::serve(listener, http::router(standin)).await
}

/// A stand-in serving on `127.0.0.1` in a background task; dropping it stops the
/// server.
#[derive(Debug)]
pub struct Running {
    url: String,
    addr: SocketAddr,
    standin: StandIn,
    task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Base URL, e.g. `http://127.0.0.1:40123` (what `ANTHROPIC_BASE_URL` takes).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The stand-in, to queue faults or scripts and read the log directly.
    pub fn standin(&self) -> &StandIn {
        &self.standin
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a stand-in on an ephemeral loopback port, in-process (for tests).
pub async fn spawn(standin: StandIn) -> std::io::Result<Running> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(serve(listener, standin.clone()));
    Ok(Running {
        url: format!("http://{addr}"),
        addr,
        standin,
        task,
    })
}
