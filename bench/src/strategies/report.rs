//! From the calls of a run to the figures: cost in base-input-token units and its
//! split, cost per turn, cache read ratio, context sizes, steps, refusals,
//! whether the planted identifier was visible. The prices are [`super::cost`]'s,
//! the markdown tables [`super::tables`]'.

use serde::Serialize;

use super::cost::{CostSplit, Prices};
use super::policy::Policy;
use super::run::{LogCheck, StrategyRun};
use super::tap::Caller;
use super::timing::Profile;

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
    let CallSums {
        ask,
        compactor,
        cost_ask,
        cost_compactor,
        contexts,
        unpriced,
        cost_split,
    } = sum_calls(run, prices);
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

/// The answered calls of a run, summed: tokens and cost per caller, the ask
/// calls' contexts, the models without a price, the cost split.
struct CallSums {
    ask: Tokens,
    compactor: Tokens,
    cost_ask: f64,
    cost_compactor: f64,
    contexts: Vec<u64>,
    unpriced: Vec<String>,
    cost_split: CostSplit,
}

/// Sums the answered calls of `run` at `prices`.
fn sum_calls(run: &StrategyRun, prices: &Prices) -> CallSums {
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
    CallSums {
        ask,
        compactor,
        cost_ask,
        cost_compactor,
        contexts,
        unpriced,
        cost_split,
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

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::usage::{CacheCreation, Usage};

    #[test]
    fn a_runs_split_and_its_cost_per_turn_add_up_to_its_cost() {
        use super::super::run::TurnRecord;
        use super::super::tables::split_table;
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
}
