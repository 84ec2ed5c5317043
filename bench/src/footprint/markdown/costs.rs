//! What the asks cost: the compaction work amortized per ask, and the AWS bill
//! per million asks (excluding the model) beside LangChain's DynamoDB cost, with
//! the prices it uses.

use std::fmt::Write as _;

use crate::footprint::compaction::Amortized;
use crate::footprint::numbers::{dollars, row, thousands};
use crate::footprint::report::{Checkpoint, Report};

/// A cell of the compaction table, from a span's amortized work.
type AmortizedCell = Box<dyn Fn(&Amortized) -> String>;
/// A degrau cell of the bill table, from its checkpoint.
type BillCell = Box<dyn Fn(&Checkpoint) -> String>;

/// What the LangChain columns of a bill row hold.
enum Lc {
    Dynamo,
    Total,
    Blank,
}

/// "Compaction, amortized per ask": one column per span between checkpoints.
pub(super) fn compaction_section(report: &Report) -> String {
    let mut out = String::new();
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
    let compaction_rows = compaction_rows();
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
    out
}

/// The compaction table's rows: a label and its cell.
fn compaction_rows() -> Vec<(&'static str, AmortizedCell)> {
    vec![
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
    ]
}

/// "AWS bill per million asks": degrau at each checkpoint, then LangChain's
/// DynamoDB cost per pattern; then the prices.
pub(super) fn bill_section(report: &Report, patterns: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## AWS bill per million asks, excluding the model\n");
    let mut header = vec!["USD per 1M asks".to_owned()];
    for c in &report.at {
        header.push(format!("degrau @{}", thousands(c.turn as u64)));
    }
    for pattern in patterns {
        for c in &report.at {
            header.push(format!("LangChain {pattern} @{}", thousands(c.turn as u64)));
        }
    }
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    let lc_cells = |f: &dyn Fn(f64) -> String| {
        let mut cells = Vec::new();
        for pattern in patterns {
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
    let blanks = patterns.len() * report.at.len();
    let bill_rows = bill_rows();
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
    out.push_str(&prices_paragraph(report));
    out
}

/// The bill table's rows: a label, degrau's cell, what LangChain's columns hold.
fn bill_rows() -> Vec<(&'static str, BillCell, Lc)> {
    vec![
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
    ]
}

/// The prices the bill uses and what it assumes, in one paragraph.
fn prices_paragraph(report: &Report) -> String {
    let mut out = String::new();
    let p = &report.prices;
    let _ = writeln!(
        out,
        "Prices (USD, us-east-1, on demand; `bench/src/footprint/prices.rs`, `Prices`): \
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
    out
}
