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

pub mod reconcile;

use std::collections::BTreeSet;

use crate::domain::FactKey;

/// Word stems that mark health data when a word of the value starts with one of
/// them. Matched against the value lowercased, with Portuguese accents stripped.
/// See the module documentation for what is left out and why.
pub const HEALTH_TERM_STEMS: &[&str] = &[
    // Conditions and diagnoses.
    "diagnos",
    "doenca",
    "disease",
    "diabet",
    "cancer",
    "tumor",
    "hipertens",
    "hypertens",
    "colesterol",
    "cholesterol",
    "asma",
    "asthma",
    "epilep",
    "hepatit",
    "tubercul",
    "sindrome",
    "syndrome",
    "infarto",
    "covid",
    "dengue",
    "enxaqueca",
    "migraine",
    "alzheimer",
    "parkinson",
    "obes",
    // Mental health and neurodivergence.
    "depress",
    "deprimid",
    "antidepress",
    "ansiedade",
    "anxiety",
    "bipolar",
    "esquizofren",
    "schizophren",
    "autis",
    "psiquiatr",
    "psychiatr",
    // Pregnancy.
    "gravid",
    "gestante",
    "gestac",
    "pregnan",
    // Allergies.
    "alerg",
    "allerg",
    // Treatments and medicines.
    "medicament",
    "medication",
    "remedio",
    "insulin",
    "quimioterap",
    "chemotherap",
    "radioterap",
    "radiotherap",
    "cirurgi",
    "surgery",
    "surgical",
    "psicoterap",
    "psychotherap",
    "fisioterap",
    "physiotherap",
];

/// Short or ambiguous health terms that match whole words only (`hiv` but not
/// `hive`). Matched like [`HEALTH_TERM_STEMS`].
pub const HEALTH_TERM_WORDS: &[&str] = &["hiv", "aids", "tdah", "adhd", "avc", "quimio"];

/// Ordinary words that start like a stem of [`HEALTH_TERM_STEMS`] and are not health
/// data: `depressa` (quickly), `gravidade` (gravity, severity), `tubérculo` (a root
/// vegetable). Written lowercased and without accents.
pub const HEALTH_TERM_EXCEPTIONS: &[&str] = &[
    "depressa",
    "gravidade",
    "gravidades",
    "tuberculo",
    "tuberculos",
];

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

/// True when `digits` (values 0 to 9) are a CPF: 11 digits whose last two are the
/// check digits of the Receita Federal rules. Sequences of one repeated digit
/// (`000.000.000-00`, `111.111.111-11`, ...) satisfy the arithmetic but are not
/// valid.
pub fn is_valid_cpf(digits: &[u8]) -> bool {
    if digits.len() != 11 || !all_decimal(digits) || all_same(digits) {
        return false;
    }
    let check = |len: usize| {
        let sum: u32 = digits[..len]
            .iter()
            .zip((2..=len as u32 + 1).rev())
            .map(|(&d, weight)| u32::from(d) * weight)
            .sum();
        (sum * 10 % 11 % 10) as u8
    };
    check(9) == digits[9] && check(10) == digits[10]
}

/// True when `digits` (values 0 to 9) are a CNPJ: 14 digits whose last two are the
/// check digits (weights 5,4,3,2,9,8,7,6,5,4,3,2 for the first and 6,5,4,3,2,9,8,
/// 7,6,5,4,3,2 for the second). Sequences of one repeated digit are not valid.
pub fn is_valid_cnpj(digits: &[u8]) -> bool {
    digits.len() == 14 && all_decimal(digits) && !all_same(digits) && cnpj_checks(digits)
}

/// True when `text` is an alphanumeric CNPJ without punctuation: 12 characters of
/// `0-9A-Z` (lowercase is read as uppercase) whose values, each its ASCII code minus
/// 48, give the last two characters, decimal digits, as check digits with the
/// numeric CNPJ's weights. A purely numeric one is a valid [`is_valid_cnpj`] too.
pub fn is_valid_alphanumeric_cnpj(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 14
        || !bytes[..12].iter().all(u8::is_ascii_alphanumeric)
        || !bytes[12..].iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    let values: Vec<u8> = bytes
        .iter()
        .map(|b| b.to_ascii_uppercase() - b'0')
        .collect();
    !all_same(&values) && cnpj_checks(&values)
}

/// Whether the last two of 14 character values are the CNPJ check digits of the
/// first twelve (values up to 42, `Z`; the sums cannot overflow).
fn cnpj_checks(values: &[u8]) -> bool {
    const WEIGHTS: [u32; 13] = [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
    let check = |len: usize| {
        let sum: u32 = values[..len]
            .iter()
            .zip(&WEIGHTS[WEIGHTS.len() - len..])
            .map(|(&value, &weight)| u32::from(value) * weight)
            .sum();
        match sum % 11 {
            0 | 1 => 0,
            rest => (11 - rest) as u8,
        }
    };
    values.len() == 14 && check(12) == values[12] && check(13) == values[13]
}

/// True when `digits` (values 0 to 9, at least one) pass the Luhn check used by
/// payment card numbers. Any length is accepted; the card lengths are the caller's
/// concern.
pub fn passes_luhn(digits: &[u8]) -> bool {
    if digits.is_empty() || !all_decimal(digits) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// The first term of [`HEALTH_TERM_WORDS`] or [`HEALTH_TERM_STEMS`] found in `text`,
/// reading its words in order; see the module documentation for the matching rules.
pub fn find_health_term(text: &str) -> Option<&'static str> {
    let folded = fold(text);
    folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty() && !HEALTH_TERM_EXCEPTIONS.contains(word))
        .find_map(|word| {
            HEALTH_TERM_WORDS
                .iter()
                .find(|term| **term == word)
                .or_else(|| {
                    HEALTH_TERM_STEMS
                        .iter()
                        .find(|stem| word.starts_with(**stem))
                })
                .copied()
        })
}

/// Lowercases and strips Portuguese accents, precomposed or combining.
fn fold(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        // Combining marks (decomposed input such as `e` + U+0301) would otherwise
        // split a word in two.
        .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ã' | 'ä' => 'a',
            'é' | 'ê' | 'è' | 'ë' => 'e',
            'í' | 'ì' | 'î' | 'ï' => 'i',
            'ó' | 'ô' | 'õ' | 'ö' | 'ò' => 'o',
            'ú' | 'ü' | 'ù' | 'û' => 'u',
            'ç' => 'c',
            other => other,
        })
        .collect()
}

/// Longest digit run tested: the longest card number.
const MAX_SCANNED_DIGITS: usize = 19;

/// Characters that join two digits into one group when alone between them.
const DIGIT_SEPARATORS: [char; 3] = ['.', '-', '/'];

/// A run of digits, possibly punctuated, and where it sits in the value's chars.
struct DigitGroup {
    start: usize,
    end: usize,
    digits: Vec<u8>,
}

/// The document or card refusal the value deserves, if any. When several numbers are
/// found, the most specific check wins: CPF, then CNPJ (numeric or alphanumeric),
/// then card.
fn find_document_number(value: &str) -> Option<FactRefusal> {
    let chars: Vec<char> = value.chars().collect();
    match find_numeric_document(&chars) {
        Some(FactRefusal::Cpf) => Some(FactRefusal::Cpf),
        _ if holds_alphanumeric_cnpj(&chars) => Some(FactRefusal::Cnpj),
        found => found,
    }
}

/// Whether a run of ASCII letters and digits (single separators between two of
/// them joining, as for digit groups) is an alphanumeric CNPJ: 14 characters, at
/// least one a letter (all-digit runs are the numeric scan's).
fn holds_alphanumeric_cnpj(chars: &[char]) -> bool {
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let mut run = String::new();
        loop {
            run.push(chars[i]);
            i += 1;
            let joined_by_separator = i + 1 < chars.len()
                && DIGIT_SEPARATORS.contains(&chars[i])
                && chars[i + 1].is_ascii_alphanumeric();
            if joined_by_separator {
                i += 1;
            } else if i >= chars.len() || !chars[i].is_ascii_alphanumeric() {
                break;
            }
        }
        if run.bytes().any(|b| b.is_ascii_alphabetic()) && is_valid_alphanumeric_cnpj(&run) {
            return true;
        }
    }
    false
}

/// [`find_document_number`]'s numeric part: CPF, CNPJ and card numbers in digit
/// groups.
fn find_numeric_document(chars: &[char]) -> Option<FactRefusal> {
    let groups = digit_groups(chars);
    let mut found: Option<FactRefusal> = None;
    for first in 0..groups.len() {
        let mut digits: Vec<u8> = Vec::with_capacity(MAX_SCANNED_DIGITS);
        for (index, group) in groups.iter().enumerate().skip(first) {
            if index > first && !joins(&chars[groups[index - 1].end..group.start]) {
                break;
            }
            digits.extend_from_slice(&group.digits);
            if digits.len() > MAX_SCANNED_DIGITS {
                break;
            }
            let refusal = match digits.len() {
                11 if is_valid_cpf(&digits) => return Some(FactRefusal::Cpf),
                14 if is_valid_cnpj(&digits) => FactRefusal::Cnpj,
                13..=19 if passes_luhn(&digits) => FactRefusal::CardNumber,
                _ => continue,
            };
            if found != Some(FactRefusal::Cnpj) {
                found = Some(refusal);
            }
        }
    }
    found
}

/// Longest gap between two digit groups that still joins them (` - `).
const MAX_GAP_CHARS: usize = 3;

/// Whether the characters between two digit groups join them into one number: a
/// short gap of whitespace holding at most one separator (`4111 1111`, `789 - 09`,
/// `789 -09`). A separator alone never reaches here: it joins within a group.
fn joins(gap: &[char]) -> bool {
    let separators = gap.iter().filter(|c| DIGIT_SEPARATORS.contains(c)).count();
    (1..=MAX_GAP_CHARS).contains(&gap.len())
        && separators <= 1
        && gap
            .iter()
            .all(|c| c.is_whitespace() || DIGIT_SEPARATORS.contains(c))
}

/// Splits `chars` into digit groups: a single separator between two digits joins
/// them, anything else ends the group.
fn digit_groups(chars: &[char]) -> Vec<DigitGroup> {
    let mut groups = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let mut digits = Vec::new();
        loop {
            digits.push(chars[i] as u8 - b'0');
            i += 1;
            let joined_by_separator = i + 1 < chars.len()
                && DIGIT_SEPARATORS.contains(&chars[i])
                && chars[i + 1].is_ascii_digit();
            if joined_by_separator {
                i += 1;
            } else if i >= chars.len() || !chars[i].is_ascii_digit() {
                break;
            }
        }
        groups.push(DigitGroup {
            start,
            end: i,
            digits,
        });
    }
    groups
}

fn all_decimal(digits: &[u8]) -> bool {
    digits.iter().all(|&d| d <= 9)
}

fn all_same(digits: &[u8]) -> bool {
    digits.windows(2).all(|pair| pair[0] == pair[1])
}

#[cfg(test)]
mod tests;
