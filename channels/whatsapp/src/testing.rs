//! Test doubles of the channel's ports (behind `test-util`): a queue that records
//! what it is given, and a Graph API that records what it sends and answers from a
//! script.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;

use super::inbox::{Inbox, QueuedMessage};
use super::outbound::{OutboundMessage, SendError, Sender};
use super::{PhoneNumberId, WaId, WaMessageId};
use degrau::deadline::Deadline;
use degrau::jobs::EnqueueError;
use degrau::store::ContactKey;

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

/// A fake voice note: an Ogg Opus stream (Opus header, tags, one data page) of
/// `seconds`, whose data page holds `say:{text}` instead of audio. The stand-in's
/// transcription route and [`SayingSpeech`] answer `text` for it (`!fail` fails).
pub fn fake_voice_note(text: &str, seconds: u64) -> Vec<u8> {
    fn page(granule: u64, body: &[u8]) -> Vec<u8> {
        let mut page = b"OggS\0\0".to_vec();
        page.extend(granule.to_le_bytes());
        page.extend([0u8; 12]); // serial, sequence, checksum (not checked)
        let mut table = vec![255u8; body.len() / 255];
        table.push(u8::try_from(body.len() % 255).unwrap_or(0));
        page.push(u8::try_from(table.len()).unwrap_or(u8::MAX));
        page.extend(table);
        page.extend(body);
        page
    }
    let pre_skip: u16 = 312;
    let mut head = b"OpusHead\x01\x01".to_vec();
    head.extend(pre_skip.to_le_bytes());
    head.extend(16_000u32.to_le_bytes());
    head.extend([0, 0, 0]);
    let mut bytes = page(0, &head);
    bytes.extend(page(0, b"OpusTags\x07\0\0\0degrau\0\0\0\0\0"));
    let end = seconds * 48_000 + u64::from(pre_skip);
    bytes.extend(page(end, format!("say:{text}").as_bytes()));
    bytes
}

/// What a fake voice note says: the text after its last `say:`.
pub fn said(bytes: &[u8]) -> Option<String> {
    let at = bytes.windows(4).rposition(|w| w == b"say:")?;
    String::from_utf8(bytes[at + 4..].to_vec()).ok()
}

/// Media served from a map by id (answered `Refused` when unknown), counting
/// fetches.
#[derive(Debug, Default)]
pub struct MapMedia {
    media: Mutex<
        std::collections::HashMap<String, Result<super::voice::Media, super::voice::MediaError>>,
    >,
    fetches: Mutex<usize>,
}

impl MapMedia {
    /// Serves `answer` for the media `id`.
    pub fn put(&self, id: &str, answer: Result<super::voice::Media, super::voice::MediaError>) {
        lock(&self.media).insert(id.to_owned(), answer);
    }

    /// How many fetches were made.
    pub fn fetches(&self) -> usize {
        *lock(&self.fetches)
    }
}

#[async_trait]
impl super::voice::MediaSource for MapMedia {
    async fn fetch(
        &self,
        id: &super::voice::MediaId,
        max_bytes: u64,
        _deadline: Deadline,
    ) -> Result<super::voice::Media, super::voice::MediaError> {
        *lock(&self.fetches) += 1;
        let answer = lock(&self.media).get(id.as_str()).cloned();
        match answer {
            Some(Ok(media)) if media.bytes.len() as u64 > max_bytes => {
                Err(super::voice::MediaError::TooLarge)
            }
            Some(answer) => answer,
            None => Err(super::voice::MediaError::Refused("unknown media".into())),
        }
    }
}

/// Speech-to-text that hears what a [`fake_voice_note`] says (`!fail` fails,
/// `!unsupported` is unsupported), counting calls.
#[derive(Debug, Default)]
pub struct SayingSpeech {
    calls: Mutex<usize>,
}

impl SayingSpeech {
    /// How many transcriptions were asked for.
    pub fn calls(&self) -> usize {
        *lock(&self.calls)
    }
}

#[async_trait]
impl super::voice::SpeechToText for SayingSpeech {
    async fn transcribe(
        &self,
        audio: super::voice::Audio<'_>,
        _deadline: Deadline,
    ) -> Result<super::voice::Transcript, super::voice::SpeechError> {
        *lock(&self.calls) += 1;
        match said(audio.bytes).as_deref() {
            Some("!fail") | None => Err(super::voice::SpeechError::Failed("scripted".into())),
            Some("!unsupported") => Err(super::voice::SpeechError::Unsupported),
            Some(text) => Ok(super::voice::Transcript {
                text: text.to_owned(),
                language: Some(audio.languages[0].to_owned()),
            }),
        }
    }
}
