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
    /// `cache_creation_input_tokens` split by the lifetime of the entries written
    /// (`usage.cache_creation`), when the API reports it. Read, never written out:
    /// a stored message's usage stays what it was before the split existed (no
    /// extra bytes on every message item).
    #[serde(default, skip_serializing)]
    pub cache_creation: Option<CacheCreation>,
}

/// The API's `usage.cache_creation`: cache writes by entry lifetime. A one-hour
/// write costs 2× a base input token, a five-minute one 1.25×.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCreation {
    /// Tokens written to five-minute entries.
    #[serde(default)]
    pub ephemeral_5m_input_tokens: u64,
    /// Tokens written to one-hour entries.
    #[serde(default)]
    pub ephemeral_1h_input_tokens: u64,
}

impl CacheCreation {
    /// Field-wise sum, saturating.
    pub fn add(&self, other: &CacheCreation) -> CacheCreation {
        CacheCreation {
            ephemeral_5m_input_tokens: self
                .ephemeral_5m_input_tokens
                .saturating_add(other.ephemeral_5m_input_tokens),
            ephemeral_1h_input_tokens: self
                .ephemeral_1h_input_tokens
                .saturating_add(other.ephemeral_1h_input_tokens),
        }
    }
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

    /// The cache writes by lifetime: the reported split, or, when the API did not
    /// report one, every write as a five-minute one (the lifetime of a breakpoint
    /// without `ttl`).
    pub fn cache_creation_split(&self) -> CacheCreation {
        self.cache_creation.unwrap_or(CacheCreation {
            ephemeral_5m_input_tokens: self.cache_creation_input_tokens,
            ephemeral_1h_input_tokens: 0,
        })
    }

    /// Field-wise sum, saturating. The split is kept when either side reports
    /// one (the other side's writes counted as [`Usage::cache_creation_split`]).
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
            cache_creation: (self.cache_creation.is_some() || other.cache_creation.is_some()).then(
                || {
                    self.cache_creation_split()
                        .add(&other.cache_creation_split())
                },
            ),
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
            cache_creation: None,
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
    fn the_creation_split_is_read_summed_and_defaults_to_five_minutes() {
        let parsed: Usage = serde_json::from_str(
            r#"{"input_tokens": 1, "cache_creation_input_tokens": 30, "output_tokens": 1,
                "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20}}"#,
        )
        .unwrap();
        let split = CacheCreation {
            ephemeral_5m_input_tokens: 10,
            ephemeral_1h_input_tokens: 20,
        };
        assert_eq!(parsed.cache_creation, Some(split));
        let unsplit = usage(0, 5, 0, 0);
        assert_eq!(unsplit.cache_creation, None);
        assert_eq!(unsplit.cache_creation_split().ephemeral_5m_input_tokens, 5);
        let sum = parsed.add(&unsplit);
        assert_eq!(sum.cache_creation_input_tokens, 35);
        assert_eq!(
            sum.cache_creation,
            Some(CacheCreation {
                ephemeral_5m_input_tokens: 15,
                ephemeral_1h_input_tokens: 20,
            })
        );
        assert_eq!(unsplit.add(&unsplit).cache_creation, None);
        // The split is never written out: stored usage stays as it was.
        let written = serde_json::to_string(&sum).unwrap();
        assert!(!written.contains("\"cache_creation\""), "{written}");
        assert!(written.contains("\"cache_creation_input_tokens\":35"));
    }

    #[test]
    fn missing_usage_fields_read_as_zero() {
        let parsed: Usage =
            serde_json::from_str(r#"{"input_tokens": 7, "output_tokens": 1}"#).unwrap();
        assert_eq!(parsed, usage(7, 0, 0, 1));
    }
}
