//! From the measurements to figures: one ask at each checkpoint turn, the
//! compaction work amortized per ask, where LangChain's item meets DynamoDB's
//! limit, and the prices the bills use; [`build`] puts the runs together. The
//! bills ([`super::bill`]), the signals ([`super::signals`]) and the markdown
//! ([`super::markdown`], [`super::sections`]) have their own files; their public
//! items are re-exported here.

use std::collections::BTreeMap;

use serde::Serialize;

use super::bill::ask_bill;
use super::cold::{ColdRun, ColdStarts, PeerColdStarts};
use super::degrau_run::{AskFigures, DegrauRun};
use super::langchain::{LangchainRun, LangchainTurn};
use super::procfs::Machine;
use degrau_awsproxy::size::{MAX_ITEM_BYTES, read_units, write_units};

pub use super::bill::{Bill, WhatsAppBill, whatsapp_bill};
pub use super::markdown::{markdown, thousands};
pub use super::sections::init_against_peer;
pub use super::signals::{
    Signals, TEMPLATE, access_log_format, access_log_line_bytes, alarm_metrics, custom_metrics,
};

/// The prices the bill uses (USD; us-east-1, on demand, as in
/// the AWS price pages of late 2026).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prices {
    /// Lambda duration, arm64, per GB-second.
    pub lambda_gb_second: f64,
    /// Lambda requests, per million.
    pub lambda_per_million_requests: f64,
    /// Memory of both functions in `template.yaml` (`MemorySize`), MB.
    pub memory_mb: u64,
    /// DynamoDB on-demand, per million write request units (1 KB).
    pub dynamodb_per_million_write_units: f64,
    /// DynamoDB on-demand, per million read request units (4 KB strongly
    /// consistent; half a unit eventually consistent; transactions double).
    pub dynamodb_per_million_read_units: f64,
    /// SQS FIFO, per million requests (each 64 KB of payload is one request).
    pub sqs_fifo_per_million_requests: f64,
    /// CloudWatch Logs ingestion, per GB.
    pub logs_per_gb: f64,
    /// Memory of the WhatsApp webhook in `template.yaml`, MB (the other three
    /// functions have [`Prices::memory_mb`]).
    pub webhook_memory_mb: u64,
    /// API Gateway HTTP API, per million requests (the first 300 million a month;
    /// each 512 KB of a request or response counts as one).
    pub http_api_per_million_requests: f64,
    /// X-Ray, per million traces recorded (the first 100,000 a month are free;
    /// retrieving and scanning traces, $0.50 per million, only when someone looks).
    pub xray_per_million_traces: f64,
    /// CloudWatch, per alarm metric a month (standard resolution; a metric-math
    /// alarm pays for each metric in it; the first 10 are free).
    pub alarm_metric_per_month: f64,
    /// CloudWatch, per dashboard a month (the first 3 of an account are free).
    pub dashboard_per_month: f64,
    /// CloudWatch, per custom metric a month (the first 10,000; EMF: each metric
    /// name with each set of dimension values is one).
    pub custom_metric_per_month: f64,
    /// Meta, per reply the WhatsApp worker sends: a free-form reply inside the
    /// 24-hour customer service window is free (Meta's per-message pricing since
    /// July 2025); only the tenant's template outside it is charged, by country.
    pub whatsapp_service_reply: f64,
    /// Not a price: the latency assumed for one DynamoDB or SQS call in AWS, ms
    /// ("single-digit milliseconds"), billed in place of moto's on this machine.
    pub assumed_aws_call_ms: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            lambda_gb_second: 0.000_013_333_4,
            lambda_per_million_requests: 0.20,
            memory_mb: 512,
            dynamodb_per_million_write_units: 0.625,
            dynamodb_per_million_read_units: 0.125,
            sqs_fifo_per_million_requests: 0.50,
            logs_per_gb: 0.50,
            webhook_memory_mb: 256,
            http_api_per_million_requests: 1.00,
            xray_per_million_traces: 5.00,
            alarm_metric_per_month: 0.10,
            dashboard_per_month: 3.00,
            custom_metric_per_month: 0.30,
            whatsapp_service_reply: 0.0,
            assumed_aws_call_ms: 5.0,
        }
    }
}

impl Prices {
    /// USD per million invocations lasting `ms` each (billed per started ms).
    pub fn lambda(&self, invocations_per_ask: f64, ms_per_ask: f64) -> f64 {
        self.lambda_at(self.memory_mb, invocations_per_ask, ms_per_ask)
    }

    /// [`Prices::lambda`] for a function of `memory_mb`.
    pub fn lambda_at(&self, memory_mb: u64, invocations_per_ask: f64, ms_per_ask: f64) -> f64 {
        let gb = memory_mb as f64 / 1024.0;
        invocations_per_ask * self.lambda_per_million_requests
            + 1e6 * gb * (ms_per_ask / 1000.0) * self.lambda_gb_second
    }

    /// USD per million asks of `requests` HTTP API requests each.
    pub fn http_api(&self, requests: f64) -> f64 {
        requests * self.http_api_per_million_requests
    }

    /// USD per million asks recording `traces` X-Ray traces each.
    pub fn xray(&self, traces: f64) -> f64 {
        traces * self.xray_per_million_traces
    }

    /// USD per million asks of `rcu` and `wcu` each.
    pub fn dynamodb(&self, rcu: f64, wcu: f64) -> f64 {
        rcu * self.dynamodb_per_million_read_units + wcu * self.dynamodb_per_million_write_units
    }

    /// USD per million asks of `requests` billed SQS requests each.
    pub fn sqs(&self, requests: f64) -> f64 {
        requests * self.sqs_fifo_per_million_requests
    }

    /// USD per million asks printing `bytes` of logs each.
    pub fn logs(&self, bytes: f64) -> f64 {
        1e6 * bytes / 1e9 * self.logs_per_gb
    }

    /// What each second of model time costs per million asks (the ask function
    /// waits for the model, and Lambda bills the wait).
    pub fn per_model_second(&self) -> f64 {
        self.lambda(0.0, 1000.0)
    }

    /// The duration billed for an invocation that lasted `wall_ms`, of which
    /// `aws_ms` waiting on `calls` AWS calls: moto's latency is replaced by
    /// [`Prices::assumed_aws_call_ms`] per call; Lambda bills started ms.
    pub fn billed_ms(&self, wall_ms: f64, aws_ms: f64, calls: u64) -> f64 {
        ((wall_ms - aws_ms).max(0.0) + calls as f64 * self.assumed_aws_call_ms).ceil()
    }
}

/// Σ of `values`, 0.0 (not -0.0) when empty.
pub(super) fn sum(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |a, b| a + b)
}

/// The compaction work of a span of turns, per ask.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Amortized {
    /// First turn of the span (1-based).
    pub from_turn: usize,
    /// Last turn of the span.
    pub to_turn: usize,
    /// Compactor invocations in the span.
    pub invocations: usize,
    /// Per ask: compactor invocations.
    pub invocations_per_ask: f64,
    /// Per ask: compactor wall time as measured here, ms.
    pub duration_ms_per_ask: f64,
    /// Per ask: compactor duration billed, ms (moto's latency replaced, see
    /// [`Prices::billed_ms`]).
    pub billed_ms_per_ask: f64,
    /// Per ask: compactor CPU, ms.
    pub cpu_ms_per_ask: f64,
    /// Per ask: DynamoDB calls of the compactor.
    pub dynamodb_calls_per_ask: f64,
    /// Per ask: read units.
    pub rcu_per_ask: f64,
    /// Per ask: write units.
    pub wcu_per_ask: f64,
    /// Per ask: billed SQS requests of the event source mapping (empty polls
    /// excluded: they run whatever the traffic).
    pub sqs_requests_per_ask: f64,
}

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
    pub whatsapp: Vec<super::whatsapp::WhatsAppFigures>,
    /// The bill per million WhatsApp messages.
    pub whatsapp_bill: WhatsAppBill,
}

/// The runs besides the conversation through `ask`: the WhatsApp messages, and
/// every EMF line the four functions printed.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// The WhatsApp messages.
    pub whatsapp: Vec<super::whatsapp::WhatsAppFigures>,
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
    pub compactions: Vec<super::degrau_run::CompactionFigures>,
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

fn amortize(run: &DegrauRun, from: usize, to: usize, prices: &Prices) -> Amortized {
    let span: Vec<_> = run
        .compactions
        .iter()
        .filter(|c| c.turn >= from && c.turn <= to)
        .collect();
    let asks = span.len().max(1) as f64;
    let invocations: usize = span.iter().map(|c| c.invocations).sum();
    Amortized {
        from_turn: from,
        to_turn: to,
        invocations,
        invocations_per_ask: invocations as f64 / asks,
        duration_ms_per_ask: sum(span.iter().map(|c| c.duration_ms)) / asks,
        billed_ms_per_ask: sum(span.iter().filter(|c| c.invocations > 0).map(|c| {
            prices.billed_ms(
                c.duration_ms,
                c.aws.dynamodb_duration_ms,
                c.aws.dynamodb_calls,
            )
        })) / asks,
        cpu_ms_per_ask: sum(span.iter().map(|c| c.cpu_ms)) / asks,
        dynamodb_calls_per_ask: sum(span.iter().map(|c| c.aws.dynamodb_calls as f64)) / asks,
        rcu_per_ask: sum(span.iter().map(|c| c.aws.rcu)) / asks,
        wcu_per_ask: sum(span.iter().map(|c| c.aws.wcu)) / asks,
        sqs_requests_per_ask: sum(span.iter().map(|c| c.aws.sqs_billed_requests as f64)) / asks,
    }
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
    let mut at = Vec::new();
    let mut previous = 0;
    let patterns: Vec<String> = {
        let mut seen: Vec<String> = Vec::new();
        for turn in &langchain.turns {
            if !seen.contains(&turn.pattern) {
                seen.push(turn.pattern.clone());
            }
        }
        seen
    };
    for &turn in &settings.checkpoints {
        let Some(ask) = run.asks.get(turn.saturating_sub(1)).cloned() else {
            continue;
        };
        let upto = &run.asks[..turn];
        let degrau_max = MaxSoFar {
            bytes_read: upto.iter().map(|a| a.aws.bytes_read).max().unwrap_or(0),
            bytes_written: upto.iter().map(|a| a.aws.bytes_written).max().unwrap_or(0),
            rcu: upto.iter().map(|a| a.aws.rcu).fold(0.0, f64::max),
            wcu: upto.iter().map(|a| a.aws.wcu).fold(0.0, f64::max),
            dynamodb_calls: upto.iter().map(|a| a.aws.dynamodb_calls).max().unwrap_or(0),
        };
        let compaction = amortize(run, previous + 1, turn, &prices);
        previous = turn;
        let bill = ask_bill(
            &prices,
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
            &prices,
            &span,
            &compaction,
            run.log_bytes_per_ask,
            signals.ask_access_log_bytes,
        );
        let n = span.len().max(1) as f64;
        let degrau_mean = MeanOfSpan {
            bytes_read: sum(span.iter().map(|a| a.aws.bytes_read as f64)) / n,
            bytes_written: sum(span.iter().map(|a| a.aws.bytes_written as f64)) / n,
            rcu: sum(span.iter().map(|a| a.aws.rcu)) / n,
            wcu: sum(span.iter().map(|a| a.aws.wcu)) / n,
            cpu_ms: sum(span.iter().map(|a| a.cpu_ms)) / n,
        };
        let mut lc = BTreeMap::new();
        let mut lc_bill = BTreeMap::new();
        for pattern in &patterns {
            if let Some(t) = langchain
                .turns
                .iter()
                .find(|t| &t.pattern == pattern && t.turn == turn && t.error.is_none())
            {
                lc_bill.insert(pattern.clone(), prices.dynamodb(t.aws.rcu, t.aws.wcu));
                lc.insert(pattern.clone(), t.clone());
            }
        }
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
        series: Series {
            degrau: run.asks.clone(),
            compactions: run
                .compactions
                .iter()
                .filter(|c| c.invocations > 0)
                .cloned()
                .collect(),
            langchain: langchain.turns.clone(),
        },
        signals,
        whatsapp: extras.whatsapp,
        whatsapp_bill,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_bill_follows_the_prices() {
        let p = Prices::default();
        // 1 M requests at 100 ms and 512 MB: $0.20 + 0.5 GB × 0.1 s × 1e6 × $0.0000133334.
        assert!((p.lambda(1.0, 100.0) - (0.20 + 0.666_67)).abs() < 1e-3);
        assert!((p.dynamodb(2.0, 4.0) - (0.25 + 2.5)).abs() < 1e-9);
        assert!((p.sqs(3.0) - 1.5).abs() < 1e-9);
        assert!((p.per_model_second() - 6.6667).abs() < 1e-3);
    }
}
