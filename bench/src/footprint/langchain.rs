//! LangChain's `DynamoDBChatMessageHistory` on the same conversation, against the
//! same moto through the same proxy: `bench/langchain/history.py`, run with the
//! repository's `.venv/bin/python` after `pip install -r
//! bench/langchain/requirements.txt` (pinned; only when the benchmark runs).
//!
//! By default only the checkpoint turns go through the class, each on a history
//! item seeded with the earlier turns exactly as the class stores them (checked
//! equal, call for call, to playing every turn); `--langchain-full` plays every
//! turn, which on moto takes tens of minutes for 300 turns since each call moves
//! the whole, growing item.

use std::path::{Path, PathBuf};
use std::process::Command;

use degrau_awsproxy::{Call, Summary};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// One turn of one access pattern, as the script measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LangchainTurn {
    /// `separate` (add user, add reply, read) or `runnable` (read, add both).
    pub pattern: String,
    /// 1-based turn.
    pub turn: usize,
    /// Wall time of the turn's history calls, ms.
    pub wall_ms: f64,
    /// CPU time of the Python process over them, ms (`time.process_time`).
    pub cpu_ms: f64,
    /// Messages in the history after the turn.
    pub messages: Option<u64>,
    /// Why the turn failed, if it did.
    pub error: Option<String>,
    /// The turn's AWS calls as the proxy recorded them.
    #[serde(default, skip_serializing)]
    pub calls: Vec<Call>,
    /// Their totals.
    #[serde(default)]
    pub aws: Summary,
    /// Size of the history item after the turn (its last `UpdateItem`, read
    /// back by the proxy), bytes.
    #[serde(default)]
    pub item_bytes: u64,
    /// The error is moto's alone: its UpdateItem check counts the replaced
    /// attribute twice, so it refuses items DynamoDB accepts.
    #[serde(default)]
    pub moto_artifact: bool,
    /// On the record of the first turn past DynamoDB's item limit: the last turn
    /// whose history fits, and that item's size (DynamoDB's rules), bytes.
    #[serde(default)]
    pub last_fit: Option<(usize, u64)>,
}

/// How the LangChain side went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LangchainRun {
    /// `seeded` or `full` (see [`Plan::full`]).
    pub mode: String,
    /// The pinned versions (the requirements file's lines).
    pub requirements: Vec<String>,
    /// Every turn of every pattern.
    pub turns: Vec<LangchainTurn>,
    /// Why it did not run, when it did not.
    pub skipped: Option<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// How the script plays the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// `separate`, `runnable` or both, comma-separated.
    pub patterns: String,
    /// Play every turn through the class (`full`) rather than only the
    /// checkpoints, each on a history item seeded with the earlier turns
    /// (`seeded`: the same item, far faster on moto).
    pub full: bool,
    /// The checkpoint turns.
    pub checkpoints: Vec<usize>,
}

/// Installs the requirements and runs the script on `transcript` (user text,
/// reply text per turn) through `endpoint` (the proxy); `work` holds the
/// conversation and output files.
pub fn run(
    endpoint: &str,
    table: &str,
    transcript: &[(String, String)],
    plan: &Plan,
    work: &Path,
) -> LangchainRun {
    let root = root();
    let requirements_file = root.join("bench/langchain/requirements.txt");
    let requirements: Vec<String> = std::fs::read_to_string(&requirements_file)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let mode = if plan.full { "full" } else { "seeded" }.to_owned();
    let skipped = |why: String| LangchainRun {
        mode: mode.clone(),
        requirements: requirements.clone(),
        turns: Vec::new(),
        skipped: Some(why),
    };
    let python = root.join(".venv/bin/python");
    if !python.exists() {
        return skipped(format!(
            "{} is missing: run `bash infra/setup.sh` first",
            python.display()
        ));
    }
    if let Err(why) = pip_install(&python, &requirements_file) {
        return skipped(why);
    }
    let conversation = match write_conversation(work, transcript) {
        Ok(conversation) => conversation,
        Err(why) => return skipped(why),
    };
    let output = work.join("footprint-langchain.jsonl");
    if let Err(why) = play(&python, endpoint, table, plan, &conversation, &output) {
        return skipped(why);
    }
    LangchainRun {
        mode,
        requirements,
        turns: read_turns(&output),
        skipped: None,
    }
}

/// `pip install -r` the pinned requirements into the virtualenv.
fn pip_install(python: &Path, requirements_file: &Path) -> Result<(), String> {
    eprintln!("footprint: pip install -r bench/langchain/requirements.txt");
    let install = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(requirements_file)
        .status();
    match install {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("pip install failed ({status})")),
        Err(err) => Err(format!("pip install could not run: {err}")),
    }
}

/// Writes the conversation the script plays into `work`; returns its path.
fn write_conversation(work: &Path, transcript: &[(String, String)]) -> Result<PathBuf, String> {
    if let Err(err) = std::fs::create_dir_all(work) {
        return Err(format!("{}: {err}", work.display()));
    }
    let conversation = work.join("footprint-conversation.json");
    let turns: Vec<_> = transcript
        .iter()
        .map(|(user, assistant)| json!({"user": user, "assistant": assistant}))
        .collect();
    if let Err(err) = std::fs::write(&conversation, json!({ "turns": turns }).to_string()) {
        return Err(format!("{}: {err}", conversation.display()));
    }
    Ok(conversation)
}

/// Runs `bench/langchain/history.py` on `conversation`, its turns written to
/// `output` (one JSON line each).
fn play(
    python: &Path,
    endpoint: &str,
    table: &str,
    plan: &Plan,
    conversation: &Path,
    output: &Path,
) -> Result<(), String> {
    // langchain-community 0.4 warns at import that it is being sunset; the class
    // measured is the one its docs still show.
    let checkpoints: Vec<String> = plan.checkpoints.iter().map(usize::to_string).collect();
    let status = Command::new(python)
        .args(["-W", "ignore::DeprecationWarning"])
        .arg(root().join("bench/langchain/history.py"))
        .args(["--endpoint", endpoint, "--table", table])
        .args(["--patterns", &plan.patterns])
        .args(["--mode", if plan.full { "full" } else { "seeded" }])
        .args(["--checkpoints", &checkpoints.join(",")])
        .arg("--conversation")
        .arg(conversation)
        .arg("--out")
        .arg(output)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .status();
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("history.py failed ({status})")),
        Err(err) => Err(format!("history.py could not run: {err}")),
    }
}

/// The turns the script wrote, each with its calls' totals and its item's size
/// (the last UpdateItem's, read back by the proxy).
fn read_turns(output: &Path) -> Vec<LangchainTurn> {
    let text = std::fs::read_to_string(output).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<LangchainTurn>(line).ok())
        .map(|mut turn| {
            turn.aws = Summary::of(&turn.calls);
            turn.item_bytes = turn
                .calls
                .iter()
                .rev()
                .find(|c| c.operation == "UpdateItem" && c.status == 200)
                .map_or(0, |c| c.usage.bytes_written);
            turn
        })
        .collect()
}
