//! "Cold start and footprint": each function's binary, init and peak RSS beside
//! the Python peer's, the init against the peer's, and how they were measured.

use std::fmt::Write as _;

use crate::footprint::numbers::{kib, thousands};
use crate::footprint::report::Report;

/// The section: the table, the init against the peer's, the notes.
pub(super) fn section(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Cold start and footprint\n");
    let _ = writeln!(
        out,
        "| function | binary ({}) | init, median of {} (min–max) | peak RSS after one invocation, median | peak RSS after the {}-turn run |",
        report.profile,
        report.cold_starts.first().map_or(0, |c| c.init_ms.len()),
        thousands(report.turns as u64),
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (i, cold) in report.cold_starts.iter().enumerate() {
        let min = cold.init_ms.iter().copied().fold(f64::INFINITY, f64::min);
        let max = cold.init_ms.iter().copied().fold(0.0, f64::max);
        let end = if i == 0 {
            report.peak_rss_end_kib.0
        } else {
            report.peak_rss_end_kib.1
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} ms ({:.1}–{:.1}) | {} | {} |",
            cold.function,
            kib(cold.binary_bytes as f64 / 1024.0),
            cold.median_init_ms(),
            min,
            max,
            kib(cold.median_peak_rss_kib()),
            end.map_or_else(|| "—".to_owned(), |k| kib(k as f64)),
        );
    }
    peer_row(&mut out, report);
    let _ = writeln!(out);
    out.push_str(&init_against_peer(report));
    out.push_str(&notes(report));
    out
}

/// The Python peer's row, when it ran.
fn peer_row(out: &mut String, report: &Report) {
    let peer = &report.python_peer;
    if peer.skipped.is_none() && !peer.starts.init_ms.is_empty() {
        let starts = &peer.starts;
        let min = starts.init_ms.iter().copied().fold(f64::INFINITY, f64::min);
        let max = starts.init_ms.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "| Python peer ({}; {}) | — | {:.1} ms ({:.1}–{:.1}) | {} (one empty event) | — |",
            peer.python,
            peer.requirements.join(", "),
            starts.median_init_ms(),
            min,
            max,
            kib(starts.median_peak_rss_kib()),
        );
    }
}

/// How init, peak RSS and CPU were measured; how the LangChain side ran.
fn notes(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Init: process start to its first poll of the local Runtime API; peak RSS: `VmHWM` \
         of `/proc/PID/status`. CPU per ask: the ask process's CPU over the invocation, from \
         `/proc/PID/task/*/schedstat` (ns) and from `utime+stime` of `/proc/PID/stat` \
         ({} ticks a second, {}; 10 ms steps at 100). The ask prints {:.0} bytes of logs \
         and metrics per ask on average.\n",
        report.clk_tck.0, report.clk_tck.1, report.log_bytes_per_ask,
    );
    if !report.langchain_requirements.is_empty() && report.langchain_skipped.is_none() {
        let how = if report.langchain_mode == "full" {
            "every turn played through the class"
        } else {
            "each checkpoint turn played through the class on a history item seeded with \
             the earlier turns exactly as the class stores them (the same calls and sizes \
             as playing every turn; `--langchain-full` does that)"
        };
        let _ = writeln!(
            out,
            "LangChain side: {} (`bench/langchain/history.py`); {how}. Only the user and \
             reply texts are stored there, not the tool rounds degrau keeps, which favours \
             LangChain. Its CPU is the Python process's (`time.process_time`), its wall \
             time the history calls' alone.",
            report.langchain_requirements.join(", ")
        );
    }
    out
}

/// The functions' init beside the Python peer's: the same init (DynamoDB and SQS
/// clients, an HTTP client, the API key read from SSM), started one after the other
/// in each round of the same run.
fn init_against_peer(report: &Report) -> String {
    let peer = &report.python_peer;
    if let Some(why) = &peer.skipped {
        return format!("No Python peer this run: {why}.\n\n");
    }
    let peer_ms = peer.starts.median_init_ms();
    if peer_ms <= 0.0 {
        return String::new();
    }
    let mut out = format!(
        "Init beside the Python peer (bench/python-peer/peer.py: boto3 DynamoDB and SQS \
         clients, an httpx client, one SSM SecureString read, then the Runtime API loop; every \
         process here reads the API key from SSM on moto through the proxy, plain HTTP on \
         loopback, so no TLS handshake is timed; medians of {} starts each, interleaved; \
         issue 15's goal: at most 1/5 of the peer's):\n\n\
         | function | init, median | Python peer's | function / peer | peer / function | goal (≤ 0.20) |\n\
         |---|---:|---:|---:|---:|---|\n",
        peer.starts.init_ms.len()
    );
    for cold in &report.cold_starts {
        let ms = cold.median_init_ms();
        let ratio = ms / peer_ms;
        out.push_str(&format!(
            "| {} | {ms:.1} ms | {peer_ms:.1} ms | {ratio:.3} | {:.1}× | {} |\n",
            cold.function,
            if ms > 0.0 { peer_ms / ms } else { 0.0 },
            if ratio <= 0.2 {
                "met".to_owned()
            } else {
                format!("missed by {:.3}", ratio - 0.2)
            }
        ));
    }
    out.push('\n');
    out
}
