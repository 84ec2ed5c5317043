//! The pieces of a round's commit, pure: its messages as stored, the answer (and
//! the body a replay repeats), the archive of the session it closes, and the
//! window messages whose TTL it extends.

use super::super::round::{Origin, RoundMessage, RoundStats};
use super::super::turn::{Turn, TurnPlan};
use super::super::{AskError, AskResponse, RecordedRound, Reply, RoundSpan, UsageSummary};
use crate::domain::StoredMessage;
use crate::plan::session::idle_seconds;
use crate::store::{MAX_ROUND_ITEMS, SessionArchive};
use crate::tenant::Settings;
use crate::usage::RoundUsage;

/// The round's messages as stored: dense sequence numbers after the plan's base;
/// the first (the user's) marked `transcribed` when it is a voice note's.
pub(super) fn stored_messages(
    round: Vec<RoundMessage>,
    transcribed: bool,
    plan: &TurnPlan,
    now: i64,
) -> Vec<StoredMessage> {
    round
        .into_iter()
        .zip(plan.base_seq + 1..)
        .map(
            |(
                RoundMessage {
                    message,
                    usage,
                    by_person,
                },
                seq,
            )| StoredMessage {
                session: plan.session,
                seq,
                role: message.role,
                content: message.content,
                pruned: None,
                usage,
                created_at: now,
                written_by_person: by_person,
                // The user's message, first of the round.
                transcribed: transcribed && seq == plan.base_seq + 1,
            },
        )
        .collect()
}

/// The answer to the client (and the body an idempotent retry replays).
pub(super) fn response(
    plan: &TurnPlan,
    messages: &[StoredMessage],
    usage: &RoundUsage,
    stats: &RoundStats,
    step_due: bool,
) -> AskResponse {
    AskResponse {
        session: plan.session,
        reply: messages.last().map_or_else(
            || Reply {
                text: String::new(),
                content: Vec::new(),
                stop_reason: None,
            },
            |m| Reply {
                text: m.to_message().text(),
                content: m.content.clone(),
                stop_reason: stats.stop_reason.clone(),
            },
        ),
        round: RoundSpan {
            first_seq: plan.base_seq + 1,
            last_seq: plan.base_seq + messages.len() as u64,
        },
        usage: UsageSummary {
            input_tokens: usage.total.input_tokens,
            cache_read_input_tokens: usage.total.cache_read_input_tokens,
            cache_creation_input_tokens: usage.total.cache_creation_input_tokens,
            output_tokens: usage.total.output_tokens,
            context_tokens: usage.context_tokens(),
        },
        compaction_queued: step_due,
    }
}

/// The archive of the session this round closes, with its record (not when the
/// head's retention ran out).
pub(super) fn archive(turn: &Turn, expires_at: i64) -> Option<SessionArchive> {
    let closed = turn
        .expected
        .as_ref()
        .filter(|_| turn.plan.closed_session.is_some())?;
    let record = turn.closing.clone().unwrap_or_else(|| {
        crate::plan::recall::record_of(
            closed.session,
            closed.summary.as_deref(),
            &[],
            closed.last_seq,
            closed.last_activity,
        )
    });
    Some(SessionArchive::from_record(
        &record,
        closed.summarized_until,
        expires_at,
    ))
}

/// The window messages a round gives its TTL: those that would expire before the
/// session can close (`expires_at` no later than now plus the idle timeout), oldest
/// first, so an open session's window never expires under it; none when the
/// session closed.
pub(super) fn refresh_due(turn: &Turn, settings: &Settings) -> Vec<u64> {
    let (plan, now) = (&turn.plan, turn.now);
    if plan.closed_session.is_some() {
        return Vec::new();
    }
    let soon = now.saturating_add(idle_seconds(settings.session_idle_minutes));
    plan.window
        .iter()
        .zip(&plan.window_expires_at)
        .filter(|(_, ttl)| ttl.is_some_and(|ttl| ttl <= soon))
        .map(|(message, _)| message.seq)
        .collect()
}

/// The window messages due the round's TTL: those the commit's transaction holds
/// besides its `items` (messages, idempotency record, archive; the head, and for a
/// new head the check of the tenant's last erase, come on top), and the rest,
/// refreshed after the commit.
pub(super) fn refresh_split(
    turn: &Turn,
    settings: &Settings,
    items: usize,
) -> (Vec<u64>, Vec<u64>) {
    let items = items + 1 + usize::from(turn.expected.is_none());
    let mut refresh = refresh_due(turn, settings);
    let rest = refresh.split_off(refresh.len().min(MAX_ROUND_ITEMS.saturating_sub(items)));
    (refresh, rest)
}

/// What an idempotent retry of the round replays: the route's own answer (a
/// recorded round's says whether its usage was estimated).
pub(super) fn replay_body(
    origin: Origin,
    response: &AskResponse,
    usage_estimated: bool,
) -> Result<String, AskError> {
    match origin {
        Origin::Model => serde_json::to_string(response),
        Origin::Client => serde_json::to_string(&RecordedRound::of(response, usage_estimated)),
    }
    .map_err(|e| AskError::Internal(e.to_string()))
}
