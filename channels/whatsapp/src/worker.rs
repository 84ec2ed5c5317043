//! The worker: one queue message in, at most one turn out. What the
//! `whatsapp-worker` function runs for each record of an SQS FIFO batch.
//!
//! 1. **Find the record** the queued message names by its incarnation (the
//!    message names no one; the index that leads to the record's contact may
//!    trail the record's write by a moment, so a young message waits a little
//!    for it, and one still young after that comes back). None (the contact was
//!    erased, or the record expired): nothing to do. Handled: its turn's reply may still be
//!    unsent (a worker died after recording it): send what is left, and stop.
//! 2. **Finish what an earlier attempt started**: a record taken by a turn that
//!    is not settled yet has that turn resumed, with the same records, text and
//!    `Idempotency-Key`, so its ask replays the stored answer instead of calling
//!    the model again.
//! 3. **Wait out the burst** ([`Worker::debounce`]): until `WHATSAPP_DEBOUNCE_SECONDS`
//!    have passed since the contact's latest pending record, waiting again when
//!    another arrives meanwhile, at most three debounces in all and never into the
//!    time the turn itself needs.
//! 4. **Take** every pending record of the contact sent to the same business
//!    number (a turn is one contact's and one number's: Meta's 24-hour window is
//!    per number, and the reply goes out from it), in arrival order (at most
//!    [`MAX_TURN_MESSAGES`], and no more text than one user message holds), and
//!    write the turn with them in one transaction. A message that arrives after
//!    this stays pending: its own queue message comes after this one (same group)
//!    and makes the next turn.
//! 5. **Answer**: a turn of bare media notes gets the tenant's `media_reply` when it
//!    set one, a voice note that cannot be heard its `voice_reply` ([`voice`],
//!    heard before the turn is taken) (no model call); any other turn is one ask of the joined texts, one a
//!    line, with the turn id as its `Idempotency-Key`.
//! 6. **Record what to send, then send it.** Outside the 24-hour customer service
//!    window (from the turn's latest message) free text cannot go out: the reply
//!    stays in the conversation, is counted, and the tenant's template goes instead
//!    when it has one. The turn and its records' move to handled are one
//!    transaction; each message sent is marked on the turn, so a redelivery sends
//!    only what did not go out.
//!
//! A failure that a later delivery may get past (the model or storage unavailable,
//! a race, the Graph API still failing after its retries) is an error: the record is
//! reported and comes back. A turn that cannot be answered (the model refused, a
//! bad configuration) is settled with nothing sent, logged and counted, so it never
//! holds the contact's later messages back.

mod answer;
pub mod handoff;
mod send;
pub mod voice;

use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use super::inbox::QueuedMessage;
use super::outbound::{SendError, Sender};
use super::store::{
    InboundRecord, MAX_TURN_MESSAGES, RecordState, TurnId, TurnRecord, TurnStatus, WhatsAppStore,
};
use super::{PhoneNumberId, WaMessageId, record_life_seconds};
use crate::settings::WhatsAppSettings;
use degrau::converse::{AskError, Converse, MAX_TEXT_CHARS};
use degrau::deadline::Deadline;
use degrau::metering::UsageCounts;
use degrau::metrics::Event;
use degrau::plan::session::Clock;
use degrau::store::{ContactKey, StoreError};
use handoff::Pending;
use voice::VOICE_BUDGET;

/// The metrics' `Function` dimension.
pub const FUNCTION: &str = "whatsapp-worker";

/// `WHATSAPP_DEBOUNCE_SECONDS` when unset.
pub const DEFAULT_DEBOUNCE_SECONDS: u64 = 3;

/// Largest `WHATSAPP_DEBOUNCE_SECONDS`.
pub const MAX_DEBOUNCE_SECONDS: u64 = 30;

/// Time a turn keeps for sending its reply after the ask: the Graph API's retries
/// fit in it.
pub const SEND_BUDGET: Duration = Duration::from_secs(10);

/// Passes over one queue message before it is handed back: each pass settles one
/// earlier turn or makes one.
const MAX_PASSES: usize = 4;

/// How long after it was queued a message whose record the index does not show is
/// still taken for one the index has not caught up with (it comes back), rather
/// than for an erased or expired record (nothing to do).
pub const INDEX_GRACE_SECONDS: i64 = 120;

/// The waits between lookups of a young message's record, within one delivery.
const INDEX_WAITS: [Duration; 3] = [
    Duration::from_millis(200),
    Duration::from_millis(500),
    Duration::from_millis(1_000),
];

/// The worker and its ports.
#[derive(Clone)]
pub struct Worker {
    /// Records and turns.
    pub store: Arc<dyn WhatsAppStore>,
    /// The ask service (and through it the tenants' settings).
    pub ask: Converse,
    /// The Graph API.
    pub sender: Arc<dyn Sender>,
    /// The clock (receive times, the window).
    pub clock: Clock,
    /// `WHATSAPP_DEBOUNCE_SECONDS`.
    pub debounce: Duration,
    /// `ASK_TIMEOUT_SECONDS`: the budget of a turn's ask.
    pub ask_timeout: Duration,
    /// Speech-to-text for voice notes; `None`: they stay `[audio]` notes.
    pub voice: Option<voice::Voice>,
    /// Events out: the handoffs the owner starts and ends from the app.
    pub events: Arc<dyn degrau::events::EventsOut>,
}

/// What a queue message came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No record (erased or expired): nothing done.
    NoRecord,
    /// The record is handled and its turn's reply out (by now or by earlier work).
    Handled,
    /// A person of the business has the conversation: the record waits, pending,
    /// for their answer or the hand-back ([`handoff`]).
    Paused,
}

/// A failure a later delivery may get past: the record is reported and comes back.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The ask failed in a way that may pass (the model or storage unavailable, a
    /// race, out of time).
    #[error("the ask failed: {0}")]
    Ask(AskError),
    /// The Graph API still failed after the retries that fit.
    #[error(transparent)]
    Send(SendError),
    /// The record kept changing under the worker.
    #[error("the contact's records kept changing; trying again later")]
    Busy,
    /// A young message's record is not in the index yet.
    #[error("the queued message's record is not indexed yet; trying again later")]
    NotIndexed,
    /// A limit of the public number (or the tenant's fair share) holds the turn
    /// back: nothing was taken or stored; the message waits `retry_after` seconds
    /// in the queue (see [`super::inbox::Hold`]).
    #[error("a limit holds the turn back: {0}")]
    Held(degrau::fairshare::Throttle),
}

impl WorkerError {
    /// A short name for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            WorkerError::Store(_) => "store",
            WorkerError::Ask(_) => "ask",
            WorkerError::Send(_) => "send",
            WorkerError::Busy => "busy",
            WorkerError::NotIndexed => "not_indexed",
            WorkerError::Held(_) => "held",
        }
    }

    /// When a held message may try again, in seconds.
    pub fn held_for(&self) -> Option<u64> {
        match self {
            WorkerError::Held(throttle) => Some(throttle.retry_after),
            WorkerError::Ask(AskError::Throttled(throttle)) => Some(throttle.retry_after),
            WorkerError::Ask(AskError::QuotaExceeded(exhausted)) => Some(exhausted.retry_after),
            _ => None,
        }
    }
}

impl Worker {
    /// The time a turn needs once taken: its ask and its send, and its voice notes'
    /// hearing when speech-to-text is on.
    pub fn turn_budget(&self) -> Duration {
        let voice = self.voice.as_ref().map_or(Duration::ZERO, |_| VOICE_BUDGET);
        self.ask_timeout + SEND_BUDGET + voice
    }

    /// Handles one queue message by `deadline` (see the module documentation).
    pub async fn handle(
        &self,
        queued: &QueuedMessage,
        deadline: Deadline,
    ) -> Result<Outcome, WorkerError> {
        let Some((key, message)) = self.find(queued, deadline).await? else {
            info!("no record for the queued message (erased or expired): nothing to do");
            return Ok(Outcome::NoRecord);
        };
        for _ in 0..MAX_PASSES {
            let now = (self.clock)();
            let Some(record) = self.store.inbound(&key, &message, now).await? else {
                info!("no record for the queued message (erased or expired): nothing to do");
                return Ok(Outcome::NoRecord);
            };
            match record.state {
                RecordState::Handled(turn) => {
                    self.resume(&key, &turn, deadline).await?;
                    return Ok(Outcome::Handled);
                }
                RecordState::Taken(turn) => self.resume(&key, &turn, deadline).await?,
                RecordState::Pending => {
                    if let Some(outcome) = self
                        .make_turn(&key, &record.message.phone_number_id, deadline)
                        .await?
                    {
                        return Ok(outcome);
                    }
                }
            }
        }
        Err(WorkerError::Busy)
    }

    /// The contact and message id of the record `queued` names; waits a little
    /// for a young message's record to show in the index, and hands a message
    /// still young after that back ([`WorkerError::NotIndexed`]).
    async fn find(
        &self,
        queued: &QueuedMessage,
        deadline: Deadline,
    ) -> Result<Option<(ContactKey, WaMessageId)>, WorkerError> {
        let mut waits = INDEX_WAITS.iter();
        loop {
            if let Some(found) = self
                .store
                .find_inbound(&queued.tenant, &queued.record)
                .await?
            {
                return Ok(Some(found));
            }
            let young = (self.clock)() - queued.queued_at < INDEX_GRACE_SECONDS;
            match waits.next() {
                _ if !young => return Ok(None),
                Some(wait) if deadline.allows(*wait + self.turn_budget()) => {
                    tokio::time::sleep(*wait).await;
                }
                _ => return Err(WorkerError::NotIndexed),
            }
        }
    }

    /// Waits out the contact's burst and returns its unhandled records (at once when
    /// one is taken by an unfinished turn, which goes first).
    pub async fn debounce(
        &self,
        key: &ContactKey,
        deadline: Deadline,
    ) -> Result<Vec<InboundRecord>, WorkerError> {
        let debounce = self.debounce.as_secs();
        let mut waited = 0u64;
        loop {
            let now = (self.clock)();
            let unhandled = self.store.unhandled(key, now).await?;
            let taken = unhandled
                .iter()
                .any(|r| matches!(r.state, RecordState::Taken(_)));
            let latest = unhandled.iter().map(|r| r.message.received_at).max();
            let Some(latest) = latest.filter(|_| !taken) else {
                return Ok(unhandled);
            };
            let due = latest.saturating_add(i64::try_from(debounce).unwrap_or(i64::MAX));
            let Ok(wait) = u64::try_from(due.saturating_sub(now)) else {
                return Ok(unhandled);
            };
            let wait_time = Duration::from_secs(wait);
            if wait == 0
                || waited + wait > 3 * debounce
                || !deadline.allows(wait_time + self.turn_budget())
            {
                return Ok(unhandled);
            }
            tokio::time::sleep(wait_time).await;
            waited += wait;
        }
    }

    /// Makes one turn of the contact's pending records sent to the business number
    /// `phone` (after the debounce), or resumes an unfinished one. A turn is one
    /// contact's and one number's: each number has its own customer service window
    /// and sends its own reply. `Some(Paused)` when a person has the conversation
    /// and the records wait.
    async fn make_turn(
        &self,
        key: &ContactKey,
        phone: &PhoneNumberId,
        deadline: Deadline,
    ) -> Result<Option<Outcome>, WorkerError> {
        let unhandled = self.debounce(key, deadline).await?;
        if let Some(turn) = unhandled.iter().find_map(|r| match &r.state {
            RecordState::Taken(turn) => Some(turn.clone()),
            _ => None,
        }) {
            return self.resume(key, &turn, deadline).await.map(|()| None);
        }
        let pending: Vec<&InboundRecord> = unhandled
            .iter()
            .filter(|r| r.state == RecordState::Pending && r.message.phone_number_id == *phone)
            .collect();
        let (pending, by_person) = match self.who_answers(key, &pending).await? {
            Pending::Agent => (pending, false),
            Pending::Person(taken) => (taken, true),
            Pending::Paused => {
                info!("a person has the conversation: the message waits for them");
                Event::new(FUNCTION).count("MessagesWaiting", 1).emit();
                return Ok(Some(Outcome::Paused));
            }
        };
        let life = record_life_seconds(self.ask.tenants.tenant_config(&key.tenant).await?.as_ref());
        let Some(mut turn) = self.turn_of(&pending, life) else {
            return Ok(None);
        };
        turn.by_person = by_person;
        // The owner's own messages spend no budget of the public number.
        if !by_person {
            self.admit_turn(key, phone, turn.messages.len(), deadline)
                .await?;
            self.hear_turn(&pending, &mut turn, deadline).await?;
        }
        if !self.store.take(key, &turn).await? {
            info!("a record changed before the turn took it; looking again");
            return Ok(None);
        }
        info!(messages = turn.messages.len(), "turn taken");
        // Counted once: only the worker that took the turn counts its messages.
        let taken = UsageCounts {
            whatsapp_in: turn.messages.len() as u64,
            ..UsageCounts::default()
        };
        self.ask.count_usage(&key.tenant, &taken, deadline).await;
        self.run(key, turn, deadline).await.map(|()| None)
    }

    /// The turn of the first pending records, in arrival order: at most
    /// [`MAX_TURN_MESSAGES`], and no more text than one user message holds; it
    /// lives `life` (the tenant's record life).
    fn turn_of(&self, pending: &[&InboundRecord], life: i64) -> Option<TurnRecord> {
        let first = pending.first()?;
        let mut taken: Vec<&InboundRecord> = Vec::new();
        let mut chars = 0;
        for record in pending.iter().take(MAX_TURN_MESSAGES) {
            let more = record.message.text.chars().count() + usize::from(!taken.is_empty());
            if !taken.is_empty() && chars + more > MAX_TEXT_CHARS {
                break;
            }
            chars += more;
            taken.push(record);
        }
        let messages: Vec<_> = taken.iter().map(|r| r.message.id.clone()).collect();
        let text: Vec<&str> = taken.iter().map(|r| r.message.text.as_str()).collect();
        let now = (self.clock)();
        Some(TurnRecord {
            id: TurnId::of(&messages),
            phone_number_id: first.message.phone_number_id.clone(),
            messages,
            text: text.join("\n"),
            bare_notes: taken.iter().all(|r| r.message.bare_note),
            by_person: false,
            voice: None,
            last_inbound_at: taken
                .iter()
                .map(|r| r.message.received_at)
                .max()
                .unwrap_or(now),
            status: TurnStatus::Taken,
            expires_at: now.saturating_add(life),
        })
    }

    /// Takes a turn where it stands: answers a taken one, sends what is left of a
    /// settled one. A turn that is gone (erased) is nothing to do.
    async fn resume(
        &self,
        key: &ContactKey,
        id: &TurnId,
        deadline: Deadline,
    ) -> Result<(), WorkerError> {
        match self.store.turn(key, id, (self.clock)()).await? {
            Some(turn) => self.run(key, turn, deadline).await,
            None => {
                info!("the turn is gone (erased or expired): nothing to do");
                Ok(())
            }
        }
    }

    async fn run(
        &self,
        key: &ContactKey,
        turn: TurnRecord,
        deadline: Deadline,
    ) -> Result<(), WorkerError> {
        let settings = self.settings(key).await?;
        let (outgoing, sent) = match &turn.status {
            TurnStatus::Done { .. } => return Ok(()),
            TurnStatus::Sending { outgoing, sent } => (outgoing.clone(), *sent),
            TurnStatus::Taken => {
                let outgoing = match turn.by_person {
                    true => self.person_answer(key, &turn, deadline).await?,
                    false => self.agent_answer(key, &turn, &settings, deadline).await?,
                };
                if !self.store.settle(key, &turn, &outgoing).await? {
                    info!("the turn changed before its reply was recorded (erased?): nothing sent");
                    return Ok(());
                }
                Event::new(FUNCTION)
                    .count("TurnsAnswered", 1)
                    .count("MessagesPerTurn", turn.messages.len() as u64)
                    .emit();
                (outgoing, 0)
            }
        };
        self.send(key, &turn, &outgoing, sent, &settings, deadline)
            .await
    }

    /// The tenant's WhatsApp settings (the defaults when its config has none); a
    /// section that does not read is [`StoreError::InvalidConfig`], as a config
    /// that does not read is.
    pub(super) async fn settings(&self, key: &ContactKey) -> Result<WhatsAppSettings, WorkerError> {
        let config = self.ask.tenants.tenant_config(&key.tenant).await?;
        let settings = WhatsAppSettings::of(config.as_ref()).map_err(StoreError::InvalidConfig)?;
        Ok(settings)
    }
}
