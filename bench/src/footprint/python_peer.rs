//! The Python peer of the cold starts: `bench/python-peer/peer.py` does the
//! functions' init in Python (boto3 DynamoDB and SQS clients, an httpx client, one
//! SSM parameter read) and then polls the Runtime API like the real Python
//! bootstrap. It runs from a venv of its own, `.local/python-peer`, made with the
//! machine's `python3` and the pinned `bench/python-peer/requirements.txt` (only
//! when the benchmark runs; a stamp of the requirements' contents makes the next
//! run skip the install). A venv of its own keeps moto and the other tools of
//! `.venv` off its import path, as a function's package would be.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

/// A ready peer: what to start and with which `PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Peer {
    /// The script (its `#!/usr/bin/env python3` finds the venv's python first on
    /// `PATH`).
    pub script: PathBuf,
    /// The venv's `bin`.
    pub bin: PathBuf,
    /// `python3 --version` of the venv.
    pub python: String,
    /// The pinned requirements (the file's lines).
    pub requirements: Vec<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The requirement lines of a requirements file's text.
pub fn requirement_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Makes (or reuses) the peer's venv; the error says why it cannot run.
pub fn prepare() -> Result<Peer, String> {
    let root = root();
    let requirements_file = root.join("bench/python-peer/requirements.txt");
    let text = std::fs::read_to_string(&requirements_file)
        .map_err(|e| format!("{}: {e}", requirements_file.display()))?;
    let venv = root.join(".local/python-peer");
    let bin = venv.join("bin");
    let stamp = venv.join(".requirements");
    if !bin.join("python3").exists() {
        eprintln!("footprint: python3 -m venv {}", venv.display());
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(text.as_str()) {
        eprintln!(
            "footprint: pip install -r bench/python-peer/requirements.txt (the Python peer's venv)"
        );
        run(Command::new(bin.join("python3"))
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements_file))?;
        std::fs::write(&stamp, &text).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    let version = Command::new(bin.join("python3"))
        .arg("--version")
        .output()
        .map_err(|e| format!("python3 --version: {e}"))?;
    Ok(Peer {
        script: root.join("bench/python-peer/peer.py"),
        python: String::from_utf8_lossy(&version.stdout).trim().to_owned(),
        bin,
        requirements: requirement_lines(&text),
    })
}

fn run(command: &mut Command) -> Result<(), String> {
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("{command:?} failed ({status})")),
        Err(error) => Err(format!("{command:?} could not run: {error}")),
    }
}

impl Peer {
    /// `PATH` for the peer: its venv first.
    pub fn path_variable(&self) -> String {
        let rest = std::env::var("PATH").unwrap_or_default();
        format!("{}:{rest}", display(&self.bin))
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_pinned_lines_only() {
        let lines = requirement_lines("# comment\nboto3==1.44.8\n\n  httpx==0.28.1  \n");
        assert_eq!(lines, ["boto3==1.44.8", "httpx==0.28.1"]);
        let shipped =
            std::fs::read_to_string(root().join("bench/python-peer/requirements.txt")).unwrap();
        let shipped = requirement_lines(&shipped);
        assert!(shipped.iter().any(|l| l.starts_with("boto3==")));
        assert!(shipped.iter().any(|l| l.starts_with("httpx==")));
    }
}
