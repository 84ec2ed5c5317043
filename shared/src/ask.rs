//! The ask service: answers a contact's message with the right memory and stores the
//! whole round, or nothing.
//!
//! One round, as `AskService::answer` reads, step by step: resolve the tenant's
//! settings; load the turn (head, facts and window, bounded by the window) and apply
//! the session rule (a new session when the last one went idle; `ask/turn.rs`); run
//! the round (the model and the tool loop, in `ask/round.rs`); prepare its commit
//! (every message with the head update, its sweep slot and the idempotency record;
//! `ask/commit.rs`, which recorded rounds (`ask/rounds.rs`) share); commit it in one
//! conditional transaction under the concurrency policy below; record its metrics;
//! then the work after a commit: give the window messages close to their TTL the
//! round's, so an open session's window never expires, and request the closed
//! session's facts and a due step. The transcript view ([`transcript`]) takes its
//! query as typed values, parsed at the edge.
//!
//! **Time budget.** An ask gets one [`Deadline`]: the earlier of the invocation's
//! and `ASK_TIMEOUT_SECONDS` from its start (the handler builds it). The model and
//! the tools must be done [`COMMIT_MARGIN`] before it, so the commit fits; every model
//! call and tool call gets that earlier deadline, no model call starts with less than
//! [`MIN_MODEL_CALL`] left, and a round that runs out of time answers
//! `ModelError::Timeout` (504 `model_timeout`), or the error of the model call that
//! used up the time, with nothing written and the idempotency key released. The
//! client is never told the round failed while it is being stored.
//!
//! **Stop reasons.** `end_turn` and `stop_sequence` end the round; `tool_use` runs
//! the tools. A reply cut off at `max_tokens` that holds a `tool_use` never runs it
//! (its input may be cut short): the same request is sent once more with twice the
//! `max_tokens` (at most [`MAX_RETRY_MAX_TOKENS`]), and a second cut-off call, or no
//! time for the retry, is [`AskError::TruncatedToolCall`]. A text reply cut off at
//! `max_tokens` is stored as it is, marked in [`Reply::stop_reason`] and counted
//! (`RepliesTruncated`). `refusal` stores nothing ([`AskError::Refused`], counted as
//! `ModelRefusals`). `model_context_window_exceeded` is handled like a "prompt is too
//! long" error: the window is cut at a safe start once and the model asked again.
//! `pause_turn` only follows server tools, which degrau does not define: it is
//! [`AskError::UnexpectedStop`].
//!
//! **Answers as they come.** Every answer is made sendable before it is kept or
//! shown ([`crate::sendable`]): the text blocks the API would refuse back (an empty
//! one beside a tool call, whitespace alone) are dropped, the rest kept as sent. An
//! answer left with no text to read and no tool call (nothing, thinking alone,
//! whitespace alone) is asked for once more, then is [`AskError::EmptyAnswer`]. A
//! round's window is read again only before its first model call; once the model
//! answered (a tool may have run), a request that breaks the API's rules is
//! [`AskError::UnsendableRound`], never a re-run: a tool runs at most once per
//! `tool_use` the model emitted.
//!
//! **Extended thinking.** With the tenant's `thinking_budget_tokens`, each request
//! asks for thinking and gets that budget on top of the answer's `max_tokens`; the
//! `thinking` and `redacted_thinking` blocks are stored with their signatures and
//! sent back unchanged in every later request (a tool loop's turn must start with
//! them).
//!
//! **Concurrency policy.** Two asks on one contact race at the commit: the condition
//! `last_seq = :expected` lets exactly one win. The loser, when no tool ran in its
//! round (so nothing outside degrau happened), reloads the fresh history and answers
//! again, once. When a tool ran (a booking may have been made), or the retry loses
//! too, it answers 409 `conflict` and stores nothing; the client sends the message
//! again. A round is never lost, duplicated or interleaved.
//!
//! (`docs/DESIGN.md`: "The flows" (a round), "The time budget".)

mod admit;
pub mod close;
mod commit;
mod context;
mod estimate;
mod events;
mod handoff_turn;
mod life;
mod operate;
mod plausible;
mod quota;
pub mod recall;
mod round;
mod rounds;
pub mod transcript;
mod turn;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Fact, IdempotencyKey, TenantId};
use crate::jobs::Jobs;
use crate::metrics::Event;
use crate::model::{Model, ModelError, StopReason};
use crate::session::{Clock, idle};
use crate::store::{Claim, ContactKey, Store, StoreError};
use crate::tenant::{Defaults, InvalidSettings, Settings, TenantStore, stored_settings};
use crate::tools::Tools;
pub use admit::RoundBudget;
pub use close::{SessionClosed, close_session};
pub use context::{ContextView, HeadToken};
use events::Shown;
pub use events::{RoundEvent, RoundEvents, shown_reply};
pub use operate::{ConfigState, DEFAULT_CONTACT_PAGE, ModelTokensView, UsageDayView, priced};
pub use plausible::CLIENT_ALLOWANCE_TOKENS;
pub use rounds::{MAX_ROUND_MESSAGES, MAX_USAGE_TOKENS, RecordedRound, RoundOutcome, RoundRequest};
pub use transcript::{PageSize, SessionSelector, format_cursor, parse_cursor};
use turn::Turn;

/// Longest user message, in characters.
pub const MAX_TEXT_CHARS: usize = 8_000;
/// Most tool rounds (model calls answered with `tool_use`) in one round.
pub const MAX_TOOL_ITERATIONS: usize = 8;
/// How long an in-progress idempotency claim blocks others at least: longer than
/// the JSON route's timeout, so a crashed attempt frees its key; a request with
/// more time left holds it longer ([`LEASE_SLACK_SECONDS`]).
pub const IDEMPOTENCY_LEASE_SECONDS: i64 = 120;
/// What a claim's lease adds to the time its request may still run: the commit's
/// answer, and clocks a little apart between instances.
pub const LEASE_SLACK_SECONDS: i64 = 30;
/// How long a completed response can be replayed.
pub const IDEMPOTENCY_TTL_SECONDS: i64 = 24 * 3600;
/// Largest transcript page.
pub const MAX_PAGE: usize = 200;
/// Transcript page size when none is asked for.
pub const DEFAULT_PAGE: usize = 50;
/// Time an ask keeps for its commit (one `TransactWriteItems`, and the read that
/// recognises a commit whose answer was lost): the model and the tools must be done
/// this long before the request's deadline.
pub const COMMIT_MARGIN: Duration = Duration::from_secs(2);
/// Least time left for a model call to start: one with less could not finish.
pub const MIN_MODEL_CALL: Duration = Duration::from_secs(1);
/// Reads of a turn whose window is broken (read while a round was landing) before
/// the round answers as for a lost race.
pub const WINDOW_READS: u32 = 3;
/// Largest `max_tokens` of the retry of a cut-off tool call (see the stop reasons in
/// the module documentation).
pub const MAX_RETRY_MAX_TOKENS: u32 = 16_384;

/// What can go wrong with a request, by what the client should do about it.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The input is wrong (empty text, bad parameter).
    #[error("{0}")]
    InvalidRequest(String),
    /// The input is over a documented limit.
    #[error("{0}")]
    TooLarge(String),
    /// Nothing is known about the contact.
    #[error("{0}")]
    NotFound(String),
    /// Another request won a race, or holds the idempotency key.
    #[error("{0}")]
    Conflict(String),
    /// The idempotency key was used with another body.
    #[error("this Idempotency-Key was already used with a different request body")]
    IdempotencyMismatch,
    /// The model failed (after retries).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model kept asking for tools.
    #[error(
        "the model asked for tools more than {MAX_TOOL_ITERATIONS} times in one round; nothing was stored"
    )]
    ToolLoop,
    /// The model answered with no content.
    #[error("the model returned an empty answer; nothing was stored")]
    EmptyAnswer,
    /// The model declined to answer (`stop_reason` `refusal`).
    #[error("the model declined to answer this message; nothing was stored")]
    Refused,
    /// A tool call was cut off at `max_tokens`, again after one retry with a larger
    /// budget: its input may be incomplete, so it was not run.
    #[error(
        "the model's tool call was cut off by its output limit, also with a larger one; no tool ran and nothing was stored"
    )]
    TruncatedToolCall,
    /// A stop reason degrau does not continue from (`pause_turn`: degrau defines no
    /// server tools).
    #[error(
        "the model stopped with `{0}`, which degrau does not continue from; nothing was stored"
    )]
    UnexpectedStop(&'static str),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The commit failed in a way that does not tell whether it landed, and the
    /// head could not tell either: the round may be stored. A retry with the same
    /// `Idempotency-Key` gets its answer if it is.
    #[error(
        "storage did not confirm the round, and it may be stored; send it again with the same \
         Idempotency-Key to get its answer"
    )]
    Indeterminate,
    /// The window read breaks a rule of the request (two messages of one role): it
    /// was read while a round was landing. `ask` reads it again; after
    /// [`WINDOW_READS`] reads it answers [`AskError::Conflict`], as for a race lost.
    #[error("the stored window could not be read whole: {0}")]
    BrokenWindow(String),
    /// A request after the model answered broke the Messages API's rules: degrau's
    /// own defect, since every answer is made sendable before it is kept
    /// ([`crate::sendable`]). The round stops there: a tool that ran is never run
    /// again by a re-read of the window, and nothing is stored.
    #[error(
        "the round could not go on: its next request would break the Messages API's rules \
         ({0}); no tool was run twice and nothing was stored"
    )]
    UnsendableRound(String),
    /// A bug: a request that could not be built.
    #[error("internal error: {0}")]
    Internal(String),
    /// The tenant's configuration cannot be honoured: its stored `CONFIG` does not
    /// read, or its settings break a rule (the reason names the field).
    #[error("the tenant's configuration is not usable: {0}")]
    TenantConfig(String),
    /// A conditional change found another version than the one it was made from.
    #[error("{0}")]
    PreconditionFailed(String),
    /// The platform's policy does not allow what was asked (a configuration
    /// outside its bounds: the message names the bound; see
    /// [`crate::tenant::bounds`]).
    #[error("{0}")]
    Forbidden(String),
    /// The platform suspended the tenant ([`crate::platform::TenantPolicy`]): no
    /// round runs, whatever its configuration says.
    #[error("this tenant is suspended by the platform; nothing was stored")]
    Suspended,
    /// A limit of the tenant's fair share refused the round
    /// ([`crate::fairshare`]): 429 with `Retry-After`, nothing written.
    #[error(transparent)]
    Throttled(#[from] crate::fairshare::Throttle),
    /// The tenant's quota for this hour is spent ([`crate::quota`]).
    #[error(
        "this tenant's {} for this hour are spent ({} an hour); nothing was stored, retry \
         in {} s",
        .0.kind.as_str().replace('_', " "), .0.limit, .0.retry_after
    )]
    QuotaExceeded(crate::quota::Exhausted),
}

/// The body of a successful ask (stored as-is for idempotent replays).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskResponse {
    /// Session the round belongs to.
    pub session: u32,
    /// The final answer.
    pub reply: Reply,
    /// Sequence numbers of the round's first and last messages.
    pub round: RoundSpan,
    /// Usage over the round's model calls; `context_tokens` is the last call's.
    pub usage: UsageSummary,
    /// True when the round's context passed the threshold and a step was requested.
    pub compaction_queued: bool,
}

/// The final answer of a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Text blocks joined.
    pub text: String,
    /// All blocks of the final assistant message.
    pub content: Vec<ContentBlock>,
    /// Why the model stopped: `end_turn`, or `max_tokens` when the text was cut off
    /// by the output limit (stored as it is); `null` when the API did not say.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
}

/// Sequence numbers of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundSpan {
    /// The user's message.
    pub first_seq: u64,
    /// The final reply.
    pub last_seq: u64,
}

/// Usage of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageSummary {
    /// Uncached input tokens, summed.
    pub input_tokens: u64,
    /// Cache reads, summed.
    pub cache_read_input_tokens: u64,
    /// Cache writes, summed.
    pub cache_creation_input_tokens: u64,
    /// Output tokens, summed.
    pub output_tokens: u64,
    /// Context size of the round's last request.
    pub context_tokens: u64,
}

/// The outcome of an ask.
#[derive(Debug, Clone, PartialEq)]
pub enum AskOutcome {
    /// A new round was answered and stored.
    Answered(AskResponse),
    /// An idempotent retry: the stored response, byte for byte.
    Replayed(String),
}

/// The memory view of a contact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryView {
    /// Current session state.
    pub session: SessionView,
    /// Facts with their sources.
    pub facts: Vec<Fact>,
}

/// Session state, as the memory view shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionView {
    /// Session number.
    pub number: u32,
    /// False once the session went idle: the next message opens a new one.
    pub open: bool,
    /// The summary of the folded messages.
    pub summary: Option<String>,
    /// Messages up to this sequence number are folded into the summary.
    pub summarized_until: u64,
    /// Last committed sequence number.
    pub last_seq: u64,
    /// Context size of the last request.
    pub last_context_tokens: u64,
    /// Compaction steps applied in this session.
    pub steps: u32,
    /// Time of the last round, seconds since the Unix epoch.
    pub last_activity: i64,
}

/// The ask service and its ports.
#[derive(Clone)]
pub struct AskService {
    /// Conversation storage.
    pub store: Arc<dyn Store>,
    /// Tenant configuration.
    pub tenants: Arc<dyn TenantStore>,
    /// The model.
    pub model: Arc<dyn Model>,
    /// The tools.
    pub tools: Arc<dyn Tools>,
    /// The compactor's queue.
    pub jobs: Arc<dyn Jobs>,
    /// The tenants' quotas of rounds and summary calls.
    pub quotas: Arc<dyn crate::quota::Quotas>,
    /// Service-wide defaults.
    pub defaults: Defaults,
    /// The clock.
    pub clock: Clock,
}

/// Hash of what an idempotent request carries, to tell a retry from another request.
pub fn payload_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Checks a user message against the documented limits.
pub fn validate_text(text: &str) -> Result<(), AskError> {
    if text.trim().is_empty() {
        return Err(AskError::InvalidRequest(
            "`text` must contain non-whitespace characters".into(),
        ));
    }
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(AskError::TooLarge(format!(
            "`text` has {chars} characters; the limit is {MAX_TEXT_CHARS}"
        )));
    }
    Ok(())
}

/// A tenant whose settings cannot be honoured: a configuration error, answered as
/// `tenant_config_invalid` with its reason, and counted.
fn unusable(error: InvalidSettings) -> AskError {
    config_unusable(error.0)
}

/// The error of a tenant whose configuration does not read or cannot be honoured,
/// counted (`TenantConfigInvalid`) so an alarm sees it before the tenant does.
fn config_unusable(reason: String) -> AskError {
    warn!(%reason, "the tenant's configuration is not usable");
    crate::metrics::Event::new("ask")
        .count("TenantConfigInvalid", 1)
        .emit();
    AskError::TenantConfig(reason)
}

/// A tenant's config (or settings), read: a stored one that does not read is
/// [`AskError::TenantConfig`].
fn read_config<T>(result: Result<T, StoreError>) -> Result<T, AskError> {
    match result {
        Err(StoreError::InvalidConfig(reason)) => Err(config_unusable(reason)),
        other => Ok(other?),
    }
}

impl AskService {
    /// Answers `text` from the contact and stores the round, answering by `deadline`
    /// (see the module's time budget).
    pub async fn ask(
        &self,
        key: &ContactKey,
        text: &str,
        idempotency: Option<&IdempotencyKey>,
        deadline: Deadline,
    ) -> Result<AskOutcome, AskError> {
        let shown = Shown::nothing();
        let asked = (deadline, RoundBudget::Api, false);
        self.ask_showing(key, text, idempotency, asked, shown).await
    }

    /// [`AskService::ask`] for a channel that spent its own budget for the round
    /// (a WhatsApp number's turns): the tenant's API rounds for the hour are not
    /// spent; its fair share is. A `transcribed` text (a voice note's) is stored
    /// marked so.
    pub async fn ask_for_channel(
        &self,
        key: &ContactKey,
        text: &str,
        idempotency: Option<&IdempotencyKey>,
        deadline: Deadline,
        transcribed: bool,
    ) -> Result<AskOutcome, AskError> {
        let shown = Shown::nothing();
        let asked = (deadline, RoundBudget::Channel, transcribed);
        self.ask_showing(key, text, idempotency, asked, shown).await
    }

    /// [`AskService::ask`], streamed: the model calls stream, and `listener` is
    /// shown the round's events as they happen ([`RoundEvent`]). What is stored,
    /// and when, is the same: the whole round at its commit, or nothing. A replay
    /// shows nothing.
    pub async fn ask_streamed(
        &self,
        key: &ContactKey,
        text: &str,
        idempotency: Option<&IdempotencyKey>,
        deadline: Deadline,
        listener: &dyn RoundEvents,
    ) -> Result<AskOutcome, AskError> {
        let shown = Shown::to(listener);
        let asked = (deadline, RoundBudget::Api, false);
        self.ask_showing(key, text, idempotency, asked, shown).await
    }

    async fn ask_showing(
        &self,
        key: &ContactKey,
        text: &str,
        idempotency: Option<&IdempotencyKey>,
        (deadline, budget, transcribed): (Deadline, RoundBudget, bool),
        shown: Shown<'_>,
    ) -> Result<AskOutcome, AskError> {
        validate_text(text)?;
        let hash = payload_hash(text);
        if let Some(idem) = idempotency
            && let Some(response) = self.claim(key, idem, &hash, deadline).await?
        {
            return Ok(AskOutcome::Replayed(response));
        }
        let result = self
            .answer(
                key,
                text,
                idempotency.map(|idem| (idem, hash.as_str())),
                (deadline, budget, transcribed),
                shown,
            )
            .await;
        self.release_failed(key, idempotency, &result, deadline)
            .await;
        result.map(AskOutcome::Answered)
    }

    /// Claims an idempotency key for this attempt. `Some(response)` when the request
    /// already completed: the stored response, to replay byte for byte.
    async fn claim(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
        hash: &str,
        deadline: Deadline,
    ) -> Result<Option<String>, AskError> {
        let claim = self.store.claim_request(
            key,
            idempotency,
            hash,
            (self.clock)(),
            lease_seconds(deadline),
        );
        match by(deadline, claim).await? {
            Claim::Started => Ok(None),
            Claim::Completed { response } => {
                Event::new("ask").count("IdempotentReplays", 1).emit();
                Ok(Some(response))
            }
            Claim::InProgress => Err(AskError::Conflict(
                "a request with this Idempotency-Key is still in progress; retry later".into(),
            )),
            Claim::Mismatch => Err(AskError::IdempotencyMismatch),
        }
    }

    /// Frees the idempotency key of an attempt that failed, so the client may retry
    /// (nothing of it was stored; only a key still in progress is released). An
    /// attempt whose commit may yet land ([`AskError::Indeterminate`]) keeps its
    /// key to its lease: a retry meanwhile is told the request is in progress, and
    /// one after it replays the round if it landed. With the deadline gone it is
    /// left to its lease.
    async fn release_failed<T>(
        &self,
        key: &ContactKey,
        idempotency: Option<&IdempotencyKey>,
        result: &Result<T, AskError>,
        deadline: Deadline,
    ) {
        let (Err(error), Some(idem)) = (result, idempotency) else {
            return;
        };
        if matches!(error, AskError::Indeterminate) {
            return;
        }
        if let Err(error) = by(deadline, self.store.release_request(key, idem)).await {
            warn!(%error, "could not release an idempotency key; it frees itself when its lease ends");
        }
    }

    /// Answers one message: resolve the tenant's settings, load the turn, run the
    /// round, then store it ([`AskService::store_round`], the commit path recorded
    /// rounds share). A race lost with no tool run loops once, on the fresh history;
    /// a window that breaks the request's rules (read while a round was landing) is
    /// read again, at most [`WINDOW_READS`] times.
    async fn answer(
        &self,
        key: &ContactKey,
        text: &str,
        idempotency: Option<(&IdempotencyKey, &str)>,
        (deadline, budget, transcribed): (Deadline, RoundBudget, bool),
        shown: Shown<'_>,
    ) -> Result<AskResponse, AskError> {
        let settings = self.settings(&key.tenant, deadline).await?;
        let shown = shown.with_tool_input(settings.stream_tool_input);
        let admitted = self.admit(key, &settings, (budget, true), deadline).await?;
        let answered = self
            .answer_admitted(
                key,
                (text, transcribed),
                idempotency,
                (&settings, deadline),
                &shown,
            )
            .await;
        self.give_back(admitted, deadline).await;
        answered
    }

    /// The rounds of an admitted answer (see [`AskService::answer`]).
    async fn answer_admitted(
        &self,
        key: &ContactKey,
        (text, transcribed): (&str, bool),
        idempotency: Option<(&IdempotencyKey, &str)>,
        (settings, deadline): (&Settings, Deadline),
        shown: &Shown<'_>,
    ) -> Result<AskResponse, AskError> {
        let (mut lost, mut broken) = (0, 0);
        loop {
            let turn = self.load_turn(key, settings, deadline).await?;
            let mut round = match self
                .run_round(
                    key,
                    settings,
                    &turn,
                    text,
                    deadline.before(COMMIT_MARGIN),
                    shown,
                )
                .await
            {
                Err(AskError::BrokenWindow(why)) => {
                    broken += 1;
                    broken_window(&why, broken)?;
                    shown.restart("the history changed while the round ran", &[]);
                    continue;
                }
                other => other?,
            };
            if !deadline.allows(COMMIT_MARGIN) {
                // Only a model or tool that overran its own deadline gets here.
                return Err(out_of_time("before the commit"));
            }
            round.transcribed = transcribed;
            let tool_ran = round.tool_ran();
            let mut stored = self
                .store_round(key, settings, &turn, round, idempotency, deadline)
                .await?;
            if stored.is_none() {
                stored = self.replay_of(key, idempotency, deadline).await;
                if let Some(replayed) = &stored {
                    shown.replaced_by(&replayed.reply.text);
                }
            }
            match stored {
                Some(response) => return Ok(response),
                None if lost == 0 && !tool_ran => {
                    lost += 1;
                    info!(
                        "lost a commit race with no tool run; answering again on the fresh history"
                    );
                    shown.restart(
                        "another message for this contact landed first; answering again",
                        &[],
                    );
                }
                None => {
                    return Err(AskError::Conflict(
                        "another message for this contact was answered at the same time; this \
                         one was not stored. Send it again."
                            .into(),
                    ));
                }
            }
        }
    }

    /// The tenant's settings: the defaults with its config item's overrides.
    async fn settings(&self, tenant: &TenantId, deadline: Deadline) -> Result<Settings, AskError> {
        let stored = stored_settings(self.tenants.as_ref(), &self.defaults, tenant);
        read_config(by(deadline, stored).await)?.map_err(unusable)
    }

    /// The contact's memory: session state and facts.
    pub async fn memory(&self, key: &ContactKey) -> Result<MemoryView, AskError> {
        let now = (self.clock)();
        let (head, facts) = self.store.load_memory(key, now).await?;
        let head = head.ok_or_else(not_found)?;
        let stored = stored_settings(self.tenants.as_ref(), &self.defaults, &key.tenant);
        let settings = read_config(stored.await)?.map_err(unusable)?;
        Ok(MemoryView {
            session: SessionView {
                number: head.session,
                open: !idle(&head, now, settings.session_idle_minutes),
                summary: head.summary.clone(),
                summarized_until: head.summarized_until,
                last_seq: head.last_seq,
                last_context_tokens: head.last_context_tokens,
                steps: head.steps,
                last_activity: head.last_activity,
            },
            // The memory view shows who set each fact; the earlier values are the
            // operator's facts route's.
            facts: facts
                .into_iter()
                .map(|fact| Fact {
                    history: Vec::new(),
                    ..fact
                })
                .collect(),
        })
    }
}

/// A store call of a request, by its deadline: one that has not answered by then
/// is unavailable (a write may then have landed or not: the caller decides).
pub(super) async fn by<T>(
    deadline: Deadline,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    deadline.run(call).await.unwrap_or_else(|| {
        Err(StoreError::Unavailable(
            "storage did not answer within the request's time".into(),
        ))
    })
}

/// How long a claim holds its key: [`IDEMPOTENCY_LEASE_SECONDS`], or the time the
/// request may still run and [`LEASE_SLACK_SECONDS`], whichever is longer. A
/// streamed round may run longer than the fixed lease (`STREAM_TIMEOUT_SECONDS`):
/// a lease that ended while its round ran would let a same-key retry run the
/// round, and its tools, a second time.
fn lease_seconds(deadline: Deadline) -> i64 {
    let left = i64::try_from(deadline.remaining().as_secs()).unwrap_or(i64::MAX / 4);
    IDEMPOTENCY_LEASE_SECONDS.max(left.saturating_add(1).saturating_add(LEASE_SLACK_SECONDS))
}

/// The `count`th broken window read: counted, and read again while reads are
/// left; then a conflict, as a race lost.
fn broken_window(why: &str, count: u32) -> Result<(), AskError> {
    warn!(
        reason = why,
        reads = count,
        "the window read breaks the request's rules"
    );
    Event::new("ask").count("BrokenWindows", 1).emit();
    if count < WINDOW_READS {
        return Ok(());
    }
    Err(AskError::Conflict(
        "the conversation was being written while it was read; nothing was stored. Send it \
         again."
            .into(),
    ))
}

/// The round ran out of time: 504 `model_timeout`, counted.
fn out_of_time(when: &'static str) -> AskError {
    warn!(when, "the ask ran out of time; nothing is stored");
    Event::new("ask").count("OutOfTime", 1).emit();
    AskError::Model(ModelError::Timeout)
}

fn not_found() -> AskError {
    AskError::NotFound("no conversation with this contact".into())
}
