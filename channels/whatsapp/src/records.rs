//! The records the WhatsApp store keeps for the worker's parts, as data: where a
//! reply's delivery stands ([`DeliveryRecord`], moved forward only by [`rank`]),
//! who has the conversation ([`Handoff`]), a voice note's media ([`AudioRef`]) and
//! what a turn's voice notes came to ([`VoiceTurn`]). The store names them; the
//! worker's parts (`delivery`, `handoff`, `voice`) act on them.

use serde::{Deserialize, Serialize};

use super::{InvalidId, WaMessageId};
use degrau::domain::check_id;

/// Longest media id kept, in characters.
const MAX_MEDIA_ID_CHARS: usize = 128;
/// Longest media type kept, in characters.
const MAX_MIME_CHARS: usize = 100;

/// Where a reply sent to the customer stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// The sent message's id (what its status callbacks name).
    pub id: WaMessageId,
    /// The transcript message it carries: its session.
    pub session: u32,
    /// And its sequence number.
    pub seq: u64,
    /// `accepted` (the Graph API took it), `sent`, `delivered`, `read` or `failed`.
    pub status: String,
    /// The Graph API's error code of a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// When it last moved, seconds since the epoch.
    pub updated_at: i64,
    /// TTL: the turn's.
    pub expires_at: i64,
}

/// How far along a status is: a callback moves a record only to a later one
/// (`failed` is final, and beats any).
pub fn rank(status: &str) -> u8 {
    match status {
        "accepted" => 0,
        "sent" => 1,
        "delivered" => 2,
        "read" => 3,
        "failed" => 4,
        _ => 0,
    }
}

/// Who took the conversation over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoffBy {
    /// The owner, answering from the WhatsApp Business app (an echo).
    BusinessApp,
    /// An operator or the business's back office, through the API.
    Operator,
}

impl HandoffBy {
    /// The name shown and logged.
    pub fn as_str(self) -> &'static str {
        match self {
            HandoffBy::BusinessApp => "business_app",
            HandoffBy::Operator => "operator",
        }
    }
}

/// A person has the contact's conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff {
    /// Who took it.
    pub by: HandoffBy,
    /// Since when, seconds since the epoch.
    pub since: i64,
    /// Until when: the agent answers again from then on.
    pub until: i64,
}

/// An audio message's media, as the webhook keeps it on the record (no bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioRef {
    /// The Graph API's media id.
    pub media_id: MediaId,
    /// The type the webhook named (`audio/ogg; codecs=opus`).
    pub mime: String,
}

degrau::id_newtype!(
    /// A Graph API media id: 1–128 of `[A-Za-z0-9_-]`.
    MediaId
);

impl MediaId {
    /// Validates a media id.
    pub fn parse(value: &str) -> Result<MediaId, InvalidId> {
        check_id(
            "media id",
            value,
            MAX_MEDIA_ID_CHARS,
            "A-Z a-z 0-9 _ -",
            |c| c.is_ascii_alphanumeric() || c == '_' || c == '-',
        )?;
        Ok(MediaId(value.to_owned()))
    }
}

impl AudioRef {
    /// An audio message's media id and type, as the webhook reads them (the type
    /// cut to 100 plain characters).
    pub fn parse(id: &str, mime: &str) -> Result<AudioRef, InvalidId> {
        let mime = mime
            .chars()
            .filter(|c| c.is_ascii_graphic() || *c == ' ')
            .take(MAX_MIME_CHARS)
            .collect();
        Ok(AudioRef {
            media_id: MediaId::parse(id)?,
            mime,
        })
    }
}

/// What a turn's voice notes came to (kept on the turn, so a retried delivery
/// answers as the first attempt decided).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoiceTurn {
    /// Every voice note was transcribed into the turn's text.
    Transcribed,
    /// One could not be heard: the turn gets the voice reply, nothing stored.
    Unheard,
}
