//! `degrau-bridge`: polls an SQS queue forever and invokes a function with each
//! batch, as a Lambda event source mapping does (see the library's docs). Wires
//! settings, tracing (to stderr), one SDK config from the environment, then loops
//! [`poll_once`], logging counts only and backing off 1 s after an error.

use std::process::ExitCode;
use std::time::Duration;

use aws_config::BehaviorVersion;
use degrau_bridge::cli::{self, Command, Settings, USAGE};
use degrau_bridge::{HttpInvoke, QueueConfig, poll_once};
use tracing::{info, warn};

#[tokio::main]
async fn main() -> ExitCode {
    init_tracing();
    let settings = match cli::parse(std::env::args().skip(1)) {
        Ok(Command::Run(settings)) => settings,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("degrau-bridge: {message}");
            return ExitCode::from(2);
        }
    };
    let (sqs, queue, invoke) = match connect(&settings).await {
        Ok(wired) => wired,
        Err(code) => return code,
    };
    info!(queue = %queue.queue_arn, function = %invoke.url, "polling");
    poll_forever(&sqs, &queue, &invoke).await
}

/// Logs to stderr, `degrau_bridge=info` unless `RUST_LOG` says otherwise.
fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("degrau_bridge=info")),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// The SQS client, the queue (discovered, then given the settings' batch, wait and
/// retry visibility) and the function to invoke; on a problem, it is printed and
/// the exit code returned.
async fn connect(
    settings: &Settings,
) -> Result<(aws_sdk_sqs::Client, QueueConfig, HttpInvoke), ExitCode> {
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    if sdk.region().is_none() {
        eprintln!("degrau-bridge: AWS_REGION is not set");
        return Err(ExitCode::from(2));
    }
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let invoke = match HttpInvoke::new(
        &settings.invoke_url,
        &settings.function,
        settings.invoke_timeout,
    ) {
        Ok(invoke) => invoke,
        Err(message) => {
            eprintln!("degrau-bridge: {message}");
            return Err(ExitCode::FAILURE);
        }
    };
    let queue = match QueueConfig::discover(&sqs, &settings.queue_url).await {
        Ok(queue) => QueueConfig {
            batch_size: settings.batch_size,
            wait_time_seconds: settings.wait_time_seconds,
            retry_visibility_seconds: settings.retry_visibility_seconds,
            ..queue
        },
        Err(e) => {
            eprintln!("degrau-bridge: {e}");
            return Err(ExitCode::FAILURE);
        }
    };
    Ok((sqs, queue, invoke))
}

/// Loops [`poll_once`], logging each settled batch's counts; backs off 1 s after
/// an error or a failed invocation.
async fn poll_forever(sqs: &aws_sdk_sqs::Client, queue: &QueueConfig, invoke: &HttpInvoke) -> ! {
    loop {
        match poll_once(sqs, queue, invoke).await {
            Ok(report) if report.received == 0 => {}
            Ok(report) => {
                info!(
                    received = report.received,
                    deleted = report.deleted,
                    failed = report.failed,
                    invoke_error = report.invoke_error.as_deref(),
                    bad_response = report.bad_response.as_deref(),
                    "batch settled"
                );
                if report.invoke_error.is_some() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            Err(e) => {
                warn!(error = %e, "poll failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
