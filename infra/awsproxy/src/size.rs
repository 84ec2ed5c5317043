//! DynamoDB's item-size rules, applied to items in DynamoDB JSON
//! (`{"name": {"S": "..."}, ...}`), and the capacity units they cost.
//!
//! The rules, from the DynamoDB developer guide ("Item sizes and formats"):
//!
//! | value | size in bytes |
//! |---|---|
//! | item | Σ over attributes of (UTF-8 length of the name + size of the value) |
//! | `S` | UTF-8 length |
//! | `N` | ⌈significant digits / 2⌉ + 1, leading and trailing zeroes trimmed; +1 when negative (the guide says "approximately"; the sign byte is an approximation too) |
//! | `B` | raw length (the base64 text decoded) |
//! | `BOOL`, `NULL` | 1 |
//! | `SS`, `NS`, `BS` | Σ of the elements' sizes (as above) |
//! | `L` | 3 + Σ (1 + element size) |
//! | `M` | 3 + Σ (1 + UTF-8 length of the key + value size) |
//!
//! Capacity units ([`read_units`], [`write_units`]): a read unit covers 4 KB
//! read strongly consistently (an eventually consistent read costs half), a
//! write unit 1 KB written; sizes round up, and every read or write costs at
//! least one unit (half for an eventually consistent read). Transactions cost
//! double: the callers multiply.

use serde_json::{Map, Value};

/// Bytes a read unit covers.
pub const READ_UNIT_BYTES: u64 = 4 * 1024;
/// Bytes a write unit covers.
pub const WRITE_UNIT_BYTES: u64 = 1024;
/// DynamoDB's largest item (names plus values).
pub const MAX_ITEM_BYTES: u64 = 400 * 1024;

/// The size of an item (a map of attribute names to values in DynamoDB JSON).
/// Anything not shaped like an item counts as 0.
pub fn item_size(item: &Value) -> u64 {
    item.as_object().map_or(0, attributes_size)
}

/// The size of attributes: Σ (name length + value size).
pub fn attributes_size(attributes: &Map<String, Value>) -> u64 {
    attributes
        .iter()
        .map(|(name, value)| len(name) + value_size(value))
        .sum()
}

/// The size of one attribute value (`{"S": "..."}`, `{"L": [...]}`, ...), without
/// its name. Unknown shapes count as 0.
pub fn value_size(value: &Value) -> u64 {
    let Some((kind, inner)) = value.as_object().and_then(|m| m.iter().next()) else {
        return 0;
    };
    match (kind.as_str(), inner) {
        ("S", Value::String(s)) => len(s),
        ("N", Value::String(n)) => number_size(n),
        ("B", Value::String(b)) => base64_len(b),
        ("BOOL" | "NULL", _) => 1,
        ("SS", Value::Array(items)) => items.iter().filter_map(Value::as_str).map(len).sum(),
        ("NS", Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(number_size)
            .sum(),
        ("BS", Value::Array(items)) => items.iter().filter_map(Value::as_str).map(base64_len).sum(),
        ("L", Value::Array(items)) => 3 + items.iter().map(|v| 1 + value_size(v)).sum::<u64>(),
        ("M", Value::Object(map)) => {
            3 + map
                .iter()
                .map(|(k, v)| 1 + len(k) + value_size(v))
                .sum::<u64>()
        }
        _ => 0,
    }
}

/// The size of a number given as DynamoDB's decimal text: one byte per two
/// significant digits, plus one; plus one more for a negative number.
pub fn number_size(text: &str) -> u64 {
    let text = text.trim();
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    // The exponent does not hold significant digits.
    let mantissa = unsigned.split(['e', 'E']).next().unwrap_or_default();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len() as u64;
    significant.div_ceil(2) + 1 + u64::from(negative)
}

/// Raw length of base64 text, without decoding it.
pub fn base64_len(text: &str) -> u64 {
    let text = text.trim();
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count() as u64;
    (len(text) / 4 * 3
        + match len(text) % 4 {
            2 => 1,
            3 => 2,
            _ => 0,
        })
    .saturating_sub(padding)
}

/// Read units for `bytes` read: ⌈bytes / 4 KB⌉, at least 1; half when eventually
/// consistent.
pub fn read_units(bytes: u64, consistent: bool) -> f64 {
    let units = bytes.div_ceil(READ_UNIT_BYTES).max(1) as f64;
    if consistent { units } else { units / 2.0 }
}

/// Write units for one item of `bytes`: ⌈bytes / 1 KB⌉, at least 1.
pub fn write_units(bytes: u64) -> f64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as f64
}

fn len(text: &str) -> u64 {
    text.len() as u64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn strings_count_utf8_bytes_with_the_attribute_name() {
        assert_eq!(item_size(&json!({"pk": {"S": "abc"}})), 5);
        assert_eq!(item_size(&json!({"ação": {"S": "é"}})), 6 + 2);
    }

    #[test]
    fn numbers_count_significant_digits() {
        assert_eq!(number_size("0"), 1);
        assert_eq!(number_size("7"), 2);
        assert_eq!(number_size("12"), 2);
        assert_eq!(number_size("123"), 3);
        assert_eq!(number_size("1000"), 2);
        assert_eq!(number_size("0.0012"), 2);
        assert_eq!(number_size("-12"), 3);
        assert_eq!(number_size("1.5E+10"), 2);
        assert_eq!(number_size("1700000000"), 2);
        assert_eq!(number_size("1734567890"), 6);
    }

    #[test]
    fn binary_counts_raw_bytes() {
        assert_eq!(base64_len("aGVsbG8="), 5);
        assert_eq!(base64_len("aGVsbG8h"), 6);
        assert_eq!(base64_len("aA=="), 1);
        assert_eq!(base64_len(""), 0);
        assert_eq!(value_size(&json!({"B": "aGVsbG8="})), 5);
    }

    #[test]
    fn lists_and_maps_add_three_bytes_and_one_per_element() {
        assert_eq!(value_size(&json!({"L": []})), 3);
        assert_eq!(value_size(&json!({"M": {}})), 3);
        assert_eq!(
            value_size(&json!({"L": [{"S": "ab"}, {"BOOL": true}]})),
            3 + 3 + 2
        );
        assert_eq!(
            value_size(&json!({"M": {"k": {"S": "ab"}, "n": {"NULL": true}}})),
            3 + (1 + 1 + 2) + (1 + 1 + 1)
        );
        assert_eq!(value_size(&json!({"SS": ["a", "bc"]})), 3);
        assert_eq!(value_size(&json!({"NS": ["1", "22"]})), 4);
    }

    #[test]
    fn units_round_up_with_a_minimum() {
        assert!((read_units(0, true) - 1.0).abs() < f64::EPSILON);
        assert!((read_units(4096, true) - 1.0).abs() < f64::EPSILON);
        assert!((read_units(4097, true) - 2.0).abs() < f64::EPSILON);
        assert!((read_units(4097, false) - 1.0).abs() < f64::EPSILON);
        assert!((read_units(10, false) - 0.5).abs() < f64::EPSILON);
        assert!((write_units(1) - 1.0).abs() < f64::EPSILON);
        assert!((write_units(1025) - 2.0).abs() < f64::EPSILON);
    }
}
