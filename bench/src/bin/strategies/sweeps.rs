//! The sweeps: degrau's steps at several compaction thresholds beside full
//! history and the sliding window (`--sweep`), and the pause fold at several keeps
//! beside the sliding window (`--fold-keep-sweep`); each printed and written as
//! markdown and JSON.

use std::path::Path;
use std::time::Instant;

use degrau_bench::strategies::cost::Prices;
use degrau_bench::strategies::policy::Policy;
use degrau_bench::strategies::report::{Metrics, metrics};
use degrau_bench::strategies::run::{RunSettings, StrategyRun};
use degrau_bench::strategies::script::{Conversation, conversation};
use degrau_bench::strategies::tables::thousands;
use degrau_bench::strategies::timing::Profile;
use degrau_bench::strategies::{Machine, compare, join_all};
use serde_json::{Value, json};

use crate::options::{Options, settings_for};

/// Runs full and sliding once and degrau's steps once per threshold, on one
/// conversation; prints and writes `threshold-sweep.{md,json}`.
pub(crate) async fn sweep(
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
    let rows = stepped_rows(options, thresholds, prices, &c, profile).await;
    let table = sweep_table(&base, &rows, full, sliding);
    let verdict = verdict(&rows, full, sliding);
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

/// degrau's steps once per threshold, two thresholds at a time: each stack is a
/// few processes on a small machine.
async fn stepped_rows(
    options: &Options,
    thresholds: &[u64],
    prices: &Prices,
    c: &Conversation,
    profile: Profile,
) -> Vec<(u64, Metrics)> {
    let mut rows = Vec::new();
    for chunk in thresholds.chunks(if options.parallel { 2 } else { 1 }) {
        let runs = chunk.iter().map(|&threshold| {
            let settings = settings_for(options, threshold, profile);
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
    rows
}

/// The sweep's table: the baselines (full history, the sliding window), then
/// degrau's steps at each threshold.
fn sweep_table(
    base: &[Metrics],
    rows: &[(u64, Metrics)],
    full: Option<f64>,
    sliding: Option<f64>,
) -> String {
    let mut table = String::from(
        "| threshold | cost (base-input tokens) | vs full | vs sliding | cost without answer output | summary cost | cache read ratio | max context | mean context | steps | rejected | identifier visible |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for m in base {
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
    for (threshold, m) in rows {
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
    table
}

/// The cheapest threshold with the identifier visible and no rejection.
fn verdict(rows: &[(u64, Metrics)], full: Option<f64>, sliding: Option<f64>) -> String {
    let best = rows
        .iter()
        .filter(|(_, m)| m.identifier_visible && m.rejected == 0)
        .min_by(|a, b| a.1.cost.total_cmp(&b.1.cost));
    match best {
        Some((threshold, m)) => format!(
            "Cheapest threshold with the identifier visible and no rejection: {} tokens ({} base-input tokens, {} of full history, {} of the sliding window).",
            thousands(*threshold as f64),
            thousands(m.cost),
            ratio(m.cost, full),
            ratio(m.cost, sliding)
        ),
        None => "No threshold kept the identifier visible without rejections.".into(),
    }
}

/// `cost` over `base`, to three decimals; a dash without a base.
fn ratio(cost: f64, base: Option<f64>) -> String {
    base.map_or("–".into(), |b| format!("{:.3}", cost / b))
}

/// Per timing profile, runs the sliding window once and degrau (auto + fold)
/// once per fold keep, on one conversation; prints and writes
/// `fold-keep-sweep.{md,json}`.
pub(crate) async fn fold_keep_sweep(
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
        let (section, entry) = fold_keep_profile(options, keeps, prices, &c, profile).await;
        text.push_str(&section);
        document.push(entry);
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

/// One timing profile of the fold-keep sweep: its section of the markdown and
/// its part of the JSON.
async fn fold_keep_profile(
    options: &Options,
    keeps: &[usize],
    prices: &Prices,
    c: &Conversation,
    profile: Profile,
) -> (String, Value) {
    eprintln!(
        "strategies: fold-keep sweep on {} turns, {} timing: {keeps:?}",
        c.turns.len(),
        profile.label()
    );
    let (sliding, rows) = fold_keep_runs(options, keeps, prices, c, profile).await;
    let window = sliding.first().map(|run| metrics(run, prices));
    let against = |cost: f64| {
        window
            .as_ref()
            .map_or("–".into(), |w| format!("{:.3}", cost / w.cost))
    };
    let mut text = String::new();
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
    let document = json!({
        "profile": profile,
        "sliding": window,
        "fold": rows.iter().map(|(k, m)| json!({"fold_keep_messages": k, "metrics": m})).collect::<Vec<_>>(),
    });
    (text, document)
}

/// The sliding window once beside degrau (auto + fold) once per fold keep, two
/// keeps at a time: each stack is a few processes on a small machine.
async fn fold_keep_runs(
    options: &Options,
    keeps: &[usize],
    prices: &Prices,
    c: &Conversation,
    profile: Profile,
) -> (Vec<StrategyRun>, Vec<(usize, Metrics)>) {
    let settings = settings_for(options, options.threshold, profile);
    let sliding = compare(c, &[Policy::Sliding], &settings, false);
    let folds = async {
        let mut rows = Vec::new();
        for chunk in keeps.chunks(if options.parallel { 2 } else { 1 }) {
            let runs = chunk.iter().map(|&keep| {
                let settings = RunSettings {
                    fold_keep_messages: Some(keep),
                    ..settings.clone()
                };
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
    tokio::join!(sliding, folds)
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
