//! The WhatsApp channel (crate `degrau-whatsapp`): a customer writes to a
//! business's WhatsApp number, Meta posts the message to degrau's webhook, and the
//! reply goes back through the Graph API. The two functions (`whatsapp-webhook`,
//! `whatsapp-worker`) and their adapters (DynamoDB, the inbound FIFO queue, the
//! Graph API client) serve what this crate decides; its core knows no AWS or HTTP.
//! It reaches the conversation through the core's channel port
//! ([`degrau::channel`]) and depends on the core crate only.
//!
//! # Layout
//!
//! * [`event`]: Meta's webhook payload, read into inbound messages (text, or a note
//!   such as `[audio]` for what degrau does not read), status callbacks and what is
//!   ignored (reactions, other fields); [`signature`]: `X-Hub-Signature-256` and the
//!   verification handshake's token, both compared in constant time.
//! * [`settings`]: a tenant's WhatsApp settings (the `whatsapp` object of its
//!   `CONFIG`, a section the core keeps opaque): the template sent outside the
//!   24-hour window, the short reply to a turn made only of media, the handoff;
//!   and their check, which the `ask` function registers for config writes.
//! * The ports: [`store`] (`WhatsAppStore`: the tenant binding, the inbound records
//!   and the turns, the erased messages' tombstones), [`inbox`] (`Inbox`: the inbound
//!   FIFO queue) and [`outbound`] (`Sender`: the Graph API); [`keyed`]: the keyed
//!   names (queue group and de-duplication ids, tombstones) that stand for a
//!   conversation or a message outside the contact's partition.
//! * The services: [`webhook`] (`WebhookService`: record and enqueue, fast) and
//!   [`worker`] (`Worker`: a burst becomes one turn, the ask service answers it, the
//!   reply is sent within the customer service window); [`reply`]: a long reply
//!   cut into the parts WhatsApp takes; [`voice`]: a voice note fetched, checked
//!   and transcribed into the turn's text (the `SpeechToText` and `MediaSource`
//!   ports); [`events`]: what they publish to the tenant's events webhook (a
//!   failed reply, a handoff started or ended by the owner).
//! * With `aws`: `aws`, the AWS half (the `WhatsAppStore` port on the adapters'
//!   DynamoDB table, the inbound SQS FIFO queue, the Graph API client, Amazon
//!   Transcribe, and the two functions' constructors from the environment).
//! * With `test-util`: `testing`, a recording queue and a scripted Graph API;
//!   `memory`, the in-memory `WhatsAppStore` (attached to the core's `MemoryStore`).
//!
//! **Once, and in order.** Meta delivers at least once. The webhook writes a durable
//! record per message id (a conditional put), then enqueues it (the FIFO queue's
//! group is the conversation, its de-duplication id the message), then marks the
//! record enqueued; a redelivery finds the record and enqueues again only when the
//! record says it never was. The worker moves records `pending` → `taken` (a turn
//! is recorded with them) → `handled` (the reply is recorded to be sent), each step a
//! conditional write, and asks with an `Idempotency-Key` derived from the turn: a
//! retried delivery replays the stored answer without a second model call, and a
//! reply recorded but not sent is sent on redelivery. (`docs/DESIGN.md`: "The
//! WhatsApp channel".)

#[cfg(feature = "aws")]
pub mod aws;
pub mod delivery;
pub mod event;
pub use event::echo;
pub mod events;
pub mod inbox;
pub mod keyed;
pub mod limits;
#[cfg(any(test, feature = "test-util"))]
pub mod memory;
pub mod outbound;
pub mod records;
pub mod reply;
pub mod settings;
pub mod signature;
pub mod store;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod typing;
pub mod webhook;
pub mod worker;

pub use worker::{handoff, voice};

use degrau::domain::{InvalidId, check_id};

/// The longest inbound text kept, in characters: WhatsApp's own limit on a text
/// message. A longer one (which Meta does not send) is cut to it, never refused: a
/// refused webhook is retried by Meta for days.
pub const MAX_INBOUND_CHARS: usize = 4096;

/// The longest text message WhatsApp sends, in characters: a longer reply goes out
/// in parts.
pub const MAX_OUTBOUND_CHARS: usize = 4096;

/// How long the customer service window stays open after the customer's last
/// message: free text can be sent only within it.
pub const SERVICE_WINDOW_SECONDS: i64 = 24 * 3600;

/// How long inbound records and turns are kept (their TTL) at most: longer than
/// Meta retries a webhook (about a week), so a late redelivery still finds its
/// record and is not answered twice. A tenant whose transcript retention is
/// shorter keeps them for that instead ([`record_life_seconds`]), and the webhook
/// refuses a message older than its records live ([`MAX_CLOCK_SKEW_SECONDS`] early),
/// so a delivery whose record has gone is never taken for a new one.
pub const RECORD_TTL_SECONDS: i64 = 8 * 24 * 3600;

/// How far Meta's clock may be ahead of degrau's when a message's timestamp is
/// held against its record's life.
pub const MAX_CLOCK_SKEW_SECONDS: i64 = 600;

/// How long a tenant's inbound records and turns live: [`RECORD_TTL_SECONDS`], or
/// the tenant's transcript retention when that is shorter (they hold the messages'
/// text).
pub fn record_life_seconds(config: Option<&degrau::tenant::TenantConfig>) -> i64 {
    let days = config
        .and_then(|c| c.transcript_retention_days)
        .unwrap_or(degrau::tenant::Defaults::default().transcript_retention_days);
    RECORD_TTL_SECONDS.min(i64::from(days.max(1)) * 86_400)
}

degrau::id_newtype!(
    /// The id of a business phone number in the Graph API (`phone_number_id`):
    /// 1–32 digits. It binds the number to a tenant.
    PhoneNumberId,
    private
);
degrau::id_newtype!(
    /// A WhatsApp message id (`wamid.…`): 1–256 of `[A-Za-z0-9._=+/:-]`. It keys the
    /// message's inbound record, so a redelivery finds it. It encodes the sender's
    /// number, so it never reaches a log or a queue attribute in clear.
    WaMessageId,
    private
);
degrau::id_newtype!(
    /// A customer's WhatsApp id (`wa_id`, `from`): 1–32 digits, their number in
    /// international form without the `+`. It becomes the contact id.
    WaId,
    private
);

// Each id states its rule (name, length, alphabet) in the same few lines, as the
// core's do; the checking itself is `check_id`, shared.
impl PhoneNumberId {
    /// Longest value, in characters.
    pub const MAX_LEN: usize = 32;

    /// Validates the value.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check_id("phone_number_id", value, Self::MAX_LEN, "digits", |c| {
            c.is_ascii_digit()
        })?;
        Ok(Self(value.to_owned()))
    }
}

impl WaMessageId {
    /// Longest value, in characters.
    pub const MAX_LEN: usize = 256;

    /// Validates the value.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check_id(
            "message id",
            value,
            Self::MAX_LEN,
            "A-Z a-z 0-9 . _ = + / : -",
            |c| c.is_ascii_alphanumeric() || "._=+/:-".contains(c),
        )?;
        Ok(Self(value.to_owned()))
    }
}

impl WaId {
    /// Longest value, in characters.
    pub const MAX_LEN: usize = 32;

    /// Validates the value.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check_id("wa_id", value, Self::MAX_LEN, "digits", |c| {
            c.is_ascii_digit()
        })?;
        Ok(Self(value.to_owned()))
    }

    /// The contact id of this customer (digits are always a valid one).
    pub fn contact(&self) -> degrau::domain::ContactId {
        degrau::domain::ContactId::parse(&self.0)
            .unwrap_or_else(|_| unreachable!("1-32 digits are a valid contact id"))
    }
}

/// Cuts `text` to at most `max` characters.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated_and_never_printed() {
        assert!(PhoneNumberId::parse("100000000000001").is_ok());
        for bad in ["", "12a", "+551199", &"1".repeat(33)] {
            assert!(PhoneNumberId::parse(bad).is_err(), "{bad}");
            assert!(WaId::parse(bad).is_err(), "{bad}");
        }
        assert!(WaMessageId::parse("wamid.HBgLMTU1NTAwMDAwMDAVAgASGA==").is_ok());
        for bad in ["", "wamid#1", "wa mid", &"a".repeat(257)] {
            assert!(WaMessageId::parse(bad).is_err(), "{bad}");
        }
        let id = WaId::parse("15550000001").unwrap();
        assert_eq!(id.contact().as_str(), "15550000001");
        assert!(!format!("{id:?}").contains("1555"));
        let error = WaId::parse("+15550000001").unwrap_err().to_string();
        assert!(!error.contains("1555"), "{error}");
    }

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("ação", 2), "aç");
        assert_eq!(cut("oi", 5), "oi");
    }
}
