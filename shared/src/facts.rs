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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(name: &str) -> FactKey {
        FactKey::parse(name).unwrap()
    }

    fn policy() -> FactPolicy {
        FactPolicy::new([key("preferred_time"), key("note"), key("language")])
    }

    fn check(value: &str) -> Result<(), FactRefusal> {
        policy().check(&key("note"), value)
    }

    fn digits(text: &str) -> Vec<u8> {
        text.bytes()
            .filter(u8::is_ascii_digit)
            .map(|b| b - b'0')
            .collect()
    }

    fn to_text(digits: &[u8]) -> String {
        digits.iter().map(|d| char::from(b'0' + d)).collect()
    }

    /// CPF check digits by the textbook formula (11 minus the remainder, 10 and 11
    /// becoming 0), written independently of the code under test.
    fn with_cpf_check_digits(nine: &[u8]) -> Vec<u8> {
        let mut all = nine.to_vec();
        for len in [9, 10] {
            let sum: usize = all
                .iter()
                .enumerate()
                .map(|(i, &d)| usize::from(d) * (len + 1 - i))
                .sum();
            let dv = 11 - sum % 11;
            all.push(if dv >= 10 { 0 } else { dv as u8 });
        }
        all
    }

    fn with_cnpj_check_digits(twelve: &[u8]) -> Vec<u8> {
        let mut all = twelve.to_vec();
        for len in [12, 13] {
            // Weights run 2..=9 cyclically from the right.
            let sum: usize = all
                .iter()
                .rev()
                .enumerate()
                .map(|(i, &d)| usize::from(d) * (2 + i % 8))
                .sum();
            let rest = sum % 11;
            all.push(if rest < 2 { 0 } else { (11 - rest) as u8 });
            assert_eq!(all.len(), len + 1);
        }
        all
    }

    fn with_luhn_digit(body: &[u8]) -> Vec<u8> {
        let mut all = body.to_vec();
        all.push(0);
        let sum: u32 = all
            .iter()
            .rev()
            .enumerate()
            .map(|(i, &d)| {
                let d = u32::from(d);
                if i % 2 == 1 {
                    (d * 2) / 10 + (d * 2) % 10
                } else {
                    d
                }
            })
            .sum();
        *all.last_mut().unwrap() = ((10 - sum % 10) % 10) as u8;
        all
    }

    fn punctuated_cpf(d: &[u8]) -> String {
        let t = to_text(d);
        format!("{}.{}.{}-{}", &t[0..3], &t[3..6], &t[6..9], &t[9..11])
    }

    #[test]
    fn cpf_validation_accepts_the_public_example_and_computed_numbers() {
        assert!(is_valid_cpf(&digits("529.982.247-25")));
        let computed = with_cpf_check_digits(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(to_text(&computed), "12345678909");
        assert!(is_valid_cpf(&computed));
    }

    #[test]
    fn cpf_validation_refuses_wrong_check_digits_repeated_digits_and_wrong_lengths() {
        assert!(!is_valid_cpf(&digits("529.982.247-24")));
        assert!(!is_valid_cpf(&digits("529.982.247-15")));
        for d in 0..=9u8 {
            assert!(!is_valid_cpf(&[d; 11]), "{d} repeated");
        }
        assert!(!is_valid_cpf(&digits("5299822472")));
        assert!(!is_valid_cpf(&digits("529982247250")));
        assert!(!is_valid_cpf(&[]));
        let mut out_of_range = digits("52998224725");
        out_of_range[0] = 15;
        assert!(!is_valid_cpf(&out_of_range));
    }

    #[test]
    fn cnpj_validation_accepts_the_public_example_and_computed_numbers() {
        assert!(is_valid_cnpj(&digits("11.222.333/0001-81")));
        let computed = with_cnpj_check_digits(&[9, 8, 7, 6, 5, 4, 3, 2, 0, 0, 0, 1]);
        assert!(is_valid_cnpj(&computed));
    }

    #[test]
    fn cnpj_validation_refuses_wrong_check_digits_repeated_digits_and_wrong_lengths() {
        assert!(!is_valid_cnpj(&digits("11.222.333/0001-82")));
        assert!(!is_valid_cnpj(&digits("11.222.333/0001-91")));
        for d in 0..=9u8 {
            assert!(!is_valid_cnpj(&[d; 14]), "{d} repeated");
        }
        assert!(!is_valid_cnpj(&digits("1122233300018")));
        assert!(!is_valid_cnpj(&digits("52998224725")));
    }

    #[test]
    fn luhn_accepts_well_known_test_cards_and_refuses_altered_ones() {
        for card in ["4111111111111111", "5555555555554444", "378282246310005"] {
            assert!(passes_luhn(&digits(card)), "{card}");
        }
        for card in ["4111111111111112", "5555555555554445", "378282246310006"] {
            assert!(!passes_luhn(&digits(card)), "{card}");
        }
        assert!(passes_luhn(&digits("79927398713")));
        assert!(!passes_luhn(&[]));
        assert!(!passes_luhn(&[10, 8]));
    }

    #[test]
    fn refuses_a_cpf_with_or_without_punctuation() {
        for value in [
            "529.982.247-25",
            "52998224725",
            "CPF: 529.982.247-25 ok",
            "cpf 529 982 247 25",
            "meu cpf é 52998224725.",
            "doc529.982.247-25x",
        ] {
            assert_eq!(check(value), Err(FactRefusal::Cpf), "{value}");
        }
    }

    #[test]
    fn refuses_a_cnpj_with_or_without_punctuation() {
        for value in [
            "11.222.333/0001-81",
            "11222333000181",
            "empresa CNPJ 11.222.333/0001-81",
        ] {
            assert_eq!(check(value), Err(FactRefusal::Cnpj), "{value}");
        }
    }

    #[test]
    fn refuses_an_alphanumeric_cnpj_with_or_without_punctuation() {
        // The Receita Federal's example of the format issued since July 2026.
        for value in [
            "12.ABC.345/01DE-35",
            "12ABC34501DE35",
            "empresa CNPJ 12.ABC.345/01DE-35 ok",
            "cnpj 12abc34501de35",
        ] {
            assert_eq!(check(value), Err(FactRefusal::Cnpj), "{value}");
        }
        // A wrong check digit, letters in the check digits, or a longer run pass.
        for value in [
            "12.ABC.345/01DE-36",
            "12ABC34501DEA5",
            "X12ABC34501DE35",
            "reference ABCDEFGHIJKLMN",
        ] {
            assert_eq!(check(value), Ok(()), "{value}");
        }
    }

    #[test]
    fn refuses_card_numbers_grouped_or_embedded_in_text() {
        for value in [
            "4111 1111 1111 1111",
            "4111-1111-1111-1111",
            "4111111111111111",
            "cartão4111111111111111",
            "card 5555 5555 5555 4444 exp 12/30",
            "amex 3782 822463 10005",
            "turma 3 4111 1111 1111 1111",
        ] {
            assert_eq!(check(value), Err(FactRefusal::CardNumber), "{value}");
        }
    }

    #[test]
    fn lets_short_numbers_times_and_dates_pass() {
        for value in [
            "3 kids",
            "room 12",
            "14:30",
            "2026-12-01",
            "2026-12-01 14:30",
            "01/12/2026 às 9h",
            "R$ 150,00",
            "size 38.5",
            "(11) 3456-7890",
        ] {
            assert_eq!(check(value), Ok(()), "{value}");
        }
    }

    #[test]
    fn phone_numbers_pass_unless_they_happen_to_pass_a_check() {
        // Both were checked by hand: the first passes no check, the second's 13 digits
        // pass Luhn, a false positive the module accepts as the safe side.
        assert_eq!(check("+55 11 98765-4321"), Ok(()));
        assert_eq!(check("+55 11 98765-4325"), Err(FactRefusal::CardNumber));
    }

    #[test]
    fn a_cpf_wins_over_a_card_found_in_the_same_value() {
        assert_eq!(
            check("4111111111111111 e 52998224725"),
            Err(FactRefusal::Cpf)
        );
        assert_eq!(
            check("4111111111111111 e 11222333000181"),
            Err(FactRefusal::Cnpj)
        );
    }

    #[test]
    fn refuses_a_disallowed_key_before_anything_else() {
        let refusal = policy()
            .check(&key("cpf"), "529.982.247-25\nDiabético")
            .unwrap_err();
        assert_eq!(
            refusal,
            FactRefusal::KeyNotAllowed {
                key: "cpf".to_owned()
            }
        );
        assert_eq!(
            refusal.to_string(),
            "fact key `cpf` is not in the tenant's allowed keys"
        );
        let nothing_allowed = FactPolicy::new([]);
        assert!(matches!(
            nothing_allowed.check(&key("note"), "ok"),
            Err(FactRefusal::KeyNotAllowed { .. })
        ));
    }

    #[test]
    fn refuses_empty_and_whitespace_only_values() {
        for value in ["", " ", "   \t ", "\u{a0}"] {
            assert_eq!(check(value), Err(FactRefusal::EmptyValue), "{value:?}");
        }
    }

    #[test]
    fn refuses_control_characters_including_line_breaks() {
        for value in [
            "line one\nline two",
            "tab\there",
            "nul\u{0}",
            "bell\u{7}",
            "x\r",
        ] {
            assert_eq!(
                check(value),
                Err(FactRefusal::ControlCharacters),
                "{value:?}"
            );
        }
    }

    #[test]
    fn checks_run_in_the_documented_order() {
        let mut short = policy();
        short.max_value_chars = 10;
        let note = key("note");
        assert_eq!(
            short.check(&note, "a very long value\nwith two lines"),
            Err(FactRefusal::ControlCharacters)
        );
        assert_eq!(
            short.check(&note, "CPF 529.982.247-25"),
            Err(FactRefusal::TooLong { chars: 18, max: 10 })
        );
        assert_eq!(check("diabetes, cpf 529.982.247-25"), Err(FactRefusal::Cpf));
    }

    #[test]
    fn length_counts_characters_not_bytes() {
        let policy = policy();
        assert_eq!(policy.max_value_chars, FactPolicy::DEFAULT_MAX_VALUE_CHARS);
        let note = key("note");
        assert_eq!(policy.check(&note, &"é".repeat(200)), Ok(()));
        assert_eq!(
            policy.check(&note, &"é".repeat(201)),
            Err(FactRefusal::TooLong {
                chars: 201,
                max: 200
            })
        );
    }

    #[test]
    fn finds_health_terms_in_portuguese_with_or_without_accents() {
        for (value, term) in [
            ("Diabético tipo 2", "diabet"),
            ("diabetico tipo 2", "diabet"),
            ("está grávida", "gravid"),
            ("GRÁVIDA de 5 meses", "gravid"),
            ("tem alergia a dipirona", "alerg"),
            ("é alérgica a camarão", "alerg"),
            ("toma remédio para pressão", "remedio"),
            ("faz quimio às terças", "quimio"),
            ("teve um AVC", "avc"),
            ("hipertensão", "hipertens"),
            ("criança com TDAH", "tdah"),
            ("doença celíaca", "doenca"),
            ("sessão de fisioterapia", "fisioterap"),
        ] {
            assert_eq!(find_health_term(value), Some(term), "{value}");
            assert_eq!(
                check(value),
                Err(FactRefusal::HealthData { term }),
                "{value}"
            );
        }
    }

    #[test]
    fn finds_health_terms_written_with_combining_accents() {
        assert_eq!(find_health_term("Diabe\u{301}tico"), Some("diabet"));
        assert_eq!(find_health_term("gra\u{301}vida"), Some("gravid"));
    }

    #[test]
    fn finds_health_terms_in_english() {
        for (value, term) in [
            ("diagnosed with asthma", "diagnos"),
            ("asthmatic", "asthma"),
            ("allergic to peanuts", "allerg"),
            ("Pregnant, due in May", "pregnan"),
            ("HIV positive", "hiv"),
            ("recovering from surgery", "surgery"),
            ("takes insulin", "insulin"),
        ] {
            assert_eq!(find_health_term(value), Some(term), "{value}");
        }
    }

    #[test]
    fn lets_ordinary_values_pass() {
        for value in [
            "prefers mornings",
            "Dra. Ana",
            "cancelar às 14h",
            "cancel on rainy days",
            "corte de cabelo",
            "haircut on Fridays",
            "English",
            "vegetariana",
            "venha depressa",
            "gravidade baixa",
            "gosta de tubérculos assados",
            "médico de família: Dr. Lima",
            "hair therapy",
            "anxious to start",
            "teaching assistant",
            "first aid kit",
            "price surge",
            "swimming, favourite stroke: crawl",
            "hive of bees",
            "10am IST",
        ] {
            assert_eq!(check(value), Ok(()), "{value}");
        }
    }

    #[test]
    fn short_terms_match_only_whole_words() {
        assert_eq!(find_health_term("hivemind"), None);
        assert_eq!(find_health_term("avcx"), None);
        assert_eq!(find_health_term("quimica"), None);
        assert_eq!(find_health_term("aids"), Some("aids"));
        assert_eq!(find_health_term("teste-hiv"), Some("hiv"));
    }

    #[test]
    fn the_health_refusal_names_the_term_not_the_value() {
        let refusal = check("Diabético tipo 2").unwrap_err();
        assert_eq!(refusal.code(), "health_data");
        let message = refusal.to_string();
        assert!(message.contains("`diabet`"), "{message}");
        assert!(!message.to_lowercase().contains("diabético"), "{message}");
    }

    #[test]
    fn every_listed_term_is_lowercase_ascii_without_accents() {
        let lists = [HEALTH_TERM_STEMS, HEALTH_TERM_WORDS, HEALTH_TERM_EXCEPTIONS];
        for term in lists.iter().flat_map(|list| list.iter()) {
            assert!(
                !term.is_empty() && term.bytes().all(|b| b.is_ascii_lowercase()),
                "{term}"
            );
        }
        for exception in HEALTH_TERM_EXCEPTIONS {
            assert!(
                HEALTH_TERM_STEMS
                    .iter()
                    .any(|stem| exception.starts_with(stem)),
                "{exception} excepts no stem"
            );
        }
    }

    #[test]
    fn refusals_have_stable_codes_and_readable_messages() {
        let all = [
            (
                FactRefusal::KeyNotAllowed { key: "x".into() },
                "key_not_allowed",
            ),
            (FactRefusal::EmptyValue, "empty_value"),
            (FactRefusal::TooLong { chars: 3, max: 2 }, "too_long"),
            (FactRefusal::ControlCharacters, "control_characters"),
            (FactRefusal::Cpf, "cpf"),
            (FactRefusal::Cnpj, "cnpj"),
            (FactRefusal::CardNumber, "card_number"),
            (FactRefusal::HealthData { term: "asma" }, "health_data"),
        ];
        for (refusal, code) in all {
            assert_eq!(refusal.code(), code);
            assert!(!refusal.to_string().is_empty());
        }
        assert_eq!(
            FactRefusal::Cpf.to_string(),
            "value holds a CPF (Brazilian taxpayer id); personal documents are not stored as facts"
        );
        assert_eq!(
            FactRefusal::CardNumber.to_string(),
            "value holds a payment card number (passes the Luhn check); \
             card numbers are not stored as facts"
        );
        assert_eq!(
            FactRefusal::TooLong {
                chars: 201,
                max: 200
            }
            .to_string(),
            "fact value has 201 characters, more than the maximum of 200"
        );
    }

    fn nine_digits() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(0..=9u8, 9).prop_filter("not one repeated digit", |d| !all_same(d))
    }

    fn cpf_text() -> impl Strategy<Value = (Vec<u8>, String)> {
        (nine_digits(), any::<bool>()).prop_map(|(nine, punctuated)| {
            let cpf = with_cpf_check_digits(&nine);
            let text = if punctuated {
                punctuated_cpf(&cpf)
            } else {
                to_text(&cpf)
            };
            (cpf, text)
        })
    }

    /// How another system may write one digit: its form (ASCII, full-width or
    /// mathematical bold, all read back as ASCII by NFKC) and an invisible format
    /// character after it, or none (zero-width space, word joiner, byte order
    /// mark, soft hyphen).
    fn digit_disguise() -> impl Strategy<Value = (u32, &'static str)> {
        (
            prop::sample::select(vec![0x30, 0xFF10, 0x1D7CE]),
            prop::sample::select(vec!["", "", "\u{200B}", "\u{2060}", "\u{FEFF}", "\u{00AD}"]),
        )
    }

    /// What another system may put between two groups of a number: the ASCII
    /// separators, dashes (hyphen, non-breaking hyphen, en and em dash, minus
    /// sign, full-width hyphen-minus), spaces (no-break, thin) and a dash between
    /// spaces.
    fn disguised_separator() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            ".",
            "-",
            "/",
            " ",
            "\u{2010}",
            "\u{2011}",
            "\u{2013}",
            "\u{2014}",
            "\u{2212}",
            "\u{FF0D}",
            "\u{00A0}",
            "\u{2009}",
            " - ",
            " \u{2013} ",
            "\u{00A0}-\u{00A0}",
        ])
    }

    /// `digits` written in groups of `sizes`, each digit and separator disguised.
    fn disguised(digits: Vec<u8>, sizes: &'static [usize]) -> impl Strategy<Value = String> {
        let count = digits.len();
        (
            prop::collection::vec(digit_disguise(), count),
            prop::collection::vec(disguised_separator(), sizes.len()),
        )
            .prop_map(move |(disguises, separators)| {
                let mut text = String::new();
                let mut at = 0;
                for (size, separator) in sizes.iter().zip(&separators) {
                    if at > 0 {
                        text.push_str(separator);
                    }
                    for (digit, (zero, invisible)) in
                        digits[at..at + size].iter().zip(&disguises[at..])
                    {
                        text.extend(char::from_u32(zero + u32::from(*digit)));
                        text.push_str(invisible);
                    }
                    at += size;
                }
                text
            })
    }

    fn disguised_cpf() -> impl Strategy<Value = String> {
        nine_digits().prop_flat_map(|nine| {
            let cpf = with_cpf_check_digits(&nine);
            disguised(cpf, &[3, 3, 3, 2])
        })
    }

    fn disguised_cnpj() -> impl Strategy<Value = String> {
        prop::collection::vec(0..=9u8, 12)
            .prop_filter("not one repeated digit", |d| !all_same(d))
            .prop_flat_map(|twelve| disguised(with_cnpj_check_digits(&twelve), &[2, 3, 3, 4, 2]))
    }

    fn disguised_card() -> impl Strategy<Value = String> {
        prop::collection::vec(0..=9u8, 15)
            .prop_flat_map(|body| disguised(with_luhn_digit(&body), &[4, 4, 4, 4]))
    }

    /// The document scan finds `expected` in `value`; the policy refuses it, as
    /// that document when nothing invisible is in it (an invisible character is
    /// refused first, as a control character).
    fn found_and_refused(value: &str, expected: FactRefusal) -> Result<(), TestCaseError> {
        let scanned = crate::text::for_scan(value);
        prop_assert_eq!(
            find_document_number(&scanned),
            Some(expected.clone()),
            "{:?}",
            value
        );
        let refusal = check(value);
        if value.chars().any(crate::text::breaks_structure) {
            prop_assert_eq!(refusal, Err(FactRefusal::ControlCharacters), "{:?}", value);
        } else {
            prop_assert_eq!(refusal, Err(expected), "{:?}", value);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn a_cpf_written_with_look_alike_digits_dashes_or_invisible_characters_is_refused(
            text in disguised_cpf(),
            before in "[a-zA-Zçãé :,]{0,12}",
        ) {
            found_and_refused(&format!("{before}{text}"), FactRefusal::Cpf)?;
        }

        #[test]
        fn a_cnpj_written_with_look_alike_digits_dashes_or_invisible_characters_is_refused(
            text in disguised_cnpj(),
            after in "[a-zA-Z :,]{0,12}",
        ) {
            found_and_refused(&format!("cnpj {text}{after}"), FactRefusal::Cnpj)?;
        }

        #[test]
        fn a_card_written_with_look_alike_digits_dashes_or_invisible_characters_is_refused(
            text in disguised_card(),
        ) {
            found_and_refused(&format!("card {text} ok"), FactRefusal::CardNumber)?;
        }

        #[test]
        fn a_value_with_a_line_or_paragraph_separator_or_a_format_character_is_refused(
            before in "[a-zA-Z :]{1,12}",
            breaker in prop::sample::select(vec![
                '\u{2028}', '\u{2029}', '\u{0085}', '\u{000B}', '\u{200B}', '\u{202E}',
                '\u{2066}', '\u{FEFF}', '\u{00AD}', '\u{061C}',
            ]),
            after in "[a-zA-Z :]{1,12}",
        ) {
            let value = format!("{before}{breaker}- vip: {after}");
            prop_assert_eq!(check(&value), Err(FactRefusal::ControlCharacters));
        }
    }

    #[test]
    fn a_name_written_with_joiners_is_one_line_and_passes() {
        assert_eq!(check("Ana 👩\u{200D}💼"), Ok(()));
        assert_eq!(check("می\u{200C}خواهم"), Ok(()));
    }

    proptest! {
        #[test]
        fn any_valid_cpf_in_surrounding_letters_is_refused(
            (cpf, text) in cpf_text(),
            before in "[a-zA-Zçãé :,]{0,12}",
            after in "[a-zA-Zçãé :,]{0,12}",
        ) {
            prop_assert!(is_valid_cpf(&cpf));
            let value = format!("{before}{text}{after}");
            prop_assert_eq!(check(&value), Err(FactRefusal::Cpf));
        }

        #[test]
        fn any_luhn_valid_sixteen_digit_card_in_surrounding_letters_is_refused(
            body in prop::collection::vec(0..=9u8, 15),
            layout in 0..3u8,
            before in "[a-zA-Z :]{0,12}",
            after in "[a-zA-Z :]{0,12}",
        ) {
            let card = with_luhn_digit(&body);
            prop_assert!(passes_luhn(&card));
            let plain = to_text(&card);
            let text = match layout {
                0 => plain,
                separator => {
                    let separator = if separator == 1 { " " } else { "-" };
                    [&plain[0..4], &plain[4..8], &plain[8..12], &plain[12..16]].join(separator)
                }
            };
            let value = format!("{before}{text}{after}");
            prop_assert_eq!(check(&value), Err(FactRefusal::CardNumber));
        }

        #[test]
        fn no_refusal_message_quotes_the_value(
            (cpf, text) in cpf_text(),
            before in "[a-zA-Z \n]{0,8}",
            after in "[a-zA-Z ]{0,8}",
            key_name in prop::sample::select(vec!["note", "language", "cpf"]),
            max in 4..40usize,
        ) {
            let value = format!("{before}{text}{after}");
            prop_assume!(value.chars().count() > 3);
            let mut policy = policy();
            policy.max_value_chars = max;
            let refusal = policy.check(&key(key_name), &value);
            prop_assert!(refusal.is_err());
            if let Err(refusal) = refusal {
                let message = refusal.to_string();
                let debug = format!("{refusal:?}");
                prop_assert!(!message.contains(&value), "{}", message);
                prop_assert!(!message.contains(&text), "{}", message);
                prop_assert!(!message.contains(&to_text(&cpf)), "{}", message);
                prop_assert!(!debug.contains(&to_text(&cpf)), "{}", debug);
            }
        }
    }
}
