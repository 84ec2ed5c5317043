//! One long conversation through the real ask function, with the compaction
//! jobs drained after every turn (the stepped policy as deployed), measuring
//! each ask on its own: its DynamoDB and SQS calls (from the proxy's log), its
//! process's CPU time and its duration.

use std::time::Instant;

use degrau::domain::FactKey;
use degrau::tenant::TenantConfig;
use degrau_awsproxy::Summary;
use serde::Serialize;

use super::procfs::{CpuTime, peak_rss_kib};
use super::stack::{ProxiedStack, TimedInvoke};

/// The tenant of the benchmark.
pub const TENANT: &str = "footprint";
/// The contact of the benchmark's conversation.
pub const CONTACT: &str = "bench-contact";

/// One ask, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AskFigures {
    /// 1-based turn.
    pub turn: usize,
    /// HTTP status of the ask.
    pub status: u16,
    /// Wall time of the invocation as the harness saw it, ms: what Lambda bills
    /// as duration, plus up to 5 ms of the local Runtime API's polling.
    pub wall_ms: f64,
    /// CPU time of the ask process over the invocation (schedstat, ns precision), ms.
    pub cpu_ms: f64,
    /// The same from `utime + stime` (clock-tick steps), ms.
    pub cpu_ticks_ms: f64,
    /// `usage.context_tokens` of the reply.
    pub context_tokens: u64,
    /// Whether the ask queued a compaction step.
    pub compaction_queued: bool,
    /// The ask's AWS calls.
    pub aws: Summary,
}

/// The compaction work that followed one turn (the bridge drained the queue).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionFigures {
    /// 1-based turn it followed.
    pub turn: usize,
    /// Compactor invocations (batches).
    pub invocations: usize,
    /// Their summed wall time, ms.
    pub duration_ms: f64,
    /// CPU time of the compactor process over them, ms (schedstat).
    pub cpu_ms: f64,
    /// The compactor's DynamoDB calls and the event source mapping's SQS calls.
    pub aws: Summary,
}

/// A whole conversation's measurements.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DegrauRun {
    /// Every ask, in order.
    pub asks: Vec<AskFigures>,
    /// Every turn's compaction work (zeros where nothing was queued).
    pub compactions: Vec<CompactionFigures>,
    /// (user text, reply text) per turn, for the LangChain run.
    #[serde(skip)]
    pub transcript: Vec<(String, String)>,
    /// Steps at the end (`/memory`'s `session.steps`).
    pub steps: u64,
    /// Mean bytes the ask function printed per ask (logs and EMF metrics).
    pub log_bytes_per_ask: f64,
    /// Peak RSS of the ask process at the end of the run, KiB.
    pub ask_peak_rss_kib_end: Option<u64>,
    /// Peak RSS of the compactor process at the end of the run, KiB.
    pub compactor_peak_rss_kib_end: Option<u64>,
}

/// The tenant's configuration: the deployed defaults' compaction settings made
/// explicit (so `--threshold` and `--keep` apply as in the strategies bench).
pub fn tenant_config(threshold: u64, keep: usize) -> TenantConfig {
    TenantConfig {
        instructions: Some(
            "You book haircuts for a barber shop. Answer briefly and use the tools.".into(),
        ),
        allowed_fact_keys: Some(
            [
                "name",
                "preferred_time",
                "preferred_professional",
                "preferred_service",
            ]
            .iter()
            .filter_map(|k| FactKey::parse(k).ok())
            .collect(),
        ),
        compaction_threshold_tokens: Some(threshold),
        window_keep_messages: Some(keep),
        ..TenantConfig::default()
    }
}

/// Plays `texts` (one user message per turn) through `stack`, draining the jobs
/// queue after each turn. `progress` is called after every turn.
pub async fn run(
    stack: &ProxiedStack,
    texts: &[String],
    clk_tck: u64,
    mut progress: impl FnMut(&AskFigures),
) -> DegrauRun {
    let ask_pid = stack.ask.pids()[0];
    let compactor_pid = stack.compactor.pids()[0];
    let output_before: usize = output_bytes(&stack.ask.output());
    let invoke = TimedInvoke::new(&stack.compactor);
    let mut asks = Vec::with_capacity(texts.len());
    let mut compactions = Vec::with_capacity(texts.len());
    let mut transcript = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        let turn = index + 1;
        let (figures, reply) = ask(stack, ask_pid, turn, text, clk_tck).await;
        progress(&figures);
        asks.push(figures);
        transcript.push((text.clone(), reply));
        compactions.push(drain(stack, &invoke, compactor_pid, turn).await);
    }
    stack.proxy.reset();
    let steps = stack.memory(TENANT, CONTACT).await["session"]["steps"]
        .as_u64()
        .unwrap_or(0);
    // Give the output readers a moment to catch the last lines.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let printed = output_bytes(&stack.ask.output()).saturating_sub(output_before);
    DegrauRun {
        log_bytes_per_ask: printed as f64 / texts.len().max(1) as f64,
        asks,
        compactions,
        transcript,
        steps,
        ask_peak_rss_kib_end: peak_rss_kib(ask_pid),
        compactor_peak_rss_kib_end: peak_rss_kib(compactor_pid),
    }
}

/// One ask, measured: its AWS calls (from the proxy), its CPU (from `/proc`),
/// its wall time; and the reply's text.
async fn ask(
    stack: &ProxiedStack,
    ask_pid: u32,
    turn: usize,
    text: &str,
    clk_tck: u64,
) -> (AskFigures, String) {
    stack.proxy.reset();
    let cpu_before = CpuTime::of(ask_pid);
    let started = Instant::now();
    let reply = stack.post(TENANT, CONTACT, text).await;
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let cpu_after = CpuTime::of(ask_pid);
    let aws = Summary::of(&stack.proxy.log());
    let figures = AskFigures {
        turn,
        status: reply.status,
        wall_ms,
        cpu_ms: cpu_after.sched_ms_since(&cpu_before),
        cpu_ticks_ms: cpu_after.ticks_ms_since(&cpu_before, clk_tck),
        context_tokens: reply.body["usage"]["context_tokens"].as_u64().unwrap_or(0),
        compaction_queued: reply.body["compaction_queued"].as_bool().unwrap_or(false),
        aws,
    };
    let reply = reply.body["reply"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (figures, reply)
}

/// The jobs queue drained after turn `turn`, measured: invocations, their wall
/// time, the compactor's CPU and AWS calls.
async fn drain(
    stack: &ProxiedStack,
    invoke: &TimedInvoke<'_>,
    compactor_pid: u32,
    turn: usize,
) -> CompactionFigures {
    stack.proxy.reset();
    let cpu_before = CpuTime::of(compactor_pid);
    let invocations = stack.drain(invoke).await;
    let cpu_after = CpuTime::of(compactor_pid);
    let durations = invoke.take();
    CompactionFigures {
        turn,
        invocations,
        duration_ms: durations.iter().map(|d| d.as_secs_f64() * 1000.0).sum(),
        cpu_ms: cpu_after.sched_ms_since(&cpu_before),
        aws: Summary::of(&stack.proxy.log()),
    }
}

fn output_bytes(lines: &[String]) -> usize {
    lines.iter().map(|l| l.len() + 1).sum()
}
