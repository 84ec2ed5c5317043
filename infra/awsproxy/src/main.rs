//! `degrau-awsproxy`: serves the recording, fault-injecting proxy (see the
//! library docs).
//!
//! ```text
//! degrau-awsproxy [--upstream URL] [--port N] [--host ADDR] [--no-shadow-reads]
//! ```
//! Defaults: upstream `http://127.0.0.1:5005` (moto as `infra/moto.sh` starts
//! it), host `127.0.0.1`, port 5006; `--port 0` picks a free one. The first line
//! on stdout is `degrau-awsproxy listening on http://HOST:PORT`.

use std::io::Write;
use std::process::ExitCode;

use degrau_awsproxy::{Config, Proxy, serve};

const USAGE: &str =
    "usage: degrau-awsproxy [--upstream URL] [--port N] [--host ADDR] [--no-shadow-reads]";

struct Settings {
    config: Config,
    host: String,
    port: u16,
}

fn parse(args: &[String]) -> Result<Settings, String> {
    let mut config = Config::new("http://127.0.0.1:5005");
    let mut host = "127.0.0.1".to_owned();
    let mut port = 5006;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--upstream" => {
                config = Config {
                    shadow_reads: config.shadow_reads,
                    ..Config::new(value("--upstream")?)
                }
            }
            "--port" => {
                port = value("--port")?
                    .parse()
                    .map_err(|e| format!("--port: {e}"))?;
            }
            "--host" => host = value("--host")?,
            "--no-shadow-reads" => config.shadow_reads = false,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if !config.upstream.starts_with("http://") && !config.upstream.starts_with("https://") {
        return Err(format!(
            "--upstream must be an http(s) URL, not {:?}",
            config.upstream
        ));
    }
    Ok(Settings { config, host, port })
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let settings = match parse(&args) {
        Ok(settings) => settings,
        Err(problem) => {
            if !problem.is_empty() {
                eprintln!("degrau-awsproxy: {problem}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let listener =
        match tokio::net::TcpListener::bind((settings.host.as_str(), settings.port)).await {
            Ok(listener) => listener,
            Err(err) => {
                eprintln!(
                    "degrau-awsproxy: cannot listen on {}:{}: {err}",
                    settings.host, settings.port
                );
                return ExitCode::FAILURE;
            }
        };
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(err) => {
            eprintln!("degrau-awsproxy: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "degrau-awsproxy listening on http://{addr} (upstream {})",
        settings.config.upstream
    );
    let _ = std::io::stdout().flush();
    match serve(listener, Proxy::new(settings.config)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("degrau-awsproxy: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn arguments_parse() {
        let settings = parse(&args(&[
            "--no-shadow-reads",
            "--upstream",
            "http://127.0.0.1:9/",
            "--port",
            "0",
        ]))
        .unwrap();
        assert_eq!(settings.config.upstream, "http://127.0.0.1:9");
        assert!(!settings.config.shadow_reads);
        assert_eq!(settings.port, 0);
        assert!(parse(&args(&["--port"])).is_err());
        assert!(parse(&args(&["--upstream", "moto"])).is_err());
        assert!(parse(&args(&["--bogus"])).is_err());
    }
}
