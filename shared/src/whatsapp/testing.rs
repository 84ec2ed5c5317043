//! Test doubles of the channel's ports (behind `test-util`): a queue that records
//! what it is given, and a Graph API that records what it sends and answers from a
//! script.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;

use super::inbox::{Inbox, QueuedMessage};
use super::outbound::{OutboundMessage, SendError, Sender};
use super::{PhoneNumberId, WaId, WaMessageId};
use crate::deadline::Deadline;
use crate::jobs::EnqueueError;
use crate::store::ContactKey;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A queue that records every message, or refuses the next `fail` ones.
#[derive(Debug, Default)]
pub struct RecordingInbox {
    queued: Mutex<Vec<QueuedMessage>>,
    fail: Mutex<usize>,
}

impl RecordingInbox {
    /// Every message queued, in order.
    pub fn queued(&self) -> Vec<QueuedMessage> {
        lock(&self.queued).clone()
    }

    /// Refuses the next `count` messages.
    pub fn fail_next(&self, count: usize) {
        *lock(&self.fail) = count;
    }
}

#[async_trait]
impl Inbox for RecordingInbox {
    async fn enqueue(
        &self,
        _key: &ContactKey,
        _id: &WaMessageId,
        message: &QueuedMessage,
    ) -> Result<(), EnqueueError> {
        let mut fail = lock(&self.fail);
        if *fail > 0 {
            *fail -= 1;
            return Err(EnqueueError("the queue is down".into()));
        }
        lock(&self.queued).push(message.clone());
        Ok(())
    }
}

/// What the scripted sender was asked to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// A text message.
    Text(String),
    /// A template, by name.
    Template(String),
}

/// A Graph API that answers from a script (then `Ok`) and records what went out.
#[derive(Debug, Default)]
pub struct ScriptedSender {
    script: Mutex<VecDeque<Result<(), SendError>>>,
    sent: Mutex<Vec<(PhoneNumberId, WaId, Sent)>>,
    reads: Mutex<Vec<WaMessageId>>,
    fail_reads: Mutex<usize>,
}

impl ScriptedSender {
    /// Queues answers for the next sends.
    pub fn push(&self, answer: Result<(), SendError>) {
        lock(&self.script).push_back(answer);
    }

    /// What went out (answered `Ok`), in order.
    pub fn sent(&self) -> Vec<Sent> {
        lock(&self.sent).iter().map(|(_, _, s)| s.clone()).collect()
    }

    /// The messages marked read (with the typing indicator), in order.
    pub fn reads(&self) -> Vec<WaMessageId> {
        lock(&self.reads).clone()
    }

    /// Makes the next `count` read marks fail.
    pub fn fail_reads(&self, count: usize) {
        *lock(&self.fail_reads) = count;
    }

    /// Who each message went out from and to.
    pub fn routes(&self) -> Vec<(PhoneNumberId, WaId)> {
        lock(&self.sent)
            .iter()
            .map(|(from, to, _)| (from.clone(), to.clone()))
            .collect()
    }
}

#[async_trait]
impl Sender for ScriptedSender {
    async fn send(
        &self,
        from: &PhoneNumberId,
        to: &WaId,
        message: OutboundMessage<'_>,
        _deadline: Deadline,
    ) -> Result<Option<WaMessageId>, SendError> {
        lock(&self.script).pop_front().unwrap_or(Ok(()))?;
        let sent = match message {
            OutboundMessage::Text(text) => Sent::Text(text.to_owned()),
            OutboundMessage::Template(template) => {
                Sent::Template(template.name.as_str().to_owned())
            }
        };
        let mut all = lock(&self.sent);
        all.push((from.clone(), to.clone(), sent));
        Ok(WaMessageId::parse(&format!("wamid.scripted.{}", all.len())).ok())
    }

    async fn mark_read(
        &self,
        _from: &PhoneNumberId,
        message: &WaMessageId,
        _deadline: Deadline,
    ) -> Result<(), SendError> {
        let mut fail = lock(&self.fail_reads);
        if *fail > 0 {
            *fail -= 1;
            return Err(SendError::Unavailable("scripted read failure".into()));
        }
        lock(&self.reads).push(message.clone());
        Ok(())
    }
}
