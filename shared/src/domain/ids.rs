//! The validated identifiers that reach storage keys (contact, tenant, fact key,
//! idempotency key, incarnation): each a newtype whose `parse` refuses what a key
//! may not hold, naming the identifier and what is wrong with it.

/// Why an identifier was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {reason}")]
pub struct InvalidId {
    /// Which identifier (e.g. "contact id").
    pub what: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

/// Checks `value` against an identifier's rule: not empty, at most `max`
/// characters, each one `ok` (`allowed` says which, in the error). The error names
/// `what` and, for a refused character, that character alone (never the value: an
/// id may carry a phone number).
pub fn check_id(
    what: &'static str,
    value: &str,
    max: usize,
    allowed: &str,
    ok: impl Fn(char) -> bool,
) -> Result<(), InvalidId> {
    let invalid = |reason: String| Err(InvalidId { what, reason });
    if value.is_empty() {
        return invalid("must not be empty".into());
    }
    if value.chars().count() > max {
        return invalid(format!("must be at most {max} characters"));
    }
    if let Some(bad) = value.chars().find(|c| !ok(*c)) {
        return invalid(format!(
            "may only contain {allowed} (found {:?})",
            bad.escape_default().to_string()
        ));
    }
    Ok(())
}

/// Declares a validated identifier: a `String` newtype that serializes as its text,
/// deserializes through its `parse` (which the type states, with
/// [`check_id`](crate::domain::check_id) and its own rule), and reads as `&str`.
/// `id_newtype!(Name)` derives `Debug`; `id_newtype!(Name, private)` writes one
/// that shows the length only, for ids that carry a phone number (the WhatsApp
/// channel's). The core's ids and the channels' are all declared so.
#[macro_export]
macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $crate::id_newtype!(@type [$(#[$doc])* #[derive(Debug)]] $name);
    };
    ($(#[$doc:meta])* $name:ident, private) => {
        $crate::id_newtype!(@type [$(#[$doc])*] $name);

        // Never the value in a Debug line: it may carry a phone number.
        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, concat!(stringify!($name), "(<{} chars>)"), self.0.len())
            }
        }
    };
    (@type [$(#[$attr:meta])*] $name:ident) => {
        $(#[$attr])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The validated text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::convert::AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::convert::TryFrom<String> for $name {
            type Error = $crate::domain::InvalidId;
            fn try_from(value: String) -> Result<Self, $crate::domain::InvalidId> {
                Self::parse(&value)
            }
        }

        impl ::std::convert::From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }
    };
}

id_newtype!(
    /// A contact id as it appears in the URL: 1–128 of `[A-Za-z0-9+_.:@-]`
    /// (a phone number in E.164, an e-mail address, a CRM id).
    ContactId
);
id_newtype!(
    /// A tenant id, from the verified JWT claim: 1–64 of `[A-Za-z0-9_.-]`. It prefixes
    /// every storage key, so it may not hold the key separator `#`.
    TenantId
);
id_newtype!(
    /// A client's `Idempotency-Key`: 1–255 visible ASCII characters (a UUID, say).
    IdempotencyKey
);
id_newtype!(
    /// A fact key: 1–64 of `[a-z0-9_]`, starting with a letter (`preferred_time`).
    FactKey
);
id_newtype!(
    /// A head's incarnation (see [`Head::incarnation`](super::Head::incarnation)):
    /// 1–64 of `[0-9a-f]`, 32 when degrau makes one. Jobs carry it instead of the
    /// contact id, so a queued job names no one: it is an opaque reference, not a
    /// secret.
    Incarnation
);

impl Incarnation {
    /// Maximum length in characters.
    pub const MAX_LEN: usize = 64;

    /// Validates an incarnation read from a job.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check_id("incarnation", value, Self::MAX_LEN, "0-9 a-f", |c| {
            c.is_ascii_digit() || ('a'..='f').contains(&c)
        })?;
        Ok(Self(value.to_owned()))
    }

    /// A new random incarnation: 128 bits as 32 hex digits.
    pub fn random() -> Self {
        Self(format!(
            "{:016x}{:016x}",
            fastrand::u64(..),
            fastrand::u64(..)
        ))
    }
}

// Each id type states its own rule (name, length, alphabet) in the same few lines;
// the checking itself is `check_id`, shared.
impl ContactId {
    /// Maximum length in characters.
    pub const MAX_LEN: usize = 128;

    /// Validates a contact id.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check_id(
            "contact id",
            value,
            Self::MAX_LEN,
            "A-Z a-z 0-9 + _ . : @ -",
            |c| c.is_ascii_alphanumeric() || "+_.:@-".contains(c),
        )?;
        Ok(Self(value.to_owned()))
    }
}

impl TenantId {
    /// Maximum length in characters.
    pub const MAX_LEN: usize = 64;

    /// Validates a tenant id.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check_id(
            "tenant id",
            value,
            Self::MAX_LEN,
            "A-Z a-z 0-9 _ . -",
            |c| c.is_ascii_alphanumeric() || "_.-".contains(c),
        )?;
        Ok(Self(value.to_owned()))
    }
}

impl IdempotencyKey {
    /// Maximum length in characters.
    pub const MAX_LEN: usize = 255;

    /// Validates an idempotency key.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check_id(
            "idempotency key",
            value,
            Self::MAX_LEN,
            "visible ASCII characters",
            |c| c.is_ascii_graphic(),
        )?;
        Ok(Self(value.to_owned()))
    }
}

impl FactKey {
    /// Maximum length in characters.
    pub const MAX_LEN: usize = 64;

    /// Validates a fact key.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        check_id("fact key", value, Self::MAX_LEN, "a-z 0-9 _", |c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
        })?;
        if !value.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err(InvalidId {
                what: "fact key",
                reason: "must start with a lowercase letter".into(),
            });
        }
        Ok(Self(value.to_owned()))
    }
}
