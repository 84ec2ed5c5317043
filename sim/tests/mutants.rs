//! Every patch in `sim/mutants/` still applies to the tree. Each undoes one defect
//! fix for `sim/mutants.sh`, the mutation check; a refactor that moves the code it
//! touches leaves it stale, and the check then plays nothing. `git apply --check`
//! from the repository's root finds that in a moment, long before anyone runs the
//! slow check. Without `git`, or outside a checkout (a source archive), the test
//! says so and checks nothing.

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("sim/ sits in the repository")
        .to_path_buf()
}

fn patches(root: &Path) -> Vec<PathBuf> {
    let dir = root.join("sim/mutants");
    let mut patches: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{} is there: {err}", dir.display()))
        .map(|entry| entry.expect("a readable entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "patch"))
        .collect();
    patches.sort();
    patches
}

#[test]
fn every_mutant_patch_applies_to_the_tree() {
    let root = repository_root();
    // `.git` is a folder in a clone and a file in a worktree: either will do.
    if !root.join(".git").exists() {
        println!(
            "note: {} is no git checkout; the mutant patches are not checked",
            root.display()
        );
        return;
    }
    if Command::new("git").arg("--version").output().is_err() {
        println!("note: no git to run; the mutant patches are not checked");
        return;
    }
    let patches = patches(&root);
    assert!(!patches.is_empty(), "sim/mutants holds no patch");
    let stale: Vec<String> = patches
        .iter()
        .filter_map(|patch| {
            // From the root: run in a subfolder, `git apply` skips the paths outside it.
            let out = Command::new("git")
                .current_dir(&root)
                .args(["apply", "--check"])
                .arg(patch)
                .output()
                .expect("git runs");
            (!out.status.success()).then(|| {
                format!(
                    "{}:\n{}",
                    patch.file_name().unwrap().to_string_lossy(),
                    String::from_utf8_lossy(&out.stderr).trim_end()
                )
            })
        })
        .collect();
    assert!(
        stale.is_empty(),
        "{} of {} mutant patches no longer apply (re-make each at the code's new place, \
         undoing the same fix):\n\n{}",
        stale.len(),
        patches.len(),
        stale.join("\n\n")
    );
}

/// Each mutant `sim/mutants/EQUIVALENT` leaves out of the score is one of the
/// patches, and names a test of the product's that exists (the one that shows no
/// state reaches it).
#[test]
fn every_equivalent_mutant_is_a_patch_with_its_test() {
    let root = repository_root();
    let listed = std::fs::read_to_string(root.join("sim/mutants/EQUIVALENT"))
        .expect("sim/mutants/EQUIVALENT is there");
    let names: Vec<String> = patches(&root)
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for line in listed
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (name, test) = line.split_once(' ').expect("a mutant and its test");
        assert!(names.iter().any(|n| n == name), "{name} is no mutant");
        let (module, function) = test.rsplit_once("::").expect("a test's path");
        let file = module.trim_end_matches("::tests").replace("::", "/");
        let source = std::fs::read_to_string(root.join(format!("shared/src/{file}.rs")))
            .unwrap_or_else(|err| panic!("{test}: shared/src/{file}.rs: {err}"));
        assert!(
            source.contains(&format!("fn {function}()")),
            "{test} is no test of shared/src/{file}.rs"
        );
    }
}
