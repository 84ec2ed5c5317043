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

use std::path::{Path, PathBuf};
use std::time::Instant;

use degrau::step_plan::CompactionPolicy;
use degrau_bench::strategies::cost::Prices;
use degrau_bench::strategies::policy::Policy;
use degrau_bench::strategies::report::{Metrics, metrics};
use degrau_bench::strategies::run::RunSettings;
use degrau_bench::strategies::script::conversation;
use degrau_bench::strategies::tables::thousands;
use degrau_bench::strategies::timing::Profile;
use degrau_bench::strategies::{Comparison, Machine, compare, join_all, write_results};
use serde_json::json;

const USAGE: &str = "\
usage: strategies [--long] [--turns 20,200] [--seed N] [--threshold TOKENS] [--keep N]
                  [--keep-tokens N] [--profiles none,messaging] [--gap-seconds N] [--policies LIST]
                  [--fold-keep N] [--sequential] [--no-log-check] [--out DIR] [--show-script]
       strategies --sweep T1,T2,... [--sweep-turns 200] [--seed N] [--keep N] [--out DIR]
       strategies --fold-keep-sweep K1,K2,... [--sweep-turns 200] [--profiles LIST] [--out DIR]

  --long          also run the 1,000-turn conversation (default lengths: 20 and 200)
  --turns LIST    conversation lengths, comma-separated (overrides the defaults and --long)
  --seed N        seed of the scripted conversations (default 2026)
  --threshold N   compaction threshold in the stand-in's tokens (default: degrau's,
                  COMPACTION_THRESHOLD_TOKENS' default)
  --keep N        messages a step keeps, and the sliding window's size (default: degrau's,
                  WINDOW_KEEP_MESSAGES' default)
  --keep-tokens N tokens degrau keeps after a step at least (default: degrau's,
                  WINDOW_KEEP_TOKENS' default; 0: by message count only)
  --profiles LIST timing profiles, each a full comparison (default none,messaging):
                  none (no time between turns), messaging (gaps drawn, seeded, from bursts,
                  replies, pauses and next-day returns: see strategies/timing.rs), next-day
                  (the same kinds, next-day returns 30 % of the gaps), every:N (N seconds
                  before every turn)
  --gap-seconds N the same as --profiles every:N (above 300 every five-minute entry
                  expires between turns)
  --policies LIST which strategies to run (default full,sliding,stepped,stepped-1h,
                  stepped-auto,stepped-fold: degrau's steps under CACHE_TTL=5m, 1h and auto
                  without the pause fold, and auto with it; also stepped-5m-fold, 5m with it)
  --sequential    run the strategies one after the other (default: at once)
  --no-log-check  do not compare the tap's records with the stand-in's log
  --show-script   print the scripted conversations (turn, kind, language, text) and stop
  --out DIR       where to write results (default: results/ at the repository root)
  --sweep LIST    run degrau's steps once per threshold (plus full and sliding once)
  --sweep-turns N length of the sweep's conversation (default 200)
  --fold-keep N   messages a pause fold keeps for a contact likely away past an hour
                  (PAUSE_FOLD_KEEP_MESSAGES; default: degrau's)
  --fold-keep-sweep LIST
                  per timing profile (default messaging,next-day), the sliding window once
                  and degrau (auto + fold) once per fold keep";

/// The stand-in's default context limit (its `--context-limit`).
const CONTEXT_LIMIT: u64 = 200_000;

struct Options {
    turns: Vec<usize>,
    seed: u64,
    threshold: u64,
    keep: usize,
    keep_tokens: Option<u64>,
    parallel: bool,
    check_log: bool,
    out: PathBuf,
    sweep: Option<Vec<u64>>,
    fold_keep: Option<usize>,
    fold_keep_sweep: Option<Vec<usize>>,
    sweep_turns: usize,
    show_script: bool,
    profiles: Vec<Profile>,
    policies: Vec<Policy>,
}

fn list<T: std::str::FromStr>(flag: &str, value: &str) -> Result<Vec<T>, String> {
    value
        .split(',')
        .map(|v| {
            v.trim()
                .replace('_', "")
                .parse()
                .map_err(|_| format!("{flag}: not a number: {v:?}"))
        })
        .collect()
}

fn parse(args: &[String]) -> Result<Option<Options>, String> {
    // The tenant config of every run defaults to degrau's own defaults.
    let defaults = CompactionPolicy::default();
    let mut options = Options {
        turns: vec![20, 200],
        seed: 2026,
        threshold: defaults.threshold_tokens,
        keep: defaults.keep_messages,
        keep_tokens: None,
        parallel: true,
        check_log: true,
        out: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map_or_else(|| PathBuf::from("results"), |root| root.join("results")),
        sweep: None,
        fold_keep: None,
        fold_keep_sweep: None,
        sweep_turns: 200,
        show_script: false,
        profiles: vec![Profile::NoPauses, Profile::Messaging],
        policies: Policy::DEFAULT.to_vec(),
    };
    let mut long = false;
    let mut profiles_given = false;
    let mut turns: Option<Vec<usize>> = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v.to_owned())),
            None => (arg.as_str(), None),
        };
        let takes_value = matches!(
            flag,
            "--turns"
                | "--seed"
                | "--threshold"
                | "--keep"
                | "--keep-tokens"
                | "--out"
                | "--sweep"
                | "--fold-keep"
                | "--fold-keep-sweep"
                | "--sweep-turns"
                | "--gap-seconds"
                | "--profiles"
                | "--policies"
        );
        let value = if takes_value {
            match inline.or_else(|| iter.next().cloned()) {
                Some(v) => v,
                None => return Err(format!("{flag} needs a value\n\n{USAGE}")),
            }
        } else {
            String::new()
        };
        let number = |v: &str| -> Result<u64, String> {
            v.replace('_', "")
                .parse()
                .map_err(|_| format!("{flag}: not a number: {v:?}"))
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "--long" => long = true,
            "--sequential" => options.parallel = false,
            "--no-log-check" => options.check_log = false,
            "--show-script" => options.show_script = true,
            "--turns" => turns = Some(list(flag, &value)?),
            "--seed" => options.seed = number(&value)?,
            "--threshold" => options.threshold = number(&value)?,
            "--keep" => options.keep = number(&value)? as usize,
            "--keep-tokens" => options.keep_tokens = Some(number(&value)?),
            "--out" => options.out = PathBuf::from(value),
            "--sweep" => options.sweep = Some(list(flag, &value)?),
            "--fold-keep" => options.fold_keep = Some(number(&value)? as usize),
            "--fold-keep-sweep" => {
                options.fold_keep_sweep = Some(list(flag, &value)?);
                if !profiles_given {
                    options.profiles = vec![Profile::Messaging, Profile::NextDay];
                }
            }
            "--sweep-turns" => options.sweep_turns = number(&value)? as usize,
            "--gap-seconds" => {
                options.profiles = vec![Profile::Every {
                    seconds: number(&value)?,
                }];
            }
            "--profiles" => {
                profiles_given = true;
                options.profiles = value
                    .split(',')
                    .map(|p| {
                        Profile::parse(p.trim())
                            .ok_or_else(|| format!("--profiles: unknown profile {p:?}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--policies" => {
                options.policies = value
                    .split(',')
                    .map(|p| {
                        Policy::parse(p.trim())
                            .ok_or_else(|| format!("--policies: unknown policy {p:?}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            other => eprintln!("strategies: ignoring {other:?} (not one of its options)"),
        }
    }
    options.turns = match turns {
        Some(t) => t,
        None if long => vec![20, 200, 1000],
        None => options.turns,
    };
    if options
        .fold_keep
        .iter()
        .chain(options.fold_keep_sweep.iter().flatten())
        .any(|&keep| keep == 0)
    {
        return Err("--fold-keep: a fold keeps at least 1 message".into());
    }
    if options.turns.iter().any(|&t| t < 5) {
        return Err("--turns: a conversation needs at least 5 turns".into());
    }
    Ok(Some(options))
}

fn settings_for(options: &Options, threshold: u64, profile: Profile) -> RunSettings {
    RunSettings {
        threshold_tokens: threshold,
        keep_messages: options.keep,
        keep_tokens: options.keep_tokens,
        fold_keep_messages: options.fold_keep,
        standin_args: Vec::new(),
        check_log: options.check_log,
        profile,
    }
}

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
        for c in &conversations {
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
        return;
    }
    let mut all_runs = Vec::new();
    for (profile, c) in options
        .profiles
        .iter()
        .flat_map(|&p| conversations.iter().map(move |c| (p, c)))
    {
        let t = Instant::now();
        let settings = settings_for(&options, options.threshold, profile);
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
    let comparisons: Vec<Comparison<'_>> = all_runs
        .iter()
        .map(|(profile, c, runs)| Comparison {
            conversation: c,
            profile: *profile,
            runs,
            metrics: runs.iter().map(|r| metrics(r, &prices)).collect(),
        })
        .collect();
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
    let goals = degrau_bench::strategies::goals(&comparisons, &settings);
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
    match write_results(
        &options.out,
        &comparisons,
        &settings,
        &prices,
        &machine,
        &command,
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

/// Runs full and sliding once and degrau's steps once per threshold, on one
/// conversation; prints and writes `threshold-sweep.{md,json}`.
async fn sweep(
    options: &Options,
    thresholds: &[u64],
    prices: &Prices,
    machine: &Machine,
    command: &str,
) {
    let started = Instant::now();
    let c = conversation(options.sweep_turns, options.seed);
    eprintln!(
        "strategies: threshold sweep on {} turns, seed {}: {thresholds:?}",
        c.turns.len(),
        c.seed
    );
    let profile = options
        .profiles
        .first()
        .copied()
        .unwrap_or(Profile::NoPauses);
    let base_settings = settings_for(options, options.threshold, profile);
    let baselines = compare(
        &c,
        &[Policy::Full, Policy::Sliding],
        &base_settings,
        options.parallel,
    )
    .await;
    let base: Vec<Metrics> = baselines.iter().map(|r| metrics(r, prices)).collect();
    let full = base
        .iter()
        .find(|m| m.policy == Policy::Full)
        .map(|m| m.cost);
    let sliding = base
        .iter()
        .find(|m| m.policy == Policy::Sliding)
        .map(|m| m.cost);
    let mut rows = Vec::new();
    // Two thresholds at a time: each stack is a few processes on a small machine.
    for chunk in thresholds.chunks(if options.parallel { 2 } else { 1 }) {
        let runs = chunk.iter().map(|&threshold| {
            let settings = settings_for(options, threshold, profile);
            let c = &c;
            async move {
                let runs = compare(c, &[Policy::Stepped], &settings, false).await;
                (threshold, runs)
            }
        });
        let results = join_all(runs).await;
        for (threshold, runs) in results {
            for run in &runs {
                rows.push((threshold, metrics(run, prices)));
            }
        }
    }
    let ratio =
        |cost: f64, base: Option<f64>| base.map_or("–".into(), |b| format!("{:.3}", cost / b));
    let mut table = String::from(
        "| threshold | cost (base-input tokens) | vs full | vs sliding | cost without answer output | summary cost | cache read ratio | max context | mean context | steps | rejected | identifier visible |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for m in &base {
        table.push_str(&format!(
            "| ({}) | {} | {} | {} | {} | – | {:.1}% | {} | {} | – | {} | {} |\n",
            m.policy.label(),
            thousands(m.cost),
            ratio(m.cost, full),
            ratio(m.cost, sliding),
            thousands(m.cost - m.cost_answer_output),
            m.cache_read_ratio * 100.0,
            thousands(m.max_context as f64),
            thousands(m.mean_context),
            m.rejected,
            if m.identifier_visible { "yes" } else { "no" }
        ));
    }
    for (threshold, m) in &rows {
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.1}% | {} | {} | {} | {} | {} |\n",
            thousands(*threshold as f64),
            thousands(m.cost),
            ratio(m.cost, full),
            ratio(m.cost, sliding),
            thousands(m.cost - m.cost_answer_output),
            thousands(m.cost_compactor),
            m.cache_read_ratio * 100.0,
            thousands(m.max_context as f64),
            thousands(m.mean_context),
            m.steps,
            m.rejected,
            if m.identifier_visible { "yes" } else { "no" }
        ));
    }
    let best = rows
        .iter()
        .filter(|(_, m)| m.identifier_visible && m.rejected == 0)
        .min_by(|a, b| a.1.cost.total_cmp(&b.1.cost));
    let verdict = match best {
        Some((threshold, m)) => format!(
            "Cheapest threshold with the identifier visible and no rejection: {} tokens ({} base-input tokens, {} of full history, {} of the sliding window).",
            thousands(*threshold as f64),
            thousands(m.cost),
            ratio(m.cost, full),
            ratio(m.cost, sliding)
        ),
        None => "No threshold kept the identifier visible without rejections.".into(),
    };
    let text = format!(
        "# Compaction threshold sweep\n\nMachine: {}. Command: `{command}`. {} turns, seed {}, keep {} messages, {} timing; prices as in strategies.md.\n\n{table}\n{verdict}\n",
        machine.label(),
        c.turns.len(),
        c.seed,
        options.keep,
        profile.label()
    );
    println!("\n{text}");
    let document = json!({
        "machine": machine,
        "turns": c.turns.len(),
        "seed": c.seed,
        "keep_messages": options.keep,
        "prices": prices,
        "baselines": base,
        "stepped": rows.iter().map(|(t, m)| json!({"threshold_tokens": t, "metrics": m})).collect::<Vec<_>>(),
    });
    write_sweep(&options.out, "threshold-sweep", &text, &document, started);
}

/// Per timing profile, runs the sliding window once and degrau (auto + fold)
/// once per fold keep, on one conversation; prints and writes
/// `fold-keep-sweep.{md,json}`.
async fn fold_keep_sweep(
    options: &Options,
    keeps: &[usize],
    prices: &Prices,
    machine: &Machine,
    command: &str,
) {
    let started = Instant::now();
    let c = conversation(options.sweep_turns, options.seed);
    let mut text = format!(
        "# Pause fold keep sweep\n\nMachine: {}. Command: `{command}`. {} turns, seed {}, \
         threshold {}, step keep {} messages; degrau under `CACHE_TTL=auto` with the pause \
         fold, `PAUSE_FOLD_KEEP_MESSAGES` as in the first column (a fold keeps it when the \
         contact's likely return is past an hour, the step's keep otherwise); prices as in \
         strategies.md.\n",
        machine.label(),
        c.turns.len(),
        c.seed,
        options.threshold,
        options.keep,
    );
    let mut document = Vec::new();
    for &profile in &options.profiles {
        eprintln!(
            "strategies: fold-keep sweep on {} turns, {} timing: {keeps:?}",
            c.turns.len(),
            profile.label()
        );
        let settings = settings_for(options, options.threshold, profile);
        // The window beside the keeps, two keeps at a time: each stack is a few
        // processes on a small machine.
        let sliding = compare(&c, &[Policy::Sliding], &settings, false);
        let folds = async {
            let mut rows = Vec::new();
            for chunk in keeps.chunks(if options.parallel { 2 } else { 1 }) {
                let runs = chunk.iter().map(|&keep| {
                    let settings = RunSettings {
                        fold_keep_messages: Some(keep),
                        ..settings.clone()
                    };
                    let c = &c;
                    async move {
                        let runs = compare(c, &[Policy::SteppedFold], &settings, false).await;
                        (keep, runs)
                    }
                });
                for (keep, runs) in join_all(runs).await {
                    rows.extend(runs.iter().map(|run| (keep, metrics(run, prices))));
                }
            }
            rows
        };
        let (sliding, rows) = tokio::join!(sliding, folds);
        let window = sliding.first().map(|run| metrics(run, prices));
        let against = |cost: f64| {
            window
                .as_ref()
                .map_or("–".into(), |w| format!("{:.3}", cost / w.cost))
        };
        text.push_str(&format!(
            "\n## {} timing\n\n| fold keep | cost (base-input tokens) | vs sliding | cache read ratio | mean context | summary requests | summary cost | failed turns | identifier visible |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
            profile.label()
        ));
        let row = |label: String, m: &Metrics| {
            format!(
                "| {label} | {} | {} | {:.1}% | {} | {} | {} | {} | {} |\n",
                thousands(m.cost),
                against(m.cost),
                m.cache_read_ratio * 100.0,
                thousands(m.mean_context),
                m.compactor_tokens.calls,
                thousands(m.cost_compactor),
                m.failed_turns,
                if m.identifier_visible { "yes" } else { "no" }
            )
        };
        if let Some(w) = &window {
            text.push_str(&row("(sliding window)".into(), w));
        }
        for (keep, m) in &rows {
            text.push_str(&row(keep.to_string(), m));
        }
        document.push(json!({
            "profile": profile,
            "sliding": window,
            "fold": rows.iter().map(|(k, m)| json!({"fold_keep_messages": k, "metrics": m})).collect::<Vec<_>>(),
        }));
    }
    println!("\n{text}");
    let document = json!({
        "machine": machine,
        "turns": c.turns.len(),
        "seed": c.seed,
        "threshold_tokens": options.threshold,
        "keep_messages": options.keep,
        "prices": prices,
        "profiles": document,
    });
    write_sweep(&options.out, "fold-keep-sweep", &text, &document, started);
}

/// Writes a sweep's `{stem}.md` (`text`) and `{stem}.json` (`document`) into
/// `out`, and says so; exits when it cannot.
fn write_sweep(out: &Path, stem: &str, text: &str, document: &serde_json::Value, started: Instant) {
    let written = std::fs::create_dir_all(out)
        .and_then(|()| std::fs::write(out.join(format!("{stem}.md")), text))
        .and_then(|()| {
            std::fs::write(
                out.join(format!("{stem}.json")),
                serde_json::to_string_pretty(document).unwrap_or_default() + "\n",
            )
        });
    match written {
        Ok(()) => eprintln!(
            "strategies: wrote {}/{stem}.{{md,json}} in {:.0} s",
            out.display(),
            started.elapsed().as_secs_f64()
        ),
        Err(error) => {
            eprintln!("strategies: could not write the sweep: {error}");
            std::process::exit(1);
        }
    }
}
