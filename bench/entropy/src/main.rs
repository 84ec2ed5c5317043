//! `entropy-probe`: how long a fresh process waits for its first random bytes from
//! aws-lc, the library behind rustls in both functions. aws-lc seeds its generator
//! once per process, by default with CPU jitter entropy besides the kernel's; the
//! first TLS handshake of a cold Lambda (SSM at init, then DynamoDB, SQS and the
//! model) pays that once. Building with `AWS_LC_SYS_NO_JITTER_ENTROPY=1` leaves the
//! jitter source out; this measures what that would save.
//!
//! ```text
//! entropy-probe [--runs N]     run N fresh processes (default 30), print the figures
//! entropy-probe --once         one measurement as JSON (what each run prints)
//! ```

use std::process::Command;
use std::time::Instant;

fn once() {
    let mut bytes = [0u8; 32];
    let started = Instant::now();
    aws_lc_rs::rand::fill(&mut bytes).expect("aws-lc random bytes");
    let first = started.elapsed();
    let started = Instant::now();
    aws_lc_rs::rand::fill(&mut bytes).expect("aws-lc random bytes");
    let second = started.elapsed();
    println!(
        "{{\"first_us\":{},\"second_us\":{}}}",
        first.as_micros(),
        second.as_micros()
    );
}

fn percentile(sorted: &[u128], p: f64) -> u128 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn field(line: &str, name: &str) -> Option<u128> {
    let start = line.find(&format!("\"{name}\":"))? + name.len() + 3;
    line[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--once") {
        once();
        return;
    }
    let runs: usize = match args.as_slice() {
        [] => 30,
        [flag, n] if flag == "--runs" => n.parse().unwrap_or_else(|_| {
            eprintln!("--runs: not a number: {n:?}");
            std::process::exit(2)
        }),
        _ => {
            eprintln!("usage: entropy-probe [--runs N] | --once");
            std::process::exit(2)
        }
    };
    let exe = std::env::current_exe().expect("own path");
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let out = Command::new(&exe).arg("--once").output().expect("run once");
        let line = String::from_utf8_lossy(&out.stdout);
        match (field(&line, "first_us"), field(&line, "second_us")) {
            (Some(f), Some(s)) => {
                first.push(f);
                second.push(s);
            }
            _ => {
                eprintln!("unexpected output: {line}");
                std::process::exit(1)
            }
        }
    }
    first.sort_unstable();
    second.sort_unstable();
    // Cargo rebuilds this crate when the variable changes (rustc records it).
    let jitter = match option_env!("AWS_LC_SYS_NO_JITTER_ENTROPY") {
        Some("1") | Some("true") => "jitter entropy off (AWS_LC_SYS_NO_JITTER_ENTROPY=1)",
        _ => "jitter entropy on (aws-lc's default)",
    };
    println!(
        "{jitter}: first random bytes of a fresh process, {} runs: median {} µs, p90 {} µs, \
         max {} µs; the next call: median {} µs",
        first.len(),
        percentile(&first, 0.5),
        percentile(&first, 0.9),
        first[first.len() - 1],
        percentile(&second, 0.5),
    );
}
