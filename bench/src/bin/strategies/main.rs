//! `strategies`: full history, sliding window and degrau's steps side by side on
//! scripted conversations, through the real functions on the local stack.
//!
//! ```text
//! strategies [--long] [--turns 20,200] [--seed N] [--threshold TOKENS] [--keep N]
//!            [--keep-tokens N] [--profiles none,messaging] [--gap-seconds N] [--policies LIST]
//!            [--sequential] [--no-log-check] [--out DIR] [--show-script]
//! strategies --sweep 4000,8000,16000,32000 [--sweep-turns 200] [--seed N] [--keep N]
//! strategies --fold-keep-sweep 12,8,4,2 [--sweep-turns 200] [--profiles messaging,next-day]
//! ```
//!
//! Needs `.venv` (moto: each run starts its own server) and the workspace binaries built
//! (`cargo build --workspace --bins`); `bash bench/run.sh` (or `./dev.sh bench`)
//! does both. Prints the table and writes `results/strategies.md`,
//! `results/strategies.json`, `results/context-per-turn-{N}.svg` and
//! `results/cost-per-turn-{N}-messaging.svg`; a sweep writes
//! `results/threshold-sweep.{md,json}`, a fold-keep sweep
//! `results/fold-keep-sweep.{md,json}`.
//!
//! Options it does not know are reported and ignored: `bench/run.sh` passes the
//! same arguments to the `footprint` benchmark.
//!
//! This file runs a comparison; `options.rs` reads the command line,
//! `sweeps.rs` runs the threshold and fold-keep sweeps.

mod options;
mod sweeps;

use std::time::Instant;

use degrau_bench::strategies::cost::Prices;
use degrau_bench::strategies::report::{Metrics, metrics};
use degrau_bench::strategies::run::{RunSettings, StrategyRun};
use degrau_bench::strategies::script::{Conversation, conversation};
use degrau_bench::strategies::timing::Profile;
use degrau_bench::strategies::{Comparison, Machine, compare, write_results};

use options::{Options, USAGE, parse, settings_for};
use sweeps::{fold_keep_sweep, sweep};

/// The stand-in's default context limit (its `--context-limit`).
const CONTEXT_LIMIT: u64 = 200_000;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{USAGE}");
            return;
        }
        Err(message) => {
            eprintln!("strategies: {message}");
            std::process::exit(2);
        }
    };
    let command = std::iter::once("strategies".to_owned())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let machine = Machine::detect();
    let prices = Prices::default();
    if let Some(thresholds) = options.sweep.clone() {
        sweep(&options, &thresholds, &prices, &machine, &command).await;
        return;
    }
    if let Some(keeps) = options.fold_keep_sweep.clone() {
        fold_keep_sweep(&options, &keeps, &prices, &machine, &command).await;
        return;
    }

    let first_profile = options
        .profiles
        .first()
        .copied()
        .unwrap_or(Profile::NoPauses);
    let settings = settings_for(&options, options.threshold, first_profile);
    let started = Instant::now();
    let conversations: Vec<_> = options
        .turns
        .iter()
        .map(|&n| conversation(n, options.seed))
        .collect();
    if options.show_script {
        show_script(&conversations);
        return;
    }
    let all_runs = play(&options, &conversations).await;
    let comparisons: Vec<Comparison<'_>> = all_runs
        .iter()
        .map(|(profile, c, runs)| Comparison {
            conversation: c,
            profile: *profile,
            runs,
            metrics: runs.iter().map(|r| metrics(r, &prices)).collect(),
        })
        .collect();
    print_tables(&comparisons, &settings, &prices, &machine);
    write(
        &options,
        &comparisons,
        &settings,
        &prices,
        &machine,
        &command,
        started,
    );
}

/// Writes the results into `--out` and says so; exits when it cannot.
fn write(
    options: &Options,
    comparisons: &[Comparison<'_>],
    settings: &RunSettings,
    prices: &Prices,
    machine: &Machine,
    command: &str,
    started: Instant,
) {
    match write_results(
        &options.out,
        comparisons,
        settings,
        prices,
        machine,
        command,
        CONTEXT_LIMIT,
    ) {
        Ok(()) => eprintln!(
            "strategies: wrote {}/strategies.md, strategies.json, context-per-turn-*.svg and cost-per-turn-*.svg in {:.0} s",
            options.out.display(),
            started.elapsed().as_secs_f64()
        ),
        Err(error) => {
            eprintln!(
                "strategies: could not write {}: {error}",
                options.out.display()
            );
            std::process::exit(1);
        }
    }
}

/// `--show-script`: each conversation, turn by turn (kind, language, text).
fn show_script(conversations: &[Conversation]) {
    for c in conversations {
        println!(
            "# {} turns, seed {}, identifier {} (planted on turn {}, asked for on turn {})",
            c.turns.len(),
            c.seed,
            c.identifier,
            c.plant_turn + 1,
            c.recall_turn + 1
        );
        for (i, turn) in c.turns.iter().enumerate() {
            println!(
                "{:>4} {:<16} {:?} {}",
                i + 1,
                format!("{:?}", turn.kind),
                turn.lang,
                turn.text
            );
        }
    }
}

/// Every conversation under every timing profile, the policies compared on each.
async fn play<'a>(
    options: &Options,
    conversations: &'a [Conversation],
) -> Vec<(Profile, &'a Conversation, Vec<StrategyRun>)> {
    let mut all_runs = Vec::new();
    for (profile, c) in options
        .profiles
        .iter()
        .flat_map(|&p| conversations.iter().map(move |c| (p, c)))
    {
        let t = Instant::now();
        let settings = settings_for(options, options.threshold, profile);
        eprintln!(
            "strategies: {} turns, {} timing, {} ({}), seed {}…",
            c.turns.len(),
            profile.label(),
            options
                .policies
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", "),
            if options.parallel {
                "at once"
            } else {
                "one after the other"
            },
            c.seed
        );
        let runs = compare(c, &options.policies, &settings, options.parallel).await;
        eprintln!(
            "strategies: {} turns done in {:.0} s",
            c.turns.len(),
            t.elapsed().as_secs_f64()
        );
        all_runs.push((profile, c, runs));
    }
    all_runs
}

/// Prints the tables and the goals, and warns of rejected requests in degrau's
/// runs and of a tap that disagrees with the stand-in's log.
fn print_tables(
    comparisons: &[Comparison<'_>],
    settings: &RunSettings,
    prices: &Prices,
    machine: &Machine,
) {
    let groups: Vec<Vec<Metrics>> = comparisons.iter().map(|c| c.metrics.clone()).collect();
    println!(
        "\n## Context strategies ({}; threshold {}, keep {}; cost in base input tokens of {}, R = {}, {} at {:.3}×)\n",
        machine.label(),
        settings.threshold_tokens,
        settings.keep_messages,
        prices.answer_model,
        prices.output_ratio,
        prices.summary_model,
        prices.summary_model_factor
    );
    println!("{}", degrau_bench::strategies::tables::table(&groups));
    println!("{}", degrau_bench::strategies::tables::split_table(&groups));
    let goals = degrau_bench::strategies::goals(comparisons, settings);
    if !goals.is_empty() {
        println!("Against issue 15's goals:\n\n{goals}");
    }
    println!("{}", degrau_bench::strategies::tables::details(&groups));
    for m in groups.iter().flatten() {
        if m.policy.is_stepped() && m.rejected > 0 {
            eprintln!(
                "strategies: WARNING: {} saw {} rejected requests at {} turns",
                m.policy.label(),
                m.rejected,
                m.turns
            );
        }
        if let Some(check) = m.log_check.as_ref().filter(|c| !c.agrees) {
            eprintln!(
                "strategies: WARNING: the tap and the stand-in's log disagree ({} vs {} calls)",
                check.tapped_calls, check.logged_calls
            );
        }
    }
}
