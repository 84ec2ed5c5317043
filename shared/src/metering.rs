//! What a tenant consumed, per UTC day: rounds, model calls and their tokens by
//! model and kind, summary and facts calls, tool calls, WhatsApp messages; and what
//! it cost at the deployment's price table (`PRICES`).
//!
//! Counted where the work is done, with one write each: a round at its commit
//! (after it, never inside the commit's transaction, so rounds of one tenant never
//! conflict over the counter), a step or a facts job when its model call returns, a
//! WhatsApp message when the worker takes or sends it. A count that fails to land
//! is logged and counted (`UsageWriteFailures`), never fails the work it counts.
//!
//! (`docs/DESIGN.md`: "Operating the memory".)

use std::collections::BTreeMap;

use crate::usage::Usage;

/// Seconds in a day: a day's number is `unix_seconds.div_euclid(DAY)`.
pub const DAY: i64 = 86_400;

/// Longest range of days `GET /v1/usage` answers at once.
pub const MAX_USAGE_DAYS: i64 = 92;

/// Tokens one model read and wrote, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCounts {
    /// Uncached input.
    pub input: u64,
    /// Written to five-minute cache entries.
    pub cache_write_5m: u64,
    /// Written to one-hour cache entries.
    pub cache_write_1h: u64,
    /// Read from the cache.
    pub cache_read: u64,
    /// Generated.
    pub output: u64,
}

impl TokenCounts {
    /// One call's usage, its cache writes split by lifetime.
    pub fn of(usage: &Usage) -> TokenCounts {
        let split = usage.cache_creation_split();
        TokenCounts {
            input: usage.input_tokens,
            cache_write_5m: split.ephemeral_5m_input_tokens,
            cache_write_1h: split.ephemeral_1h_input_tokens,
            cache_read: usage.cache_read_input_tokens,
            output: usage.output_tokens,
        }
    }

    /// Field-wise sum, saturating.
    pub fn add(&self, other: &TokenCounts) -> TokenCounts {
        TokenCounts {
            input: self.input.saturating_add(other.input),
            cache_write_5m: self.cache_write_5m.saturating_add(other.cache_write_5m),
            cache_write_1h: self.cache_write_1h.saturating_add(other.cache_write_1h),
            cache_read: self.cache_read.saturating_add(other.cache_read),
            output: self.output.saturating_add(other.output),
        }
    }

    /// The counts as `(kind, count)`, in the order the API answers them: the
    /// store's attribute names derive from the kinds.
    pub fn kinds(&self) -> [(&'static str, u64); 5] {
        [
            ("input", self.input),
            ("cache_write_5m", self.cache_write_5m),
            ("cache_write_1h", self.cache_write_1h),
            ("cache_read", self.cache_read),
            ("output", self.output),
        ]
    }

    /// Sets the count of `kind` (one of [`TokenCounts::kinds`]); unknown kinds are
    /// ignored.
    pub fn set(&mut self, kind: &str, count: u64) {
        match kind {
            "input" => self.input = count,
            "cache_write_5m" => self.cache_write_5m = count,
            "cache_write_1h" => self.cache_write_1h = count,
            "cache_read" => self.cache_read = count,
            "output" => self.output = count,
            _ => {}
        }
    }
}

/// A tenant's consumption, counted per day (or one piece of work's share of it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageCounts {
    /// Rounds committed (by `ask`, or recorded by a client).
    pub rounds: u64,
    /// Answer calls to the model (a tool round makes several).
    pub model_calls: u64,
    /// Tool calls run.
    pub tool_calls: u64,
    /// Compaction steps' summary calls.
    pub summary_calls: u64,
    /// Fact extractions' calls.
    pub facts_calls: u64,
    /// WhatsApp messages taken in.
    pub whatsapp_in: u64,
    /// WhatsApp messages sent.
    pub whatsapp_out: u64,
    /// WhatsApp turns a limit of the number held back in the queue (each time).
    pub whatsapp_held: u64,
    /// Tokens by model id.
    pub tokens: BTreeMap<String, TokenCounts>,
}

impl UsageCounts {
    /// The plain counters as `(name, count)`: the store's attribute names.
    pub fn counters(&self) -> [(&'static str, u64); 8] {
        [
            ("rounds", self.rounds),
            ("model_calls", self.model_calls),
            ("tool_calls", self.tool_calls),
            ("summary_calls", self.summary_calls),
            ("facts_calls", self.facts_calls),
            ("whatsapp_in", self.whatsapp_in),
            ("whatsapp_out", self.whatsapp_out),
            ("whatsapp_held", self.whatsapp_held),
        ]
    }

    /// Sets the counter `name` (one of [`UsageCounts::counters`]); unknown names
    /// are ignored.
    pub fn set(&mut self, name: &str, count: u64) {
        match name {
            "rounds" => self.rounds = count,
            "model_calls" => self.model_calls = count,
            "tool_calls" => self.tool_calls = count,
            "summary_calls" => self.summary_calls = count,
            "facts_calls" => self.facts_calls = count,
            "whatsapp_in" => self.whatsapp_in = count,
            "whatsapp_out" => self.whatsapp_out = count,
            "whatsapp_held" => self.whatsapp_held = count,
            _ => {}
        }
    }

    /// Adds `usage` of one call of `model` to the tokens.
    pub fn add_tokens(&mut self, model: &str, usage: &Usage) {
        let entry = self.tokens.entry(model.to_owned()).or_default();
        *entry = entry.add(&TokenCounts::of(usage));
    }

    /// Whether nothing is counted (no write is needed).
    pub fn is_empty(&self) -> bool {
        self.counters().iter().all(|(_, count)| *count == 0)
            && self
                .tokens
                .values()
                .all(|tokens| tokens.kinds().iter().all(|(_, count)| *count == 0))
    }
}

/// One model's prices, in millionths of a USD per million tokens (so a table
/// compares exactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelPrice {
    /// Uncached input.
    pub input: u64,
    /// Output.
    pub output: u64,
}

/// The deployment's prices (`PRICES`: `model=input/output` per million tokens,
/// comma-separated). Cache writes cost 1.25× the input price for five-minute
/// entries and 2× for one-hour entries, reads 0.1×, as Anthropic prices them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceTable {
    models: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// Parses `model=input/output,...` (empty: no prices).
    pub fn parse(text: &str) -> Result<PriceTable, String> {
        let mut models = BTreeMap::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (model, prices) = entry
                .split_once('=')
                .ok_or_else(|| format!("`{entry}` is not model=input/output"))?;
            let (input, output) = prices
                .split_once('/')
                .ok_or_else(|| format!("`{entry}` is not model=input/output"))?;
            let price = |text: &str| {
                text.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|p| p.is_finite() && (0.0..=1_000_000.0).contains(p))
                    .map(|usd| (usd * 1_000_000.0).round() as u64)
                    .ok_or_else(|| {
                        format!("`{entry}`: a price is a number of USD from 0 to 1,000,000")
                    })
            };
            models.insert(
                model.trim().to_owned(),
                ModelPrice {
                    input: price(input)?,
                    output: price(output)?,
                },
            );
        }
        Ok(PriceTable { models })
    }

    /// Sets `model`'s prices, USD per million tokens (a tenant policy's own).
    pub fn set(&mut self, model: &str, input_usd: f64, output_usd: f64) {
        let micros = |usd: f64| (usd.clamp(0.0, 1_000_000.0) * 1_000_000.0).round() as u64;
        self.models.insert(
            model.to_owned(),
            ModelPrice {
                input: micros(input_usd),
                output: micros(output_usd),
            },
        );
    }

    /// Whether the table has a price for `model`.
    pub fn has(&self, model: &str) -> bool {
        self.models.contains_key(model)
    }

    /// What `tokens` of `model` cost in USD, or `None` when the table has no
    /// price for it.
    pub fn cost(&self, model: &str, tokens: &TokenCounts) -> Option<f64> {
        let price = self.models.get(model)?;
        let (input, output) = (price.input as f64 / 1e6, price.output as f64 / 1e6);
        let per = |count: u64, usd: f64| count as f64 * usd / 1e6;
        Some(
            per(tokens.input, input)
                + per(tokens.cache_write_5m, input * 1.25)
                + per(tokens.cache_write_1h, input * 2.0)
                + per(tokens.cache_read, input * 0.1)
                + per(tokens.output, output),
        )
    }
}

/// A day's number as `YYYY-MM-DD` (UTC).
pub fn format_day(day: i64) -> String {
    let (year, month, date) = civil_from_days(day);
    format!("{year:04}-{month:02}-{date:02}")
}

/// The day's number of `YYYY-MM-DD`, or `None` when it is not a valid date.
pub fn parse_day(text: &str) -> Option<i64> {
    let mut parts = text.split('-');
    let (year, month, date) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || year.len() != 4 || month.len() != 2 || date.len() != 2 {
        return None;
    }
    let (year, month, date): (i64, u32, u32) =
        (year.parse().ok()?, month.parse().ok()?, date.parse().ok()?);
    let day = days_from_civil(year, month, date);
    (civil_from_days(day) == (year, month, date)).then_some(day)
}

// Howard Hinnant's algorithms for the proleptic Gregorian calendar.
fn days_from_civil(year: i64, month: u32, date: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(date) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(day: i64) -> (i64, u32, u32) {
    let z = day + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let date = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, date)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_read_and_print_as_utc_dates() {
        assert_eq!(format_day(0), "1970-01-01");
        assert_eq!(parse_day("1970-01-01"), Some(0));
        // 2026-12-03T00:00:00Z is 1,796,256,000 s.
        assert_eq!(parse_day("2026-12-03"), Some(1_796_256_000 / DAY));
        assert_eq!(format_day(1_796_256_000 / DAY), "2026-12-03");
        assert_eq!(format_day(parse_day("2028-02-29").unwrap()), "2028-02-29");
        for bad in [
            "2026-02-29",
            "2026-13-01",
            "2026-1-01",
            "26-01-01",
            "2026-01-01x",
            "",
        ] {
            assert_eq!(parse_day(bad), None, "{bad}");
        }
    }

    #[test]
    fn prices_parse_and_cost_each_kind_at_its_multiple() {
        let table = PriceTable::parse("claude-x=3/15, other=1/5").unwrap();
        let tokens = TokenCounts {
            input: 1_000_000,
            cache_write_5m: 1_000_000,
            cache_write_1h: 1_000_000,
            cache_read: 1_000_000,
            output: 1_000_000,
        };
        let cost = table.cost("claude-x", &tokens).unwrap();
        assert!(
            (cost - (3.0 + 3.75 + 6.0 + 0.3 + 15.0)).abs() < 1e-9,
            "{cost}"
        );
        assert_eq!(table.cost("unknown", &tokens), None);
        assert_eq!(PriceTable::parse("").unwrap(), PriceTable::default());
        for bad in ["claude-x", "claude-x=3", "claude-x=a/1", "claude-x=-1/2"] {
            assert!(PriceTable::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts_add_by_model_and_an_empty_count_needs_no_write() {
        let mut counts = UsageCounts::default();
        assert!(counts.is_empty());
        let usage = Usage {
            input_tokens: 10,
            cache_creation_input_tokens: 20,
            cache_read_input_tokens: 30,
            output_tokens: 5,
            cache_creation: None,
        };
        counts.add_tokens("m", &usage);
        counts.add_tokens("m", &usage);
        assert!(!counts.is_empty());
        let tokens = counts.tokens["m"];
        assert_eq!(
            (
                tokens.input,
                tokens.cache_write_5m,
                tokens.cache_read,
                tokens.output
            ),
            (20, 40, 60, 10)
        );
    }
}
