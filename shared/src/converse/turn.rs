//! A turn's read: the head, the facts and the window, read again while the window
//! falls short of the head, and the session rule applied to them ([`turn_plan`]):
//! a new session when the last one went idle, its facts requested.

use super::{AskError, Converse, by};
use crate::deadline::Deadline;
use crate::domain::{Fact, Head, StoredMessage};
use crate::plan::cache_ttl::record_gap;
use crate::plan::recall::index::{index_session, with_summary};
use crate::plan::recall::tokenize::StemmingTokenizer;
use crate::plan::recall::{SessionRecord, digest, record_of};
use crate::plan::session::idle;
use crate::records::{Closing, records_of_life};
use crate::store::{ContactKey, load_whole_turn};
use crate::tenant::Settings;

/// Where a turn stands once the session rule is applied.
pub(super) struct TurnPlan {
    pub(super) session: u32,
    pub(super) base_seq: u64,
    pub(super) summarized_until: u64,
    pub(super) summary: Option<String>,
    pub(super) steps: u32,
    pub(super) window: Vec<StoredMessage>,
    /// The TTL of each window message, in the same order.
    pub(super) window_expires_at: Vec<Option<i64>>,
    pub(super) closed_session: Option<u32>,
    /// The closed session whose fact extraction this round requests: the closed
    /// one, unless the scheduled sweep already requested it or its retention ran
    /// out.
    pub(super) request_facts: Option<u32>,
    /// The contact's recent gaps with this round's last (what the `auto` cache
    /// TTL reads and the commit writes back); empty for a contact with no memory.
    pub(super) gaps: Vec<u32>,
}

/// A turn as loaded: when, the contact's facts, the head as read (the commit's
/// condition), and where the session rule puts the turn.
pub(super) struct Turn {
    pub(super) now: i64,
    pub(super) facts: Vec<Fact>,
    pub(super) expected: Option<Head>,
    pub(super) plan: TurnPlan,
    /// The record of the session this turn closes (archived by its commit).
    pub(super) closing: Option<SessionRecord>,
    /// The index and text of the session this turn closes, from what the turn
    /// read of it (its summary, as its search summary, and the messages after
    /// it): what the `recall` tool searches of it until its own index is written.
    pub(super) closing_index: Option<Closing>,
    /// The digest of the last session, for the contact context (the tenant's
    /// `recall_digest`); the same for every round of the session.
    pub(super) digest: Option<String>,
}

impl Converse {
    /// Reads the turn (head, facts, window; read again while the window falls
    /// short of the head, see [`load_whole_turn`]) and applies the session rule.
    pub(super) async fn load_turn(
        &self,
        key: &ContactKey,
        settings: &Settings,
        deadline: Deadline,
    ) -> Result<Turn, AskError> {
        let now = (self.clock)();
        let state = by(deadline, load_whole_turn(self.store.as_ref(), key, now)).await?;
        // A head written after the clock was read (the window read again while a
        // round landed, or another instance's clock a little ahead) dates the turn:
        // its messages are never dated before the head's last round, nor before
        // their life began (a read of the life would hide them; the simulator's
        // dense-sequence check found a round so dated, seed 106).
        let now = state.head.as_ref().map_or(now, |head| {
            now.max(head.last_activity).max(head.born_at.unwrap_or(now))
        });
        // The session this turn closes, recorded from what the read holds of it: its
        // summary and the messages after it.
        let closing = state
            .head
            .as_ref()
            .filter(|head| idle(head, now, settings.session_idle_minutes))
            .map(|head| {
                record_of(
                    head.session,
                    head.summary.as_deref(),
                    &state.window,
                    head.last_seq,
                    head.last_activity,
                )
            });
        let closing_index = closing.as_ref().map(|record| {
            let tokenizer = StemmingTokenizer::default();
            let (index, text) = index_session(record.session, &state.window, &tokenizer);
            let index = match record.summary.as_deref() {
                Some(summary) => with_summary(index, summary, &tokenizer),
                None => index,
            };
            (index, text)
        });
        let plan = turn_plan(
            state.head.as_ref(),
            state.window,
            state.window_expires_at,
            now,
            settings,
        );
        let born = crate::records::born_of(state.head.as_ref(), now);
        let digest = match settings.recall_digest {
            true => {
                self.last_session_digest(key, &plan, closing.as_ref(), (now, born), deadline)
                    .await?
            }
            false => None,
        };
        Ok(Turn {
            now,
            facts: state.facts,
            expected: state.head,
            plan,
            closing,
            closing_index,
            digest,
        })
    }

    /// The digest of the session before the turn's: the one it closes, or the
    /// newest record when that is the previous session's (its first round stored
    /// it), so every round of a session shows the same paragraph.
    async fn last_session_digest(
        &self,
        key: &ContactKey,
        plan: &TurnPlan,
        closing: Option<&SessionRecord>,
        (now, born): (i64, Option<i64>),
        deadline: Deadline,
    ) -> Result<Option<String>, AskError> {
        if let Some(closing) = closing {
            return Ok(Some(digest(closing)));
        }
        if plan.session <= 1 {
            return Ok(None);
        }
        let newest = by(
            deadline,
            records_of_life(self.records.as_ref(), key, 1, now, born),
        )
        .await?;
        Ok(newest
            .first()
            .filter(|record| record.session + 1 == plan.session)
            .map(digest))
    }
}

/// The session rule: a contact's session closes after the idle timeout; the next
/// message opens a new one that starts with facts and no summary. (A head past its
/// retention reads as none: the store's reads treat it as gone, and the next round
/// writes over it, from session 1, as over a head DynamoDB's TTL deleted.)
/// A new session's plan: no window, no summary, `closed_session` closed by it.
fn fresh(session: u32, closed_session: Option<u32>) -> TurnPlan {
    TurnPlan {
        session,
        base_seq: 0,
        summarized_until: 0,
        summary: None,
        steps: 0,
        window: Vec::new(),
        window_expires_at: Vec::new(),
        closed_session,
        request_facts: None,
        gaps: Vec::new(),
    }
}

/// The plan of closing `head`'s session now, on request, idle or not (`close.rs`):
/// the next session opened, the closed one's facts requested unless the sweep
/// already did, the contact's rhythm kept as it is (closing is not a round).
pub(super) fn closing_plan(head: &Head) -> TurnPlan {
    TurnPlan {
        request_facts: (head.facts_requested != Some(head.session)).then_some(head.session),
        gaps: head.recent_gaps.clone(),
        ..fresh(head.session + 1, Some(head.session))
    }
}

fn turn_plan(
    head: Option<&Head>,
    window: Vec<StoredMessage>,
    window_expires_at: Vec<Option<i64>>,
    now: i64,
    settings: &Settings,
) -> TurnPlan {
    let gaps = |head: &Head| record_gap(&head.recent_gaps, now - head.last_activity);
    match head {
        None => fresh(1, None),
        Some(head) if idle(head, now, settings.session_idle_minutes) => TurnPlan {
            request_facts: (head.facts_requested != Some(head.session)).then_some(head.session),
            // The contact's rhythm outlives the session.
            gaps: gaps(head),
            ..fresh(head.session + 1, Some(head.session))
        },
        Some(head) => TurnPlan {
            session: head.session,
            base_seq: head.last_seq,
            summarized_until: head.summarized_until,
            summary: head.summary.clone(),
            steps: head.steps,
            window,
            window_expires_at,
            closed_session: None,
            request_facts: None,
            gaps: gaps(head),
        },
    }
}
