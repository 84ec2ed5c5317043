//! Settings of the `degrau-standin` binary: command-line flags over environment
//! variables over defaults, read once at start; a bad value stops it with a clear
//! message.

use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use crate::Config;

/// Usage text for `--help`.
pub const USAGE: &str = "\
degrau-standin: offline stand-in for the Anthropic Messages API

usage: degrau-standin [--addr ADDR] [--port PORT] [--context-limit TOKENS]
                      [--min-cacheable-tokens TOKENS] [--clock real|manual]

  --addr                  address to bind (env DEGRAU_STANDIN_ADDR; default 127.0.0.1)
  --port                  port, 0 for an ephemeral one (env DEGRAU_STANDIN_PORT; default 4010)
  --context-limit         largest prompt, in tokens (env DEGRAU_STANDIN_CONTEXT_LIMIT; default 200000)
  --min-cacheable-tokens  smallest cached prefix (env DEGRAU_STANDIN_MIN_CACHEABLE_TOKENS; default 1024)
  --clock                 the cache clock: `real` (time since start plus POST /stand-in/clock
                          advances) or `manual` (the advances only) (env DEGRAU_STANDIN_CLOCK;
                          default real)

When ready it prints `degrau-standin listening on http://ADDR:PORT` on stdout.
Point degrau at it with ANTHROPIC_BASE_URL=http://ADDR:PORT (any non-empty API key).";

/// Default port.
pub const DEFAULT_PORT: u16 = 4010;

/// What the binary should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Serve with these settings.
    Run(Settings),
    /// Print [`USAGE`].
    Help,
}

/// Where to listen and how to behave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Address to bind.
    pub addr: IpAddr,
    /// Port to bind; 0 picks a free one.
    pub port: u16,
    /// The stand-in's tunables.
    pub config: Config,
}

fn parse_value<T: FromStr>(name: &str, value: &str) -> Result<T, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("invalid value for {name}: {value:?}"))
}

/// Reads the settings from arguments (without the program name) and an
/// environment lookup.
pub fn parse(
    args: impl IntoIterator<Item = String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Command, String> {
    let mut addr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut port = DEFAULT_PORT;
    let mut config = Config::default();

    let mut apply = |flag: &str, value: &str| -> Result<(), String> {
        match flag {
            "--addr" => addr = parse_value(flag, value)?,
            "--port" => port = parse_value(flag, value)?,
            "--context-limit" => config.context_limit = parse_value(flag, value)?,
            "--min-cacheable-tokens" => config.min_cacheable_tokens = parse_value(flag, value)?,
            "--clock" => config.clock = parse_value(flag, value)?,
            other => return Err(format!("unknown option {other:?}\n\n{USAGE}")),
        }
        Ok(())
    };
    for (variable, flag) in [
        ("DEGRAU_STANDIN_ADDR", "--addr"),
        ("DEGRAU_STANDIN_PORT", "--port"),
        ("DEGRAU_STANDIN_CONTEXT_LIMIT", "--context-limit"),
        (
            "DEGRAU_STANDIN_MIN_CACHEABLE_TOKENS",
            "--min-cacheable-tokens",
        ),
        ("DEGRAU_STANDIN_CLOCK", "--clock"),
    ] {
        if let Some(value) = env(variable).filter(|v| !v.trim().is_empty()) {
            apply(flag, &value).map_err(|e| format!("{variable}: {e}"))?;
        }
    }
    // The bridge's flags are read the same way (`infra/bridge/src/cli.rs`): two
    // binaries that share no crate, each with a dozen lines rather than a parser
    // dependency.
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Command::Help);
        }
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), value.to_owned()),
            None => {
                let value = args
                    .next()
                    .ok_or_else(|| format!("{arg} needs a value\n\n{USAGE}"))?;
                (arg, value)
            }
        };
        apply(&flag, &value)?;
    }
    Ok(Command::Run(Settings { addr, port, config }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str], env: &[(&str, &str)]) -> Result<Command, String> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        parse(args.iter().map(|a| (*a).to_owned()), |key| {
            env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn defaults_to_loopback_port_4010() {
        let Command::Run(settings) = run(&[], &[]).unwrap() else {
            panic!("expected run");
        };
        assert_eq!(settings.addr.to_string(), "127.0.0.1");
        assert_eq!(settings.port, 4010);
        assert_eq!(settings.config, Config::default());
    }

    #[test]
    fn flags_override_the_environment() {
        let Command::Run(settings) = run(
            &[
                "--port",
                "0",
                "--min-cacheable-tokens=10",
                "--clock",
                "manual",
            ],
            &[
                ("DEGRAU_STANDIN_PORT", "5000"),
                ("DEGRAU_STANDIN_CONTEXT_LIMIT", "9000"),
            ],
        )
        .unwrap() else {
            panic!("expected run");
        };
        assert_eq!(settings.port, 0);
        assert_eq!(settings.config.context_limit, 9000);
        assert_eq!(settings.config.min_cacheable_tokens, 10);
        assert_eq!(settings.config.clock, crate::Clock::Manual);
        assert!(
            run(&["--clock", "fast"], &[])
                .unwrap_err()
                .contains("--clock")
        );
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        assert!(run(&["--port", "x"], &[]).unwrap_err().contains("--port"));
        assert!(run(&["--port"], &[]).unwrap_err().contains("needs a value"));
        assert!(
            run(&["--bogus", "1"], &[])
                .unwrap_err()
                .contains("unknown option")
        );
        assert!(
            run(&[], &[("DEGRAU_STANDIN_ADDR", "nope")])
                .unwrap_err()
                .starts_with("DEGRAU_STANDIN_ADDR")
        );
        assert_eq!(run(&["--help"], &[]).unwrap(), Command::Help);
    }
}
