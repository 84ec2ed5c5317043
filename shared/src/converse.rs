//! The ask service: answers a contact's message with the right memory and stores the
//! whole round, or nothing.
//!
//! One round, as `Converse::answer` reads, step by step: resolve the tenant's
//! settings; load the turn (head, facts and window, bounded by the window) and apply
//! the session rule (a new session when the last one went idle; `ask/turn.rs`); run
//! the round (the model and the tool loop, in `ask/round.rs`); prepare its commit
//! (every message with the head update, its sweep slot and the idempotency record;
//! `ask/commit.rs`, which recorded rounds (`ask/rounds.rs`) share); commit it in one
//! conditional transaction under the concurrency policy below; record its metrics;
//! then the work after a commit: give the window messages close to their TTL the
//! round's, so an open session's window never expires, and request the closed
//! session's facts and a due step. The transcript view ([`crate::records::transcript`]) takes its
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
//! shown ([`crate::plan::sendable`]): the text blocks the API would refuse back (an empty
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
mod after;
pub mod close;
mod commit;
mod context;
mod estimate;
mod events;
mod handoff_turn;
mod message;
mod plausible;
mod quota;
mod recall;
mod response;
mod round;
mod rounds;
mod turn;

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::deadline::Deadline;
use crate::domain::{IdempotencyKey, TenantId};
use crate::jobs::Jobs;
use crate::metrics::Event;
use crate::model::{Model, ModelError};
use crate::plan::session::Clock;
use crate::store::{Claim, ContactKey, RecallStore, RecordStore, RoundStore, UsageStore};
use crate::tenant::{Defaults, Settings, TenantStore};
use crate::tools::Tools;
pub use admit::RoundBudget;
pub use close::{SessionClosed, close_session};
pub use context::{ContextView, HeadToken};
use events::Shown;
pub use events::{RoundEvent, RoundEvents, shown_reply};
pub use plausible::CLIENT_ALLOWANCE_TOKENS;
pub use response::{AskOutcome, AskResponse, Reply, RoundSpan, UsageSummary};
pub use rounds::{MAX_ROUND_MESSAGES, MAX_USAGE_TOKENS, RecordedRound, RoundOutcome, RoundRequest};
use turn::Turn;

use crate::service::by;
pub use crate::service::{AskError, MAX_TOOL_ITERATIONS};

/// Longest user message, in characters.
pub const MAX_TEXT_CHARS: usize = 8_000;
/// How long an in-progress idempotency claim blocks others at least: longer than
/// the JSON route's timeout, so a crashed attempt frees its key; a request with
/// more time left holds it longer ([`LEASE_SLACK_SECONDS`]).
pub const IDEMPOTENCY_LEASE_SECONDS: i64 = 120;
/// What a claim's lease adds to the time its request may still run: the commit's
/// answer, and clocks a little apart between instances.
pub const LEASE_SLACK_SECONDS: i64 = 30;
/// How long a completed response can be replayed.
pub const IDEMPOTENCY_TTL_SECONDS: i64 = 24 * 3600;
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

/// The conversation service (a round asked, streamed, recorded or closed; the
/// context a client's own loop reads) and the ports it calls.
#[derive(Clone)]
pub struct Converse {
    /// What a round reads and writes.
    pub store: Arc<dyn RoundStore>,
    /// The last session's record, for the digest a new session starts with.
    pub records: Arc<dyn RecordStore>,
    /// The session indexes and texts the `recall` tool searches.
    pub recall: Arc<dyn RecallStore>,
    /// The tenant's usage counts, added to by each round.
    pub usage: Arc<dyn UsageStore>,
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

impl Converse {
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

    /// [`Converse::ask`] for a channel that spent its own budget for the round
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

    /// [`Converse::ask`], streamed: the model calls stream, and `listener` is
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
            Claim::InProgress => Err(AskError::InProgress),
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
    /// round, then store it ([`Converse::store_round`], the commit path recorded
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

    /// The rounds of an admitted answer (see [`Converse::answer`]).
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
                stored = self.replay_of(key, idempotency, deadline).await?;
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
        crate::service::settings(self.tenants.as_ref(), &self.defaults, tenant, deadline).await
    }
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
