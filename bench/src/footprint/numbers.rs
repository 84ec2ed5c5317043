//! How the report's figures add up and print: Σ, `1,234`, `2.5` units, `$0.63`,
//! `8.8 MiB`, and a markdown table row.

use std::fmt::Write as _;

/// Σ of `values`, 0.0 (not -0.0) when empty.
pub(super) fn sum(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |a, b| a + b)
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Capacity units: whole when whole (`2`), else to one decimal (`2.5`).
pub(super) fn units(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// `$0.63`; from $100 on, whole dollars with separators (`$1,234`).
pub(super) fn dollars(x: f64) -> String {
    if x >= 100.0 {
        format!("${}", thousands(x.round() as u64))
    } else {
        format!("${x:.2}")
    }
}

/// KiB as MiB to one decimal (`8.8 MiB`).
pub(super) fn kib(k: f64) -> String {
    format!("{:.1} MiB", k / 1024.0)
}

/// A markdown table row: `label`, then `cells`.
pub(super) fn row(out: &mut String, label: &str, cells: &[String]) {
    let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234), "1,234");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(units(2.0), "2");
        assert_eq!(units(2.5), "2.5");
        assert_eq!(dollars(0.626), "$0.63");
        assert_eq!(dollars(1234.4), "$1,234");
    }
}
