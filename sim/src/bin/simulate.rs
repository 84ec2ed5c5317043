//! The simulator's long runs: `simulate --seeds N [--from S] [--events E]` plays
//! seeds S..S+N, each a plan of E events, on every core, and prints what it
//! covered (events and seeds a second, simulated days, invariant checks, the
//! faults played by kind); on the lowest failing seed found it
//! shrinks the plan, prints the shortest failing list and writes it to
//! `sim-failure.json`. `simulate --replay FILE` plays a plan written so, and
//! `simulate --seed S` plays one seed (both print every event of a failure).
//! `--open DIR` names the open defects (`sim/pending/`: shrunk plans of defects
//! found and not yet fixed): each must still fail, and their seeds are left out of
//! the long run, so a known defect neither hides a new one nor passes unnoticed
//! once fixed.
//! (docs/reliability.md: replaying a failing seed.)

use std::process::ExitCode;
use std::time::Instant;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use degrau_sim::{Failure, Plan, Stats, generate, run, shrink};

/// Events a plan holds unless `--events` says otherwise (as `./dev.sh test`).
const DEFAULT_EVENTS: usize = 400;
/// Runs a shrink may make.
const SHRINK_BUDGET: usize = 400;

fn main() -> ExitCode {
    let args = Args(std::env::args().skip(1).collect());
    let events = args.number("--events", DEFAULT_EVENTS as u64) as usize;
    if let Some(path) = args.value("--replay") {
        return replay(&read_plan(&path));
    }
    if args.value("--seed").is_some() {
        return replay(&generate(args.number("--seed", 0), events));
    }
    let seeds = args.number("--seeds", 100);
    let from = args.number("--from", 1);
    let open = match args.value("--open") {
        Some(dir) => match open_defects(&dir) {
            Ok(seeds) => seeds,
            Err(message) => {
                eprintln!("{message}");
                return ExitCode::FAILURE;
            }
        },
        None => Vec::new(),
    };
    let started = Instant::now();
    let (total, failed) = play_all(from, seeds, events, &open);
    if let Some((seed, plan, failure)) = failed {
        return shrink_failure(seed, &plan, &failure);
    }
    print_totals(&total, seeds, from, events, started.elapsed().as_secs_f64());
    let left_out = open
        .iter()
        .filter(|seed| (from..from + seeds).contains(seed));
    let left_out: Vec<String> = left_out.map(u64::to_string).collect();
    if !left_out.is_empty() {
        println!(
            "left out: seed {} (open defects, --open)",
            left_out.join(", ")
        );
    }
    ExitCode::SUCCESS
}

/// The command line's arguments.
struct Args(Vec<String>);

impl Args {
    /// The argument after `flag`, when given.
    fn value(&self, flag: &str) -> Option<String> {
        self.0
            .iter()
            .position(|arg| arg == flag)
            .and_then(|at| self.0.get(at + 1))
            .cloned()
    }

    /// The number after `flag`, or `default`; a flag given something else ends the
    /// process.
    fn number(&self, flag: &str, default: u64) -> u64 {
        self.value(flag).map_or(default, |text| {
            text.parse().unwrap_or_else(|_| {
                eprintln!("{flag} takes a number, not {text}");
                std::process::exit(2)
            })
        })
    }
}

/// The plan written in `path` (by a failing run's shrink); a file that cannot be
/// read as one ends the process.
fn read_plan(path: &str) -> Plan {
    let text = std::fs::read_to_string(path).unwrap_or_else(|err| {
        eprintln!("cannot read {path}: {err}");
        std::process::exit(2)
    });
    serde_json::from_str(&text).unwrap_or_else(|err| {
        eprintln!("{path} is not a plan: {err}");
        std::process::exit(2)
    })
}

/// Shrinks the failing `plan` of `seed`, prints the shortest failing list and
/// writes it to `sim-failure.json`.
fn shrink_failure(seed: u64, plan: &Plan, failure: &Failure) -> ExitCode {
    eprintln!(
        "seed {seed} failed at event {}: {}",
        failure.step, failure.violation
    );
    let (shrunk, failure) = shrink(plan, failure, SHRINK_BUDGET);
    print_failure(&shrunk, &failure);
    let json = serde_json::to_string_pretty(&shrunk).expect("a plan serialises");
    match std::fs::write("sim-failure.json", json) {
        Ok(()) => eprintln!(
            "the shortest failing plan is in sim-failure.json; replay it with \
             `./dev.sh simulate --replay sim-failure.json`"
        ),
        Err(err) => eprintln!("could not write sim-failure.json: {err}"),
    }
    ExitCode::FAILURE
}

/// What a long run covered, `elapsed` seconds in all.
fn print_totals(total: &Stats, seeds: u64, from: u64, events: usize, elapsed: f64) {
    println!(
        "{seeds} seeds (from {from}), {events} events each: all invariants held\n\
         {:.1} seeds/s, {:.0} events/s, {:.1} s in all\n\
         {} events, {} invariant checks, {} messages sent, {} rounds stored, {} model calls\n\
         {:.1} simulated days ({:.2} a seed)\n\
         faults: {} crashes, {} late writes, {} store faults, {} quirky answers, {} config changes",
        seeds as f64 / elapsed,
        total.events as f64 / elapsed,
        elapsed,
        total.events,
        total.checks,
        total.messages,
        total.rounds,
        total.model_calls,
        total.seconds as f64 / 86_400.0,
        total.seconds as f64 / 86_400.0 / seeds.max(1) as f64,
        total.crashes,
        total.late_writes,
        total.store_faults,
        total.quirks,
        total.config_changes,
    );
}

/// Plays seeds `from..from + seeds` on every core (each seed on one thread, its
/// own runtime: a seed's history is the same whichever thread plays it): the
/// totals, or the lowest failing seed found.
fn play_all(
    from: u64,
    seeds: u64,
    events: usize,
    skip: &[u64],
) -> (Stats, Option<(u64, Plan, Failure)>) {
    let next = AtomicU64::new(from);
    let stop = AtomicBool::new(false);
    let total = Mutex::new(Stats::default());
    let failed: Mutex<Option<(u64, Plan, Failure)>> = Mutex::new(None);
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= from + seeds {
                        return;
                    }
                    if skip.contains(&seed) {
                        continue;
                    }
                    let plan = generate(seed, events);
                    match run(&plan) {
                        Ok(stats) => lock(&total).add(&stats),
                        Err(failure) => {
                            stop.store(true, Ordering::Relaxed);
                            let mut failed = lock(&failed);
                            if failed.as_ref().is_none_or(|(first, ..)| seed < *first) {
                                *failed = Some((seed, plan, failure));
                            }
                        }
                    }
                }
            });
        }
    });
    let total = *lock(&total);
    (
        total,
        failed.into_inner().unwrap_or_else(PoisonError::into_inner),
    )
}

/// Replays every plan in `dir` (an open defect each): the seeds they came from,
/// or what is wrong (a plan that now holds belongs in `sim/regressions/`).
fn open_defects(dir: &str) -> Result<Vec<u64>, String> {
    let entries = std::fs::read_dir(dir).map_err(|err| format!("cannot read {dir}: {err}"))?;
    let mut seeds = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|err| format!("cannot read {dir}: {err}"))?
            .path();
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let name = path.display();
        let text = std::fs::read_to_string(&path).map_err(|err| format!("{name}: {err}"))?;
        let plan: Plan =
            serde_json::from_str(&text).map_err(|err| format!("{name} is not a plan: {err}"))?;
        match run(&plan) {
            Ok(_) => {
                return Err(format!(
                    "{name} now holds every invariant: its defect is fixed, so move it to \
                     sim/regressions/ (and its seed is played again)"
                ));
            }
            Err(failure) => println!(
                "open defect, seed {} left out: {name} still fails: {}",
                plan.seed, failure.violation
            ),
        }
        seeds.push(plan.seed);
    }
    Ok(seeds)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn replay(plan: &Plan) -> ExitCode {
    match run(plan) {
        Ok(stats) => {
            println!(
                "seed {}: {} events, all invariants held ({} checks)",
                plan.seed, stats.events, stats.checks
            );
            ExitCode::SUCCESS
        }
        Err(failure) => {
            print_failure(plan, &failure);
            ExitCode::FAILURE
        }
    }
}

fn print_failure(plan: &Plan, failure: &Failure) {
    eprintln!(
        "seed {} (window {} tokens), {} events, broken after event {}: {}",
        plan.seed,
        plan.window,
        plan.steps.len(),
        failure.step,
        failure.violation
    );
    for (index, step) in plan.steps.iter().enumerate().take(failure.step + 1) {
        eprintln!("  {index:>4}  {:?}", step.event);
    }
    eprintln!("the state then:\n{}", failure.state);
}
