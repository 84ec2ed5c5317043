//! The markdown report: one ask at each checkpoint turn beside LangChain's, the
//! compaction amortized per ask, the bill per million asks, the cold starts; and
//! how its numbers print.

use std::fmt::Write as _;

use super::degrau_run::AskFigures;
use super::langchain::LangchainTurn;
use super::report::{Amortized, Checkpoint, Report};
use super::sections::{fixed_markdown, init_against_peer, whatsapp_markdown};

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn units(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

pub(super) fn dollars(x: f64) -> String {
    if x >= 100.0 {
        format!("${}", thousands(x.round() as u64))
    } else {
        format!("${x:.2}")
    }
}

fn kib(k: f64) -> String {
    format!("{:.1} MiB", k / 1024.0)
}

/// What a LangChain cell without a measured turn says.
fn missing(report: &Report, pattern: &str, turn: usize) -> String {
    let limit = report.item_limits.iter().find(|l| l.pattern == pattern);
    match limit {
        Some(l) if l.failed_turn.is_some_and(|t| t <= turn) => "over 400 KB".to_owned(),
        Some(l) if l.moto_refused_turn.is_some_and(|t| t <= turn) => {
            "moto refused (note)".to_owned()
        }
        _ => "—".to_owned(),
    }
}

fn row(out: &mut String, label: &str, cells: &[String]) {
    let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
}

/// The markdown report.
pub fn markdown(report: &Report, command: &str) -> String {
    let mut out = String::new();
    let p = &report.prices;
    let _ = writeln!(
        out,
        "# degrau footprint: the cost of an ask as the history grows\n"
    );
    let _ = writeln!(
        out,
        "Machine: {} · function binaries: **{}** build · `{command}` · seed {} · \
         compaction threshold {} tokens, {} messages kept per step · {} turns, {} steps, \
         {} failed asks.\n",
        report.machine.label(),
        report.profile,
        report.seed,
        thousands(report.threshold_tokens),
        report.keep_messages,
        thousands(report.turns as u64),
        report.steps,
        report.failed_asks,
    );
    if let Some(note) = &report.binaries_note {
        let _ = writeln!(out, "> {note}\n");
    }

    let patterns: Vec<String> = report
        .item_limits
        .iter()
        .map(|l| l.pattern.clone())
        .collect();
    let mut header = vec!["per ask".to_owned()];
    for c in &report.at {
        header.push(format!("degrau @{}", thousands(c.turn as u64)));
    }
    for pattern in &patterns {
        for c in &report.at {
            header.push(format!("LangChain {pattern} @{}", thousands(c.turn as u64)));
        }
    }
    let _ = writeln!(out, "## One ask at turn N\n");
    let _ = writeln!(
        out,
        "degrau: the real `ask` function (one message in, the model and tool loop, one \
         transaction out). LangChain: `DynamoDBChatMessageHistory` on the same \
         conversation (user and reply texts); `separate` = add the user message, add the \
         reply, read the history; `runnable` = read once, add both in one \
         `add_messages` (what `RunnableWithMessageHistory` does). Sizes and capacity \
         units by DynamoDB's rules, recorded by `degrau-awsproxy`.\n"
    );
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    type Cell = dyn Fn(&AskFigures) -> String;
    type LcCell = dyn Fn(&LangchainTurn) -> String;
    let rows: Vec<(&str, Box<Cell>, Box<LcCell>)> = vec![
        (
            "DynamoDB calls",
            Box::new(|a| a.aws.dynamodb_calls.to_string()),
            Box::new(|t| t.aws.dynamodb_calls.to_string()),
        ),
        (
            "items read",
            Box::new(|a| thousands(a.aws.items_read)),
            Box::new(|t| thousands(t.aws.items_read)),
        ),
        (
            "bytes read",
            Box::new(|a| thousands(a.aws.bytes_read)),
            Box::new(|t| thousands(t.aws.bytes_read)),
        ),
        (
            "items written",
            Box::new(|a| thousands(a.aws.items_written)),
            Box::new(|t| thousands(t.aws.items_written)),
        ),
        (
            "bytes written",
            Box::new(|a| thousands(a.aws.bytes_written)),
            Box::new(|t| thousands(t.aws.bytes_written)),
        ),
        (
            "read units (RCU)",
            Box::new(|a| units(a.aws.rcu)),
            Box::new(|t| units(t.aws.rcu)),
        ),
        (
            "write units (WCU)",
            Box::new(|a| units(a.aws.wcu)),
            Box::new(|t| units(t.aws.wcu)),
        ),
        (
            "SQS requests",
            Box::new(|a| a.aws.sqs_billed_requests.to_string()),
            Box::new(|_| "—".to_owned()),
        ),
        (
            "CPU ms (schedstat)",
            Box::new(|a| format!("{:.1}", a.cpu_ms)),
            Box::new(|t| format!("{:.1}", t.cpu_ms)),
        ),
        (
            "CPU ms (utime+stime)",
            Box::new(|a| format!("{:.0}", a.cpu_ticks_ms)),
            Box::new(|_| "—".to_owned()),
        ),
        (
            "wall ms",
            Box::new(|a| format!("{:.1}", a.wall_ms)),
            Box::new(|t| format!("{:.1}", t.wall_ms)),
        ),
        (
            "… of which in AWS calls (moto here)",
            Box::new(|a| format!("{:.1}", a.aws.duration_ms)),
            Box::new(|t| format!("{:.1}", t.aws.duration_ms)),
        ),
    ];
    for (label, degrau, lc) in &rows {
        let mut cells: Vec<String> = report.at.iter().map(|c| degrau(&c.degrau)).collect();
        for pattern in &patterns {
            for c in &report.at {
                cells.push(
                    c.langchain
                        .get(pattern)
                        .map_or_else(|| missing(report, pattern, c.turn), lc),
                );
            }
        }
        row(&mut out, label, &cells);
    }
    let blanks = patterns.len() * report.at.len();
    let pad = |mut cells: Vec<String>| {
        cells.extend(std::iter::repeat_n(String::new(), blanks));
        cells
    };
    row(
        &mut out,
        "degrau, largest of turns 1..N: bytes read / RCU",
        &pad(report
            .at
            .iter()
            .map(|c| {
                format!(
                    "{} / {}",
                    thousands(c.degrau_max.bytes_read),
                    units(c.degrau_max.rcu)
                )
            })
            .collect()),
    );
    row(
        &mut out,
        "degrau, largest of turns 1..N: bytes written / WCU",
        &pad(report
            .at
            .iter()
            .map(|c| {
                format!(
                    "{} / {}",
                    thousands(c.degrau_max.bytes_written),
                    units(c.degrau_max.wcu)
                )
            })
            .collect()),
    );
    row(
        &mut out,
        "degrau, mean of the turns since the previous column: bytes read / RCU",
        &pad(report
            .at
            .iter()
            .map(|c| {
                format!(
                    "{} / {:.1}",
                    thousands(c.degrau_mean.bytes_read.round() as u64),
                    c.degrau_mean.rcu
                )
            })
            .collect()),
    );
    row(
        &mut out,
        "degrau, mean of the turns since the previous column: bytes written / WCU",
        &pad(report
            .at
            .iter()
            .map(|c| {
                format!(
                    "{} / {:.1}",
                    thousands(c.degrau_mean.bytes_written.round() as u64),
                    c.degrau_mean.wcu
                )
            })
            .collect()),
    );
    row(
        &mut out,
        "degrau, mean of the turns since the previous column: CPU ms",
        &pad(report
            .at
            .iter()
            .map(|c| format!("{:.1}", c.degrau_mean.cpu_ms))
            .collect()),
    );
    row(
        &mut out,
        &format!(
            "billed ms (own time + {} ms per AWS call)",
            report.prices.assumed_aws_call_ms
        ),
        &pad(report
            .at
            .iter()
            .map(|c| format!("{:.0}", c.bill.ask_billed_ms))
            .collect()),
    );
    if !patterns.is_empty() {
        let mut sizes: Vec<String> = report.at.iter().map(|_| String::new()).collect();
        for pattern in &patterns {
            for c in &report.at {
                sizes.push(
                    c.langchain
                        .get(pattern)
                        .map_or_else(String::new, |t| thousands(t.item_bytes)),
                );
            }
        }
        row(
            &mut out,
            "LangChain history item after the turn, bytes",
            &sizes,
        );
    }
    let _ = writeln!(out);
    for limit in &report.item_limits {
        let text = match (
            limit.failed_turn,
            limit.over_limit_turn,
            limit.projected_turn,
        ) {
            (Some(turn), _, _) => {
                let mut text = format!(
                    "reached at turn {turn}: {}; every later add fails the same way \
                     (the class raises; an agent that catches it loses the messages)",
                    limit.error.as_deref().unwrap_or("error")
                );
                if let Some((last, rcu, wcu, cost)) = limit.last_before_failure {
                    let _ = write!(
                        text,
                        ". At turn {last}, the last that fits, one ask costs about {} RCU and \
                         {} WCU: {} per million asks in DynamoDB alone",
                        units(rcu),
                        units(wcu),
                        dollars(cost)
                    );
                }
                text
            }
            (None, Some(turn), _) => format!(
                "the item passed 400 KB at turn {turn} (moto accepted it; DynamoDB refuses \
                 items over 400 KB)"
            ),
            (None, None, Some(turn)) => format!(
                "not reached in this run; {} bytes at turn {}, growing {:.0} bytes a turn: \
                 400 KB at about turn {}",
                thousands(limit.last_item_bytes),
                limit.last_turn,
                limit.growth_per_turn,
                thousands(turn as u64)
            ),
            _ => "not reached in this run".to_owned(),
        };
        let _ = writeln!(
            out,
            "- LangChain `{}`, DynamoDB's 400 KB item limit: {text}.",
            limit.pattern
        );
        if let Some(turn) = limit.moto_refused_turn {
            let _ = writeln!(
                out,
                "- LangChain `{}`: moto refused the class's UpdateItem from turn {turn} on, \
                 although DynamoDB would accept the item (moto's update check counts the \
                 replaced attribute twice); later checkpoints could not be measured on moto.",
                limit.pattern
            );
        }
    }
    if let Some(why) = &report.langchain_skipped {
        let _ = writeln!(out, "- LangChain did not run: {why}.");
    }
    let _ = writeln!(out);

    let _ = writeln!(out, "## Compaction, amortized per ask\n");
    let _ = writeln!(
        out,
        "The compactor's work (step jobs from the SQS FIFO queue, through the event \
         source mapping) over the turns since the previous column, divided by those \
         turns.\n"
    );
    let _ = writeln!(
        out,
        "| per ask | {} |",
        report
            .at
            .iter()
            .map(|c| format!("turns {}–{}", c.compaction.from_turn, c.compaction.to_turn))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out, "|{}", "---|".repeat(report.at.len() + 1));
    type AmortizedCell = Box<dyn Fn(&Amortized) -> String>;
    let compaction_rows: Vec<(&str, AmortizedCell)> = vec![
        (
            "compactor invocations",
            Box::new(|a| format!("{} ({:.3})", a.invocations, a.invocations_per_ask)),
        ),
        (
            "compactor ms (measured here)",
            Box::new(|a| format!("{:.2}", a.duration_ms_per_ask)),
        ),
        (
            "compactor ms (billed)",
            Box::new(|a| format!("{:.2}", a.billed_ms_per_ask)),
        ),
        (
            "compactor CPU ms",
            Box::new(|a| format!("{:.2}", a.cpu_ms_per_ask)),
        ),
        (
            "DynamoDB calls",
            Box::new(|a| format!("{:.2}", a.dynamodb_calls_per_ask)),
        ),
        ("RCU", Box::new(|a| format!("{:.2}", a.rcu_per_ask))),
        ("WCU", Box::new(|a| format!("{:.2}", a.wcu_per_ask))),
        (
            "SQS requests",
            Box::new(|a| format!("{:.2}", a.sqs_requests_per_ask)),
        ),
    ];
    for (label, cell) in &compaction_rows {
        row(
            &mut out,
            label,
            &report
                .at
                .iter()
                .map(|c| cell(&c.compaction))
                .collect::<Vec<_>>(),
        );
    }
    let _ = writeln!(out);

    let _ = writeln!(out, "## AWS bill per million asks, excluding the model\n");
    let mut header = vec!["USD per 1M asks".to_owned()];
    for c in &report.at {
        header.push(format!("degrau @{}", thousands(c.turn as u64)));
    }
    for pattern in &patterns {
        for c in &report.at {
            header.push(format!("LangChain {pattern} @{}", thousands(c.turn as u64)));
        }
    }
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    let lc_cells = |f: &dyn Fn(f64) -> String| {
        let mut cells = Vec::new();
        for pattern in &patterns {
            for c in &report.at {
                cells.push(
                    c.langchain_dynamodb_bill
                        .get(pattern)
                        .map_or_else(|| "—".to_owned(), |b| f(*b)),
                );
            }
        }
        cells
    };
    /// What the LangChain columns of a bill row hold.
    enum Lc {
        Dynamo,
        Total,
        Blank,
    }
    type BillCell = Box<dyn Fn(&Checkpoint) -> String>;
    let bill_rows: Vec<(&str, BillCell, Lc)> = vec![
        (
            "ask Lambda (requests + GB-s)",
            Box::new(|c| dollars(c.bill.ask_lambda)),
            Lc::Blank,
        ),
        (
            "ask DynamoDB",
            Box::new(|c| dollars(c.bill.ask_dynamodb)),
            Lc::Dynamo,
        ),
        (
            "ask SQS (step jobs sent)",
            Box::new(|c| dollars(c.bill.ask_sqs)),
            Lc::Blank,
        ),
        (
            "compactor Lambda",
            Box::new(|c| dollars(c.bill.compaction_lambda)),
            Lc::Blank,
        ),
        (
            "compactor DynamoDB",
            Box::new(|c| dollars(c.bill.compaction_dynamodb)),
            Lc::Blank,
        ),
        (
            "SQS (jobs received and deleted)",
            Box::new(|c| dollars(c.bill.compaction_sqs)),
            Lc::Blank,
        ),
        (
            "CloudWatch Logs ingestion",
            Box::new(|c| dollars(c.bill.logs)),
            Lc::Blank,
        ),
        (
            "API Gateway (the HTTP API request)",
            Box::new(|c| dollars(c.bill.api_gateway)),
            Lc::Blank,
        ),
        (
            "API access log line, ingested",
            Box::new(|c| dollars(c.bill.access_logs)),
            Lc::Blank,
        ),
        (
            "X-Ray (the ask's trace and each compactor invocation's)",
            Box::new(|c| dollars(c.bill.xray)),
            Lc::Blank,
        ),
        (
            "**total**",
            Box::new(|c| format!("**{}**", dollars(c.bill.total))),
            Lc::Total,
        ),
        (
            "total from the mean ask of the span since the previous column (steady state)",
            Box::new(|c| dollars(c.span_bill.total)),
            Lc::Blank,
        ),
        (
            "(ask Lambda at the wall time measured here, moto's latency included; not in the total)",
            Box::new(|c| dollars(c.bill.ask_lambda_as_measured)),
            Lc::Blank,
        ),
    ];
    for (label, cell, lc) in &bill_rows {
        let mut cells: Vec<String> = report.at.iter().map(cell).collect();
        match lc {
            Lc::Dynamo => cells.extend(lc_cells(&dollars)),
            Lc::Total => {
                cells.extend(lc_cells(&|b| format!("**{}** (DynamoDB only)", dollars(b))));
            }
            Lc::Blank => cells.extend(std::iter::repeat_n("—".to_owned(), blanks)),
        }
        row(&mut out, label, &cells);
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Prices (USD, us-east-1, on demand; `bench/src/footprint/report.rs`, `Prices`): \
         Lambda arm64 ${} per GB-second and ${:.2} per million requests, at the template's \
         {} MB ({} MB for the WhatsApp webhook); DynamoDB ${} per million write units (1 KB) \
         and ${} per million read units (4 KB strongly consistent, half for eventually \
         consistent, transactions double); SQS FIFO ${:.2} per million requests (64 KB \
         each); CloudWatch Logs ingestion ${:.2} per GB; API Gateway HTTP API ${:.2} per \
         million requests; X-Ray ${:.2} per million traces recorded, every invocation \
         counted as traced (the default sampling rule records the first request of each \
         second and 5 % of the rest, so at a small business's traffic it records them all; \
         the first 100,000 traces a month are free). Lambda duration: the function's \
         measured wall time less the time it waited on moto, plus an assumed {} ms per \
         DynamoDB or SQS call (moto on a shared 2-core machine answers in tens to hundreds \
         of ms, DynamoDB in single-digit ms); the stand-in's answers on loopback are \
         included. In production the function also waits for the model, and each second \
         of that wait adds {} per million asks. The access log line is the template's \
         format with values of their usual size: {:.0} bytes for an ask. Storage, data \
         transfer and the model are not included. LangChain's column is its DynamoDB cost \
         only (its process is not a Lambda here).\n",
        p.lambda_gb_second,
        p.lambda_per_million_requests,
        p.memory_mb,
        p.webhook_memory_mb,
        p.dynamodb_per_million_write_units,
        p.dynamodb_per_million_read_units,
        p.sqs_fifo_per_million_requests,
        p.logs_per_gb,
        p.http_api_per_million_requests,
        p.xray_per_million_traces,
        p.assumed_aws_call_ms,
        dollars(p.per_model_second()),
        report.signals.ask_access_log_bytes,
    );
    out.push_str(&whatsapp_markdown(report));
    out.push_str(&fixed_markdown(report));

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
    let _ = writeln!(out);
    out.push_str(&init_against_peer(report));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234), "1,234");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(units(2.0), "2");
        assert_eq!(units(2.5), "2.5");
        assert_eq!(dollars(0.626), "$0.63");
        assert_eq!(dollars(1234.4), "$1,234");
    }
}
