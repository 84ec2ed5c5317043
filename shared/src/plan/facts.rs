//! Fact validation: the "closed facts" invariant.
//!
//! A fact is stored only when its key is one of the tenant's allowed keys and its
//! value is one non-empty line of bounded length that holds no personal document
//! (CPF, CNPJ), no payment card number and no health data. [`FactPolicy::check`]
//! decides; it is pure (no I/O) and its refusals never quote the value, so they can
//! be logged.
//!
//! # Numbers
//!
//! The value is first read in its scan form ([`crate::text::for_scan`]): NFKC, so
//! full-width digits (`１２３`) are ASCII ones; format characters dropped, so a
//! zero-width space inside a number hides nothing; every dash (en dash, em dash,
//! the minus sign, a non-breaking hyphen) read as `-` and every space as a space.
//!
//! Digits are read in groups: a single `.`, `-` or `/` between two digits joins them
//! (`123.456.789-09`, `12.345.678/0001-95`, `4111-1111-1111-1111`), and groups
//! separated by a short gap of whitespace with at most one of those separators in it
//! are also tried together (`4111 1111 1111 1111`, `529 982 247 25`, `123.456.789 -
//! 09`), up to 19 digits. Any other character
//! ends a run, so numbers glued to words are still found (`cartão4111111111111111`).
//! Every group and every such run of groups is tested: 11 digits against the CPF
//! check digits, 14 against the CNPJ check digits, and 13 to 19 against the Luhn
//! check used by payment cards. Only ASCII digits are read there.
//!
//! The alphanumeric CNPJ (issued since July 2026: 12 characters of `0-9A-Z`, then two
//! numeric check digits) is read apart: runs of ASCII letters and digits, joined by
//! the same single separators, that hold exactly 14 characters with a letter among
//! them are tested against its check digits (the numeric CNPJ's weights, each
//! character counting as its ASCII code minus 48; lowercase is read as uppercase).
//!
//! Check digits keep false positives rare but not absent: an unrelated 11-digit
//! number passes the CPF check about once in a hundred, and a 13- to 19-digit number
//! (a phone number with country code, say `+55 11 98765-4325`) passes Luhn about once
//! in ten. Such values are refused: refusing a harmless fact is the safe side of
//! storing a document. Short numbers (`3 kids`, `room 12`, `14:30`, `2026-12-01`)
//! always pass.
//!
//! # Health terms
//!
//! Health data is recognised by a documented, deliberately short list rather than by
//! guessing: [`HEALTH_TERM_STEMS`] match the start of a word, [`HEALTH_TERM_WORDS`]
//! match whole words only, and [`HEALTH_TERM_EXCEPTIONS`] are ordinary words that
//! merely start like a stem. The value is lowercased, Portuguese accents are stripped
//! (`Diabético` reads as `diabetico`) and it is split into words on every
//! non-alphanumeric character before matching. The list covers Portuguese and
//! English; it is a safety net, not a classifier, so it leans towards terms that are
//! unambiguous in scheduling and customer-service conversations:
//!
//! - short or ambiguous terms are whole words (`hiv`, `aids`, `tdah`, `avc`), so
//!   `cancel`, `cancelar`, `surge`, `aid` or `assistant` never match;
//! - generic words that are not health data on their own are left out: `medic`,
//!   `médico`, `doctor`, `terapia`/`therapy` (hair and spa therapies are common),
//!   `anxious` and `ansioso` (eager), `stroke` (swimming, strokes of luck), and the
//!   abbreviations `dst`/`ist`, which read as time zones;
//! - a few stems have known collisions, listed as exceptions: `depressa` (quickly),
//!   `gravidade` (gravity, severity), `tubérculo` (a root vegetable).
//!
//! The zodiac sign `Câncer` still matches `cancer`; that false positive is accepted.
//!
//! (`docs/DESIGN.md`: invariant 8.)

mod documents;
mod health;
pub mod reconcile;

use std::collections::BTreeSet;

use crate::domain::FactKey;
use documents::find_document_number;
pub use documents::{is_valid_alphanumeric_cnpj, is_valid_cnpj, is_valid_cpf, passes_luhn};
pub use health::{HEALTH_TERM_EXCEPTIONS, HEALTH_TERM_STEMS, HEALTH_TERM_WORDS, find_health_term};

/// The tenant's rules for facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactPolicy {
    /// The closed list of keys a fact may have.
    pub allowed_keys: BTreeSet<FactKey>,
    /// Maximum length of a value, in characters (not bytes).
    pub max_value_chars: usize,
}

impl FactPolicy {
    /// Maximum value length used by [`FactPolicy::new`].
    pub const DEFAULT_MAX_VALUE_CHARS: usize = 200;

    /// A policy allowing these keys, with values of at most
    /// [`FactPolicy::DEFAULT_MAX_VALUE_CHARS`] characters.
    pub fn new(allowed_keys: impl IntoIterator<Item = FactKey>) -> Self {
        FactPolicy {
            allowed_keys: allowed_keys.into_iter().collect(),
            max_value_chars: Self::DEFAULT_MAX_VALUE_CHARS,
        }
    }

    /// Ok(()) when the fact may be stored, else the first reason it may not.
    ///
    /// Checks, in order: the key is allowed; the value is not empty or whitespace
    /// only; it holds no control characters; it is at most `max_value_chars`
    /// characters; it holds no CPF, CNPJ or card number; it holds no health term.
    /// The length is checked before the content scans, which keeps them bounded.
    pub fn check(&self, key: &FactKey, value: &str) -> Result<(), FactRefusal> {
        if !self.allowed_keys.contains(key) {
            return Err(FactRefusal::KeyNotAllowed {
                key: key.as_str().to_owned(),
            });
        }
        if value.trim().is_empty() {
            return Err(FactRefusal::EmptyValue);
        }
        if value.chars().any(crate::text::breaks_structure) {
            return Err(FactRefusal::ControlCharacters);
        }
        let chars = value.chars().count();
        if chars > self.max_value_chars {
            return Err(FactRefusal::TooLong {
                chars,
                max: self.max_value_chars,
            });
        }
        let scanned = crate::text::for_scan(value);
        if let Some(refusal) = find_document_number(&scanned) {
            return Err(refusal);
        }
        if let Some(term) = find_health_term(&scanned) {
            return Err(FactRefusal::HealthData { term });
        }
        Ok(())
    }
}

/// Why a fact may not be stored. Messages never quote the value, so they are safe to
/// log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FactRefusal {
    /// The key is not one of the tenant's allowed keys.
    #[error("fact key `{key}` is not in the tenant's allowed keys")]
    KeyNotAllowed {
        /// The refused key (a validated [`FactKey`], never the value).
        key: String,
    },
    /// The value is empty or whitespace only.
    #[error("fact value is empty or only whitespace")]
    EmptyValue,
    /// The value is longer than the policy allows.
    #[error("fact value has {chars} characters, more than the maximum of {max}")]
    TooLong {
        /// Length of the value, in characters.
        chars: usize,
        /// The policy's maximum, in characters.
        max: usize,
    },
    /// The value holds a control character, line breaks included.
    #[error("fact value holds control characters (such as line breaks); facts are one line")]
    ControlCharacters,
    /// The value holds a CPF.
    #[error(
        "value holds a CPF (Brazilian taxpayer id); personal documents are not stored as facts"
    )]
    Cpf,
    /// The value holds a CNPJ.
    #[error(
        "value holds a CNPJ (Brazilian company registry id); documents are not stored as facts"
    )]
    Cnpj,
    /// The value holds a number that passes the Luhn check.
    #[error(
        "value holds a payment card number (passes the Luhn check); \
         card numbers are not stored as facts"
    )]
    CardNumber,
    /// The value holds a term of the health list.
    #[error(
        "value holds health data (matched the listed term `{term}`); \
         health data is not stored as facts"
    )]
    HealthData {
        /// The entry of [`HEALTH_TERM_STEMS`] or [`HEALTH_TERM_WORDS`] that matched.
        term: &'static str,
    },
}

impl FactRefusal {
    /// Short stable code for metrics and logs: "key_not_allowed", "empty_value",
    /// "too_long", "control_characters", "cpf", "cnpj", "card_number", "health_data".
    pub fn code(&self) -> &'static str {
        match self {
            FactRefusal::KeyNotAllowed { .. } => "key_not_allowed",
            FactRefusal::EmptyValue => "empty_value",
            FactRefusal::TooLong { .. } => "too_long",
            FactRefusal::ControlCharacters => "control_characters",
            FactRefusal::Cpf => "cpf",
            FactRefusal::Cnpj => "cnpj",
            FactRefusal::CardNumber => "card_number",
            FactRefusal::HealthData { .. } => "health_data",
        }
    }
}

#[cfg(test)]
mod tests;
