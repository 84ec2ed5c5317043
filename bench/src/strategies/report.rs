//! From the calls of a run to the figures: cost in base-input-token units, cache
//! read ratio, context sizes, steps, refusals, whether the planted identifier was
//! visible; and the markdown table.

use serde::Serialize;

use super::run::{LogCheck, Policy, StrategyRun};
use super::tap::Caller;

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
    /// A cache read relative to a base input token.
    pub cache_read: f64,
    /// An output token relative to an input token (R).
    pub output_ratio: f64,
}

impl Default for Prices {
    /// claude-sonnet-5 ($3 in / $15 out per million) answers, claude-haiku-4-5 ($1 /
    /// $5) summarises: R = 5 for both, haiku at 1/3 of sonnet; cache writes 1.25×,
    /// reads 0.1× (NOTES-ANTHROPIC.md).
    fn default() -> Self {
        Prices {
            answer_model: "claude-sonnet-5".into(),
            summary_model: "claude-haiku-4-5".into(),
            summary_model_factor: 1.0 / 3.0,
            cache_write: 1.25,
            cache_read: 0.1,
            output_ratio: 5.0,
        }
    }
}

impl Prices {
    /// Price factor of a model relative to the answer model (unknown ids count as
    /// the answer model; [`Metrics::unpriced_models`] lists them).
    pub fn model_factor(&self, model: &str) -> f64 {
        if model == self.summary_model {
            self.summary_model_factor
        } else {
            1.0
        }
    }

    /// Cost of one call's usage in base-input-token units of the answer model.
    pub fn cost(&self, model: &str, usage: &degrau::usage::Usage) -> f64 {
        self.model_factor(model)
            * (usage.input_tokens as f64
                + self.cache_write * usage.cache_creation_input_tokens as f64
                + self.cache_read * usage.cache_read_input_tokens as f64
                + self.output_ratio * usage.output_tokens as f64)
    }
}

/// Token sums of a group of calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Calls answered.
    pub calls: usize,
    /// `input_tokens`.
    pub input: u64,
    /// `cache_creation_input_tokens`.
    pub cache_write: u64,
    /// `cache_read_input_tokens`.
    pub cache_read: u64,
    /// `output_tokens`.
    pub output: u64,
}

/// The figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// The policy.
    pub policy: Policy,
    /// Turns played.
    pub turns: usize,
    /// Total cost in base-input-token units (ask and compactor calls).
    pub cost: f64,
    /// Of which the ask function's calls.
    pub cost_ask: f64,
    /// Of which the compactor's calls (summaries and facts, at the summary model's price).
    pub cost_compactor: f64,
    /// Of which the answers' output tokens (R × output of the ask calls).
    pub cost_answer_output: f64,
    /// Token sums of the ask calls.
    pub ask_tokens: Tokens,
    /// Token sums of the compactor calls.
    pub compactor_tokens: Tokens,
    /// Cache reads over all input tokens of the ask calls.
    pub cache_read_ratio: f64,
    /// Largest context (input + cache read + cache write) of an accepted ask call.
    pub max_context: u64,
    /// Mean context of the accepted ask calls.
    pub mean_context: f64,
    /// Compaction steps applied (`steps` of the memory view).
    pub steps: u64,
    /// Calls the stand-in refused (status ≠ 200).
    pub rejected: usize,
    /// Turns the ask function did not answer with 200.
    pub failed_turns: usize,
    /// Whether the planted identifier was in the request answering the turn that
    /// asked for it (messages or system).
    pub identifier_visible: bool,
    /// Turns where the model's tool use differed from the script's expectation.
    pub tool_mismatches: usize,
    /// Compactor invocations reported failed by the bridge.
    pub compactor_failures: usize,
    /// Models met that have no price of their own.
    pub unpriced_models: Vec<String>,
    /// Wall-clock seconds.
    pub elapsed_seconds: f64,
    /// The check against the stand-in's log.
    pub log_check: Option<LogCheck>,
}

/// Computes the figures of a run.
pub fn metrics(run: &StrategyRun, prices: &Prices) -> Metrics {
    let mut ask = Tokens::default();
    let mut compactor = Tokens::default();
    let (mut cost_ask, mut cost_compactor) = (0.0, 0.0);
    let mut contexts = Vec::new();
    let mut unpriced = Vec::new();
    for call in &run.calls {
        let Some(usage) = call.usage else { continue };
        if call.model != prices.answer_model
            && call.model != prices.summary_model
            && !unpriced.contains(&call.model)
        {
            unpriced.push(call.model.clone());
        }
        let cost = prices.cost(&call.model, &usage);
        let sums = match call.caller {
            Caller::Ask => {
                cost_ask += cost;
                contexts.push(usage.context_tokens());
                &mut ask
            }
            Caller::Compactor => {
                cost_compactor += cost;
                &mut compactor
            }
        };
        sums.calls += 1;
        sums.input += usage.input_tokens;
        sums.cache_write += usage.cache_creation_input_tokens;
        sums.cache_read += usage.cache_read_input_tokens;
        sums.output += usage.output_tokens;
    }
    let ask_input = ask.input + ask.cache_write + ask.cache_read;
    let identifier_visible = run
        .calls
        .iter()
        .filter(|c| c.turn == run.recall_turn && c.caller == Caller::Ask && c.status == 200)
        .any(|c| c.held_watched);
    Metrics {
        policy: run.policy,
        turns: run.turns,
        cost: cost_ask + cost_compactor,
        cost_ask,
        cost_compactor,
        cost_answer_output: prices.output_ratio * ask.output as f64,
        ask_tokens: ask,
        compactor_tokens: compactor,
        cache_read_ratio: if ask_input == 0 {
            0.0
        } else {
            ask.cache_read as f64 / ask_input as f64
        },
        max_context: contexts.iter().copied().max().unwrap_or(0),
        mean_context: if contexts.is_empty() {
            0.0
        } else {
            contexts.iter().sum::<u64>() as f64 / contexts.len() as f64
        },
        steps: run.steps,
        rejected: run.calls.iter().filter(|c| c.status != 200).count(),
        failed_turns: run.per_turn.iter().filter(|t| t.status != 200).count(),
        identifier_visible,
        tool_mismatches: run
            .per_turn
            .iter()
            .filter(|t| t.status == 200 && t.tool_called != t.tool_expected)
            .count(),
        compactor_failures: run.compactor_failures,
        unpriced_models: unpriced,
        elapsed_seconds: run.elapsed_seconds,
        log_check: run.log_check.clone(),
    }
}

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
        "| turns | strategy | cost (base-input tokens) | vs full | vs sliding | cache read ratio \
         | max context | mean context | steps | rejected | identifier visible |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for group in groups {
        let of = |policy: Policy| group.iter().find(|m| m.policy == policy).map(|m| m.cost);
        let full = of(Policy::Full);
        let sliding = of(Policy::Sliding);
        for m in group {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.1}% | {} | {} | {} | {} | {} |\n",
                m.turns,
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
        "| turns | strategy | ask calls | input | cache write | cache read | output \
         | cost without answer output | summary calls | summary cost | failed turns \
         | tool mismatches | log check | time (s) |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n",
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
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} |\n",
            m.turns,
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

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::usage::Usage;

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
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(thousands(-1234.0), "-1,234");
    }
}
