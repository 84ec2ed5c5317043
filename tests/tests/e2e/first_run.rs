//! What `./dev.sh up` and `./dev.sh test`'s set-up say while they work
//! (`infra/progress.sh`): a build's output as it comes, kept in a log; on a failure
//! the log's last lines and where the whole log is; a first build announced as the
//! long one; a service that never answers named, with its log. Each runs the real
//! shell functions, with a stand-in `cargo` on the PATH where a build is involved.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `script` in bash after sourcing `infra/progress.sh`, in `dir`, with `dir/bin`
/// first on the PATH.
fn bash(dir: &Path, script: &str, env: &[(&str, &str)]) -> Output {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .current_dir(dir)
        .arg("-c")
        .arg(format!(
            "set -euo pipefail; source '{}'; {script}",
            root().join("infra/progress.sh").display()
        ))
        .env("PATH", path)
        .envs(env.iter().copied())
        .output()
        .expect("run bash")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(degrau_tests::unique(&format!("first-run-{name}")));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    dir
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_command_that_works_shows_its_output_and_keeps_it_in_its_log() {
    let dir = scratch("ok");
    let output = bash(
        &dir,
        "run_logged logs/step.log 'the step' bash -c 'echo one; echo two >&2'",
        &[],
    );
    let said = stderr(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("one\n") && said.contains("two\n"), "{said}");
    assert!(said.contains("degrau: the step: done in "), "{said}");
    let log = std::fs::read_to_string(dir.join("logs/step.log")).unwrap();
    assert!(log.contains("one\n") && log.contains("two\n"), "{log}");
}

#[test]
fn a_command_that_fails_ends_with_its_logs_last_lines_and_where_the_whole_log_is() {
    let dir = scratch("fail");
    let output = bash(
        &dir,
        "run_logged logs/step.log 'the step' bash -c 'for i in $(seq 1 60); do echo line $i; done; exit 3'",
        &[],
    );
    assert_eq!(output.status.code(), Some(3), "the command's own status");
    let said = stderr(&output);
    assert!(said.contains("degrau: the step failed (exit 3"), "{said}");
    let log = dir.join("logs/step.log");
    let (_, tail) = said
        .split_once(&format!("---- last 30 lines of {} ----", "logs/step.log"))
        .unwrap_or_else(|| panic!("no tail in:\n{said}"));
    assert!(
        tail.contains("line 31\n") && tail.contains("line 60\n"),
        "{tail}"
    );
    assert!(
        !tail.contains("line 30\n"),
        "only the last 30 lines: {tail}"
    );
    assert!(tail.contains("the whole log: logs/step.log"), "{tail}");
    let whole = std::fs::read_to_string(log).unwrap();
    assert_eq!(whole.lines().count(), 60);
}

#[test]
fn the_first_build_says_it_takes_minutes_and_a_later_one_does_not() {
    let dir = scratch("build");
    // A stand-in cargo: prints its arguments, fails when asked to.
    let cargo = dir.join("bin/cargo");
    std::fs::write(
        &cargo,
        "#!/usr/bin/env bash\necho \"Compiling with: $*\"\n[[ -z \"${FAIL_BUILD:-}\" ]]\n",
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&cargo)
        .status()
        .unwrap();
    let target = dir.join("target");
    let target = target.to_str().unwrap();

    let first = bash(
        &dir,
        "cargo_build 'the functions' -p ask",
        &[("CARGO_TARGET_DIR", target)],
    );
    let said = stderr(&first);
    assert!(first.status.success(), "{said}");
    assert!(said.contains("this is the first build"), "{said}");
    assert!(said.contains("several minutes"), "{said}");
    assert!(
        said.contains("Compiling with: build -p ask"),
        "cargo's own output: {said}"
    );
    assert!(
        said.contains("degrau: compiling the functions: done in"),
        "{said}"
    );

    std::fs::create_dir_all(dir.join("target/debug")).unwrap();
    let later = bash(
        &dir,
        "cargo_build 'the functions' -p ask",
        &[("CARGO_TARGET_DIR", target)],
    );
    let said = stderr(&later);
    assert!(later.status.success(), "{said}");
    assert!(!said.contains("first build"), "{said}");

    let failed = bash(
        &dir,
        "cargo_build 'the functions' -p ask",
        &[("CARGO_TARGET_DIR", target), ("FAIL_BUILD", "1")],
    );
    let said = stderr(&failed);
    assert!(!failed.status.success());
    assert!(
        said.contains("degrau: compiling the functions failed"),
        "{said}"
    );
    assert!(said.contains("the whole log: "), "{said}");
    assert!(said.contains(".local/logs/build.log"), "{said}");
}

#[test]
fn a_service_that_never_answers_is_named_with_its_log() {
    let dir = scratch("wait");
    std::fs::write(dir.join("service.log"), "starting\nbind: address in use\n").unwrap();
    // Port 9 (discard) on loopback: nothing listens there.
    let output = bash(
        &dir,
        "wait_for http://127.0.0.1:9/ 'the stand-in' service.log 1",
        &[],
    );
    assert!(!output.status.success());
    let said = stderr(&output);
    assert!(
        said.contains("degrau: the stand-in did not come up within 1 s"),
        "{said}"
    );
    assert!(said.contains("bind: address in use"), "{said}");
    assert!(said.contains("the whole log: service.log"), "{said}");
}
