//! Settings of the `degrau-bridge` binary, read once from its flags; a bad value
//! stops it with a clear message. AWS settings come from the standard environment
//! (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials), not from here.

use std::str::FromStr;
use std::time::Duration;

/// Usage text for `--help`.
pub const USAGE: &str = "\
degrau-bridge: local stand-in for the Lambda SQS event source mapping

usage: degrau-bridge --queue-url URL --invoke-url BASE --function NAME
                     [--batch-size N] [--wait SECONDS] [--retry-visibility SECONDS]
                     [--invoke-timeout SECONDS]

  --queue-url         the SQS queue to poll
  --invoke-url        base URL of the Lambda Invoke API (cargo lambda watch), e.g. http://127.0.0.1:9000
  --function          the function to invoke, e.g. compactor
  --batch-size        messages per invocation, 1-10 (default 10)
  --wait              long-poll wait of each receive, 0-20 s (default 1)
  --retry-visibility  visibility timeout given to messages to retry (local-only shortcut;
                      default: none, the queue's own timeout decides, as in AWS)
  --invoke-timeout    give up on an invocation after this long (default 900 s)

AWS configuration comes from the environment: AWS_ENDPOINT_URL, AWS_REGION and
credentials (any non-empty dummy keys for moto). Logs counts only, never bodies.";

/// What the binary should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Poll with these settings.
    Run(Settings),
    /// Print [`USAGE`].
    Help,
}

/// The bridge's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The queue to poll.
    pub queue_url: String,
    /// Base URL of the invoke endpoint.
    pub invoke_url: String,
    /// The function to invoke.
    pub function: String,
    /// Messages per batch.
    pub batch_size: i32,
    /// Long-poll wait, seconds.
    pub wait_time_seconds: i32,
    /// Visibility timeout for messages to retry, seconds.
    pub retry_visibility_seconds: Option<i32>,
    /// Per-invocation timeout.
    pub invoke_timeout: Duration,
}

fn number<T: FromStr + PartialOrd + std::fmt::Display>(
    flag: &str,
    value: &str,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, String> {
    let parsed: T = value
        .trim()
        .parse()
        .map_err(|_| format!("invalid value for {flag}: {value:?}"))?;
    if !range.contains(&parsed) {
        return Err(format!(
            "{flag} must be within {}..={}, not {parsed}",
            range.start(),
            range.end()
        ));
    }
    Ok(parsed)
}

/// Reads the settings from the arguments (without the program name).
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut queue_url = None;
    let mut invoke_url = None;
    let mut function = None;
    let mut batch_size = 10;
    let mut wait_time_seconds = 1;
    let mut retry_visibility_seconds = None;
    let mut invoke_timeout = Duration::from_secs(900);

    // The stand-in's flags are read the same way (`infra/standin/src/cli.rs`): two
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
        match flag.as_str() {
            "--queue-url" => queue_url = Some(value),
            "--invoke-url" => invoke_url = Some(value),
            "--function" => function = Some(value),
            "--batch-size" => batch_size = number(&flag, &value, 1..=10)?,
            "--wait" => wait_time_seconds = number(&flag, &value, 0..=20)?,
            "--retry-visibility" => {
                retry_visibility_seconds = Some(number(&flag, &value, 0..=43_200)?);
            }
            "--invoke-timeout" => {
                invoke_timeout = Duration::from_secs(number(&flag, &value, 1..=86_400)?);
            }
            other => return Err(format!("unknown option {other:?}\n\n{USAGE}")),
        }
    }
    let required = |value: Option<String>, flag: &str| {
        value
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| format!("{flag} is required\n\n{USAGE}"))
    };
    Ok(Command::Run(Settings {
        queue_url: required(queue_url, "--queue-url")?,
        invoke_url: required(invoke_url, "--invoke-url")?,
        function: required(function, "--function")?,
        batch_size,
        wait_time_seconds,
        retry_visibility_seconds,
        invoke_timeout,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Command, String> {
        parse(args.iter().map(|a| (*a).to_owned()))
    }

    const REQUIRED: [&str; 6] = [
        "--queue-url",
        "http://q",
        "--invoke-url",
        "http://127.0.0.1:9000",
        "--function",
        "compactor",
    ];

    #[test]
    fn defaults_are_batches_of_ten_a_one_second_wait_and_no_shortcut() {
        let Command::Run(settings) = run(&REQUIRED).unwrap() else {
            panic!("expected run");
        };
        assert_eq!(settings.queue_url, "http://q");
        assert_eq!(settings.function, "compactor");
        assert_eq!(settings.batch_size, 10);
        assert_eq!(settings.wait_time_seconds, 1);
        assert_eq!(settings.retry_visibility_seconds, None);
        assert_eq!(settings.invoke_timeout, Duration::from_secs(900));
    }

    #[test]
    fn flags_set_the_tunables() {
        let mut args = REQUIRED.to_vec();
        args.extend(["--batch-size", "3", "--wait=0", "--retry-visibility", "5"]);
        let Command::Run(settings) = run(&args).unwrap() else {
            panic!("expected run");
        };
        assert_eq!(settings.batch_size, 3);
        assert_eq!(settings.wait_time_seconds, 0);
        assert_eq!(settings.retry_visibility_seconds, Some(5));
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        let with = |extra: &[&str]| {
            let mut args = REQUIRED.to_vec();
            args.extend(extra);
            run(&args).unwrap_err()
        };
        assert!(with(&["--batch-size", "11"]).contains("--batch-size must be within"));
        assert!(with(&["--wait", "x"]).contains("invalid value for --wait"));
        assert!(with(&["--bogus", "1"]).contains("unknown option"));
        assert!(with(&["--retry-visibility"]).contains("needs a value"));
        assert!(
            run(&REQUIRED[..4])
                .unwrap_err()
                .contains("--function is required")
        );
        assert_eq!(run(&["--help"]).unwrap(), Command::Help);
    }
}
