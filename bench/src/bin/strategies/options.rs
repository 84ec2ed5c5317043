//! The command line: its usage, the options it sets, and the settings of a run
//! from them.

use std::path::PathBuf;

use degrau::plan::step_plan::CompactionPolicy;
use degrau_bench::strategies::policy::Policy;
use degrau_bench::strategies::run::RunSettings;
use degrau_bench::strategies::timing::Profile;

/// The command line's usage text.
pub(crate) const USAGE: &str = "\
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

/// What to run.
pub(crate) struct Options {
    /// Conversation lengths.
    pub(crate) turns: Vec<usize>,
    /// Seed of the scripted conversations.
    pub(crate) seed: u64,
    /// Compaction threshold, tokens.
    pub(crate) threshold: u64,
    /// Messages a step keeps (and the sliding window's size).
    pub(crate) keep: usize,
    /// Tokens degrau keeps after a step at least; `None`: its default.
    pub(crate) keep_tokens: Option<u64>,
    /// Whether the strategies run at once.
    pub(crate) parallel: bool,
    /// Whether to check the tap against the stand-in's log.
    pub(crate) check_log: bool,
    /// Where to write the results.
    pub(crate) out: PathBuf,
    /// Thresholds of a threshold sweep.
    pub(crate) sweep: Option<Vec<u64>>,
    /// Messages a pause fold keeps; `None`: degrau's default.
    pub(crate) fold_keep: Option<usize>,
    /// Fold keeps of a fold-keep sweep.
    pub(crate) fold_keep_sweep: Option<Vec<usize>>,
    /// Length of a sweep's conversation.
    pub(crate) sweep_turns: usize,
    /// Print the scripted conversations and stop.
    pub(crate) show_script: bool,
    /// Timing profiles, each a full comparison.
    pub(crate) profiles: Vec<Profile>,
    /// The strategies to run.
    pub(crate) policies: Vec<Policy>,
}

/// A comma-separated list of numbers (`_` allowed as a separator of thousands).
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

/// Parses the command line; `Ok(None)` for `--help`.
pub(crate) fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut options = defaults();
    let mut given = Given::default();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v.to_owned())),
            None => (arg.as_str(), None),
        };
        let value = if takes_value(flag) {
            match inline.or_else(|| iter.next().cloned()) {
                Some(v) => v,
                None => return Err(format!("{flag} needs a value\n\n{USAGE}")),
            }
        } else {
            String::new()
        };
        if !apply(&mut options, &mut given, flag, &value)? {
            return Ok(None);
        }
    }
    finish(options, given).map(Some)
}

/// What the flags say besides the options themselves.
#[derive(Default)]
struct Given {
    /// `--long`.
    long: bool,
    /// `--profiles` was given (a fold-keep sweep then keeps them).
    profiles: bool,
    /// `--turns`.
    turns: Option<Vec<usize>>,
}

/// The options before the flags: the tenant config of every run defaults to
/// degrau's own defaults.
fn defaults() -> Options {
    let defaults = CompactionPolicy::default();
    Options {
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
    }
}

/// Whether `flag` takes a value (`--flag value` or `--flag=value`).
fn takes_value(flag: &str) -> bool {
    matches!(
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
    )
}

/// Sets what `flag` (with `value`, empty for a flag without one) says;
/// `Ok(false)` for `--help`.
fn apply(
    options: &mut Options,
    given: &mut Given,
    flag: &str,
    value: &str,
) -> Result<bool, String> {
    let number = |v: &str| -> Result<u64, String> {
        v.replace('_', "")
            .parse()
            .map_err(|_| format!("{flag}: not a number: {v:?}"))
    };
    match flag {
        "-h" | "--help" => return Ok(false),
        "--long" => given.long = true,
        "--sequential" => options.parallel = false,
        "--no-log-check" => options.check_log = false,
        "--show-script" => options.show_script = true,
        "--turns" => given.turns = Some(list(flag, value)?),
        "--seed" => options.seed = number(value)?,
        "--threshold" => options.threshold = number(value)?,
        "--keep" => options.keep = number(value)? as usize,
        "--keep-tokens" => options.keep_tokens = Some(number(value)?),
        "--out" => options.out = PathBuf::from(value),
        "--sweep" => options.sweep = Some(list(flag, value)?),
        "--fold-keep" => options.fold_keep = Some(number(value)? as usize),
        "--fold-keep-sweep" => {
            options.fold_keep_sweep = Some(list(flag, value)?);
            if !given.profiles {
                options.profiles = vec![Profile::Messaging, Profile::NextDay];
            }
        }
        "--sweep-turns" => options.sweep_turns = number(value)? as usize,
        "--gap-seconds" => {
            options.profiles = vec![Profile::Every {
                seconds: number(value)?,
            }];
        }
        "--profiles" => {
            given.profiles = true;
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
    Ok(true)
}

/// The turns (`--turns`, else `--long`'s, else the defaults) and the checks
/// that need every flag.
fn finish(mut options: Options, given: Given) -> Result<Options, String> {
    options.turns = match given.turns {
        Some(t) => t,
        None if given.long => vec![20, 200, 1000],
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
    Ok(options)
}

/// The settings of a run with `threshold` under `profile`.
pub(crate) fn settings_for(options: &Options, threshold: u64, profile: Profile) -> RunSettings {
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
