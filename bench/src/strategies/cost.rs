//! What a call costs, in base input tokens of the answer model: the prices
//! relative to one such token, and a cost split by where it goes (cache reads,
//! five-minute and one-hour cache writes, uncached input, output).

use degrau::usage::Usage;
use serde::Serialize;

/// Prices relative to one base input token of the answer model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prices {
    /// The answer model.
    pub answer_model: String,
    /// The summary and fact model.
    pub summary_model: String,
    /// Summary model's price per token relative to the answer model's.
    pub summary_model_factor: f64,
    /// A cache write (5-minute entry) relative to a base input token.
    pub cache_write: f64,
    /// A cache write of a 1-hour entry relative to a base input token.
    pub cache_write_1h: f64,
    /// A cache read relative to a base input token.
    pub cache_read: f64,
    /// An output token relative to an input token (R).
    pub output_ratio: f64,
}

impl Default for Prices {
    /// claude-sonnet-5 ($3 in / $15 out per million) answers, claude-haiku-4-5 ($1 /
    /// $5) summarises: R = 5 for both, haiku at 1/3 of sonnet; cache writes 1.25×
    /// (five-minute entries) or 2× (one-hour), reads 0.1× (NOTES-ANTHROPIC.md).
    fn default() -> Self {
        Prices {
            answer_model: "claude-sonnet-5".into(),
            summary_model: "claude-haiku-4-5".into(),
            summary_model_factor: 1.0 / 3.0,
            cache_write: 1.25,
            cache_write_1h: 2.0,
            cache_read: 0.1,
            output_ratio: 5.0,
        }
    }
}

impl Prices {
    /// Price factor of a model relative to the answer model (unknown ids count as
    /// the answer model; [`Metrics::unpriced_models`](super::report::Metrics::unpriced_models) lists them).
    pub fn model_factor(&self, model: &str) -> f64 {
        if model == self.summary_model {
            self.summary_model_factor
        } else {
            1.0
        }
    }

    /// Cost of one call's usage in base-input-token units of the answer model.
    pub fn cost(&self, model: &str, usage: &Usage) -> f64 {
        self.split(model, usage).total()
    }

    /// The same cost, by where it goes. Writes the API did not split count as
    /// five-minute ones ([`Usage::cache_creation_split`]).
    pub fn split(&self, model: &str, usage: &Usage) -> CostSplit {
        let factor = self.model_factor(model);
        let writes = usage.cache_creation_split();
        CostSplit {
            cache_read: factor * self.cache_read * usage.cache_read_input_tokens as f64,
            cache_write_5m: factor * self.cache_write * writes.ephemeral_5m_input_tokens as f64,
            cache_write_1h: factor * self.cache_write_1h * writes.ephemeral_1h_input_tokens as f64,
            input: factor * usage.input_tokens as f64,
            output: factor * self.output_ratio * usage.output_tokens as f64,
        }
    }
}

/// A cost in base-input-token units, by where it goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CostSplit {
    /// Cache reads (0.1×).
    pub cache_read: f64,
    /// Writes of five-minute entries (1.25×).
    pub cache_write_5m: f64,
    /// Writes of one-hour entries (2×).
    pub cache_write_1h: f64,
    /// Uncached input (1×).
    pub input: f64,
    /// Output (R×).
    pub output: f64,
}

impl CostSplit {
    /// The whole cost.
    pub fn total(&self) -> f64 {
        self.cache_read + self.cache_write_5m + self.cache_write_1h + self.input + self.output
    }

    /// Part by part sum.
    pub fn add(&self, other: &CostSplit) -> CostSplit {
        CostSplit {
            cache_read: self.cache_read + other.cache_read,
            cache_write_5m: self.cache_write_5m + other.cache_write_5m,
            cache_write_1h: self.cache_write_1h + other.cache_write_1h,
            input: self.input + other.input,
            output: self.output + other.output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::usage::CacheCreation;

    #[test]
    fn cost_weighs_writes_reads_outputs_and_the_summary_model() {
        let prices = Prices::default();
        let usage = Usage {
            input_tokens: 100,
            cache_creation_input_tokens: 1000,
            cache_read_input_tokens: 10_000,
            output_tokens: 20,
            cache_creation: None,
        };
        let sonnet = 100.0 + 1250.0 + 1000.0 + 100.0;
        assert!((prices.cost("claude-sonnet-5", &usage) - sonnet).abs() < 1e-9);
        assert!((prices.cost("claude-haiku-4-5", &usage) - sonnet / 3.0).abs() < 1e-9);
    }

    #[test]
    fn the_cost_split_adds_up_to_the_cost_and_prices_one_hour_writes_at_twice_the_input() {
        let prices = Prices::default();
        let usage = Usage {
            input_tokens: 100,
            cache_creation_input_tokens: 1000,
            cache_read_input_tokens: 10_000,
            output_tokens: 20,
            cache_creation: Some(CacheCreation {
                ephemeral_5m_input_tokens: 400,
                ephemeral_1h_input_tokens: 600,
            }),
        };
        let split = prices.split("claude-sonnet-5", &usage);
        assert!((split.cache_read - 1000.0).abs() < 1e-9);
        assert!((split.cache_write_5m - 500.0).abs() < 1e-9);
        assert!((split.cache_write_1h - 1200.0).abs() < 1e-9);
        assert!((split.input - 100.0).abs() < 1e-9);
        assert!((split.output - 100.0).abs() < 1e-9);
        assert!((split.total() - prices.cost("claude-sonnet-5", &usage)).abs() < 1e-9);
        let haiku = prices.split("claude-haiku-4-5", &usage);
        assert!((haiku.total() - split.total() / 3.0).abs() < 1e-9);
        assert!((split.add(&haiku).total() - split.total() * 4.0 / 3.0).abs() < 1e-9);
    }
}
