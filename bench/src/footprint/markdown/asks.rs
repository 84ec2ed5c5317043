//! "One ask at turn N": degrau's ask beside LangChain's at each checkpoint,
//! degrau's largest and mean asks, LangChain's history item and where it meets
//! DynamoDB's 400 KB limit.

use std::fmt::Write as _;

use crate::footprint::degrau_run::AskFigures;
use crate::footprint::langchain::LangchainTurn;
use crate::footprint::numbers::{dollars, row, thousands, units};
use crate::footprint::report::{ItemLimit, Report};

/// A degrau cell of the ask table, from its ask.
type Cell = dyn Fn(&AskFigures) -> String;
/// A LangChain cell of the ask table, from its turn.
type LcCell = dyn Fn(&LangchainTurn) -> String;

/// The section: the table, then the notes on LangChain's item limit.
pub(super) fn section(report: &Report, patterns: &[String]) -> String {
    let mut out = table_head(report, patterns);
    let rows = ask_rows();
    for (label, degrau, lc) in &rows {
        let mut cells: Vec<String> = report.at.iter().map(|c| degrau(&c.degrau)).collect();
        for pattern in patterns {
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
    largest_rows(&mut out, report, blanks);
    mean_rows(&mut out, report, blanks);
    if !patterns.is_empty() {
        item_size_row(&mut out, report, patterns);
    }
    out.push_str(&limit_notes(report));
    out
}

/// The head of the ask table: the section's title and intro, the column labels
/// (degrau at each checkpoint, then each LangChain pattern at each).
fn table_head(report: &Report, patterns: &[String]) -> String {
    let mut out = String::new();
    let mut header = vec!["per ask".to_owned()];
    for c in &report.at {
        header.push(format!("degrau @{}", thousands(c.turn as u64)));
    }
    for pattern in patterns {
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
    out
}

/// LangChain's history item after each checkpoint turn (blank under degrau).
fn item_size_row(out: &mut String, report: &Report, patterns: &[String]) {
    let mut sizes: Vec<String> = report.at.iter().map(|_| String::new()).collect();
    for pattern in patterns {
        for c in &report.at {
            sizes.push(
                c.langchain
                    .get(pattern)
                    .map_or_else(String::new, |t| thousands(t.item_bytes)),
            );
        }
    }
    row(out, "LangChain history item after the turn, bytes", &sizes);
}

/// The notes under the table: where each pattern meets DynamoDB's item limit,
/// moto's refusals, or why LangChain did not run.
fn limit_notes(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out);
    for limit in &report.item_limits {
        let text = limit_text(limit);
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
    out
}

/// The ask table's rows: a label, degrau's cell, LangChain's cell.
fn ask_rows() -> Vec<(&'static str, Box<Cell>, Box<LcCell>)> {
    vec![
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
    ]
}

/// `cells` followed by `blanks` empty cells (the LangChain columns).
fn pad(mut cells: Vec<String>, blanks: usize) -> Vec<String> {
    cells.extend(std::iter::repeat_n(String::new(), blanks));
    cells
}

/// degrau's largest ask over turns 1..N: bytes read and written, and their units.
fn largest_rows(out: &mut String, report: &Report, blanks: usize) {
    row(
        out,
        "degrau, largest of turns 1..N: bytes read / RCU",
        &pad(
            report
                .at
                .iter()
                .map(|c| {
                    format!(
                        "{} / {}",
                        thousands(c.degrau_max.bytes_read),
                        units(c.degrau_max.rcu)
                    )
                })
                .collect(),
            blanks,
        ),
    );
    row(
        out,
        "degrau, largest of turns 1..N: bytes written / WCU",
        &pad(
            report
                .at
                .iter()
                .map(|c| {
                    format!(
                        "{} / {}",
                        thousands(c.degrau_max.bytes_written),
                        units(c.degrau_max.wcu)
                    )
                })
                .collect(),
            blanks,
        ),
    );
}

/// degrau's mean ask since the previous column, and the billed duration.
fn mean_rows(out: &mut String, report: &Report, blanks: usize) {
    row(
        out,
        "degrau, mean of the turns since the previous column: bytes read / RCU",
        &pad(
            report
                .at
                .iter()
                .map(|c| {
                    format!(
                        "{} / {:.1}",
                        thousands(c.degrau_mean.bytes_read.round() as u64),
                        c.degrau_mean.rcu
                    )
                })
                .collect(),
            blanks,
        ),
    );
    row(
        out,
        "degrau, mean of the turns since the previous column: bytes written / WCU",
        &pad(
            report
                .at
                .iter()
                .map(|c| {
                    format!(
                        "{} / {:.1}",
                        thousands(c.degrau_mean.bytes_written.round() as u64),
                        c.degrau_mean.wcu
                    )
                })
                .collect(),
            blanks,
        ),
    );
    row(
        out,
        "degrau, mean of the turns since the previous column: CPU ms",
        &pad(
            report
                .at
                .iter()
                .map(|c| format!("{:.1}", c.degrau_mean.cpu_ms))
                .collect(),
            blanks,
        ),
    );
    row(
        out,
        &format!(
            "billed ms (own time + {} ms per AWS call)",
            report.prices.assumed_aws_call_ms
        ),
        &pad(
            report
                .at
                .iter()
                .map(|c| format!("{:.0}", c.bill.ask_billed_ms))
                .collect(),
            blanks,
        ),
    );
}

/// What the note on a pattern's 400 KB limit says: reached (and what the last
/// turn that fits costs), passed on moto, projected, or not reached.
fn limit_text(limit: &ItemLimit) -> String {
    match (
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
    }
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
