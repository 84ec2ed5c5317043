//! The local stack's provisioning and `template.yaml` agree: tables and queues
//! created from the template in moto carry every property the template sets.

use std::process::Command;

#[test]
fn the_local_provisioning_creates_what_the_template_declares() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let output = Command::new(format!("{root}/.venv/bin/python"))
        .arg(format!("{root}/infra/check_provisioning.py"))
        .arg("--endpoint")
        .arg(degrau_tests::moto::endpoint())
        .output()
        .expect("run infra/check_provisioning.py (./dev.sh test sets up .venv)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("match template.yaml"), "{stdout}");
}
