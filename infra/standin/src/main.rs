//! `degrau-standin`: serves the offline Messages API stand-in (see the library's
//! docs). Wires settings, tracing (to stderr) and the listener; prints the ready
//! line on stdout for scripts and tests.

use std::io::Write;
use std::process::ExitCode;

use degrau_standin::cli::{self, Command, USAGE};
use degrau_standin::{StandIn, serve};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("degrau_standin=info")),
        )
        .with_writer(std::io::stderr)
        .init();

    let settings = match cli::parse(std::env::args().skip(1), |k| std::env::var(k).ok()) {
        Ok(Command::Run(settings)) => settings,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("degrau-standin: {message}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind((settings.addr, settings.port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!(
                "degrau-standin: cannot listen on {}:{}: {e}",
                settings.addr, settings.port
            );
            return ExitCode::FAILURE;
        }
    };
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("degrau-standin: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("degrau-standin listening on http://{addr}");
    let _ = std::io::stdout().flush();

    match serve(listener, StandIn::new(settings.config)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("degrau-standin: {e}");
            ExitCode::FAILURE
        }
    }
}
