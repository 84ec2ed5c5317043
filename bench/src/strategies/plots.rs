//! The plots of a comparison: context tokens per turn, and the cost of each turn
//! with the turns after a long gap shaded ([`super::svg`] draws them).

use super::comparison::Comparison;
use super::cost::Prices;
use super::machine::Machine;
use super::policy::Policy;
use super::report;
use super::run::RunSettings;
use super::svg;
use super::tables::thousands;

/// Colour of a policy in the plots.
pub fn color(policy: Policy) -> &'static str {
    match policy {
        Policy::Full => "#d62728",
        Policy::Sliding => "#1f77b4",
        Policy::Stepped => "#2ca02c",
        Policy::SteppedHour => "#9467bd",
        Policy::SteppedAuto => "#ff7f0e",
        Policy::SteppedFold => "#17becf",
        Policy::SteppedFiveFold => "#8c564b",
    }
}

/// The context plot of one comparison.
pub fn plot(
    comparison: &Comparison<'_>,
    settings: &RunSettings,
    context_limit: u64,
    machine: &Machine,
) -> String {
    let series: Vec<svg::Series<'_>> = comparison
        .runs
        .iter()
        .map(|run| svg::Series {
            label: run.policy.label(),
            color: color(run.policy),
            values: run.per_turn.iter().map(|t| t.context_tokens).collect(),
        })
        .collect();
    let peak = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .max()
        .unwrap_or(0);
    let mut rules = vec![svg::Rule {
        label: "compaction threshold",
        value: settings.threshold_tokens,
    }];
    if peak * 10 >= context_limit * 6 {
        rules.push(svg::Rule {
            label: "stand-in context limit",
            value: context_limit,
        });
    }
    svg::chart(
        &format!(
            "Context tokens per turn: {} turns, seed {}",
            comparison.conversation.turns.len(),
            comparison.conversation.seed
        ),
        &[
            &format!(
                "degrau benchmark: real ask and compactor on the local stack, offline stand-in's token count; threshold {}, keep {} messages",
                thousands(settings.threshold_tokens as f64),
                settings.keep_messages,
            ),
            &machine.label(),
        ],
        "context tokens (input + cache read + cache write)",
        &series,
        &rules,
        None,
    )
}

/// The cost of each turn of one comparison (every call made while the turn was
/// played, the compactor's included), the turns that came after a gap longer than
/// the cache's five minutes shaded.
pub fn cost_plot(
    comparison: &Comparison<'_>,
    settings: &RunSettings,
    prices: &Prices,
    machine: &Machine,
) -> String {
    let series: Vec<svg::Series<'_>> = comparison
        .runs
        .iter()
        .map(|run| svg::Series {
            label: run.policy.label(),
            color: color(run.policy),
            values: report::cost_per_turn(run, prices)
                .iter()
                .map(|c| c.round() as u64)
                .collect(),
        })
        .collect();
    let marks = svg::Marks {
        label: "after a gap of more than 5 minutes",
        turns: comparison
            .gaps()
            .iter()
            .enumerate()
            .filter(|(_, g)| g.seconds > 300)
            .map(|(i, _)| i + 1)
            .collect(),
    };
    svg::chart(
        &format!(
            "Cost per turn, {} timing: {} turns, seed {}",
            comparison.profile.label(),
            comparison.conversation.turns.len(),
            comparison.conversation.seed
        ),
        &[
            &format!(
                "base-input tokens of {} (reads 0.1×, writes 1.25× / 2× (1 h), output {}×, summaries at {:.2}×); threshold {}, keep {}",
                prices.answer_model,
                prices.output_ratio,
                prices.summary_model_factor,
                thousands(settings.threshold_tokens as f64),
                settings.keep_messages,
            ),
            &machine.label(),
        ],
        "cost of the turn (base-input tokens)",
        &series,
        &[],
        Some(&marks),
    )
}
