//! The `degrau-standin` binary: flags, the ready line, and serving.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Kills the child when the test ends, even on a failed assertion.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_binary_prints_its_address_and_serves_there() {
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_degrau-standin"))
            .args(["--port", "0", "--addr", "127.0.0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts"),
    );
    let stdout = child.0.stdout.take().expect("piped stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .unwrap()
    .unwrap();
    let url = line
        .trim()
        .strip_prefix("degrau-standin listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    assert!(url.starts_with("http://127.0.0.1:"));
    assert!(!url.ends_with(":0"));

    let reply = reqwest::Client::new()
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "k")
        .header("anthropic-version", "2023-06-01")
        .json(&crate::helpers::body_with(
            serde_json::json!([{"role": "user", "content": "hi"}]),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
}

#[test]
fn a_bad_flag_exits_with_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_degrau-standin"))
        .args(["--port", "nope"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--port"));
}
