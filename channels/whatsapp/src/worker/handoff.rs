//! Human handoff: a person of the business takes a conversation over, and the agent
//! stays quiet for that contact until they hand it back.
//!
//! **Taking over.** An echo of the business's own app ([`crate::echo`]) is the
//! owner answering the customer. The worker makes the customer's pending messages
//! before it and the owner's echoes one *person turn* ([`TurnRecord::by_person`]):
//! stored in the transcript as one round (the customer's text, then the owner's
//! as the business's message marked `written_by_person`), never asked of the model,
//! and nothing sent (the customer already has the owner's message). It hands the
//! conversation to the person for the tenant's `whatsapp.handoff_hours` (12 by
//! default), each new echo extending it. An operator (`POST
//! /v1/contacts/{contact}/handoff`) or a back office that answers through its own
//! systems does the same without an echo.
//!
//! **While a person has it**, the customer's messages are recorded and stay
//! pending: the agent does not answer them, marks nothing read, and the queue
//! message is done. The owner's next echo takes them into its round; when the
//! conversation goes back to the agent, the customer's next message makes a turn
//! of every message still pending.
//!
//! **Handing back**: the owner sends the tenant's `whatsapp.handback_keyword`
//! alone (the word itself is not stored in the transcript), an operator calls
//! `POST .../handback` (the inspector's button), or the time runs out. The handoff
//! is one item of the contact (`WA#HANDOFF`), so an erase takes it.
//!
//! **Events out.** An echo that hands the conversation to the owner publishes
//! `handoff.started` (`"by": "business_app"`), each extension too, as the API's
//! handoff route does; the hand-back word publishes `handoff.ended` when a handoff
//! was in force ([`degrau::events`]).

pub use super::super::records::{Handoff, HandoffBy};

use tracing::{info, warn};

use super::super::events::{handoff_ended, handoff_started};
use super::super::store::{InboundRecord, Outgoing, TurnRecord};
use super::{FUNCTION, Worker, WorkerError};
use degrau::channel::{Conversation, PersonAnswer};
use degrau::converse::MAX_TEXT_CHARS;
use degrau::deadline::Deadline;
use degrau::domain::IdempotencyKey;
use degrau::events::{self, EventType, Occurrence};
use degrau::metrics::Event;
use degrau::store::ContactKey;

/// What the contact's pending records come to, before the agent may answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pending<'a> {
    /// The agent answers them (no echo among them, no handoff).
    Agent,
    /// A person has the conversation: they wait.
    Paused,
    /// A person turn: the customer's records before the first echo, and the run of
    /// echoes after them.
    Person(Vec<&'a InboundRecord>),
}

/// What the pending records (arrival order) come to while `paused` says whether a
/// person has the conversation. An echo that `hands_back` (the tenant's word) is
/// taken alone: the customer's messages before it stay for the agent.
pub(super) fn sort_pending<'a>(
    pending: &[&'a InboundRecord],
    paused: bool,
    hands_back: impl Fn(&str) -> bool,
) -> Pending<'a> {
    let Some(first_echo) = pending.iter().position(|r| r.message.by_business) else {
        return if paused {
            Pending::Paused
        } else {
            Pending::Agent
        };
    };
    if hands_back(&pending[first_echo].message.text) {
        return Pending::Person(vec![pending[first_echo]]);
    }
    let echoes = pending[first_echo..]
        .iter()
        .take_while(|r| r.message.by_business)
        .count();
    let taken = pending[..first_echo + echoes]
        .iter()
        .take(super::super::store::MAX_TURN_MESSAGES)
        .copied()
        .collect();
    Pending::Person(taken)
}

impl Worker {
    /// Who answers the contact's pending records: the agent, nobody yet (a person
    /// has the conversation), or the person whose echoes are among them.
    pub(super) async fn who_answers<'a>(
        &self,
        key: &ContactKey,
        pending: &[&'a InboundRecord],
    ) -> Result<Pending<'a>, WorkerError> {
        let paused = self.store.handoff(key, (self.clock)()).await?.is_some();
        let settings = self.settings(key).await?;
        Ok(sort_pending(pending, paused, |text| {
            settings.is_handback(text)
        }))
    }

    /// Answers a person turn: records it in the transcript and hands the
    /// conversation to the person, or, for the hand-back word alone, hands it back
    /// to the agent. Nothing is sent either way.
    pub(super) async fn person_answer(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        deadline: Deadline,
    ) -> Result<Outgoing, WorkerError> {
        let now = (self.clock)();
        let settings = self.settings(key).await?;
        let mut customer: Vec<String> = Vec::new();
        let mut business: Vec<String> = Vec::new();
        for id in &turn.messages {
            if let Some(record) = self.store.inbound(key, id, now).await? {
                let side = match record.message.by_business {
                    true => &mut business,
                    false => &mut customer,
                };
                side.push(record.message.text);
            }
        }
        if customer.is_empty() && business.len() == 1 && settings.is_handback(&business[0]) {
            let had = self.handoff_in_force(key, now).await;
            self.store.set_handoff(key, None).await?;
            info!("the owner handed the conversation back");
            Event::new(FUNCTION).count("Handbacks", 1).emit();
            // Only a handoff that was in force ends (as the API's handback).
            if had {
                self.publish(handoff_ended(key, now)).await;
            }
            return Ok(Outgoing::Nothing {
                reason: "handed_back".into(),
            });
        }
        if business.is_empty() {
            // The echoes are gone (erased meanwhile): nothing to record.
            return Ok(Outgoing::Nothing {
                reason: "answered_by_a_person".into(),
            });
        }
        let customer = (!customer.is_empty()).then(|| joined(&customer));
        let idempotency = IdempotencyKey::parse(turn.id.as_str())
            .unwrap_or_else(|_| unreachable!("64 hex digits are a valid key"));
        let answer = joined(&business);
        let person = PersonAnswer {
            key,
            customer: customer.as_deref(),
            answer: &answer,
            idempotency: &idempotency,
            deadline,
        };
        Conversation::record(&self.ask, person)
            .await
            .map_err(WorkerError::Ask)?;
        let handoff = Handoff {
            by: HandoffBy::BusinessApp,
            since: now,
            until: now.saturating_add(settings.handoff_seconds()),
        };
        self.store.set_handoff(key, Some(&handoff)).await?;
        self.publish(handoff_started(key, &handoff)).await;
        info!(
            hours = settings.handoff_seconds() / 3600,
            "a person answered: the agent waits"
        );
        Event::new(FUNCTION).count("PersonTurns", 1).emit();
        Ok(Outgoing::Nothing {
            reason: "answered_by_a_person".into(),
        })
    }
}

impl Worker {
    /// Whether a handoff is in force, for the events out only: `false` without
    /// a queue, and when it cannot be read (logged and counted; the hand-back
    /// goes on).
    async fn handoff_in_force(&self, key: &ContactKey, now: i64) -> bool {
        if !self.events.enabled() {
            return false;
        }
        match self.store.handoff(key, now).await {
            Ok(handoff) => handoff.is_some(),
            Err(error) => {
                warn!(%error, "the handoff did not read; handoff.ended not published");
                events::not_published(EventType::HandoffEnded.as_str());
                false
            }
        }
    }

    /// Publishes `occurrence` to the tenant's events webhook, if it has one.
    async fn publish(&self, occurrence: Occurrence) {
        events::publish(self.ask.tenants.as_ref(), self.events.as_ref(), occurrence).await;
    }
}

/// Texts one a line, at most one user message's length.
fn joined(texts: &[String]) -> String {
    super::super::cut(&texts.join("\n"), MAX_TEXT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewInbound, RecordState};
    use crate::{PhoneNumberId, WaMessageId};

    fn record(id: &str, by_business: bool) -> InboundRecord {
        InboundRecord {
            message: NewInbound {
                id: WaMessageId::parse(id).unwrap(),
                incarnation: None,
                phone_number_id: PhoneNumberId::parse("1").unwrap(),
                text: id.into(),
                bare_note: false,
                by_business,
                audio: None,
                received_at: 0,
                expires_at: 1,
                tombstone: None,
            },
            arrival: 0,
            state: RecordState::Pending,
            enqueued: true,
        }
    }

    fn ids(pending: &Pending<'_>) -> Vec<String> {
        match pending {
            Pending::Person(taken) => taken
                .iter()
                .map(|r| r.message.id.as_str().to_owned())
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn a_person_turn_takes_the_customers_messages_and_the_run_of_echoes_after_them() {
        let records = [
            record("c1", false),
            record("e1", true),
            record("e2", true),
            record("c2", false),
            record("e3", true),
        ];
        let pending: Vec<&InboundRecord> = records.iter().collect();
        let never = |_: &str| false;
        assert_eq!(
            ids(&sort_pending(&pending, false, never)),
            ["c1", "e1", "e2"]
        );
        assert_eq!(ids(&sort_pending(&pending[3..], true, never)), ["c2", "e3"]);
        let word = |text: &str| text == "e3";
        assert_eq!(ids(&sort_pending(&pending[3..], true, word)), ["e3"]);
        let customers: Vec<&InboundRecord> = vec![&records[0], &records[3]];
        assert_eq!(sort_pending(&customers, true, never), Pending::Paused);
        assert_eq!(sort_pending(&customers, false, never), Pending::Agent);
    }
}
