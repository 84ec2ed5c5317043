//! Closing a contact's session on request (`POST /v1/contacts/{contact}/sessions`):
//! what going idle does, now. A chat framework's "clear" (LangChain's
//! `BaseChatMessageHistory.clear`) means "start a new conversation", not "forget
//! this person": the session is closed as the idle timeout would close it, and
//! the contact's facts stay.
//!
//! The close is the commit of a round of no message (`Converse::prepare_commit`
//! with the plan `turn::closing_plan`): in one conditional transaction the
//! closed session's archive and recall record are written and the head moves to
//! the next session, empty (no window, no summary); then the closed session's fact
//! extraction is requested, as after a round that closes one. The next round
//! belongs to that session, whose context holds the facts and the last session's
//! digest. A session with no message never goes idle ([`crate::plan::session::idle`]),
//! so closing again, or the idle timeout passing, closes nothing more: the close
//! is idempotent by itself.
//!
//! A round that lands while the close is prepared wins: the close answers 409
//! `conflict`, nothing changed. A round read before the close and committed after
//! it finds its head stale (the session changed) and is told to read the context
//! again, as after an idle timeout.

use serde::Serialize;
use tracing::info;

use super::commit::Committed;
use super::round::{Origin, Round, RoundStats};
use super::turn::closing_plan;
use super::{AskError, Converse};
use crate::deadline::Deadline;
use crate::metrics::Event;
use crate::plan::recall::record_of;
use crate::store::ContactKey;
use crate::usage::RoundUsage;

/// The answer of a close.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionClosed {
    /// The session the contact's next round belongs to.
    pub session: u32,
    /// The session closed now; `None` when none held a message (a contact never
    /// seen, or a session a close just opened).
    pub closed_session: Option<u32>,
}

/// Closes the contact's session now, by `deadline` (see the module documentation).
pub async fn close_session(
    service: &Converse,
    key: &ContactKey,
    deadline: Deadline,
) -> Result<SessionClosed, AskError> {
    let settings = service.settings(&key.tenant, deadline).await?;
    let mut turn = service.load_turn(key, &settings, deadline).await?;
    let head = match &turn.expected {
        Some(head) if head.last_seq > 0 => head.clone(),
        // Nothing to close: the next round opens (or continues) the session the
        // turn plan names, with no window.
        _ => {
            return Ok(SessionClosed {
                session: turn.plan.session,
                closed_session: None,
            });
        }
    };
    // What the head's session holds after its summary: the window when it is open
    // (read as `ask` reads it), nothing when it went idle (the turn plan then
    // dropped it; its record was made from it).
    let window = std::mem::take(&mut turn.plan.window);
    turn.closing = turn.closing.take().or_else(|| {
        Some(record_of(
            head.session,
            head.summary.as_deref(),
            &window,
            head.last_seq,
            head.last_activity,
        ))
    });
    turn.plan = closing_plan(&head);
    let nothing = Round {
        messages: Vec::new(),
        usage: RoundUsage::default(),
        stats: RoundStats::default(),
        origin: Origin::Client,
        transcribed: false,
    };
    let prepared = service.prepare_commit(key, &settings, &turn, nothing, None, false)?;
    if let Committed::Lost = service.commit(key, &prepared, deadline).await? {
        return Err(AskError::Conflict(
            "another round for this contact landed while its session was being closed; \
             nothing was changed; close it again"
                .into(),
        ));
    }
    info!(
        session = head.session,
        facts = turn.plan.request_facts.is_some(),
        "session closed on request"
    );
    Event::new("ask").count("SessionsClosed", 1).emit();
    service
        .after_commit(key, &settings, &prepared, &turn.plan, deadline)
        .await;
    Ok(SessionClosed {
        session: turn.plan.session,
        closed_session: Some(head.session),
    })
}
