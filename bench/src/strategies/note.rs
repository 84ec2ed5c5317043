//! The markdown note of a benchmark run: how it was played, the timing profiles,
//! how cost is counted, the tables, the goals, how to read the figures, the plots.

use super::comparison::{Comparison, context_profile};
use super::cost::Prices;
use super::machine::Machine;
use super::policy::Policy;
use super::report::Metrics;
use super::run::RunSettings;
use super::tables::{self, thousands};
use super::timing::{self, Profile};

/// The targets of issue 15 for today's figures, and where each run stands.
pub fn goals(comparisons: &[Comparison<'_>], settings: &RunSettings) -> String {
    let mut out = String::new();
    for c in comparisons {
        let Some(full) = c.metrics.iter().find(|m| m.policy == Policy::Full) else {
            continue;
        };
        out.push_str(&against_sliding(c));
        out.push_str(&against_full(c, full));
    }
    out.push_str(&cache_read_goals(comparisons, settings));
    out
}

/// Each of degrau's runs against the sliding window (issue 28), under a timing
/// with pauses.
fn against_sliding(c: &Comparison<'_>) -> String {
    let mut out = String::new();
    let turns = c.conversation.turns.len();
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
    out
}

/// Each of degrau's runs against full history, where issue 15 set a target for
/// the comparison's timing and length.
fn against_full(c: &Comparison<'_>, full: &Metrics) -> String {
    let mut out = String::new();
    let turns = c.conversation.turns.len();
    let target = match (c.profile, turns) {
        (Profile::Messaging, 200) => Some(0.25),
        (Profile::Messaging, 1000) => Some(0.12),
        (Profile::NoPauses, 200) => Some(0.33),
        _ => None,
    };
    let Some(target) = target else {
        return out;
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
    out
}

/// degrau's main-model cache read ratio against its target, for the thresholds
/// that have one, on conversations long enough to step.
fn cache_read_goals(comparisons: &[Comparison<'_>], settings: &RunSettings) -> String {
    let default_threshold = degrau::plan::step_plan::CompactionPolicy::default().threshold_tokens;
    let mut out = String::new();
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
                    thousands(settings.threshold_tokens as f64),
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
    out.push_str(&how_played(settings));
    out.push_str(&timing(comparisons));
    out.push_str(&accounting(prices));
    out.push_str(&tables::table(&groups));
    out.push_str(
        "\nThe cost split: where each strategy's cost goes, in base-input tokens (all calls, \
         the compactor's at its model's price), with each part's share of the total:\n\n",
    );
    out.push_str(&tables::split_table(&groups));
    let goals = goals(comparisons, settings);
    if !goals.is_empty() {
        out.push_str("\nAgainst the goals (issues 15 and 28):\n\n");
        out.push_str(&goals);
    }
    out.push_str("\nWhere the cost goes, and the run's own checks (the tap's records against the stand-in's log; tool mismatches: turns where the model's tool use differed from the script's intent):\n\n");
    out.push_str(&tables::details(&groups));
    out.push_str(&reading(comparisons));
    out
}

/// How each conversation is played: the functions, the policies, the tenant
/// config, the stand-in.
fn how_played(settings: &RunSettings) -> String {
    let mut out = String::new();
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
        thousands(
            settings
                .keep_tokens
                .unwrap_or(degrau::plan::step_plan::CompactionPolicy::default().keep_tokens)
                as f64
        ),
        if settings.standin_args.is_empty() {
            "no arguments".to_owned()
        } else {
            format!("`{}`", settings.standin_args.join(" "))
        },
    ));
    out
}

/// The timing profiles, and the gaps each comparison with pauses was played with.
fn timing(comparisons: &[Comparison<'_>]) -> String {
    let mut out = String::new();
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
    out
}

/// The sessions (all open throughout), and how cost, cache reads, contexts and
/// rejections are counted.
fn accounting(prices: &Prices) -> String {
    let mut out = String::new();
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
    out
}

/// How to read the figures, and the plots.
fn reading(comparisons: &[Comparison<'_>]) -> String {
    let mut out = String::new();
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
