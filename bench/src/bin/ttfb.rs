//! `ttfb`: time to the first delta of a streamed reply beside the time to the whole
//! answer, measured side by side in one run through the real binaries: `ask-stream`
//! (Lambda's response streaming, read piece by piece as it reaches the Runtime API)
//! and `ask` (the JSON route), against the stand-in pacing its answers like a model
//! that writes one event every `--delta-ms` milliseconds (streamed or not: a
//! whole answer comes when its last event would have).
//!
//! Two kinds of round: a plain answer (one model call) and a tool round (two model
//! calls and a tool between them). Prints the table and writes
//! `results/streaming.md`.
//!
//! Needs moto (`DEGRAU_TEST_AWS_ENDPOINT`) and the workspace binaries built
//! (`cargo build --workspace --bins`).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use degrau::tenant::TenantConfig;
use degrau_tests::lambda::LocalLambda;
use degrau_tests::stack::FullStack;
use degrau_tests::streamed::read;
use degrau_tests::{api_event, unique};
use serde_json::json;

const USAGE: &str = "\
usage: cargo run -p degrau-bench --bin ttfb -- [--rounds N] [--delta-ms MS]
  --rounds    rounds of each kind and route (default 20)
  --delta-ms  the stand-in's pause between two events of an answer (default 25)";

struct Options {
    rounds: usize,
    delta_ms: u64,
}

fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut options = Options {
        rounds: 20,
        delta_ms: 25,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value"))?
                .parse::<u64>()
                .map_err(|e| format!("{flag}: {e}"))
        };
        match flag.as_str() {
            "--rounds" => options.rounds = value()?.max(1) as usize,
            "--delta-ms" => options.delta_ms = value()?,
            "--help" | "-h" => return Ok(None),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(Some(options))
}

/// Milliseconds at the `q` quantile (nearest rank).
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// What one kind of round measured.
#[derive(Default)]
struct Figures {
    first_delta: Vec<f64>,
    streamed_whole: Vec<f64>,
    json_whole: Vec<f64>,
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("ttfb: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let stack = FullStack::start(&[]).await;
    let streaming = stack.start_function("ask-stream", &[]).await;
    let tenant = unique("ttfb");
    stack
        .configure(
            &tenant,
            &TenantConfig {
                instructions: Some("You book haircuts for a barber shop. Use the tools.".into()),
                ..TenantConfig::default()
            },
        )
        .await;
    stack.standin.pace(options.delta_ms).await;

    let kinds = [
        (
            "plain answer (1 model call)",
            "hello, what can you do for me?",
        ),
        (
            "tool round (2 model calls)",
            "any free slots on 2026-12-03?",
        ),
    ];
    let mut table = Vec::new();
    for (kind, question) in kinds {
        let mut figures = Figures::default();
        for round in 0..options.rounds {
            if let Err(problem) =
                measure_round(&stack, &streaming, &tenant, question, round, &mut figures).await
            {
                eprintln!("ttfb: {problem}");
                return ExitCode::FAILURE;
            }
        }
        table.push((kind, figures));
    }
    let out = markdown(&options, &table);
    print!("{out}");
    if let Err(error) = std::fs::write("results/streaming.md", &out) {
        eprintln!("ttfb: could not write results/streaming.md: {error}");
    }
    ExitCode::SUCCESS
}

/// One round of each route: the streamed one (its first delta and its end) and
/// the JSON one (the whole answer), each for a contact of its own.
async fn measure_round(
    stack: &FullStack,
    streaming: &LocalLambda,
    tenant: &str,
    question: &str,
    round: usize,
    figures: &mut Figures,
) -> Result<(), String> {
    let body = json!({ "text": format!("{question} ({round})") }).to_string();
    let headers = [
        ("content-type", "application/json"),
        ("x-tenant-id", tenant),
    ];
    let contact = format!("s-{round}-{}", figures.first_delta.len());
    let path = format!("/v1/contacts/{contact}/messages/stream");
    let event = api_event("POST", &path, "", &headers, Some(&body), None);
    let sent = Instant::now();
    let mut pieces = streaming.invoke_streaming(event);
    let reply = read(&mut pieces, Duration::from_secs(60), |_| false).await;
    let first = reply.events.iter().find(|e| e.name == "delta");
    let done = reply.end().filter(|e| e.name == "done");
    let (Some(first), Some(done)) = (first, done) else {
        return Err(format!("a streamed round did not finish: {}", reply.raw));
    };
    figures.first_delta.push(ms(first.at - sent));
    figures.streamed_whole.push(ms(done.at - sent));

    let contact = format!("j-{round}");
    let path = format!("/v1/contacts/{contact}/messages");
    let event = api_event("POST", &path, "", &headers, Some(&body), None);
    let sent = Instant::now();
    let answer = stack.ask.invoke(event).await;
    if !answer.as_ref().is_ok_and(|a| a["statusCode"] == json!(200)) {
        return Err(format!("a JSON round failed: {answer:?}"));
    }
    figures.json_whole.push(ms(sent.elapsed()));
    Ok(())
}

/// The table of the rounds, p50 and p90, with the command that reproduces it.
fn markdown(options: &Options, table: &[(&str, Figures)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Streamed replies: time to the first delta beside time to the whole answer \
         ({} rounds of each kind and route; the stand-in writes an event every {} ms; \
         milliseconds from the invocation to the piece reaching the Runtime API).\n",
        options.rounds, options.delta_ms
    );
    let _ = writeln!(
        out,
        "| round | first delta, streamed (p50 / p90) | whole answer, streamed (p50 / p90) | whole answer, JSON route (p50 / p90) |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    for (kind, f) in table {
        let _ = writeln!(
            out,
            "| {kind} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} |",
            quantile(&f.first_delta, 0.5),
            quantile(&f.first_delta, 0.9),
            quantile(&f.streamed_whole, 0.5),
            quantile(&f.streamed_whole, 0.9),
            quantile(&f.json_whole, 0.5),
            quantile(&f.json_whole, 0.9),
        );
    }
    let _ = writeln!(
        out,
        "\nReproduce: `cargo run -q -p degrau-bench --bin ttfb -- --rounds {} --delta-ms {}` \
         (moto running, `DEGRAU_TEST_AWS_ENDPOINT` set, binaries built).",
        options.rounds, options.delta_ms
    );
    out
}
