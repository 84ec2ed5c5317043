//! Voice notes: a customer's audio message becomes their text in the turn.
//!
//! The webhook keeps only the audio's media id and type on the record (`[audio]`
//! its text). When speech-to-text is on ([`Worker::voice`]), the worker, before it
//! takes a turn holding such a record, fetches the audio through the Graph API
//! ([`MediaSource`]: the media id's short-lived URL, at most [`MAX_VOICE_BYTES`],
//! its `sha256` checked), checks it is an Ogg Opus stream of at most
//! [`MAX_VOICE_SECONDS`] (read from the stream's own pages, before any
//! transcription is paid for), and has it transcribed ([`SpeechToText`], in
//! Portuguese or English). The transcript takes the record's place in the turn's
//! text, and the turn's user message is stored marked `transcribed`.
//!
//! **The audio is never stored**: its bytes live in the worker's memory for the
//! fetch and the transcription only; no item, queue message or log line holds
//! them, nor the transcript (a log line names the outcome only).
//!
//! **Bad audio** (too large, too long, not Ogg Opus, a checksum that does not
//! match, a media id Meta no longer serves, a transcription that failed or heard
//! nothing) makes the turn [`VoiceTurn::Unheard`]: it is answered with the tenant's
//! `whatsapp.voice_reply` (or [`DEFAULT_VOICE_REPLY`]) without a model call, and
//! nothing of it enters the conversation. Only a Graph API that does not answer
//! is an error a later delivery may get past (the message comes back).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use sha2::{Digest, Sha256};
use tracing::{info, warn};

use super::super::outbound::SendError;
use super::super::store::{InboundRecord, TurnRecord};
use super::{FUNCTION, Worker, WorkerError};
use degrau::converse::MAX_TEXT_CHARS;
use degrau::deadline::Deadline;
use degrau::metrics::Event;

/// Largest audio fetched, in bytes: 2 MiB, far above a voice note of
/// [`MAX_VOICE_SECONDS`] (Opus at 16–32 kbit/s is 2–4 KB a second). Checked on the
/// size Meta declares before the download, and while reading it.
pub const MAX_VOICE_BYTES: u64 = 2 * 1024 * 1024;

/// Longest voice note transcribed, in seconds. Amazon Transcribe's streaming API
/// hears about as fast as the audio plays, and a turn must fit the worker's time.
pub const MAX_VOICE_SECONDS: u64 = 60;

/// The time a turn keeps for hearing its voice notes (the fetch and a
/// transcription of [`MAX_VOICE_SECONDS`]), when speech-to-text is on.
pub const VOICE_BUDGET: Duration = Duration::from_secs(MAX_VOICE_SECONDS + 15);

/// The languages a transcription listens for, in Amazon Transcribe's codes.
pub const LANGUAGES: [&str; 2] = ["pt-BR", "en-US"];

pub use super::super::records::{AudioRef, MediaId, VoiceTurn};
pub use crate::settings::DEFAULT_VOICE_REPLY;

/// Media fetched from the Graph API.
#[derive(Clone, PartialEq, Eq)]
pub struct Media {
    /// The bytes (never logged: `Debug` shows their length).
    pub bytes: Vec<u8>,
    /// The type Meta declared.
    pub mime: String,
    /// The SHA-256 Meta declared, hex, when it declared one.
    pub sha256: Option<String>,
}

impl std::fmt::Debug for Media {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Media({} bytes, {})", self.bytes.len(), self.mime)
    }
}

/// Why media was not fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    /// Larger than the limit (declared or read).
    #[error("the media is larger than {MAX_VOICE_BYTES} bytes")]
    TooLarge,
    /// Meta refused it for good (expired or unknown id, a URL the address rules
    /// refuse…).
    #[error("the media cannot be fetched: {0}")]
    Refused(String),
    /// No answer, or a 429/5xx still after the retries that fit.
    #[error("the Graph API is unavailable: {0}")]
    Unavailable(String),
}

/// Fetches an inbound message's media (the Graph API adapter, or a double).
#[async_trait]
pub trait MediaSource: Send + Sync {
    /// The media `id`: at most `max_bytes`, by `deadline`.
    async fn fetch(
        &self,
        id: &MediaId,
        max_bytes: u64,
        deadline: Deadline,
    ) -> Result<Media, MediaError>;
}

/// What was heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// The text.
    pub text: String,
    /// The language identified, when the service says.
    pub language: Option<String>,
}

/// Why a transcription gave no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpeechError {
    /// Longer than the service takes.
    #[error("the audio is too long")]
    TooLong,
    /// A format the service does not read.
    #[error("the audio's format is not supported")]
    Unsupported,
    /// Anything else (the service refused or failed).
    #[error("the transcription failed: {0}")]
    Failed(String),
}

/// Audio to transcribe.
#[derive(Clone, Copy)]
pub struct Audio<'a> {
    /// The bytes: an Ogg Opus stream.
    pub bytes: &'a [u8],
    /// Its type.
    pub mime: &'a str,
    /// Its length, in seconds.
    pub seconds: u64,
    /// The input sample rate its Opus header names (hertz).
    pub sample_rate: u32,
    /// The languages to listen for ([`LANGUAGES`]).
    pub languages: &'a [&'a str],
}

/// The speech-to-text port: Amazon Transcribe, the stand-in over HTTP, or a test
/// double.
#[async_trait]
pub trait SpeechToText: Send + Sync {
    /// Transcribes `audio` by `deadline`.
    async fn transcribe(
        &self,
        audio: Audio<'_>,
        deadline: Deadline,
    ) -> Result<Transcript, SpeechError>;
}

/// Speech-to-text for the worker: where audio comes from and who listens.
#[derive(Clone)]
pub struct Voice {
    /// The Graph API's media.
    pub media: Arc<dyn MediaSource>,
    /// The transcription.
    pub speech: Arc<dyn SpeechToText>,
}

/// One voice note: its transcript, or why it was not heard (for logs and metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// The transcript.
    Text(String),
    /// Why not.
    Unheard(&'static str),
}

/// The Opus stream's length in seconds and its input sample rate, read from its
/// Ogg pages; `None` when the bytes are not an Ogg Opus stream.
pub fn ogg_opus_length(bytes: &[u8]) -> Option<(u64, u32)> {
    let (mut at, mut first, mut last_granule) = (0usize, true, None);
    let (mut pre_skip, mut rate) = (0u64, 48_000u32);
    while at < bytes.len() {
        let header = bytes.get(at..at + 27)?;
        if &header[..4] != b"OggS" {
            return None;
        }
        let segments = usize::from(header[26]);
        let table = bytes.get(at + 27..at + 27 + segments)?;
        let body_len: usize = table.iter().map(|s| usize::from(*s)).sum();
        let body_at = at + 27 + segments;
        let body = bytes.get(body_at..body_at + body_len)?;
        if first {
            if body.len() < 19 || &body[..8] != b"OpusHead" {
                return None;
            }
            pre_skip = u64::from(u16::from_le_bytes([body[10], body[11]]));
            rate = u32::from_le_bytes([body[12], body[13], body[14], body[15]]);
            first = false;
        }
        let granule = u64::from_le_bytes(header[6..14].try_into().ok()?);
        // A page that ends no packet carries granule -1: not a position.
        if granule != u64::MAX {
            last_granule = Some(granule);
        }
        at = body_at + body_len;
    }
    let samples = last_granule?.saturating_sub(pre_skip);
    Some((samples.div_ceil(48_000), rate))
}

/// True for a type speech-to-text reads: Ogg (Opus), what WhatsApp's voice notes
/// are (`audio/ogg; codecs=opus`).
fn supported(mime: &str) -> bool {
    let base = mime.split(';').next().unwrap_or_default().trim();
    base.eq_ignore_ascii_case("audio/ogg") || base.eq_ignore_ascii_case("audio/opus")
}

/// Fetches, checks and transcribes one voice note (see the module). `Err` only
/// when the Graph API is unavailable.
pub async fn hear(
    voice: &Voice,
    audio: &AudioRef,
    deadline: Deadline,
) -> Result<Heard, MediaError> {
    let media = match voice
        .media
        .fetch(&audio.media_id, MAX_VOICE_BYTES, deadline)
        .await
    {
        Ok(media) => media,
        Err(MediaError::TooLarge) => return Ok(Heard::Unheard("too_large")),
        Err(MediaError::Refused(_)) => return Ok(Heard::Unheard("not_fetched")),
        Err(error @ MediaError::Unavailable(_)) => return Err(error),
    };
    if u64::try_from(media.bytes.len()).unwrap_or(u64::MAX) > MAX_VOICE_BYTES {
        return Ok(Heard::Unheard("too_large"));
    }
    if let Some(declared) = &media.sha256 {
        let actual = hex::encode(Sha256::digest(&media.bytes));
        if !declared.trim().eq_ignore_ascii_case(&actual) {
            return Ok(Heard::Unheard("checksum_mismatch"));
        }
    }
    let mime = if media.mime.is_empty() {
        audio.mime.as_str()
    } else {
        media.mime.as_str()
    };
    if !supported(mime) {
        return Ok(Heard::Unheard("unsupported"));
    }
    let Some((seconds, sample_rate)) = ogg_opus_length(&media.bytes) else {
        return Ok(Heard::Unheard("unsupported"));
    };
    if seconds > MAX_VOICE_SECONDS {
        return Ok(Heard::Unheard("too_long"));
    }
    let audio = Audio {
        bytes: &media.bytes,
        mime,
        seconds,
        sample_rate,
        languages: &LANGUAGES,
    };
    Ok(match voice.speech.transcribe(audio, deadline).await {
        Ok(transcript) if transcript.text.trim().is_empty() => Heard::Unheard("nothing_heard"),
        Ok(transcript) => Heard::Text(super::super::cut(
            transcript.text.trim(),
            super::super::MAX_INBOUND_CHARS,
        )),
        Err(SpeechError::TooLong) => Heard::Unheard("too_long"),
        Err(SpeechError::Unsupported) => Heard::Unheard("unsupported"),
        Err(SpeechError::Failed(_)) => Heard::Unheard("transcription_failed"),
    })
}

impl Worker {
    /// Hears the voice notes among the turn's records (`taken`, in its order) when
    /// speech-to-text is on: their transcripts take their place in the turn's text
    /// ([`VoiceTurn::Transcribed`]), or the turn is [`VoiceTurn::Unheard`] when one
    /// cannot be heard. A turn without a voice note is left as it is.
    pub(super) async fn hear_turn(
        &self,
        taken: &[&InboundRecord],
        turn: &mut TurnRecord,
        deadline: Deadline,
    ) -> Result<(), WorkerError> {
        let Some(voice) = &self.voice else {
            return Ok(());
        };
        let (mut texts, mut heard_any) = (Vec::new(), false);
        for record in taken
            .iter()
            .filter(|r| turn.messages.contains(&r.message.id))
        {
            let audio = (record.message.audio.as_ref()).filter(|_| !record.message.by_business);
            let Some(audio) = audio else {
                texts.push(record.message.text.clone());
                continue;
            };
            // The media endpoint is the Graph API's: unavailable, the message comes
            // back as when a send fails.
            // The ask and the send keep their time.
            let hearing = deadline.before(self.ask_timeout + super::SEND_BUDGET);
            let heard = hear(voice, audio, hearing)
                .await
                .map_err(|error| WorkerError::Send(SendError::Unavailable(error.to_string())))?;
            match heard {
                Heard::Text(text) => {
                    info!("a voice note was transcribed");
                    Event::new(FUNCTION)
                        .count("VoiceNotesTranscribed", 1)
                        .emit();
                    heard_any = true;
                    texts.push(text);
                }
                Heard::Unheard(why) => {
                    warn!(why, "a voice note could not be heard: the voice reply goes");
                    Event::new(FUNCTION)
                        .dimension("Reason", why)
                        .rollup()
                        .count("VoiceNotesUnheard", 1)
                        .emit();
                    turn.voice = Some(VoiceTurn::Unheard);
                    return Ok(());
                }
            }
        }
        if heard_any {
            turn.text = super::super::cut(&texts.join("\n"), MAX_TEXT_CHARS);
            turn.bare_notes = false;
            turn.voice = Some(VoiceTurn::Transcribed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{fake_voice_note, said};

    #[test]
    fn an_ogg_opus_streams_length_is_read_from_its_pages() {
        let note = fake_voice_note("oi", 7);
        assert_eq!(ogg_opus_length(&note), Some((7, 16_000)));
        assert_eq!(said(&note).as_deref(), Some("oi"));
        assert_eq!(ogg_opus_length(&note[..note.len() - 1]), None, "cut short");
        assert_eq!(ogg_opus_length(b"ID3\x04 an mp3"), None);
        let mut vorbis = note.clone();
        vorbis[28..36].copy_from_slice(b"\x01vorbisX");
        assert_eq!(ogg_opus_length(&vorbis), None, "not Opus");
    }

    #[test]
    fn only_ogg_is_supported_and_ids_are_checked() {
        assert!(supported("audio/ogg; codecs=opus"));
        assert!(supported("AUDIO/OGG"));
        assert!(!supported("audio/mpeg") && !supported("audio/amr") && !supported(""));
        assert!(AudioRef::parse("1234567890", "audio/ogg").is_ok());
        for bad in ["", "12/34", "a b", &"1".repeat(129)] {
            assert!(MediaId::parse(bad).is_err(), "{bad}");
        }
        let cut = AudioRef::parse("1", &"x".repeat(500)).unwrap();
        assert_eq!(cut.mime.len(), 100);
    }
}
