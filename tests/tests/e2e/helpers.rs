//! What several end-to-end modules share: environment pairs, the error assertion,
//! the scripted conversation's turns, a compacting tenant config, a stack behind the
//! fault-injecting proxy, waiting for the stand-in to take its queued faults, and
//! `template.yaml` as JSON.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use degrau::domain::FactKey;
use degrau::tenant::TenantConfig;
use degrau_awsproxy::Running;
use degrau_tests::stack::{FullStack, StackOptions};
use degrau_tests::{HttpReply, moto};
use serde_json::{Value, json};

/// Instructions of the tenants that book haircuts.
pub const BOOKING_INSTRUCTIONS: &str = "You book haircuts for a barber shop. Use the tools.";

/// Environment pairs, owned.
pub fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The reply is the documented error: its status and type.
pub fn assert_error(reply: &HttpReply, status: u16, kind: &str) {
    assert_eq!(
        (reply.status, reply.error_type()),
        (status, Some(kind)),
        "{}",
        reply.raw
    );
}

/// Turn `i` of a scheduling conversation: slot lists (long tool results), bookings
/// with identifiers, small talk.
pub fn turn(i: usize) -> String {
    let day = 1 + i % 9;
    match i % 3 {
        0 => format!("turn {i:03}: any free slots on 2026-12-0{day}?"),
        1 => format!("turn {i:03}: please book 10:30 on 2026-12-0{day}"),
        _ => format!("turn {i:03}: thanks, that works for me"),
    }
}

/// The round's first and last sequence numbers from a 200 (zeros otherwise).
pub fn round_of(reply: &HttpReply) -> (u64, u64) {
    (
        reply.body["round"]["first_seq"].as_u64().unwrap_or(0),
        reply.body["round"]["last_seq"].as_u64().unwrap_or(0),
    )
}

/// A tenant config that steps at `threshold` tokens, keeps `keep` messages and
/// stores facts under `fact_keys`.
pub fn compacting(fact_keys: &[&str], threshold: u64, keep: usize) -> TenantConfig {
    TenantConfig {
        allowed_fact_keys: Some(
            fact_keys
                .iter()
                .map(|k| FactKey::parse(k).unwrap())
                .collect(),
        ),
        compaction_threshold_tokens: Some(threshold),
        window_keep_messages: Some(keep),
        ..TenantConfig::default()
    }
}

/// A stack whose functions reach DynamoDB through a fresh fault-injecting proxy
/// (the test's own clients read moto directly), with `ask_instances` ask processes.
pub async fn stack_behind_proxy(ask_instances: usize) -> (FullStack, Running) {
    let proxy = degrau_awsproxy::spawn(moto::endpoint()).await;
    let stack = FullStack::start_with(&StackOptions {
        dynamodb_endpoint: Some(proxy.url().to_owned()),
        ask_instances,
        ..StackOptions::default()
    })
    .await;
    (stack, proxy)
}

/// How many faults the stand-in still holds (an empty push answers the count).
async fn faults_queued(stack: &FullStack) -> u64 {
    reqwest::Client::new()
        .post(format!("{}/stand-in/faults", stack.standin.url))
        .json(&json!([]))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["queued"]
        .as_u64()
        .unwrap()
}

/// Waits until the stand-in took every queued fault: the model call that took the
/// last one is in flight (a `hang_ms` fault holds it there).
pub async fn until_the_faults_are_taken(stack: &FullStack) {
    for _ in 0..3_000 {
        if faults_queued(stack).await == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no model call took the queued faults");
}

/// A `CLOCK_OFFSET_FILE` for one function: missing (no offset) until [`set`];
/// removed on drop.
///
/// [`set`]: ClockOffset::set
pub struct ClockOffset(std::path::PathBuf);

impl ClockOffset {
    pub fn new(name: &str) -> ClockOffset {
        let path =
            std::env::temp_dir().join(format!("degrau-e2e-clock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        ClockOffset(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    pub fn set(&self, seconds: i64) {
        std::fs::write(&self.0, seconds.to_string()).unwrap();
    }
}

impl Drop for ClockOffset {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A full stack whose functions read the clock moved by a [`ClockOffset`] (at 0)
/// and whose stand-in's cache runs on its manual clock: a test moves both by the
/// same gaps.
pub async fn stack_on_moved_clocks(name: &str) -> (FullStack, ClockOffset) {
    let offset = ClockOffset::new(name);
    offset.set(0);
    let stack = FullStack::start_with(&StackOptions {
        standin_args: &["--clock", "manual"],
        env: vec![("CLOCK_OFFSET_FILE".into(), offset.path().into())],
        ..StackOptions::default()
    })
    .await;
    (stack, offset)
}

/// `template.yaml` as JSON, read by the local provisioning's own loader (it knows the
/// CloudFormation short tags).
pub fn template() -> Value {
    template_at(Path::new("template.yaml"))
}

/// A template as JSON (`path` from the repository's root, or absolute), read as
/// [`template`] reads `template.yaml`.
pub fn template_at(path: &Path) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = "import json, sys; from pathlib import Path; sys.path.insert(0, 'infra'); \
                  import provision; print(json.dumps(provision.load_template(Path(sys.argv[1]))))";
    let output = Command::new(root.join(".venv/bin/python"))
        .current_dir(&root)
        .args(["-c", script])
        .arg(path)
        .output()
        .expect("run the repo's python (./dev.sh test sets up .venv)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}
