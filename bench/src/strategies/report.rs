//! From the calls of a run to the figures: cost in base-input-token units and its
//! split (cache reads, five-minute and one-hour cache writes, uncached input,
//! output), cost per turn, cache read ratio, context sizes, steps, refusals,
//! whether the planted identifier was visible; and the markdown tables.

use degrau::usage::Usage;
use serde::Serialize;

use super::policy::Policy;
use super::run::{LogCheck, StrategyRun};
use super::tap::Caller;
use super::timing::Profile;

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
    /// the answer model; [`Metrics::unpriced_models`] lists them).
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

/// Token sums of a group of calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Calls answered.
    pub calls: usize,
    /// `input_tokens`.
    pub input: u64,
    /// `cache_creation_input_tokens`.
    pub cache_write: u64,
    /// Of which written to five-minute entries.
    pub cache_write_5m: u64,
    /// Of which written to one-hour entries.
    pub cache_write_1h: u64,
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
    /// The timing profile.
    pub profile: Profile,
    /// Turns played.
    pub turns: usize,
    /// Total cost in base-input-token units (ask and compactor calls).
    pub cost: f64,
    /// The same, by where it goes (ask and compactor calls, each at its model's
    /// price).
    pub cost_split: CostSplit,
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
    /// What the pause fold jobs did: `applied`, or each reason to skip
    /// ([`super::run::fold_outcomes`]).
    pub fold_outcomes: std::collections::BTreeMap<String, u64>,
}

/// Computes the figures of a run.
pub fn metrics(run: &StrategyRun, prices: &Prices) -> Metrics {
    let mut ask = Tokens::default();
    let mut compactor = Tokens::default();
    let (mut cost_ask, mut cost_compactor) = (0.0, 0.0);
    let mut contexts = Vec::new();
    let mut unpriced = Vec::new();
    let mut cost_split = CostSplit::default();
    for call in &run.calls {
        let Some(usage) = call.usage else { continue };
        if call.model != prices.answer_model
            && call.model != prices.summary_model
            && !unpriced.contains(&call.model)
        {
            unpriced.push(call.model.clone());
        }
        let split = prices.split(&call.model, &usage);
        cost_split = cost_split.add(&split);
        let cost = split.total();
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
        let writes = usage.cache_creation_split();
        sums.cache_write_5m += writes.ephemeral_5m_input_tokens;
        sums.cache_write_1h += writes.ephemeral_1h_input_tokens;
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
        profile: run.profile,
        turns: run.turns,
        cost: cost_ask + cost_compactor,
        cost_split,
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
        fold_outcomes: run.fold_outcomes.clone(),
    }
}

/// The cost of each turn: every call made while it was played (the ask
/// function's and the compactor's steps after it), in base-input-token units.
pub fn cost_per_turn(run: &StrategyRun, prices: &Prices) -> Vec<f64> {
    let mut costs = vec![0.0; run.turns];
    for call in &run.calls {
        if let (Some(usage), Some(cost)) = (call.usage, costs.get_mut(call.turn)) {
            *cost += prices.cost(&call.model, &usage);
        }
    }
    costs
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

    #[test]
    fn a_runs_split_and_its_cost_per_turn_add_up_to_its_cost() {
        use super::super::run::TurnRecord;
        use super::super::tap::Call;
        let prices = Prices::default();
        let call = |turn: usize, caller: Caller, model: &str, usage: Option<Usage>| Call {
            turn,
            caller,
            model: model.into(),
            status: if usage.is_some() { 200 } else { 400 },
            usage,
            tools_called: Vec::new(),
            held_watched: false,
            request_bytes: 0,
        };
        let written = |five: u64, hour: u64, read: u64| Usage {
            input_tokens: 3,
            cache_creation_input_tokens: five + hour,
            cache_read_input_tokens: read,
            output_tokens: 7,
            cache_creation: Some(CacheCreation {
                ephemeral_5m_input_tokens: five,
                ephemeral_1h_input_tokens: hour,
            }),
        };
        let record = |gap_seconds| TurnRecord {
            gap_seconds,
            status: 200,
            context_tokens: 0,
            ask_calls: 1,
            tool_called: false,
            tool_expected: false,
        };
        let run = StrategyRun {
            policy: Policy::Stepped,
            profile: Profile::Messaging,
            turns: 2,
            calls: vec![
                call(0, Caller::Ask, "claude-sonnet-5", Some(written(1500, 0, 0))),
                call(1, Caller::Ask, "claude-sonnet-5", None),
                call(
                    1,
                    Caller::Ask,
                    "claude-sonnet-5",
                    Some(written(20, 1200, 300)),
                ),
                call(
                    1,
                    Caller::Compactor,
                    "claude-haiku-4-5",
                    Some(written(0, 0, 0)),
                ),
            ],
            per_turn: vec![record(0), record(3600)],
            steps: 1,
            summary_chars: 0,
            recall_turn: 1,
            compactor_failures: 0,
            elapsed_seconds: 0.0,
            log_check: None,
            fold_outcomes: Default::default(),
        };
        let m = metrics(&run, &prices);
        assert!((m.cost_split.total() - m.cost).abs() < 1e-6);
        let per_turn = cost_per_turn(&run, &prices);
        assert_eq!(per_turn.len(), 2);
        assert!((per_turn.iter().sum::<f64>() - m.cost).abs() < 1e-6);
        assert_eq!(m.ask_tokens.cache_write_1h, 1200);
        assert_eq!(m.ask_tokens.cache_write_5m, 1520);
        assert_eq!(m.rejected, 1);
        assert!(split_table(&[vec![m]]).contains("| 2 | messaging | degrau (5m) |"));
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
