//! The soak, longer than the test's: many conversations at once with bursts on the
//! same contact, on the local stack, then the storage check; prints the figures.
//!
//! ```sh
//! bash infra/moto.sh start && cargo build --workspace --bins
//! DEGRAU_TEST_AWS_ENDPOINT=$(bash infra/moto.sh url) \
//!   cargo run -p degrau-tests --bin soak -- --seconds 60
//! ```
//!
//! Flags: `--seconds N` (default 60), `--requests N` (stop after N requests instead
//! of, or as well as, the time), `--contacts N` (default 8), `--burst N` (default
//! 3), `--instances N` ask instances (default 4), `--no-compaction`. Exits 1 when
//! the check finds a violation.

use std::process::ExitCode;
use std::time::Duration;

use degrau_tests::moto;
use degrau_tests::soak::{SoakConfig, soak};

const USAGE: &str = "usage: soak [--seconds N] [--requests N] [--contacts N] [--burst N] \
                     [--instances N] [--no-compaction]";

fn parse(args: &[String]) -> Result<SoakConfig, String> {
    let mut config = SoakConfig {
        duration: Some(Duration::from_secs(60)),
        max_requests: None,
        ask_instances: 4,
        ..SoakConfig::default()
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        if flag == "--no-compaction" {
            config.compaction = false;
            continue;
        }
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_owned());
        }
        let value: usize = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?
            .parse()
            .map_err(|_| format!("{flag} needs a whole number\n{USAGE}"))?;
        if value == 0 {
            return Err(format!("{flag} must be at least 1"));
        }
        match flag.as_str() {
            "--seconds" => config.duration = Some(Duration::from_secs(value as u64)),
            "--requests" => config.max_requests = Some(value),
            "--contacts" => config.contacts = value,
            "--burst" => config.burst = value,
            "--instances" => config.ask_instances = value,
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    Ok(config)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse(&args) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    if std::env::var(moto::ENDPOINT_VAR).is_err() {
        eprintln!(
            "{} is not set: start moto (`bash infra/moto.sh start`) and run with \
             {}=$(bash infra/moto.sh url)",
            moto::ENDPOINT_VAR,
            moto::ENDPOINT_VAR
        );
        return ExitCode::from(2);
    }
    eprintln!("soak: running {config:?}");
    let report = soak(config).await;
    println!("{report}");
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
