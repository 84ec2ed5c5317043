//! The simulation as a test: every plan in `sim/regressions/` (each the shrunk
//! plan of a defect the simulator found, failing before its fix) and a fixed
//! budget of generated seeds. The long run is `./dev.sh simulate` (release build,
//! hundreds of seeds), which `./dev.sh test` runs too.

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::PathBuf;

use degrau_sim::{Plan, generate, run};

/// Seeds each test thread plays (debug builds play about one a second).
const SEEDS_PER_THREAD: u64 = 16;
/// Events in each generated plan, as `simulate` plays them.
const EVENTS: usize = 400;

fn regressions() -> Vec<(String, Plan)> {
    plans_in("regressions")
}

fn plans_in(folder: &str) -> Vec<(String, Plan)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut plans: Vec<(String, Plan)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("sim/{folder} is there: {err}"))
        .map(|entry| entry.expect("a readable entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable plan");
            let plan = serde_json::from_str(&text)
                .unwrap_or_else(|err| panic!("{} is not a plan: {err}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                plan,
            )
        })
        .collect();
    plans.sort_by(|a, b| a.0.cmp(&b.0));
    plans
}

#[test]
fn every_plan_that_once_broke_an_invariant_now_holds() {
    let plans = regressions();
    assert!(!plans.is_empty(), "the regressions are read");
    for (name, plan) in plans {
        if let Err(failure) = run(&plan) {
            panic!(
                "{name}: broken after event {}: {}\n{}",
                failure.step, failure.violation, failure.state
            );
        }
    }
}

/// `sim/pending/` holds the open defects: plans the simulator shrank whose fix is
/// still to come. Each must still fail (a plan that holds has its fix and belongs
/// in `sim/regressions/`); `./dev.sh test`'s long run leaves their seeds out.
#[test]
fn every_open_defect_still_breaks_its_invariant() {
    for (name, plan) in plans_in("pending") {
        assert!(
            run(&plan).is_err(),
            "{name} now holds every invariant: move it to sim/regressions/"
        );
    }
}

fn play_seeds(from: u64) {
    for seed in from..from + SEEDS_PER_THREAD {
        if let Err(failure) = run(&generate(seed, EVENTS)) {
            panic!(
                "seed {seed} broken after event {}: {}\n\
                 replay and shrink it with `./dev.sh simulate --from {seed} --seeds 1`\n{}",
                failure.step, failure.violation, failure.state
            );
        }
    }
}

#[test]
fn generated_histories_hold_every_invariant_seeds_1_to_16() {
    play_seeds(1);
}

#[test]
fn generated_histories_hold_every_invariant_seeds_17_to_32() {
    play_seeds(1 + SEEDS_PER_THREAD);
}

#[test]
fn the_same_seed_plays_the_same_history() {
    let plan = generate(42, 120);
    assert_eq!(plan, generate(42, 120), "plans are the seed's");
    let first = run(&plan).expect("seed 42 holds");
    let second = run(&plan).expect("seed 42 holds");
    assert_eq!(first, second, "a replay plays what the first run played");
}
