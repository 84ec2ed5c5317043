//! The worker's answer to a turn: the tenant's media or voice reply, or one ask
//! of the turn's text through the core's channel port under the turn's key, kept
//! within the customer service window.

use tracing::{error, info, warn};

use super::send::outside_window;
use super::{FUNCTION, SEND_BUDGET, Worker, WorkerError};
use crate::reply::split_reply;
use crate::settings::WhatsAppSettings;
use crate::store::{Outgoing, TurnRecord};
use crate::voice::VoiceTurn;
use crate::{MAX_OUTBOUND_CHARS, SERVICE_WINDOW_SECONDS};
use degrau::channel::{ChannelTurn, Conversation};
use degrau::converse::{AskError, AskOutcome, AskResponse};
use degrau::deadline::Deadline;
use degrau::domain::IdempotencyKey;
use degrau::metrics::Event;
use degrau::model::ModelError;
use degrau::store::{ContactKey, StoreError};

impl Worker {
    /// The agent's answer, the customer seeing their message read and the typing
    /// indicator while the round runs.
    pub(super) async fn agent_answer(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        settings: &WhatsAppSettings,
        deadline: Deadline,
    ) -> Result<Outgoing, WorkerError> {
        let _typing = self.start_typing(turn, settings, deadline).await;
        self.answer(key, turn, settings, deadline).await
    }

    /// What the turn sends: the tenant's media reply, or the ask's answer; within
    /// the window as text, outside it the template or nothing.
    async fn answer(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        settings: &WhatsAppSettings,
        deadline: Deadline,
    ) -> Result<Outgoing, WorkerError> {
        let (reply, reply_at) = match (&settings.media_reply, turn.bare_notes) {
            _ if turn.voice == Some(VoiceTurn::Unheard) => {
                (settings.voice_reply().to_owned(), None)
            }
            (Some(reply), true) => {
                Event::new(FUNCTION).count("MediaReplies", 1).emit();
                (reply.as_str().to_owned(), None)
            }
            _ => match self.ask_turn(key, turn, deadline).await? {
                Ok(response) => (
                    response.reply.text,
                    Some((response.session, response.round.last_seq)),
                ),
                Err(nothing) => return Ok(nothing),
            },
        };
        if reply.trim().is_empty() {
            return Ok(Outgoing::Nothing {
                reason: "empty_reply".into(),
            });
        }
        let now = (self.clock)();
        if now.saturating_sub(turn.last_inbound_at) >= SERVICE_WINDOW_SECONDS {
            return Ok(outside_window(settings));
        }
        Ok(Outgoing::Text {
            parts: split_reply(&reply, MAX_OUTBOUND_CHARS),
            reply_at,
        })
    }

    /// One ask of the turn's text under the turn's key: `Ok(Ok(reply))`, or
    /// `Ok(Err(nothing))` when the turn cannot be answered (settled with nothing
    /// sent), or an error a later delivery may get past.
    async fn ask_turn(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        deadline: Deadline,
    ) -> Result<Result<AskResponse, Outgoing>, WorkerError> {
        let idempotency = IdempotencyKey::parse(turn.id.as_str())
            .unwrap_or_else(|_| unreachable!("64 hex digits are a valid key"));
        let ask_deadline = Deadline::after(self.ask_timeout).earlier(deadline.before(SEND_BUDGET));
        let transcribed = turn.voice == Some(VoiceTurn::Transcribed);
        // The number's budget was spent for the turn when it was taken
        // (`admit_turn`): not the tenant's API rounds.
        let asked = ChannelTurn {
            key,
            text: &turn.text,
            idempotency: &idempotency,
            deadline: ask_deadline,
            transcribed,
        };
        match Conversation::answer(&self.ask, asked).await {
            Ok(AskOutcome::Answered(response)) => Ok(Ok(response)),
            Ok(AskOutcome::Replayed(body)) => {
                info!("the turn's answer was stored already: replayed");
                match serde_json::from_str::<AskResponse>(&body) {
                    Ok(response) => Ok(Ok(response)),
                    Err(_) => Err(WorkerError::Store(StoreError::Corrupt(
                        "a stored answer did not read back".into(),
                    ))),
                }
            }
            Err(error) if passes(&error) => {
                warn!(%error, "the turn's ask failed; the message comes back");
                Err(WorkerError::Ask(error))
            }
            Err(error) => {
                error!(%error, "the turn cannot be answered: nothing is sent");
                Event::new(FUNCTION).count("TurnsFailed", 1).emit();
                Ok(Err(Outgoing::Nothing {
                    reason: "not_answered".into(),
                }))
            }
        }
    }
}

/// True for an ask failure a later delivery may get past.
fn passes(error: &AskError) -> bool {
    match error {
        // A limit holds the turn back: the message waits in the queue (the
        // handler hides it until the limit allows) and answers then.
        AskError::Conflict(_)
        | AskError::InProgress
        | AskError::QuotaExceeded(_)
        | AskError::Throttled(_) => true,
        AskError::Store(error) => {
            matches!(error, StoreError::Unavailable(_) | StoreError::Conflict(_))
        }
        AskError::Model(error) => matches!(
            error,
            ModelError::RateLimited { .. }
                | ModelError::Unavailable { .. }
                | ModelError::Timeout
                | ModelError::Connection(_)
        ),
        _ => false,
    }
}
