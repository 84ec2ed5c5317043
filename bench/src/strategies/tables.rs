//! The markdown tables of a comparison: the main table (cost against full history
//! and the sliding window), where the cost goes with the run's own checks, and the
//! cost split.

use super::policy::Policy;
use super::report::Metrics;

/// `1234567` → `1,234,567`.
pub fn thousands(value: f64) -> String {
    let rounded = value.round() as i128;
    let digits = rounded.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if rounded < 0 {
        out.insert(0, '-');
    }
    out
}

fn ratio(value: f64, base: Option<f64>) -> String {
    match base {
        Some(base) if base > 0.0 => format!("{:.3}", value / base),
        _ => "–".into(),
    }
}

/// The main table: one row per policy per length.
pub fn table(groups: &[Vec<Metrics>]) -> String {
    let mut out = String::from(
        "| turns | timing | strategy | cost (base-input tokens) | vs full | vs sliding | cache read ratio \
         | max context | mean context | steps | rejected | identifier visible |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for group in groups {
        let of = |policy: Policy| group.iter().find(|m| m.policy == policy).map(|m| m.cost);
        let full = of(Policy::Full);
        let sliding = of(Policy::Sliding);
        for m in group {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {:.1}% | {} | {} | {} | {} | {} |\n",
                m.turns,
                m.profile.label(),
                m.policy.label(),
                thousands(m.cost),
                ratio(m.cost, full),
                ratio(m.cost, sliding),
                m.cache_read_ratio * 100.0,
                thousands(m.max_context as f64),
                thousands(m.mean_context),
                m.steps,
                m.rejected,
                if m.identifier_visible { "yes" } else { "no" },
            ));
        }
    }
    out
}

/// The detail table: where the cost goes, and the run's own checks.
pub fn details(groups: &[Vec<Metrics>]) -> String {
    let mut out = String::from(
        "| turns | timing | strategy | ask calls | input | cache write | cache read | output \
         | cost without answer output | summary calls | summary cost | failed turns \
         | tool mismatches | log check | time (s) |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n",
    );
    for m in groups.iter().flatten() {
        let log = match &m.log_check {
            Some(check) if check.agrees => format!("ok ({} calls)", check.logged_calls),
            Some(check) => format!(
                "MISMATCH ({} logged, {} tapped)",
                check.logged_calls, check.tapped_calls
            ),
            None => "skipped".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} |\n",
            m.turns,
            m.profile.label(),
            m.policy.label(),
            m.ask_tokens.calls,
            thousands(m.ask_tokens.input as f64),
            thousands(m.ask_tokens.cache_write as f64),
            thousands(m.ask_tokens.cache_read as f64),
            thousands(m.ask_tokens.output as f64),
            thousands(m.cost - m.cost_answer_output),
            m.compactor_tokens.calls,
            thousands(m.cost_compactor),
            m.failed_turns,
            m.tool_mismatches,
            log,
            m.elapsed_seconds,
        ));
    }
    out
}

/// The cost split: one row per policy per length and profile, each part in
/// base-input tokens and as a share of the total.
pub fn split_table(groups: &[Vec<Metrics>]) -> String {
    let mut out = String::from(
        "| turns | timing | strategy | cache reads (0.1×) | cache writes 5m (1.25×) \
         | cache writes 1h (2×) | uncached input (1×) | output (R×) | total |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for m in groups.iter().flatten() {
        let s = &m.cost_split;
        let total = s.total();
        let part = |value: f64| {
            if total > 0.0 {
                format!("{} ({:.0}%)", thousands(value), value / total * 100.0)
            } else {
                thousands(value)
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            m.turns,
            m.profile.label(),
            m.policy.label(),
            part(s.cache_read),
            part(s.cache_write_5m),
            part(s.cache_write_1h),
            part(s.input),
            part(s.output),
            thousands(total),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(thousands(-1234.0), "-1,234");
    }
}
