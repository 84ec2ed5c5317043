//! Usage accounting: the context size the model measured (never a character
//! estimate), the cache read ratio, and sums over the calls of one round.
//!
//! (`docs/DESIGN.md`: invariant 11.)

use serde::{Deserialize, Serialize};

/// The `usage` object of a Messages API response.
///
/// `input_tokens` excludes cached tokens: it counts only what follows the last
/// cache breakpoint, so the context size is the sum of the three input fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens (after the last breakpoint).
    #[serde(default)]
    pub input_tokens: u64,
    /// Input tokens written to the cache by this call.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the cache by this call.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Generated tokens.
    #[serde(default)]
    pub output_tokens: u64,
}

impl Usage {
    /// Context size of the request: every input token, cached or not.
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens
    }

    /// Share of the context read from the cache, in `0.0..=1.0` (0 for an empty context).
    pub fn cache_read_ratio(&self) -> f64 {
        match self.context_tokens() {
            0 => 0.0,
            total => self.cache_read_input_tokens as f64 / total as f64,
        }
    }

    /// Field-wise sum, saturating.
    pub fn add(&self, other: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            cache_creation_input_tokens: self
                .cache_creation_input_tokens
                .saturating_add(other.cache_creation_input_tokens),
            cache_read_input_tokens: self
                .cache_read_input_tokens
                .saturating_add(other.cache_read_input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
        }
    }
}

/// Usage over the model calls of one round (the tool loop makes several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundUsage {
    /// Number of model calls.
    pub calls: u32,
    /// Sum over every call: what the round cost.
    pub total: Usage,
    /// The last call's usage: its context size is the conversation's size now.
    pub last: Usage,
}

impl RoundUsage {
    /// Adds one call's usage.
    pub fn record(&mut self, call: Usage) {
        self.calls += 1;
        self.total = self.total.add(&call);
        self.last = call;
    }

    /// The context the next request starts from: the last call's measured context.
    /// Summing across calls would count the shared prefix several times.
    pub fn context_tokens(&self) -> u64 {
        self.last.context_tokens()
    }

    /// Cache read ratio over the whole round.
    pub fn cache_read_ratio(&self) -> f64 {
        self.total.cache_read_ratio()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, write: u64, read: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            cache_creation_input_tokens: write,
            cache_read_input_tokens: read,
            output_tokens: output,
        }
    }

    #[test]
    fn context_size_adds_the_three_input_fields_and_not_the_output() {
        assert_eq!(usage(10, 200, 3000, 99).context_tokens(), 3210);
    }

    #[test]
    fn cache_read_ratio_is_reads_over_context() {
        assert_eq!(usage(0, 0, 0, 5).cache_read_ratio(), 0.0);
        assert_eq!(usage(50, 50, 900, 5).cache_read_ratio(), 0.9);
        assert_eq!(usage(100, 0, 0, 5).cache_read_ratio(), 0.0);
    }

    #[test]
    fn a_round_sums_its_calls_and_measures_context_from_the_last() {
        let mut round = RoundUsage::default();
        round.record(usage(20, 1000, 0, 40));
        round.record(usage(30, 60, 1000, 10));
        assert_eq!(round.calls, 2);
        assert_eq!(round.total, usage(50, 1060, 1000, 50));
        assert_eq!(round.context_tokens(), 1090);
        assert_eq!(round.cache_read_ratio(), 1000.0 / 2110.0);
    }

    #[test]
    fn missing_usage_fields_read_as_zero() {
        let parsed: Usage =
            serde_json::from_str(r#"{"input_tokens": 7, "output_tokens": 1}"#).unwrap();
        assert_eq!(parsed, usage(7, 0, 0, 1));
    }
}
