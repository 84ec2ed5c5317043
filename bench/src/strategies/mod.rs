//! Context strategies side by side: full history, a sliding window and degrau's
//! stepped compaction, on the same scripted conversation, through the real `ask`
//! and `compactor` functions on the local stack, with only `CONTEXT_POLICY`
//! switched.
//!
//! - [`script`] generates the conversations (seeded, Portuguese and English);
//! - [`run`] plays one through a fresh stack with one [`policy`], [`clock`]
//!   moving time between the turns;
//! - [`tap`] records every model call on its way to the stand-in;
//! - [`timing`] draws the time before each turn (the timing profiles);
//! - [`report`] turns the calls into figures at [`cost`]'s prices, [`tables`]
//!   into markdown tables;
//! - [`comparison`] holds one conversation's runs under one profile, [`note`]
//!   writes their markdown note, [`plots`] their plots, which [`svg`] draws;
//! - [`machine`] says where the figures came from.
//!
//! [`compare`] runs the policies on one conversation under one timing
//! profile, [`write_results`] writes `results/strategies.{md,json}`,
//! `results/context-per-turn-{N}.svg` and, for the messaging profile,
//! `results/cost-per-turn-{N}-messaging.svg`. The `strategies` binary is the
//! command line.

pub mod clock;
pub mod comparison;
pub mod cost;
pub mod machine;
pub mod note;
pub mod plots;
pub mod policy;
pub mod report;
pub mod run;
pub mod script;
pub mod svg;
pub mod tables;
pub mod tap;
pub mod timing;

use std::path::Path;

use serde_json::json;

use cost::Prices;
use policy::Policy;
use run::{RunSettings, StrategyRun};
use script::Conversation;

pub use comparison::{Comparison, context_profile};
pub use machine::{Machine, civil_date};
pub use note::{goals, markdown};
pub use plots::{color, cost_plot, plot};

/// Runs `policies` on one conversation, one fresh stack each: one after the other,
/// or all at once when `parallel` (each has its own processes, moto included).
pub async fn compare(
    conversation: &Conversation,
    policies: &[Policy],
    settings: &RunSettings,
    parallel: bool,
) -> Vec<StrategyRun> {
    if parallel {
        let runs = policies
            .iter()
            .map(|&policy| run::run_strategy(conversation, policy, settings));
        join_all(runs).await
    } else {
        let mut out = Vec::new();
        for &policy in policies {
            out.push(run::run_strategy(conversation, policy, settings).await);
        }
        out
    }
}

/// Awaits futures concurrently on the current task; the outputs keep their order.
pub async fn join_all<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => *output = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// The JSON document: settings, prices, machine, and per comparison the profile,
/// its gaps, the metrics and each run's context and cost per turn.
pub fn json_document(
    comparisons: &[Comparison<'_>],
    settings: &RunSettings,
    prices: &Prices,
    machine: &Machine,
) -> serde_json::Value {
    json!({
        "machine": machine,
        "settings": settings,
        "prices": prices,
        "conversations": comparisons.iter().map(|c| {
            let gaps = c.gaps();
            json!({
                "turns": c.conversation.turns.len(),
                "seed": c.conversation.seed,
                "profile": c.profile,
                "profile_description": c.profile.describe(),
                "gaps": timing::GapSummary::of(&gaps),
                "gap_seconds": gaps.iter().map(|g| g.seconds).collect::<Vec<_>>(),
                "identifier": c.conversation.identifier,
                "plant_turn": c.conversation.plant_turn,
                "recall_turn": c.conversation.recall_turn,
                "metrics": c.metrics,
                "context_per_turn": c.runs.iter().map(|r| json!({
                    "policy": r.policy,
                    "values": r.per_turn.iter().map(|t| t.context_tokens).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "cost_per_turn": c.runs.iter().map(|r| json!({
                    "policy": r.policy,
                    "values": report::cost_per_turn(r, prices)
                        .iter()
                        .map(|v| (v * 10.0).round() / 10.0)
                        .collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        }).collect::<Vec<_>>(),
    })
}

/// Writes `strategies.md`, `strategies.json`, one `context-per-turn-{N}.svg` per
/// conversation (of the first profile) and one `cost-per-turn-{N}-messaging.svg`
/// per messaging comparison into `dir`.
pub fn write_results(
    dir: &Path,
    comparisons: &[Comparison<'_>],
    settings: &RunSettings,
    prices: &Prices,
    machine: &Machine,
    command: &str,
    context_limit: u64,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("strategies.md"),
        markdown(comparisons, settings, prices, machine, command),
    )?;
    let document = json_document(comparisons, settings, prices, machine);
    std::fs::write(
        dir.join("strategies.json"),
        serde_json::to_string_pretty(&document).map_err(std::io::Error::other)? + "\n",
    )?;
    let first = context_profile(comparisons);
    for c in comparisons {
        let n = c.conversation.turns.len();
        if c.profile == first {
            std::fs::write(
                dir.join(format!("context-per-turn-{n}.svg")),
                plot(c, settings, context_limit, machine),
            )?;
        }
        if !c.profile.shares().is_empty() {
            std::fs::write(
                dir.join(format!("cost-per-turn-{n}-{}.svg", c.profile.slug())),
                cost_plot(c, settings, prices, machine),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn join_all_keeps_the_order() {
        let futures = (0..3u64).map(|i| async move {
            tokio::time::sleep(std::time::Duration::from_millis(30 - 10 * i)).await;
            i
        });
        assert_eq!(join_all(futures).await, vec![0, 1, 2]);
    }
}
