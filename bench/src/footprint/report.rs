//! From the measurements to figures: one ask at each checkpoint turn and where
//! LangChain's item meets DynamoDB's limit; [`build`] puts the runs together. The
//! prices ([`super::prices`]), the compaction amortized per ask
//! ([`super::compaction`]), the bills ([`super::bill`]) and the signals
//! ([`super::signals`]) have their own files, and the markdown
//! ([`super::markdown`]) reads the [`Report`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::bill::{Bill, WhatsAppBill, ask_bill, whatsapp_bill};
use super::cold::{ColdRun, ColdStarts, PeerColdStarts};
use super::compaction::{Amortized, amortize};
use super::degrau_run::{AskFigures, CompactionFigures, DegrauRun};
use super::langchain::{LangchainRun, LangchainTurn};
use super::numbers::sum;
use super::prices::Prices;
use super::procfs::Machine;
use super::signals::{Signals, TEMPLATE};
use super::whatsapp::WhatsAppFigures;
use degrau_awsproxy::size::{MAX_ITEM_BYTES, read_units, write_units};

/// Figures at one checkpoint turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checkpoint {
    /// The turn (1-based).
    pub turn: usize,
    /// degrau's ask at that turn.
    pub degrau: AskFigures,
    /// The largest per-ask figures of degrau over turns 1..=turn.
    pub degrau_max: MaxSoFar,
    /// degrau's mean ask over the span since the previous checkpoint.
    pub degrau_mean: MeanOfSpan,
    /// degrau's compaction work over the span since the previous checkpoint, per ask.
    pub compaction: Amortized,
    /// degrau's bill per million asks, from the ask at this turn.
    pub bill: Bill,
    /// The same from the mean ask over the span since the previous checkpoint
    /// (the sawtooth's phase at one turn says little; the mean is the steady state).
    pub span_bill: Bill,
    /// LangChain's turn, per access pattern (absent past a failure).
    pub langchain: BTreeMap<String, LangchainTurn>,
    /// LangChain's DynamoDB bill per million asks, per pattern.
    pub langchain_dynamodb_bill: BTreeMap<String, f64>,
}

/// Largest per-ask figures so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MaxSoFar {
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Read units.
    pub rcu: f64,
    /// Write units.
    pub wcu: f64,
    /// DynamoDB calls.
    pub dynamodb_calls: u64,
}

/// Mean per-ask figures over a span of turns.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MeanOfSpan {
    /// Bytes read.
    pub bytes_read: f64,
    /// Bytes written.
    pub bytes_written: f64,
    /// Read units.
    pub rcu: f64,
    /// Write units.
    pub wcu: f64,
    /// CPU ms (schedstat).
    pub cpu_ms: f64,
}

/// Where LangChain's history item meets DynamoDB's 400 KB limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemLimit {
    /// Access pattern.
    pub pattern: String,
    /// The first turn whose history no longer fits DynamoDB's item limit (by
    /// DynamoDB's size rules), if the run got there.
    pub failed_turn: Option<usize>,
    /// The first turn whose write moto alone refused (see
    /// [`LangchainTurn::moto_artifact`]).
    pub moto_refused_turn: Option<usize>,
    /// Its error.
    pub error: Option<String>,
    /// The first turn whose item was over 400 KB although the write went through
    /// (moto may not enforce the limit on updates; DynamoDB does).
    pub over_limit_turn: Option<usize>,
    /// Item size at the last turn measured, bytes.
    pub last_item_bytes: u64,
    /// Its turn.
    pub last_turn: usize,
    /// Mean growth per turn, bytes.
    pub growth_per_turn: f64,
    /// The turn where linear growth reaches 400 KB, when not reached in the run.
    pub projected_turn: Option<usize>,
    /// The last turn that fits, with the read and write units of one ask there
    /// (derived from the item's size: the pattern's reads and writes of an item of
    /// that size, within a unit) and their cost per million asks (USD).
    pub last_before_failure: Option<(usize, f64, f64, f64)>,
}

/// Everything the benchmark found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The machine.
    pub machine: Machine,
    /// Build profile of the function binaries, and a warning if any.
    pub profile: String,
    /// Warning about the binaries.
    pub binaries_note: Option<String>,
    /// Clock ticks per second and where that came from.
    pub clk_tck: (u64, String),
    /// Turns played.
    pub turns: usize,
    /// Checkpoint turns.
    pub checkpoints: Vec<usize>,
    /// Conversation seed.
    pub seed: u64,
    /// Compaction threshold (tokens) and messages kept per step.
    pub threshold_tokens: u64,
    /// Messages a step keeps.
    pub keep_messages: usize,
    /// Prices.
    pub prices: Prices,
    /// Figures per checkpoint.
    pub at: Vec<Checkpoint>,
    /// Steps over the run.
    pub steps: u64,
    /// Failed asks (must be 0).
    pub failed_asks: usize,
    /// Mean bytes the ask printed per ask.
    pub log_bytes_per_ask: f64,
    /// Peak RSS of the long-running ask and compactor processes at the end, KiB.
    pub peak_rss_end_kib: (Option<u64>, Option<u64>),
    /// LangChain's 400 KB limit, per pattern.
    pub item_limits: Vec<ItemLimit>,
    /// LangChain's pinned requirements.
    pub langchain_requirements: Vec<String>,
    /// `seeded` (checkpoint turns on a seeded item) or `full` (every turn).
    pub langchain_mode: String,
    /// Why LangChain did not run, if it did not.
    pub langchain_skipped: Option<String>,
    /// Cold starts.
    pub cold_starts: Vec<ColdStarts>,
    /// The Python peer's cold starts, the same init in Python.
    pub python_peer: PeerColdStarts,
    /// Per-turn series (degrau asks, compactions; LangChain turns).
    pub series: Series,
    /// What the signals cost: access log lines, alarms, dashboards, custom metrics.
    pub signals: Signals,
    /// Every WhatsApp message measured.
    pub whatsapp: Vec<WhatsAppFigures>,
    /// The bill per million WhatsApp messages.
    pub whatsapp_bill: WhatsAppBill,
}

/// The runs besides the conversation through `ask`: the WhatsApp messages, and
/// every EMF line the four functions printed.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// The WhatsApp messages.
    pub whatsapp: Vec<WhatsAppFigures>,
    /// Bytes the webhook and the worker printed per message (logs and metrics).
    pub whatsapp_log_bytes_per_message: f64,
    /// Every line the four functions printed.
    pub metric_lines: Vec<String>,
}

/// Every turn, for plots and checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// degrau's asks.
    pub degrau: Vec<AskFigures>,
    /// degrau's compaction work per turn (only turns that had some).
    pub compactions: Vec<CompactionFigures>,
    /// LangChain's turns.
    pub langchain: Vec<LangchainTurn>,
}

/// Inputs of [`build`] besides the runs.
pub struct Settings {
    /// Checkpoint turns, ascending.
    pub checkpoints: Vec<usize>,
    /// Conversation seed.
    pub seed: u64,
    /// Compaction threshold.
    pub threshold_tokens: u64,
    /// Messages kept per step.
    pub keep_messages: usize,
    /// Clock ticks per second and its source.
    pub clk_tck: (u64, String),
    /// The machine.
    pub machine: Machine,
}

fn item_limit(pattern: &str, turns: &[&LangchainTurn], prices: &Prices) -> ItemLimit {
    let failed = turns.iter().find(|t| t.error.is_some() && !t.moto_artifact);
    let moto_refused_turn = turns.iter().find(|t| t.moto_artifact).map(|t| t.turn);
    let last_before_failure = failed.and_then(|f| f.last_fit).map(|(turn, bytes)| {
        // Eventually consistent GetItems (the class's default) and UpdateItems of
        // the whole item: `separate` reads it 3 times and writes it twice,
        // `runnable` reads it twice and writes it once.
        let (reads, writes) = if pattern == "runnable" {
            (2.0, 1.0)
        } else {
            (3.0, 2.0)
        };
        let rcu = reads * read_units(bytes, false);
        let wcu = writes * write_units(bytes);
        (turn, rcu, wcu, prices.dynamodb(rcu, wcu))
    });
    let over = turns
        .iter()
        .find(|t| t.item_bytes > MAX_ITEM_BYTES)
        .map(|t| t.turn);
    let measured: Vec<_> = turns
        .iter()
        .filter(|t| t.item_bytes > 0 && t.error.is_none())
        .collect();
    let (last_turn, last_bytes) = measured.last().map_or((0, 0), |t| (t.turn, t.item_bytes));
    let growth = match (measured.first(), measured.last()) {
        (Some(a), Some(b)) if b.turn > a.turn => {
            (b.item_bytes as f64 - a.item_bytes as f64) / (b.turn - a.turn) as f64
        }
        _ => 0.0,
    };
    let projected = (failed.is_none() && over.is_none() && growth > 0.0).then(|| {
        last_turn + ((MAX_ITEM_BYTES as f64 - last_bytes as f64) / growth).ceil() as usize
    });
    ItemLimit {
        pattern: pattern.to_owned(),
        failed_turn: failed.map(|t| t.turn),
        error: failed.and_then(|t| t.error.clone()),
        over_limit_turn: over,
        last_item_bytes: last_bytes,
        last_turn,
        growth_per_turn: growth,
        projected_turn: projected,
        last_before_failure,
        moto_refused_turn,
    }
}

/// Puts the runs together.
pub fn build(
    settings: Settings,
    run: &DegrauRun,
    langchain: &LangchainRun,
    cold: ColdRun,
    profile: String,
    binaries_note: Option<String>,
    extras: Extras,
) -> Report {
    let ColdRun {
        functions: cold_starts,
        peer: python_peer,
    } = cold;
    let prices = Prices::default();
    let signals = Signals::of(&prices, TEMPLATE, &extras.metric_lines);
    let patterns = patterns_of(langchain);
    let at = checkpoints(
        &settings.checkpoints,
        run,
        langchain,
        &patterns,
        &prices,
        &signals,
    );
    let item_limits = patterns
        .iter()
        .map(|p| {
            let turns: Vec<&LangchainTurn> =
                langchain.turns.iter().filter(|t| &t.pattern == p).collect();
            item_limit(p, &turns, &prices)
        })
        .collect();
    let compaction = at.last().map_or(0.0, |c: &Checkpoint| {
        c.span_bill.compaction_lambda + c.span_bill.compaction_dynamodb + c.span_bill.compaction_sqs
    });
    let whatsapp_bill = whatsapp_bill(
        &prices,
        &extras.whatsapp,
        extras.whatsapp_log_bytes_per_message,
        &signals,
        compaction,
    );
    Report {
        machine: settings.machine,
        profile,
        binaries_note,
        clk_tck: settings.clk_tck,
        turns: run.asks.len(),
        checkpoints: settings.checkpoints,
        seed: settings.seed,
        threshold_tokens: settings.threshold_tokens,
        keep_messages: settings.keep_messages,
        prices,
        at,
        steps: run.steps,
        failed_asks: run.asks.iter().filter(|a| a.status != 200).count(),
        log_bytes_per_ask: run.log_bytes_per_ask,
        peak_rss_end_kib: (run.ask_peak_rss_kib_end, run.compactor_peak_rss_kib_end),
        item_limits,
        langchain_requirements: langchain.requirements.clone(),
        langchain_mode: langchain.mode.clone(),
        langchain_skipped: langchain.skipped.clone(),
        cold_starts,
        python_peer,
        series: series(run, langchain),
        signals,
        whatsapp: extras.whatsapp,
        whatsapp_bill,
    }
}

/// LangChain's access patterns, in the order its turns first name them.
fn patterns_of(langchain: &LangchainRun) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for turn in &langchain.turns {
        if !seen.contains(&turn.pattern) {
            seen.push(turn.pattern.clone());
        }
    }
    seen
}

/// The figures at each checkpoint turn the run reached, each span's compaction
/// starting after the previous checkpoint.
fn checkpoints(
    turns: &[usize],
    run: &DegrauRun,
    langchain: &LangchainRun,
    patterns: &[String],
    prices: &Prices,
    signals: &Signals,
) -> Vec<Checkpoint> {
    let mut at = Vec::new();
    let mut previous = 0;
    for &turn in turns {
        let Some(ask) = run.asks.get(turn.saturating_sub(1)).cloned() else {
            continue;
        };
        let degrau_max = max_so_far(&run.asks[..turn]);
        let compaction = amortize(run, previous + 1, turn, prices);
        previous = turn;
        let bill = ask_bill(
            prices,
            &[&ask],
            &compaction,
            run.log_bytes_per_ask,
            signals.ask_access_log_bytes,
        );
        let span: Vec<&AskFigures> = run
            .asks
            .iter()
            .filter(|a| a.turn >= compaction.from_turn && a.turn <= turn)
            .collect();
        let span_bill = ask_bill(
            prices,
            &span,
            &compaction,
            run.log_bytes_per_ask,
            signals.ask_access_log_bytes,
        );
        let degrau_mean = mean_of_span(&span);
        let (lc, lc_bill) = langchain_at(langchain, patterns, turn, prices);
        at.push(Checkpoint {
            turn,
            degrau: ask,
            degrau_max,
            degrau_mean,
            compaction,
            bill,
            span_bill,
            langchain: lc,
            langchain_dynamodb_bill: lc_bill,
        });
    }
    at
}

/// The largest per-ask figures of `upto`.
fn max_so_far(upto: &[AskFigures]) -> MaxSoFar {
    MaxSoFar {
        bytes_read: upto.iter().map(|a| a.aws.bytes_read).max().unwrap_or(0),
        bytes_written: upto.iter().map(|a| a.aws.bytes_written).max().unwrap_or(0),
        rcu: upto.iter().map(|a| a.aws.rcu).fold(0.0, f64::max),
        wcu: upto.iter().map(|a| a.aws.wcu).fold(0.0, f64::max),
        dynamodb_calls: upto.iter().map(|a| a.aws.dynamodb_calls).max().unwrap_or(0),
    }
}

/// The mean per-ask figures of `span`.
fn mean_of_span(span: &[&AskFigures]) -> MeanOfSpan {
    let n = span.len().max(1) as f64;
    MeanOfSpan {
        bytes_read: sum(span.iter().map(|a| a.aws.bytes_read as f64)) / n,
        bytes_written: sum(span.iter().map(|a| a.aws.bytes_written as f64)) / n,
        rcu: sum(span.iter().map(|a| a.aws.rcu)) / n,
        wcu: sum(span.iter().map(|a| a.aws.wcu)) / n,
        cpu_ms: sum(span.iter().map(|a| a.cpu_ms)) / n,
    }
}

/// LangChain's turn at `turn` per pattern (when measured without error), and its
/// DynamoDB bill per million asks.
fn langchain_at(
    langchain: &LangchainRun,
    patterns: &[String],
    turn: usize,
    prices: &Prices,
) -> (BTreeMap<String, LangchainTurn>, BTreeMap<String, f64>) {
    let mut lc = BTreeMap::new();
    let mut lc_bill = BTreeMap::new();
    for pattern in patterns {
        if let Some(t) = langchain
            .turns
            .iter()
            .find(|t| &t.pattern == pattern && t.turn == turn && t.error.is_none())
        {
            lc_bill.insert(pattern.clone(), prices.dynamodb(t.aws.rcu, t.aws.wcu));
            lc.insert(pattern.clone(), t.clone());
        }
    }
    (lc, lc_bill)
}

/// Every turn: degrau's asks, its compactions (turns that had some), LangChain's.
fn series(run: &DegrauRun, langchain: &LangchainRun) -> Series {
    Series {
        degrau: run.asks.clone(),
        compactions: run
            .compactions
            .iter()
            .filter(|c| c.invocations > 0)
            .cloned()
            .collect(),
        langchain: langchain.turns.clone(),
    }
}
