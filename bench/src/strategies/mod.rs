//! Context strategies side by side: full history, a sliding window and degrau's
//! stepped compaction, on the same scripted conversation, through the real `ask`
//! and `compactor` functions on the local stack, with only `CONTEXT_POLICY`
//! switched.
//!
//! - [`script`] generates the conversations (seeded, Portuguese and English);
//! - [`run`] plays one through a fresh stack with one policy;
//! - [`tap`] records every model call on its way to the stand-in;
//! - [`timing`] draws the time before each turn (the timing profiles);
//! - [`report`] turns the calls into figures and tables, the cost split included;
//! - [`svg`] draws context tokens per turn, and the cost of each turn.
//!
//! [`compare`] runs the three policies on one conversation under one timing
//! profile, [`write_results`] writes `results/strategies.{md,json}`,
//! `results/context-per-turn-{N}.svg` and, for the messaging profile,
//! `results/cost-per-turn-{N}-messaging.svg`. The `strategies` binary is the
//! command line.

pub mod report;
pub mod run;
pub mod script;
pub mod svg;
pub mod tap;
pub mod timing;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::json;

use report::{Metrics, Prices};
use run::{Policy, RunSettings, StrategyRun};
use script::Conversation;
use timing::Profile;

/// Where the figures came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// `uname -m`.
    pub arch: String,
    /// `nproc`.
    pub cpus: usize,
    /// `model name` of `/proc/cpuinfo`, when there is one.
    pub cpu_model: Option<String>,
    /// The day of the run, UTC, `YYYY-MM-DD`.
    pub date: String,
}

impl Machine {
    /// Reads this machine.
    pub fn detect() -> Machine {
        let arch = std::process::Command::new("uname")
            .arg("-m")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            });
        let days = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86_400);
        Machine {
            arch,
            cpus,
            cpu_model,
            date: civil_date(days),
        }
    }

    /// `x86_64, 2 CPUs (model), 2026-11-30`.
    pub fn label(&self) -> String {
        match &self.cpu_model {
            Some(model) => format!("{}, {} CPUs ({model}), {}", self.arch, self.cpus, self.date),
            None => format!("{}, {} CPUs, {}", self.arch, self.cpus, self.date),
        }
    }
}

/// `YYYY-MM-DD` of a count of days since 1970-01-01 (proleptic Gregorian).
pub fn civil_date(days_since_epoch: u64) -> String {
    // Howard Hinnant's days-to-civil algorithm.
    let z = days_since_epoch as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

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

/// One conversation's comparison under one timing profile, as written to the
/// results.
pub struct Comparison<'a> {
    /// The conversation.
    pub conversation: &'a Conversation,
    /// The timing profile its runs were played with.
    pub profile: Profile,
    /// Its runs.
    pub runs: &'a [StrategyRun],
    /// Their figures.
    pub metrics: Vec<Metrics>,
}

impl Comparison<'_> {
    /// The gaps its runs were played with.
    pub fn gaps(&self) -> Vec<timing::Gap> {
        self.profile
            .gaps(self.conversation.turns.len(), self.conversation.seed)
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
                report::thousands(settings.threshold_tokens as f64),
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
                report::thousands(settings.threshold_tokens as f64),
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

/// The targets of issue 15 for today's figures, and where each run stands.
pub fn goals(comparisons: &[Comparison<'_>], settings: &RunSettings) -> String {
    let default_threshold = degrau::step_plan::CompactionPolicy::default().threshold_tokens;
    let mut out = String::new();
    for c in comparisons {
        let turns = c.conversation.turns.len();
        let Some(full) = c.metrics.iter().find(|m| m.policy == Policy::Full) else {
            continue;
        };
        if let Some(sliding) = c.metrics.iter().find(|m| m.policy == Policy::Sliding)
            && c.profile != Profile::NoPauses
        {
            for stepped in c.metrics.iter().filter(|m| m.policy.is_stepped()) {
                let ratio = stepped.cost / sliding.cost;
                out.push_str(&format!(
                    "- {} timing, {turns} turns: {} costs {ratio:.3}× the sliding window; issue 28's goal is at most 1.00× with the early identifier visible ({}; identifier {}).\n",
                    c.profile.label(),
                    stepped.policy.label(),
                    if ratio <= 1.0 {
                        "met".to_owned()
                    } else {
                        format!("missed by {:.3}", ratio - 1.0)
                    },
                    if stepped.identifier_visible { "visible" } else { "not visible" },
                ));
            }
        }
        let target = match (c.profile, turns) {
            (Profile::Messaging, 200) => Some(0.25),
            (Profile::Messaging, 1000) => Some(0.12),
            (Profile::NoPauses, 200) => Some(0.33),
            _ => None,
        };
        let Some(target) = target else {
            continue;
        };
        for stepped in c.metrics.iter().filter(|m| m.policy.is_stepped()) {
            let ratio = stepped.cost / full.cost;
            out.push_str(&format!(
                "- {} timing, {turns} turns: {} costs {ratio:.3}× full history; the goal is at most {target:.2}× ({}).\n",
                c.profile.label(),
                stepped.policy.label(),
                if ratio <= target {
                    "met".to_owned()
                } else {
                    format!("missed by {:.3}", ratio - target)
                }
            ));
        }
    }
    let read_target = if settings.threshold_tokens == 3000 {
        Some(0.90)
    } else if settings.threshold_tokens == default_threshold {
        Some(0.95)
    } else {
        None
    };
    if let Some(target) = read_target {
        // A conversation too short to step says nothing about the steps.
        for c in comparisons
            .iter()
            .filter(|c| c.conversation.turns.len() >= 200)
        {
            for m in c.metrics.iter().filter(|m| m.policy.is_stepped()) {
                out.push_str(&format!(
                    "- {} timing, {} turns, threshold {}: {}'s main-model cache read ratio is {:.1}%; the goal is at least {:.0}% ({}).\n",
                    c.profile.label(),
                    c.conversation.turns.len(),
                    report::thousands(settings.threshold_tokens as f64),
                    m.policy.label(),
                    m.cache_read_ratio * 100.0,
                    target * 100.0,
                    if m.cache_read_ratio >= target {
                        "met".to_owned()
                    } else {
                        format!("missed by {:.1} points", (target - m.cache_read_ratio) * 100.0)
                    }
                ));
            }
        }
    }
    out
}

/// The markdown note: settings, prices, the timing profiles, the tables, the
/// goals, the plots.
pub fn markdown(
    comparisons: &[Comparison<'_>],
    settings: &RunSettings,
    prices: &Prices,
    machine: &Machine,
    command: &str,
) -> String {
    let groups: Vec<Vec<Metrics>> = comparisons.iter().map(|c| c.metrics.clone()).collect();
    let mut out = String::new();
    out.push_str("# Context strategies side by side\n\n");
    out.push_str(&format!(
        "Machine: {}. Command: `{command}`.\n\n",
        machine.label()
    ));
    out.push_str(&format!(
        "Each conversation is played once per strategy through the real `ask` and \
         `compactor` binaries on the local stack (moto, the bridge, the offline stand-in), a \
         fresh stack each time, with only `CONTEXT_POLICY` and `CACHE_TTL` switched: full \
         history and the sliding window with five-minute entries (no `ttl`, what a client \
         that never asks for one sends), degrau's steps under `CACHE_TTL=5m`, `1h` (every \
         breakpoint, the stable prefix's and the messages', cached for an hour) and `auto` \
         (chosen per request from the contact's recent gaps and the request's sizes: all \
         five minutes, the stable prefix for an hour, or all for an hour; \
         `shared/src/cache_ttl.rs`). Tenant config \
         for all: compaction threshold {} tokens, keep {} messages (the sliding window keeps \
         the same {} messages, cut at a safe start) and, for degrau's steps, at least {} \
         tokens after a step (`window_keep_tokens`). Stand-in: context limit 200,000 tokens \
         unless set otherwise ({}), minimum cacheable prefix 1,024, its own token count (a \
         quarter of the characters of each block's JSON).\n\n",
        settings.threshold_tokens,
        settings.keep_messages,
        settings.keep_messages,
        report::thousands(
            settings
                .keep_tokens
                .unwrap_or(degrau::step_plan::CompactionPolicy::default().keep_tokens)
                as f64
        ),
        if settings.standin_args.is_empty() {
            "no arguments".to_owned()
        } else {
            format!("`{}`", settings.standin_args.join(" "))
        },
    ));
    let mut profiles: Vec<Profile> = Vec::new();
    for c in comparisons {
        if !profiles.contains(&c.profile) {
            profiles.push(c.profile);
        }
    }
    out.push_str(
        "**Timing.** The stand-in runs with `--clock manual`: its cache clock moves only \
         when the benchmark advances it, by the profile's gap before each turn, so a week \
         of pauses plays in minutes, nothing sleeps, and the same gaps give the same \
         expiries on any machine. A cache entry lives five minutes (or an hour, for a \
         `ttl: 1h` breakpoint) from its last use. Profiles:\n\n",
    );
    for profile in &profiles {
        out.push_str(&format!(
            "- **{}**: {}.\n",
            profile.label(),
            profile.describe()
        ));
    }
    for c in comparisons
        .iter()
        .filter(|c| !c.profile.shares().is_empty())
    {
        let g = timing::GapSummary::of(&c.gaps());
        out.push_str(&format!(
            "  - {}, {} turns (seed {}): {} bursts, {} replies, {} pauses, {} next-day returns; {} gaps \
             longer than five minutes, {} longer than an hour; {:.1} days from the first turn to \
             the last.\n",
            c.profile.label(),
            c.conversation.turns.len(),
            c.conversation.seed,
            g.bursts,
            g.replies,
            g.pauses,
            g.next_day,
            g.over_5_minutes,
            g.over_1_hour,
            g.total_seconds as f64 / 86_400.0
        ));
    }
    out.push_str(
        "\n**Sessions.** The functions' clock moves with the stand-in's (`CLOCK_OFFSET_FILE`: \
         the benchmark adds each gap to it), so each round records the gap the profile meant \
         and `CACHE_TTL=auto` decides from it. No gap reaches the default \
         `SESSION_IDLE_MINUTES` (24 hours; the longest is 22 hours): every session stays open \
         for every strategy. A longer absence would close degrau's session, and the next \
         message would start from the facts alone, so keeping it open does not flatter \
         degrau.\n\n",
    );
    out.push_str(&format!(
        "Cost is in base input tokens of the answer model ({}): input + {}× five-minute cache \
         writes + {}× one-hour cache writes + {}× cache reads + R × output with R = {} \
         (output/input price ratio of {answer}, $15 / $3 per million), and the compactor's \
         summary and fact calls ({}) at {:.3}× ({} vs {answer}: $1 vs $3 per million input, \
         the same R). The cache read ratio is cache reads over all input tokens of the ask \
         calls (the main model); contexts are input + cache read + cache write of each \
         accepted ask call; rejected counts every model call answered with a status other \
         than 200 (the ask function then cuts its window once and retries). \"Identifier \
         visible\" says whether the order code planted on turn 2 was anywhere in the request \
         (messages or system) answering the turn that asks for it.\n\n",
        prices.answer_model,
        prices.cache_write,
        prices.cache_write_1h,
        prices.cache_read,
        prices.output_ratio,
        prices.summary_model,
        prices.summary_model_factor,
        prices.summary_model,
        answer = prices.answer_model,
    ));
    out.push_str(&report::table(&groups));
    out.push_str(
        "\nThe cost split: where each strategy's cost goes, in base-input tokens (all calls, \
         the compactor's at its model's price), with each part's share of the total:\n\n",
    );
    out.push_str(&report::split_table(&groups));
    let goals = goals(comparisons, settings);
    if !goals.is_empty() {
        out.push_str("\nAgainst the goals (issues 15 and 28):\n\n");
        out.push_str(&goals);
    }
    out.push_str("\nWhere the cost goes, and the run's own checks (the tap's records against the stand-in's log; tool mismatches: turns where the model's tool use differed from the script's intent):\n\n");
    out.push_str(&report::details(&groups));
    out.push_str(
        "\nReading the figures: the stand-in's text replies name what degrau remembers without \
         quoting it (since issue 28; before, they quoted up to 200 characters of the summary, \
         which made degrau's answers longer than the other strategies'); \"cost without answer \
         output\" leaves the answers out and compares only what the context policy controls. \
         degrau (auto + fold) runs the scheduled sweep (every 15 minutes of the clock) during \
         the first 75 minutes of each gap, where a pause fold can fall due. A full-history \
         request larger than the stand-in's context limit is refused (counted in rejected); the \
         ask function then cuts its window to the last messages and retries once, so from \
         there on full history behaves like a sliding window that first sends a refused request \
         (unbilled, but a round trip) every turn. The contexts do not depend on the timing \
         (the stand-in's answers depend on the request only): the context plots are drawn \
         once.\n\n",
    );
    for c in comparisons
        .iter()
        .filter(|c| c.profile == context_profile(comparisons))
    {
        let n = c.conversation.turns.len();
        out.push_str(&format!(
            "![context tokens per turn, {n} turns](context-per-turn-{n}.svg)\n\n"
        ));
    }
    for c in comparisons
        .iter()
        .filter(|c| !c.profile.shares().is_empty())
    {
        let n = c.conversation.turns.len();
        out.push_str(&format!(
            "![cost per turn, {} timing, {n} turns](cost-per-turn-{n}-{}.svg)\n\n",
            c.profile.label(),
            c.profile.slug()
        ));
    }
    out
}

/// The profile whose comparisons the context plots are drawn from: the first.
fn context_profile(comparisons: &[Comparison<'_>]) -> Profile {
    comparisons.first().map_or(Profile::NoPauses, |c| c.profile)
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

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_787), "2026-11-30");
    }

    #[tokio::test]
    async fn join_all_keeps_the_order() {
        let futures = (0..3u64).map(|i| async move {
            tokio::time::sleep(std::time::Duration::from_millis(30 - 10 * i)).await;
            i
        });
        assert_eq!(join_all(futures).await, vec![0, 1, 2]);
    }
}
