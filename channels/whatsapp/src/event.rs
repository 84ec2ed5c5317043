//! Meta's webhook payload (`object: whatsapp_business_account`), read into what
//! degrau acts on. Each `entry[].changes[]` with `field: messages` has a `value`
//! naming the business number (`metadata.phone_number_id`) and holding inbound
//! `messages` and/or `statuses` of messages sent. Every other field (templates,
//! account updates…) is ignored.
//!
//! What an inbound message becomes ([`Body`]):
//!
//! | `type` | turn text |
//! |---|---|
//! | `text` | its body |
//! | `button` (a template's quick reply), `interactive` (a button or list reply) | the title the customer tapped |
//! | `image`, `video`, `document` | `[image]` (etc.), and the caption after it when there is one |
//! | `audio` | `[audio]`, with its media id and type kept: the worker transcribes it when speech-to-text is on ([`super::voice`]) |
//! | `sticker`, `location`, `contacts` | `[sticker]`, `[location]`, `[contacts]`: no media is downloaded, no coordinates or numbers are kept |
//! | `order`, `unsupported`, anything else | `[order]`, `[unsupported]` |
//! | `reaction`, `system` | nothing: never a turn |
//!
//! A message whose sender or id is not valid is refused alone (counted), never the
//! whole delivery: Meta retries a webhook that does not answer 2xx, for days.

pub mod echo;

use serde::Deserialize;
use serde_json::Value;

use super::voice::AudioRef;
use super::{MAX_INBOUND_CHARS, PhoneNumberId, WaId, WaMessageId, cut};

/// Most inbound messages and statuses one delivery may hold; a larger one is
/// refused whole (413), and nothing of it is recorded. Meta sends one or a few.
pub const MAX_ITEMS_PER_DELIVERY: usize = 100;

/// What one delivery holds, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Delivery {
    /// Inbound messages that make turns.
    pub inbound: Vec<Inbound>,
    /// Status callbacks of messages degrau sent.
    pub statuses: Vec<Status>,
    /// What is ignored, by kind (`reaction`, `system`, `field:<name>`…).
    pub ignored: Vec<String>,
    /// Messages refused alone, by reason (a bad sender or id).
    pub refused: Vec<&'static str>,
}

/// One inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// The business number it was sent to.
    pub phone_number_id: PhoneNumberId,
    /// The customer.
    pub from: WaId,
    /// Its id (the key of its record).
    pub id: WaMessageId,
    /// What it says in the turn.
    pub body: Body,
    /// When the customer sent it, by Meta's `timestamp` (seconds since the epoch;
    /// Meta writes it as a string, a number is read too); `None` when absent.
    pub sent_at: Option<i64>,
    /// True for an echo: a person of the business wrote it to the customer from
    /// the WhatsApp Business app ([`super::echo`]).
    pub by_business: bool,
}

/// What an inbound message contributes to a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Text the customer typed or tapped.
    Text(String),
    /// A kind degrau does not read (`audio`, `image`…), with the caption typed
    /// with it, if any.
    Note {
        /// The kind, as in the note (`[audio]`).
        kind: String,
        /// The caption, when the customer wrote one.
        caption: Option<String>,
    },
    /// A voice note or audio file: `[audio]` in the turn until the worker hears it.
    Audio(AudioRef),
}

impl Body {
    /// The message's text in the turn: its text, or its note (`[image] caption`),
    /// at most [`MAX_INBOUND_CHARS`] characters.
    pub fn turn_text(&self) -> String {
        let text = match self {
            Body::Text(text) => text.clone(),
            Body::Note {
                kind,
                caption: None,
            } => format!("[{kind}]"),
            Body::Note {
                kind,
                caption: Some(caption),
            } => format!("[{kind}] {caption}"),
            Body::Audio(_) => "[audio]".to_owned(),
        };
        cut(&text, MAX_INBOUND_CHARS)
    }

    /// True for a note with nothing typed (a turn of only these may get the tenant's
    /// short reply instead of a model call).
    pub fn is_bare_note(&self) -> bool {
        matches!(self, Body::Note { caption: None, .. } | Body::Audio(_))
    }
}

/// A status callback of a message degrau sent (its `Debug` names no one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The business number that sent the message.
    pub phone_number_id: PhoneNumberId,
    /// The sent message's id, when it reads.
    pub id: Option<WaMessageId>,
    /// The customer it went to (`recipient_id`), when it reads: never logged.
    pub recipient: Option<WaId>,
    /// `sent`, `delivered`, `read`, `failed`, or `other` for anything else.
    pub status: &'static str,
    /// The error codes of a failure.
    pub error_codes: Vec<i64>,
}

/// Why a delivery was refused whole (nothing of it is recorded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// Not JSON, or not a WhatsApp Business Account notification.
    #[error("the body is not a WhatsApp Business Account notification: {0}")]
    Malformed(String),
    /// More than [`MAX_ITEMS_PER_DELIVERY`] messages and statuses.
    #[error(
        "the notification holds {0} messages and statuses; the limit is {MAX_ITEMS_PER_DELIVERY}"
    )]
    TooLarge(usize),
}

#[derive(Deserialize)]
struct Notification {
    object: String,
    #[serde(default)]
    entry: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    changes: Vec<Change>,
}

#[derive(Deserialize)]
struct Change {
    #[serde(default)]
    field: String,
    #[serde(default)]
    value: Value,
}

#[derive(Deserialize)]
struct MessagesValue {
    metadata: Metadata,
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    statuses: Vec<Value>,
}

#[derive(Deserialize)]
struct Metadata {
    phone_number_id: String,
}

#[derive(Deserialize)]
struct RawMessage {
    from: String,
    id: String,
    #[serde(default)]
    timestamp: Option<Value>,
}

/// A message's typed content, as a customer's message or an echo carries it.
#[derive(Deserialize)]
struct RawContent {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<Text>,
    #[serde(default)]
    button: Option<Button>,
    #[serde(default)]
    interactive: Option<Interactive>,
    #[serde(default)]
    image: Option<Media>,
    #[serde(default)]
    video: Option<Media>,
    #[serde(default)]
    document: Option<Media>,
    #[serde(default)]
    audio: Option<RawAudio>,
}

#[derive(Deserialize)]
struct RawAudio {
    #[serde(default)]
    id: String,
    #[serde(default)]
    mime_type: String,
}

#[derive(Deserialize)]
struct Text {
    #[serde(default)]
    body: String,
}

#[derive(Deserialize)]
struct Button {
    #[serde(default)]
    text: String,
}

#[derive(Deserialize)]
struct Interactive {
    #[serde(default)]
    button_reply: Option<Reply>,
    #[serde(default)]
    list_reply: Option<Reply>,
}

#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    title: String,
}

#[derive(Deserialize)]
struct Media {
    #[serde(default)]
    caption: Option<String>,
}

#[derive(Deserialize)]
struct RawStatus {
    #[serde(default)]
    id: String,
    #[serde(default)]
    recipient_id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    errors: Vec<RawError>,
}

#[derive(Deserialize)]
struct RawError {
    #[serde(default)]
    code: Option<i64>,
}

/// Reads a delivery's body. Only a body that is not a notification at all, or one
/// over the item limit, is refused; a bad message inside is refused alone.
pub fn parse_delivery(body: &[u8]) -> Result<Delivery, DeliveryError> {
    // The serde message could quote the body: only its category is kept.
    let notification: Notification = serde_json::from_slice(body)
        .map_err(|err| DeliveryError::Malformed(format!("{:?} error", err.classify())))?;
    if notification.object != "whatsapp_business_account" {
        return Err(DeliveryError::Malformed(
            "`object` is not `whatsapp_business_account`".into(),
        ));
    }
    let mut delivery = Delivery::default();
    let mut items = 0usize;
    for change in notification.entry.into_iter().flat_map(|e| e.changes) {
        if change.field == echo::ECHO_FIELD {
            items += echo::read_echoes(&mut delivery, change.value);
            if items > MAX_ITEMS_PER_DELIVERY {
                return Err(DeliveryError::TooLarge(items));
            }
            continue;
        }
        if change.field != "messages" {
            delivery
                .ignored
                .push(format!("field:{}", short(&change.field)));
            continue;
        }
        let Ok(value) = serde_json::from_value::<MessagesValue>(change.value) else {
            delivery.refused.push("malformed_change");
            continue;
        };
        items += value.messages.len() + value.statuses.len();
        if items > MAX_ITEMS_PER_DELIVERY {
            return Err(DeliveryError::TooLarge(items));
        }
        let Ok(phone) = PhoneNumberId::parse(&value.metadata.phone_number_id) else {
            delivery.refused.push("bad_phone_number_id");
            continue;
        };
        for message in value.messages {
            read_message(&mut delivery, &phone, message);
        }
        for status in value.statuses {
            delivery.statuses.push(read_status(&phone, status));
        }
    }
    Ok(delivery)
}

/// A field or type name as logged: at most 32 plain characters.
fn short(name: &str) -> String {
    let plain: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(32)
        .collect();
    if plain.is_empty() {
        "unknown".into()
    } else {
        plain
    }
}

fn read_message(delivery: &mut Delivery, phone: &PhoneNumberId, message: Value) {
    let Ok(raw) = serde_json::from_value::<RawMessage>(message.clone()) else {
        delivery.refused.push("malformed_message");
        return;
    };
    let Some(body) = read_body(delivery, &message) else {
        return;
    };
    match (WaId::parse(&raw.from), WaMessageId::parse(&raw.id)) {
        (Ok(from), Ok(id)) => delivery.inbound.push(Inbound {
            phone_number_id: phone.clone(),
            from,
            id,
            body,
            sent_at: raw.timestamp.as_ref().and_then(seconds),
            by_business: false,
        }),
        (Err(_), _) => delivery.refused.push("bad_sender"),
        (_, Err(_)) => delivery.refused.push("bad_message_id"),
    }
}

/// What a message (or an echo) says in a turn; `None` for what never makes one
/// (a reaction, a system message: counted as ignored) or content that does not
/// read (refused).
pub(super) fn read_body(delivery: &mut Delivery, message: &Value) -> Option<Body> {
    let Ok(raw) = RawContent::deserialize(message) else {
        delivery.refused.push("malformed_message");
        return None;
    };
    let body = match raw.kind.as_str() {
        "reaction" | "system" => {
            delivery.ignored.push(raw.kind);
            return None;
        }
        "text" => Body::Text(raw.text.map(|t| t.body).unwrap_or_default()),
        "button" => Body::Text(raw.button.map(|b| b.text).unwrap_or_default()),
        "interactive" => {
            let reply = raw
                .interactive
                .and_then(|i| i.button_reply.or(i.list_reply));
            Body::Text(reply.map(|r| r.title).unwrap_or_default())
        }
        kind @ ("image" | "video" | "document") => {
            let media = match kind {
                "image" => raw.image,
                "video" => raw.video,
                _ => raw.document,
            };
            Body::Note {
                kind: kind.to_owned(),
                caption: media
                    .and_then(|m| m.caption)
                    .filter(|c| !c.trim().is_empty()),
            }
        }
        "audio" => match raw
            .audio
            .and_then(|a| AudioRef::parse(&a.id, &a.mime_type).ok())
        {
            Some(audio) => Body::Audio(audio),
            None => Body::Note {
                kind: "audio".into(),
                caption: None,
            },
        },
        kind @ ("sticker" | "location" | "contacts" | "order") => Body::Note {
            kind: kind.to_owned(),
            caption: None,
        },
        _ => Body::Note {
            kind: "unsupported".to_owned(),
            caption: None,
        },
    };
    // A text with nothing in it (an empty button title) says nothing: a note
    // instead, so a turn is never empty.
    Some(match body {
        Body::Text(text) if text.trim().is_empty() => Body::Note {
            kind: "empty".into(),
            caption: None,
        },
        other => other,
    })
}

/// A timestamp in seconds, as Meta writes it (`"1700000000"`) or as a number.
pub(super) fn seconds(value: &Value) -> Option<i64> {
    match value {
        Value::String(text) => text.trim().parse().ok(),
        other => other.as_i64(),
    }
}

fn read_status(phone: &PhoneNumberId, status: Value) -> Status {
    let raw = serde_json::from_value::<RawStatus>(status).unwrap_or(RawStatus {
        id: String::new(),
        recipient_id: String::new(),
        status: String::new(),
        errors: Vec::new(),
    });
    Status {
        phone_number_id: phone.clone(),
        id: WaMessageId::parse(&raw.id).ok(),
        recipient: WaId::parse(&raw.recipient_id).ok(),
        status: match raw.status.as_str() {
            "sent" => "sent",
            "delivered" => "delivered",
            "read" => "read",
            "failed" => "failed",
            "deleted" => "deleted",
            _ => "other",
        },
        error_codes: raw.errors.iter().filter_map(|e| e.code).collect(),
    }
}

#[cfg(test)]
mod tests;
