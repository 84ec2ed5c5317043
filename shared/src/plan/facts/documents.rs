//! The document and card numbers a fact may not hold: the CPF, CNPJ (numeric and
//! alphanumeric) and Luhn check digits, and the scan that reads a value's digits in
//! groups to test them (see [`crate::plan::facts`] for the reading rules).

use super::FactRefusal;

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
pub(super) fn find_document_number(value: &str) -> Option<FactRefusal> {
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

pub(super) fn all_same(digits: &[u8]) -> bool {
    digits.windows(2).all(|pair| pair[0] == pair[1])
}
