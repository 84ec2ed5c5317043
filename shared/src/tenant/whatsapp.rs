//! A tenant's WhatsApp settings: the `whatsapp` object of its `CONFIG` item, read
//! like the rest of it (unknown fields refused, every value validated when read).
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

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::TenantConfig;

    #[test]
    fn the_whatsapp_object_is_read_validated_and_strict() {
        let config: TenantConfig = serde_json::from_str(
            r#"{"whatsapp": {"template": {"name": "retomar_conversa", "language": "pt_BR"},
                             "media_reply": "Pode escrever?"}}"#,
        )
        .unwrap();
        let whatsapp = config.whatsapp.unwrap();
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
        ] {
            assert!(serde_json::from_str::<TenantConfig>(bad).is_err(), "{bad}");
        }
        let long = format!(
            r#"{{"whatsapp": {{"media_reply": "{}"}}}}"#,
            "a".repeat(MAX_MEDIA_REPLY_CHARS + 1)
        );
        assert!(serde_json::from_str::<TenantConfig>(&long).is_err());
        for good in ["es", "en_US", "fil"] {
            assert!(LanguageCode::try_from(good.to_owned()).is_ok(), "{good}");
        }
    }
}
