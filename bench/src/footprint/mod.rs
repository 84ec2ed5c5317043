//! The cost of an ask as the history grows, side by side with LangChain's
//! `DynamoDBChatMessageHistory`; the AWS bill per million asks excluding the
//! model; cold starts and memory of the function binaries.
//!
//! - [`stack`]: the local stack with every AWS call of the functions and of the
//!   event source mapping going through a recording `degrau-awsproxy`;
//! - [`degrau_run`]: one conversation through the real `ask` binary, the step
//!   jobs drained after each turn, each ask measured on its own (AWS calls from
//!   the proxy, CPU from `/proc`);
//! - [`langchain`]: the same conversation through LangChain (a Python script);
//! - [`whatsapp`]: WhatsApp messages through the webhook, the inbound queue and the
//!   worker, each measured;
//! - [`cold`]: cold starts (init, peak RSS), beside [`python_peer`], a Python
//!   process doing the same init;
//! - [`report`]: the figures at each checkpoint, put together by
//!   [`report::build`]; [`compaction`], the compaction work amortized per ask;
//! - [`prices`] and [`bill`]: the prices, and the bill per million asks and per
//!   million WhatsApp messages;
//! - [`signals`]: the signals' monthly cost, from the template and the metrics the
//!   functions printed;
//! - [`markdown`]: the report as markdown, a file per section; [`numbers`], how
//!   its figures add up and print.
//!
//! The conversation is the strategies benchmark's scripted one
//! ([`crate::strategies::script::conversation`], same seed), so both benchmarks
//! play the same customer. Checkpoints: turns 10, 100 and 300 by default (300
//! rather than 1,000 keeps the default run within a few minutes on 2 cores);
//! `--long` plays 1,000 turns with checkpoints 10, 100 and 1,000.
//! [`Options::parse`] documents the flags; `run` does everything.

pub mod bill;
pub mod cold;
pub mod compaction;
pub mod degrau_run;
pub mod langchain;
pub mod markdown;
pub mod numbers;
pub mod prices;
pub mod procfs;
pub mod python_peer;
pub mod report;
pub mod signals;
pub mod stack;
pub mod whatsapp;

use std::path::PathBuf;
use std::time::Instant;

use report::{Extras, Report, Settings};
use stack::{Binaries, ProxiedStack};

/// The command line's usage text.
pub const USAGE: &str = "\
usage: footprint [--long] [--checkpoints 10,100,300] [--seed N] [--threshold TOKENS]
                 [--keep N] [--cold-starts N] [--no-langchain] [--langchain-full]
                 [--langchain-patterns LIST] [--whatsapp N] [--out DIR]

  --long               play 1,000 turns, checkpoints 10, 100 and 1,000
                       (default: 300 turns, checkpoints 10, 100 and 300)
  --checkpoints LIST   checkpoint turns, comma-separated; the last one is the length
  --seed N             seed of the scripted conversation (default 2026, as strategies)
  --threshold N        compaction threshold in tokens (default: degrau's, 8000)
  --keep N             messages a step keeps (default 12, as deployed)
  --cold-starts N      fresh processes per function for init and memory (default 5)
  --no-langchain       skip the LangChain comparison (and its pip install)
  --langchain-full     play every LangChain turn (default: only the checkpoints, each
                       on a history item seeded with the earlier turns; same figures,
                       minutes instead of tens of minutes on moto)
  --langchain-patterns separate,runnable (default: both)
  --whatsapp N         WhatsApp messages to measure through the webhook and the
                       worker (default 20; 0 skips them)
  --out DIR            where to write footprint.md and footprint.json (default results/)

Options it does not know are reported and ignored: bench/run.sh passes the same
arguments to the strategies benchmark.";

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Checkpoint turns, ascending; the last is the conversation's length.
    pub checkpoints: Vec<usize>,
    /// Conversation seed.
    pub seed: u64,
    /// Compaction threshold, tokens.
    pub threshold: u64,
    /// Messages kept per step.
    pub keep: usize,
    /// Cold starts per function.
    pub cold_starts: usize,
    /// Whether to run LangChain.
    pub langchain: bool,
    /// LangChain access patterns.
    pub langchain_patterns: String,
    /// Play every LangChain turn rather than seeding the checkpoints.
    pub langchain_full: bool,
    /// WhatsApp messages to measure.
    pub whatsapp: usize,
    /// Output folder.
    pub out: PathBuf,
    /// Arguments that were ignored.
    pub ignored: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            checkpoints: vec![10, 100, 300],
            seed: 2026,
            threshold: degrau::plan::step_plan::CompactionPolicy::default().threshold_tokens,
            keep: degrau::plan::step_plan::CompactionPolicy::default().keep_messages,
            cold_starts: 5,
            langchain: true,
            langchain_patterns: "separate,runnable".into(),
            langchain_full: false,
            whatsapp: 20,
            out: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results"),
            ignored: Vec::new(),
        }
    }
}

impl Options {
    /// Parses the command line; `Ok(None)` for `--help`.
    pub fn parse(args: &[String]) -> Result<Option<Options>, String> {
        let mut options = Options::default();
        let mut long = false;
        let mut checkpoints = None;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| {
                args.next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            let number = |flag: &str, text: String| {
                text.replace('_', "")
                    .parse::<u64>()
                    .map_err(|_| format!("{flag}: not a number: {text:?}"))
            };
            match arg.as_str() {
                "-h" | "--help" => return Ok(None),
                "--long" => long = true,
                "--checkpoints" => {
                    let list = value(arg)?
                        .split(',')
                        .map(|v| number("--checkpoints", v.trim().to_owned()).map(|n| n as usize))
                        .collect::<Result<Vec<_>, _>>()?;
                    checkpoints = Some(list);
                }
                "--seed" => options.seed = number(arg, value(arg)?)?,
                "--threshold" => options.threshold = number(arg, value(arg)?)?,
                "--keep" => options.keep = number(arg, value(arg)?)? as usize,
                "--cold-starts" => options.cold_starts = number(arg, value(arg)?)? as usize,
                "--whatsapp" => options.whatsapp = number(arg, value(arg)?)? as usize,
                "--no-langchain" => options.langchain = false,
                "--langchain-full" => options.langchain_full = true,
                "--langchain-patterns" => {
                    let patterns = value(arg)?;
                    if patterns
                        .split(',')
                        .any(|p| !["separate", "runnable"].contains(&p))
                    {
                        return Err(format!(
                            "--langchain-patterns: separate and/or runnable, not {patterns:?}"
                        ));
                    }
                    options.langchain_patterns = patterns;
                }
                "--out" => options.out = PathBuf::from(value(arg)?),
                other => options.ignored.push(other.to_owned()),
            }
        }
        options.checkpoints = match checkpoints {
            Some(list) => list,
            None if long => vec![10, 100, 1_000],
            None => options.checkpoints,
        };
        options.checkpoints.retain(|t| *t > 0);
        options.checkpoints.sort_unstable();
        options.checkpoints.dedup();
        if options.checkpoints.is_empty() {
            return Err("--checkpoints: at least one turn".into());
        }
        Ok(Some(options))
    }

    /// Turns to play.
    pub fn turns(&self) -> usize {
        self.checkpoints.last().copied().unwrap_or(0)
    }
}

/// Runs the whole benchmark and returns its report (not written yet).
pub async fn run(options: &Options) -> Report {
    let started = Instant::now();
    let machine = procfs::Machine::detect();
    let (clk_tck, clk_source) = procfs::clock_ticks();
    let binaries = Binaries::find();
    eprintln!(
        "footprint: {} binaries ({}), {} turns, checkpoints {:?}",
        binaries.profile,
        binaries.ask.display(),
        options.turns(),
        options.checkpoints
    );
    let script = crate::strategies::script::conversation(options.turns(), options.seed);
    let texts: Vec<String> = script
        .turns
        .iter()
        .take(options.turns())
        .map(|t| t.text.clone())
        .collect();

    let stack = ProxiedStack::start(binaries.clone()).await;
    let degrau = play_degrau(&stack, options, &texts, clk_tck).await;
    let langchain = play_langchain(&stack, options, &degrau).await;
    let extras = play_whatsapp(&stack, options, &texts).await;

    eprintln!(
        "footprint: {} cold starts per function and of the Python peer",
        options.cold_starts
    );
    let cold_starts = cold::measure(&stack, options.cold_starts).await;
    stack.clean_up().await;
    eprintln!(
        "footprint: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    report::build(
        Settings {
            checkpoints: options.checkpoints.clone(),
            seed: options.seed,
            threshold_tokens: options.threshold,
            keep_messages: options.keep,
            clk_tck: (clk_tck, clk_source.to_owned()),
            machine,
        },
        &degrau,
        &langchain,
        cold_starts,
        binaries.profile.clone(),
        binaries.note.clone(),
        extras,
    )
}

/// The conversation through degrau (the tenant configured first), with a
/// progress line now and then and at each checkpoint.
async fn play_degrau(
    stack: &ProxiedStack,
    options: &Options,
    texts: &[String],
    clk_tck: u64,
) -> degrau_run::DegrauRun {
    stack
        .configure(
            degrau_run::TENANT,
            &degrau_run::tenant_config(options.threshold, options.keep),
        )
        .await;
    let checkpoints = options.checkpoints.clone();
    degrau_run::run(stack, texts, clk_tck, |ask| {
        if ask.turn % 50 == 0 || ask.turn < 6 || checkpoints.contains(&ask.turn) {
            eprintln!(
                "footprint: degrau turn {}: {} DynamoDB calls, {} B read, {} B written, {:.1} ms ({:.1} ms in AWS calls)",
                ask.turn,
                ask.aws.dynamodb_calls,
                ask.aws.bytes_read,
                ask.aws.bytes_written,
                ask.wall_ms,
                ask.aws.duration_ms
            );
        }
    })
    .await
}

/// The same conversation through LangChain (on a blocking task: a Python
/// process), unless `--no-langchain`.
async fn play_langchain(
    stack: &ProxiedStack,
    options: &Options,
    degrau: &degrau_run::DegrauRun,
) -> langchain::LangchainRun {
    if !options.langchain {
        return langchain::LangchainRun {
            mode: String::new(),
            requirements: Vec::new(),
            turns: Vec::new(),
            skipped: Some("--no-langchain".into()),
        };
    }
    let endpoint = stack.proxy.url().to_owned();
    let table = degrau_tests::moto::unique_name("footprint-langchain");
    let transcript = degrau.transcript.clone();
    let plan = langchain::Plan {
        patterns: options.langchain_patterns.clone(),
        full: options.langchain_full,
        checkpoints: options.checkpoints.clone(),
    };
    let work = options.out.join("tmp");
    tokio::task::spawn_blocking(move || {
        langchain::run(&endpoint, &table, &transcript, &plan, &work)
    })
    .await
    .unwrap_or_else(|err| langchain::LangchainRun {
        mode: String::new(),
        requirements: Vec::new(),
        turns: Vec::new(),
        skipped: Some(format!("the LangChain task failed: {err}")),
    })
}

/// The first `--whatsapp` texts through the webhook and the worker, with the
/// bytes those two printed per message; and every EMF line the four functions
/// printed by then.
async fn play_whatsapp(stack: &ProxiedStack, options: &Options, texts: &[String]) -> Extras {
    let whatsapp_texts: Vec<String> = texts.iter().take(options.whatsapp).cloned().collect();
    eprintln!(
        "footprint: {} WhatsApp messages through the webhook and the worker",
        whatsapp_texts.len()
    );
    let printed = |lambda: &degrau_tests::lambda::LocalLambda| -> usize {
        lambda.output().iter().map(|l| l.len() + 1).sum()
    };
    let before = printed(&stack.webhook) + printed(&stack.worker);
    let whatsapp = whatsapp::run(stack, &whatsapp_texts).await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let whatsapp_log_bytes_per_message = (printed(&stack.webhook) + printed(&stack.worker))
        .saturating_sub(before) as f64
        / whatsapp.len().max(1) as f64;
    let metric_lines: Vec<String> = [&stack.ask, &stack.compactor, &stack.webhook, &stack.worker]
        .iter()
        .flat_map(|lambda| lambda.output())
        .filter(|line| line.contains("\"_aws\""))
        .collect();
    Extras {
        whatsapp,
        whatsapp_log_bytes_per_message,
        metric_lines,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_parse_and_ignore_the_strategies_flags() {
        let default = Options::parse(&[]).unwrap().unwrap();
        assert_eq!(default.checkpoints, [10, 100, 300]);
        let long = Options::parse(&args(&["--long", "--sequential", "--turns", "20,200"]))
            .unwrap()
            .unwrap();
        assert_eq!(long.checkpoints, [10, 100, 1000]);
        assert_eq!(long.ignored, ["--sequential", "--turns", "20,200"]);
        let custom = Options::parse(&args(&["--checkpoints", "30,5", "--no-langchain"]))
            .unwrap()
            .unwrap();
        assert_eq!(custom.checkpoints, [5, 30]);
        assert_eq!(custom.turns(), 30);
        assert!(!custom.langchain);
        assert_eq!(custom.whatsapp, 20);
        let none = Options::parse(&args(&["--whatsapp", "0"]))
            .unwrap()
            .unwrap();
        assert_eq!(none.whatsapp, 0);
        assert!(Options::parse(&args(&["--help"])).unwrap().is_none());
        assert!(Options::parse(&args(&["--seed", "x"])).is_err());
        assert!(Options::parse(&args(&["--langchain-patterns", "other"])).is_err());
    }
}
