//! Memory for an agent that runs its own loop, the write side: a round the client
//! ran itself (its model calls, its tools), committed through the commit path of
//! `ask` ([`Converse::record_round`], `POST /v1/contacts/{contact}/rounds`): the
//! same transaction, head update, session opening and archive, facts request for a
//! closed session, step when the usage's context passes the threshold, sweep slot,
//! TTLs, idempotency and lost-answer check.
//!
//! A round is refused, with nothing written, unless it has the shape of a round
//! `ask` itself stores ([`RoundRequest::parse`]): a user message of text only first;
//! roles alternating; every `tool_use` answered by its `tool_result`s, first in the
//! next message, and every `tool_result` answering one; an assistant message with
//! no unanswered `tool_use` last; the block types degrau stores; the user's text and
//! the tool results within the limits `ask` keeps (refused, not cut: the client sent
//! them); at most [`MAX_ROUND_MESSAGES`]; and the last model call's usage. At the
//! commit its head token must still name the stored state
//! ([`super::HeadToken::stale_against`]) and its `tool_use` ids must be new to the
//! session's window (the API refuses a request that repeats one), and its usage's
//! context must be one the last request can have held ([`super::plausible`]). A
//! usage that reports no context (or none at all) is estimated from what degrau
//! holds ([`super::estimate`]), and the answer says so (`usage_estimated`).
//! A round that passes spends one of the tenant's rounds ([`crate::quota`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::admit::RoundBudget;
use super::round::{Round, first_cut};
use super::{
    AskError, AskResponse, Converse, HeadToken, MAX_TOOL_ITERATIONS, RoundSpan, UsageSummary,
    payload_hash,
};
use crate::deadline::Deadline;
use crate::domain::{IdempotencyKey, Message};
use crate::store::ContactKey;
use crate::usage::Usage;

mod check;
mod parse;

use check::*;
use parse::*;

/// Most messages in a recorded round: as many as `ask` can store, the user's
/// message and the answer with [`MAX_TOOL_ITERATIONS`] tool calls and results
/// between them.
pub const MAX_ROUND_MESSAGES: usize = 2 + 2 * MAX_TOOL_ITERATIONS;

/// Largest value of any usage field: far above any model's context window, low
/// enough that sums never overflow.
pub const MAX_USAGE_TOKENS: u64 = 10_000_000;

/// A round as the client sends it, checked: the head token, the messages, the last
/// model call's usage, and the hash an idempotent retry is recognised by.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRequest {
    /// The state the client read the context from.
    pub head: HeadToken,
    /// The round: the user's message first, the final answer last.
    pub messages: Vec<Message>,
    /// The last model call's usage: its context drives compaction as in `ask`.
    /// All zeros when the body had none.
    pub usage: Usage,
    /// True when a person of the business wrote its answer (a WhatsApp handoff
    /// turn, or `POST .../handoff`), not a model: its assistant messages are
    /// stored marked so.
    pub written_by_person: bool,
    hash: String,
}

impl RoundRequest {
    /// A round a person of the business answered: the customer's text, then the
    /// person's, against `head`. Its hash names only the texts, so a retry after the
    /// round landed (the head moved) replays it instead of refusing it.
    pub(super) fn by_person(head: HeadToken, customer: &str, answer: &str) -> RoundRequest {
        RoundRequest {
            head,
            messages: vec![
                Message::user_text(customer),
                Message::assistant_text(answer),
            ],
            usage: Usage::default(),
            written_by_person: true,
            hash: payload_hash(&format!("person {customer}\n{answer}")),
        }
    }
}

/// The answer to a recorded round (and the body an idempotent retry replays).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRound {
    /// The session the round was stored in.
    pub session: u32,
    /// Sequence numbers of its first and last messages.
    pub round: RoundSpan,
    /// The usage sent, with `context_tokens` computed from it.
    pub usage: UsageSummary,
    /// True when the round's context passed the threshold and a step was requested.
    pub compaction_queued: bool,
    /// True when the usage reported no context and `usage` is degrau's estimate
    /// (`ask/estimate.rs`).
    pub usage_estimated: bool,
}

impl RecordedRound {
    /// The answer to a recorded round committed as `response`, its usage
    /// `estimated` or not.
    pub(super) fn of(response: &AskResponse, estimated: bool) -> Self {
        RecordedRound {
            session: response.session,
            round: response.round,
            usage: response.usage,
            compaction_queued: response.compaction_queued,
            usage_estimated: estimated,
        }
    }
}

/// The outcome of recording a round.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundOutcome {
    /// The round was stored.
    Recorded(RecordedRound),
    /// An idempotent retry: the stored response, byte for byte.
    Replayed(String),
}

fn invalid(message: impl Into<String>) -> AskError {
    AskError::InvalidRequest(message.into())
}

impl RoundRequest {
    /// Reads and checks a round's JSON body (see the module documentation); each
    /// refusal names the message and block at fault, messages counted from 0 as in
    /// the Messages API's own errors.
    pub fn parse(body: &Value) -> Result<RoundRequest, AskError> {
        let wire: Body = serde_json::from_value(body.clone()).map_err(|e| {
            invalid(format!(
                "the body must be a JSON object {{\"head\", \"messages\", \"usage\"}}: {e}"
            ))
        })?;
        let head = HeadToken::parse(&wire.head)?;
        if wire.messages.is_empty() {
            return Err(invalid(
                "`messages` is empty: a round holds at least the user's message and the answer",
            ));
        }
        if wire.messages.len() > MAX_ROUND_MESSAGES {
            return Err(AskError::TooLarge(format!(
                "the round has {} messages; the limit is {MAX_ROUND_MESSAGES} (the user's \
                 message, {MAX_TOOL_ITERATIONS} tool calls and results, the answer)",
                wire.messages.len()
            )));
        }
        let messages = wire
            .messages
            .iter()
            .enumerate()
            .map(|(index, value)| parse_message(index, value))
            .map(|message| message.map(sendable_answer))
            .collect::<Result<Vec<Message>, AskError>>()?;
        check_round(&messages)?;
        Ok(RoundRequest {
            head,
            messages,
            usage: wire.usage.as_ref().map_or(Ok(Usage::default()), usage)?,
            written_by_person: false,
            hash: payload_hash(&format!("rounds {body}")),
        })
    }
}

impl Converse {
    /// Commits a round the client ran itself by `deadline`, idempotently with
    /// `idempotency` (the same key and body replays the stored answer; another body
    /// is [`AskError::IdempotencyMismatch`]). Nothing is written on any error but
    /// [`AskError::Indeterminate`].
    pub async fn record_round(
        &self,
        key: &ContactKey,
        request: &RoundRequest,
        idempotency: Option<&IdempotencyKey>,
        deadline: Deadline,
    ) -> Result<RoundOutcome, AskError> {
        if let Some(idem) = idempotency
            && let Some(response) = self.claim(key, idem, &request.hash, deadline).await?
        {
            return Ok(RoundOutcome::Replayed(response));
        }
        let result = self
            .record(
                key,
                request,
                idempotency.map(|idem| (idem, request.hash.as_str())),
                deadline,
            )
            .await;
        self.release_failed(key, idempotency, &result, deadline)
            .await;
        result.map(RoundOutcome::Recorded)
    }

    /// Loads the turn as `ask` does, checks the head token and the window's tool
    /// ids against it, and stores the round through the shared commit path. A round
    /// that lands between this read and the commit is a conflict too: the client's
    /// model saw a window without it.
    async fn record(
        &self,
        key: &ContactKey,
        request: &RoundRequest,
        idempotency: Option<(&IdempotencyKey, &str)>,
        deadline: Deadline,
    ) -> Result<RecordedRound, AskError> {
        let settings = self.settings(&key.tenant, deadline).await?;
        let turn = self.load_turn(key, &settings, deadline).await?;
        if let Some(why) = request.head.stale_against(&HeadToken::of(&turn)) {
            return Err(AskError::Conflict(why));
        }
        if let Some(id) = reused_tool_id(&turn.plan.window, &request.messages) {
            return Err(invalid(format!(
                "`tool_use` id {id} is already in this session's window; ids must be unique"
            )));
        }
        let estimated = request.usage.context_tokens() == 0;
        let usage = match estimated {
            true => super::estimate::estimated_usage(&settings, &turn, request)?,
            false => {
                super::plausible::check_usage(&settings, &turn, request)?;
                request.usage
            }
        };
        // A recorded round ran its model elsewhere: no lease to hold.
        let admitted = self
            .admit(key, &settings, (RoundBudget::Api, false), deadline)
            .await?;
        self.give_back(admitted, deadline).await;
        let hard_capped = first_cut(&settings, &turn).hard_capped;
        let mut round = Round::recorded(request.messages.clone(), usage, estimated, hard_capped);
        if request.written_by_person {
            round = round.by_person();
        }
        match self
            .store_round(key, &settings, &turn, round, idempotency, deadline)
            .await?
        {
            Some(response) => Ok(RecordedRound::of(&response, estimated)),
            None => Err(AskError::Conflict(
                "another round for this contact landed while this one was being stored; \
                 nothing was stored; read the context again and run the round on it"
                    .into(),
            )),
        }
    }
}
