//! A tenant's WhatsApp settings: the `whatsapp` object of its `CONFIG` item, a
//! section the core keeps opaque ([`degrau::channel::ChannelSection`]). This crate
//! reads it ([`WhatsAppSettings::of`]) like the core reads the rest (unknown fields
//! refused, every value validated when read), and [`WhatsAppSettingsCheck`] refuses
//! a bad one when the config is written (the `ask` function registers it).
//!
//! ```json
//! {"whatsapp": {
//!    "template": {"name": "retomar_conversa", "language": "pt_BR"},
//!    "media_reply": "Ainda não consigo ouvir áudios; pode escrever?"}}
//! ```
//!
//! * `template`: sent instead of a reply the 24-hour customer service window no
//!   longer allows (an approved template without parameters). Absent: nothing is
//!   sent then; the reply is in the conversation all the same.
//! * `media_reply`: sent, without a model call, to a turn made only of media the
//!   customer typed nothing with (`[audio]`, `[sticker]`…). Absent (the default):
//!   such a turn goes to the model as its notes, and the model answers it (it can
//!   say, in the customer's language, that it cannot listen to audio).
//! * `voice_reply`: sent, without a model call, when speech-to-text is on and a
//!   voice note of the turn cannot be heard (too long, not a voice note, the
//!   transcription failed). Absent: [`DEFAULT_VOICE_REPLY`].

use degrau::channel::{ChannelSection, ChannelSettingsCheck};
use degrau::tenant::TenantConfig;
use serde::{Deserialize, Serialize};

/// The section's name in the tenant's config.
pub const CHANNEL: &str = "whatsapp";

/// The reply to a voice note that cannot be heard, when the tenant set none.
pub const DEFAULT_VOICE_REPLY: &str = "Desculpe, não consegui ouvir seu áudio. Pode escrever? \
     (Sorry, I could not listen to your voice note. Could you write it instead?)";

/// Longest `media_reply`, in characters.
pub const MAX_MEDIA_REPLY_CHARS: usize = 1024;

/// The tenant's WhatsApp settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WhatsAppSettings {
    /// The template sent outside the customer service window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateRef>,
    /// The short reply to a turn of bare media notes (no model call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_reply: Option<MediaReply>,
    /// The reply to a voice note that cannot be heard (no model call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_reply: Option<VoiceReply>,
    /// Whether a taken message is marked read with the typing indicator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_receipts: Option<bool>,
    /// How long a person's answer pauses the agent for the contact, in hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_hours: Option<HandoffHours>,
    /// The word the owner sends to hand the conversation back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handback_keyword: Option<HandbackKeyword>,
}

/// `handoff_hours` when the tenant set none.
pub const DEFAULT_HANDOFF_HOURS: u32 = 12;

/// Longest `handoff_hours`: a week.
pub const MAX_HANDOFF_HOURS: u32 = 168;

/// Longest `handback_keyword`, in characters.
pub const MAX_HANDBACK_KEYWORD_CHARS: usize = 32;

impl WhatsAppSettings {
    /// The settings in the tenant's `config` (the defaults when it has no
    /// `whatsapp` section), or why its section does not read, naming the field
    /// (`whatsapp.template.name: ...`).
    pub fn of(config: Option<&TenantConfig>) -> Result<WhatsAppSettings, String> {
        config
            .and_then(|config| config.channel_section(CHANNEL))
            .map_or_else(|| Ok(WhatsAppSettings::default()), |s| s.read(CHANNEL))
    }

    /// True unless the tenant turned read receipts off.
    pub fn marks_read(&self) -> bool {
        self.read_receipts.unwrap_or(true)
    }

    /// How long a person's answer pauses the agent, in seconds.
    pub fn handoff_seconds(&self) -> i64 {
        let hours = self
            .handoff_hours
            .as_ref()
            .map_or(DEFAULT_HANDOFF_HOURS, HandoffHours::get);
        i64::from(hours) * 3600
    }

    /// The reply to a voice note that cannot be heard: the tenant's, or the default.
    pub fn voice_reply(&self) -> &str {
        self.voice_reply
            .as_ref()
            .map_or(DEFAULT_VOICE_REPLY, VoiceReply::as_str)
    }

    /// True when `text` (an echo of the owner) is the tenant's hand-back word.
    pub fn is_handback(&self, text: &str) -> bool {
        self.handback_keyword
            .as_ref()
            .is_some_and(|word| word.as_str().trim().eq_ignore_ascii_case(text.trim()))
    }
}

/// The check of the `whatsapp` section on a config write: it must read as
/// [`WhatsAppSettings`].
#[derive(Debug, Clone, Copy, Default)]
pub struct WhatsAppSettingsCheck;

impl ChannelSettingsCheck for WhatsAppSettingsCheck {
    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn check(&self, section: &ChannelSection) -> Result<(), String> {
        section.read::<WhatsAppSettings>(CHANNEL).map(|_| ())
    }
}

/// `handoff_hours`: 1–[`MAX_HANDOFF_HOURS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct HandoffHours(u32);

impl HandoffHours {
    /// The hours.
    pub fn get(&self) -> u32 {
        self.0
    }
}

impl TryFrom<u32> for HandoffHours {
    type Error = String;
    fn try_from(value: u32) -> Result<Self, String> {
        if (1..=MAX_HANDOFF_HOURS).contains(&value) {
            Ok(HandoffHours(value))
        } else {
            Err(format!(
                "whatsapp.handoff_hours must be 1-{MAX_HANDOFF_HOURS}"
            ))
        }
    }
}

impl From<HandoffHours> for u32 {
    fn from(value: HandoffHours) -> u32 {
        value.0
    }
}

/// An approved message template: its name and language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateRef {
    /// The template's name: 1–512 of `[a-z0-9_]`.
    pub name: TemplateName,
    /// Its language code: `pt_BR`, `en_US`, `es`…
    pub language: LanguageCode,
}

macro_rules! checked_text {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The validated text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(value: String) -> Result<Self, String> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(&value)?;
                Ok($name(value))
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }
    };
}

checked_text!(
    /// A template name: 1–512 of `[a-z0-9_]`, as Meta names templates.
    TemplateName,
    |name| {
        if !name.is_empty()
            && name.len() <= 512
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            Ok(())
        } else {
            Err("whatsapp.template.name must be 1-512 of a-z 0-9 _".into())
        }
    }
);

checked_text!(
    /// A template language code: two or three lowercase letters, optionally `_`
    /// and two uppercase ones (`pt_BR`).
    LanguageCode,
    |code| {
        let (language, region) = code.split_once('_').unwrap_or((code, ""));
        let language_ok =
            (2..=3).contains(&language.len()) && language.chars().all(|c| c.is_ascii_lowercase());
        let region_ok = region.is_empty()
            || (region.len() == 2 && region.chars().all(|c| c.is_ascii_uppercase()));
        if language_ok && region_ok && !code.ends_with('_') {
            Ok(())
        } else {
            Err("whatsapp.template.language must look like `pt_BR` or `es`".into())
        }
    }
);

checked_text!(
    /// The short reply to a turn of bare media notes: 1–1,024 characters, not only
    /// whitespace.
    MediaReply,
    |text| {
        if text.trim().is_empty() || text.chars().count() > MAX_MEDIA_REPLY_CHARS {
            Err(format!(
                "whatsapp.media_reply must be 1-{MAX_MEDIA_REPLY_CHARS} characters, not only whitespace"
            ))
        } else {
            Ok(())
        }
    }
);

checked_text!(
    /// The reply to a voice note that cannot be heard: 1–1,024 characters, not
    /// only whitespace.
    VoiceReply,
    |text| {
        if text.trim().is_empty() || text.chars().count() > MAX_MEDIA_REPLY_CHARS {
            Err(format!(
                "whatsapp.voice_reply must be 1-{MAX_MEDIA_REPLY_CHARS} characters, not only whitespace"
            ))
        } else {
            Ok(())
        }
    }
);

checked_text!(
    /// The hand-back word: 1–32 characters, not only whitespace.
    HandbackKeyword,
    |text| {
        if text.trim().is_empty() || text.chars().count() > MAX_HANDBACK_KEYWORD_CHARS {
            Err(format!(
                "whatsapp.handback_keyword must be 1-{MAX_HANDBACK_KEYWORD_CHARS} characters, not only whitespace"
            ))
        } else {
            Ok(())
        }
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The WhatsApp settings of a config's text, read as the worker reads them.
    fn read(text: &str) -> Result<WhatsAppSettings, String> {
        let config: TenantConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        WhatsAppSettings::of(Some(&config))
    }

    #[test]
    fn the_whatsapp_object_is_read_validated_and_strict() {
        let whatsapp = read(
            r#"{"whatsapp": {"template": {"name": "retomar_conversa", "language": "pt_BR"},
                             "media_reply": "Pode escrever?"}}"#,
        )
        .unwrap();
        let template = whatsapp.template.unwrap();
        assert_eq!(
            (template.name.as_str(), template.language.as_str()),
            ("retomar_conversa", "pt_BR")
        );
        assert_eq!(whatsapp.media_reply.unwrap().as_str(), "Pode escrever?");
        for bad in [
            r#"{"whatsapp": {"templat": null}}"#,
            r#"{"whatsapp": {"template": {"name": "Hello World", "language": "en"}}}"#,
            r#"{"whatsapp": {"template": {"name": "hello", "language": "english"}}}"#,
            r#"{"whatsapp": {"template": {"name": "hello", "language": "pt_"}}}"#,
            r#"{"whatsapp": {"template": {"name": "hello"}}}"#,
            r#"{"whatsapp": {"media_reply": "   "}}"#,
            r#"{"whatsapp": {"voice_reply": ""}}"#,
            r#"{"whatsapp": {"handoff_hours": 0}}"#,
            r#"{"whatsapp": {"handoff_hours": 169}}"#,
            r#"{"whatsapp": {"handback_keyword": " "}}"#,
            r#"{"whatsapp": {"read_receipts": "no"}}"#,
            r#"{"whatsapp": "on"}"#,
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
        let long = format!(
            r#"{{"whatsapp": {{"media_reply": "{}"}}}}"#,
            "a".repeat(MAX_MEDIA_REPLY_CHARS + 1)
        );
        assert!(read(&long).is_err());
        let handoff = read(
            r#"{"whatsapp": {"handoff_hours": 2, "handback_keyword": "voltar", "read_receipts": false}}"#,
        )
        .unwrap();
        assert_eq!(handoff.handoff_seconds(), 7200);
        assert!(!handoff.marks_read());
        assert!(handoff.is_handback(" VOLTAR "));
        assert!(!handoff.is_handback("voltar já"));
        let plain = WhatsAppSettings::default();
        assert_eq!(plain.handoff_seconds(), 12 * 3600);
        assert!(plain.marks_read() && !plain.is_handback("voltar"));
        assert_eq!(plain.voice_reply(), DEFAULT_VOICE_REPLY);
        assert_eq!(read("{}").unwrap(), plain, "no section: the defaults");
        let voice = read(r#"{"whatsapp": {"voice_reply": "Pode digitar?"}}"#).unwrap();
        assert_eq!(voice.voice_reply(), "Pode digitar?");
        for good in ["es", "en_US", "fil"] {
            assert!(LanguageCode::try_from(good.to_owned()).is_ok(), "{good}");
        }
    }

    #[test]
    fn the_check_names_the_field_at_fault_as_the_config_reader_does() {
        let check = |text: &str| {
            let config: TenantConfig = serde_json::from_str(text).unwrap();
            WhatsAppSettingsCheck.check(config.channel_section(CHANNEL).unwrap())
        };
        assert_eq!(WhatsAppSettingsCheck.channel(), "whatsapp");
        assert_eq!(
            check(r#"{"whatsapp": {"template": {"name": "Bad Name", "language": "pt_BR"}}}"#),
            Err("whatsapp.template.name: whatsapp.template.name must be 1-512 of a-z 0-9 _".into())
        );
        assert_eq!(
            check(r#"{"whatsapp": {"handoff_hours": 0}}"#),
            Err("whatsapp.handoff_hours: whatsapp.handoff_hours must be 1-168".into())
        );
        let unknown = check(r#"{"whatsapp": {"__probe__": 1}}"#).unwrap_err();
        assert!(
            unknown.contains("unknown field `__probe__`, expected one of `template`"),
            "{unknown}"
        );
        assert_eq!(check(r#"{"whatsapp": {"read_receipts": false}}"#), Ok(()));
    }
}
