//! `footprint`: the cost of an ask as the history grows (DynamoDB items, bytes
//! and units, CPU), beside LangChain's `DynamoDBChatMessageHistory`; the AWS
//! bill per million asks excluding the model; cold starts and memory of the
//! function binaries. See `degrau_bench::footprint`.
//!
//! Needs moto (`DEGRAU_TEST_AWS_ENDPOINT`) and the workspace binaries built
//! (`cargo build --workspace --bins`; `cargo build --release -p ask -p compactor`
//! for release figures). Prints the markdown and writes `results/footprint.md`
//! and `results/footprint.json`.

use std::process::ExitCode;

use degrau_bench::footprint::{Options, USAGE, markdown, run};

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match Options::parse(&args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("footprint: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if !options.ignored.is_empty() {
        eprintln!(
            "footprint: ignoring options for the other benchmark: {}",
            options.ignored.join(" ")
        );
    }
    let report = run(&options).await;
    let mut command = "cargo run -p degrau-bench --bin footprint --".to_owned();
    for arg in args.iter().filter(|a| !options.ignored.contains(a)) {
        command.push(' ');
        command.push_str(arg);
    }
    let markdown = markdown::markdown(&report, command.trim_end_matches(" --"));
    println!("{markdown}");
    if let Err(err) = std::fs::create_dir_all(&options.out) {
        eprintln!("footprint: {}: {err}", options.out.display());
        return ExitCode::FAILURE;
    }
    let json = match serde_json::to_string_pretty(&report) {
        Ok(json) => json,
        Err(err) => {
            eprintln!("footprint: JSON: {err}");
            return ExitCode::FAILURE;
        }
    };
    for (name, text) in [("footprint.md", markdown), ("footprint.json", json)] {
        let path = options.out.join(name);
        if let Err(err) = std::fs::write(&path, text) {
            eprintln!("footprint: {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("footprint: wrote {}", path.display());
    }
    if report.failed_asks > 0 {
        eprintln!("footprint: {} asks failed", report.failed_asks);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
