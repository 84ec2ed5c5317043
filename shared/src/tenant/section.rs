//! A channel's section of the tenant's `CONFIG` item: a JSON object the core
//! keeps as it is and never reads (`"whatsapp": {...}`). The channel reads it,
//! typed, with [`ChannelSection::read`]; the core checks it on a write only
//! through the checks a deployment registers (see [`crate::channel`], which
//! names this type too).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A channel's settings as the core holds them: a JSON object, opaque.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChannelSection(Map<String, Value>);

impl ChannelSection {
    /// The section's fields, as given.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.0
    }

    /// The section read as the channel's own type, or why it does not read:
    /// naming the field by its path in the config, the section being `channel`
    /// (`whatsapp.template.name: ...`), as the rest of the config is named.
    pub fn read<T: DeserializeOwned>(&self, channel: &str) -> Result<T, String> {
        let value = Value::Object(self.0.clone());
        serde_path_to_error::deserialize(value).map_err(|err| {
            let path = err.path().to_string();
            let text = err.into_inner().to_string();
            match path.as_str() {
                "." | "" => format!("{channel}: {text}"),
                _ => format!("{channel}.{path}: {text}"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        #[serde(default)]
        hours: Option<u8>,
    }

    #[test]
    fn a_section_is_an_object_read_typed_with_its_path_named() {
        let section: ChannelSection = serde_json::from_str(r#"{"hours": 2}"#).unwrap();
        assert_eq!(section.read::<Sample>("sms").unwrap().hours, Some(2));
        assert!(serde_json::from_str::<ChannelSection>(r#""text""#).is_err());
        assert!(serde_json::from_str::<ChannelSection>("[1]").is_err());
        let bad: ChannelSection = serde_json::from_str(r#"{"hours": "two"}"#).unwrap();
        let error = bad.read::<Sample>("sms").unwrap_err();
        assert!(error.starts_with("sms.hours: invalid type"), "{error}");
        let unknown: ChannelSection = serde_json::from_str(r#"{"colour": 1}"#).unwrap();
        let error = unknown.read::<Sample>("sms").unwrap_err();
        assert!(error.contains("unknown field `colour`"), "{error}");
        assert_eq!(
            serde_json::to_string(&section).unwrap(),
            r#"{"hours":2}"#,
            "written back as given"
        );
    }
}
