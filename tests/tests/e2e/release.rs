//! What a release is made of agrees with itself: one version for the crates, the
//! Python and TypeScript clients and the newest section of `CHANGELOG.md` (Keep a
//! Changelog, semver), the HTTP API's own version against its paths, `LICENSE` the
//! licence every package declares, and a release folder a team deploys without a
//! Rust toolchain. No moto needed.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// `MAJOR.MINOR.PATCH` as numbers (degrau's versions carry no pre-release tag).
fn semver(text: &str) -> Option<(u64, u64, u64)> {
    let mut parts = text.split('.').map(|part| {
        (!part.is_empty() && (part == "0" || !part.starts_with('0')))
            .then(|| part.parse::<u64>().ok())
            .flatten()
    });
    let version = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(version)
}

/// The value of `key = "..."` in a TOML file's `[section]` (a flat reading: enough
/// for the two one-line keys read here).
fn toml_string(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = "";
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            current = line;
        } else if current == section
            && let Some((name, value)) = line.split_once('=')
            && name.trim() == key
        {
            return Some(value.trim().trim_matches('"').to_owned());
        }
    }
    None
}

/// The release headings of a changelog (`## [X.Y.Z] - YYYY-MM-DD`), in order,
/// after checking the file's shape; `Err` says what is wrong.
fn changelog_releases(text: &str) -> Result<Vec<(u64, u64, u64)>, String> {
    const KINDS: [&str; 6] = [
        "Added",
        "Changed",
        "Deprecated",
        "Removed",
        "Fixed",
        "Security",
    ];
    if !text.starts_with("# Changelog\n") {
        return Err("the first line is not `# Changelog`".into());
    }
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
    if headings.first() != Some(&"## [Unreleased]") {
        return Err(format!(
            "the first section is not [Unreleased]: {:?}",
            headings.first()
        ));
    }
    let mut releases = Vec::new();
    for heading in &headings[1..] {
        let parsed = heading
            .strip_prefix("## [")
            .and_then(|rest| rest.split_once("] - "))
            .filter(|(_, date)| is_date(date))
            .and_then(|(version, _)| semver(version));
        match parsed {
            Some(version) => releases.push(version),
            None => return Err(format!("not `## [X.Y.Z] - YYYY-MM-DD`: {heading}")),
        }
    }
    if releases.windows(2).any(|pair| pair[0] <= pair[1]) {
        return Err(format!("releases not newest first: {releases:?}"));
    }
    for line in text.lines().filter(|l| l.starts_with("### ")) {
        if !KINDS.contains(&&line[4..]) {
            return Err(format!("not a Keep a Changelog kind of change: {line}"));
        }
    }
    Ok(releases)
}

fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                *b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
}

#[test]
fn the_changelog_reader_refuses_what_keep_a_changelog_does_not_allow() {
    let good = "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2027-01-02\n### Added\n- x\n\n## [0.1.0] - 2026-12-03\n### Fixed\n- y\n";
    assert_eq!(changelog_releases(good), Ok(vec![(0, 2, 0), (0, 1, 0)]));
    for bad in [
        good.replace("# Changelog\n", "# Changes\n"),
        good.replace("## [Unreleased]\n", ""),
        good.replace("[0.2.0] - 2027-01-02", "[0.2] - 2027-01-02"),
        good.replace("[0.2.0] - 2027-01-02", "[0.2.0] - 2 January 2027"),
        good.replace("[0.2.0]", "[0.1.0]"),
        good.replace("### Added", "### New"),
    ] {
        assert!(changelog_releases(&bad).is_err(), "accepted:\n{bad}");
    }
    assert_eq!(semver("1.10.0"), Some((1, 10, 0)));
    for bad in ["1.0", "1.0.0.0", "01.0.0", "1.x.0", "1.0.0-rc.1"] {
        assert_eq!(semver(bad), None, "{bad}");
    }
}

#[test]
fn the_crates_the_python_client_and_the_changelog_name_one_version() {
    // Every crate inherits the workspace's version (this crate's is that one).
    let crates = env!("CARGO_PKG_VERSION");
    let manifest = read("Cargo.toml");
    assert_eq!(
        toml_string(&manifest, "[workspace.package]", "version").as_deref(),
        Some(crates)
    );
    for member in [
        "shared",
        "adapters",
        "channels/whatsapp",
        "functions/ask",
        "functions/compactor",
        "functions/whatsapp-webhook",
        "functions/whatsapp-worker",
        "functions/events-out",
        "infra/standin",
        "infra/bridge",
        "infra/awsproxy",
        "tests",
        "bench",
        "bench/entropy",
    ] {
        let text = read(&format!("{member}/Cargo.toml"));
        assert!(
            text.contains("\nversion.workspace = true\n"),
            "{member} does not take the workspace's version"
        );
    }
    let python = toml_string(
        &read("clients/python/pyproject.toml"),
        "[project]",
        "version",
    );
    assert_eq!(python.as_deref(), Some(crates), "degrau-client's version");
    let npm: Value = serde_json::from_str(&read("clients/typescript/package.json")).unwrap();
    assert_eq!(
        npm["version"].as_str(),
        Some(crates),
        "the TypeScript client's version"
    );
    let releases = changelog_releases(&read("CHANGELOG.md")).unwrap();
    let newest = releases.first().expect("CHANGELOG.md names a release");
    assert_eq!(
        Some(*newest),
        semver(crates),
        "the newest CHANGELOG section"
    );
}

#[test]
fn the_http_api_version_has_the_major_of_its_paths() {
    let openapi: Value = serde_json::from_str(&read("docs/openapi.json")).unwrap();
    let version = openapi["info"]["version"].as_str().unwrap();
    let (major, _, _) = semver(version).unwrap_or_else(|| panic!("not semver: {version}"));
    let prefix = format!("/v{major}/");
    let paths: Vec<&String> = openapi["paths"].as_object().unwrap().keys().collect();
    assert!(!paths.is_empty());
    for path in paths {
        assert!(path.starts_with(&prefix), "{path} is not under {prefix}");
    }
    assert!(
        read("CHANGELOG.md").contains(&format!("HTTP API {version}")),
        "CHANGELOG.md names the API's version {version}"
    );
}

#[test]
fn the_licence_file_is_the_apache_2_0_text_every_package_declares() {
    // The standard text of the Apache License 2.0 (apache.org's LICENSE-2.0.txt),
    // whole: its SHA-256.
    let text = read("LICENSE");
    assert_eq!(
        hex::encode(Sha256::digest(text.as_bytes())),
        "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
    );
    assert_eq!(env!("CARGO_PKG_LICENSE"), "Apache-2.0");
    assert_eq!(
        toml_string(&read("Cargo.toml"), "[workspace.package]", "license").as_deref(),
        Some("Apache-2.0")
    );
    assert_eq!(
        toml_string(
            &read("clients/python/pyproject.toml"),
            "[project]",
            "license"
        )
        .as_deref(),
        Some("Apache-2.0")
    );
    // The wheel carries the same file (a link, so the two cannot drift).
    assert_eq!(read("clients/python/LICENSE"), text);
}

#[test]
fn samconfig_turns_on_the_beta_flag_the_cargo_lambda_builder_needs() {
    let template = read("template.yaml");
    let functions = template.matches("BuildMethod: rust-cargolambda").count();
    assert_eq!(functions, 6, "the six functions build with cargo-lambda");
    let samconfig = read("samconfig.toml");
    assert!(
        samconfig.contains("\nversion = 0.1\n"),
        "samconfig's format version"
    );
    for section in [
        "[default.global.parameters]",
        "[default.build.parameters]",
        "[default.local_invoke.parameters]",
    ] {
        assert_eq!(
            toml_string(&samconfig, section, "beta_features").as_deref(),
            Some("true"),
            "{section}"
        );
    }
    assert_eq!(
        toml_string(&samconfig, "[default.build.parameters]", "template_file").as_deref(),
        Some("template.yaml")
    );
    assert_eq!(
        toml_string(&samconfig, "[default.deploy.parameters]", "capabilities").as_deref(),
        Some("CAPABILITY_IAM")
    );
}

#[test]
fn there_is_a_sample_event_for_each_function_and_each_is_json() {
    // Each is also run through its function's real handler, in the function's own
    // tests (functions/*/tests/events.rs).
    let mut names: Vec<String> = std::fs::read_dir(root().join("events"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    for name in &names {
        let text = read(&format!("events/{name}"));
        serde_json::from_str::<Value>(&text).unwrap_or_else(|err| panic!("{name}: {err}"));
    }
    for function in [
        "ask",
        "compactor",
        "whatsapp-webhook",
        "whatsapp-worker",
        "events-out",
    ] {
        assert!(
            names.iter().any(|name| name.starts_with(function)),
            "no sample event for {function}: {names:?}"
        );
        let test = root().join(format!("functions/{function}/tests/events.rs"));
        assert!(test.exists(), "{} is missing", test.display());
    }
}

#[test]
fn the_release_script_names_the_version_and_packages_each_function_for_lambda() {
    let release = |args: &[&str]| {
        std::process::Command::new("python3")
            .arg(root().join("infra/release.py"))
            .args(args)
            .output()
            .unwrap()
    };
    let version = release(&["version"]);
    assert!(
        version.status.success(),
        "{}",
        String::from_utf8_lossy(&version.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        env!("CARGO_PKG_VERSION")
    );

    // A build directory as `sam build` leaves it, one bootstrap per function.
    let dir = std::env::temp_dir().join(degrau_tests::unique("release"));
    let functions = [
        ("AskFunction", "ask"),
        ("AskStreamFunction", "ask-stream"),
        ("CompactorFunction", "compactor"),
        ("WhatsAppWebhookFunction", "whatsapp-webhook"),
        ("WhatsAppWorkerFunction", "whatsapp-worker"),
        ("EventsOutFunction", "events-out"),
    ];
    for (logical, name) in functions {
        std::fs::create_dir_all(dir.join("build").join(logical)).unwrap();
        std::fs::write(dir.join("build").join(logical).join("bootstrap"), name).unwrap();
    }
    let out = dir.join("dist");
    let (build, dist) = (dir.join("build"), out.clone());
    let package = || release(&["package", build.to_str().unwrap(), dist.to_str().unwrap()]);
    let packaged = package();
    assert!(
        packaged.status.success(),
        "{}",
        String::from_utf8_lossy(&packaged.stderr)
    );
    // Each zip holds one executable `bootstrap` at its root, as provided.al2023 wants.
    let check = "import sys, zipfile\n\
                 z = zipfile.ZipFile(sys.argv[1])\n\
                 [info] = z.infolist()\n\
                 print(info.filename, oct(info.external_attr >> 16), z.read(info).decode())";
    for (_, name) in functions {
        let listed = std::process::Command::new("python3")
            .args(["-c", check])
            .arg(out.join(format!("{name}-arm64.zip")))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&listed.stdout).trim(),
            format!("bootstrap 0o100755 {name}")
        );
    }
    let sums = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    assert_eq!(
        sums.lines().count(),
        7,
        "six zips and the packaged template: {sums}"
    );
    let ask = std::fs::read(out.join("ask-arm64.zip")).unwrap();
    assert!(sums.contains(&format!(
        "{}  ask-arm64.zip",
        hex::encode(Sha256::digest(&ask))
    )));

    // A build without one of the functions is refused.
    std::fs::remove_file(dir.join("build/CompactorFunction/bootstrap")).unwrap();
    let missing = package();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("CompactorFunction"));
}

#[test]
fn a_release_folder_holds_a_template_that_deploys_its_prebuilt_zips() {
    // `./dev.sh release`'s package step over stand-in binaries (the arm64 build
    // takes twelve minutes): the template it writes must name every function's
    // zip beside it, build nothing, and pass cfn-lint (CI also runs `sam validate
    // --lint` on it).
    let out = std::env::temp_dir().join(format!("degrau-release-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = std::process::Command::new("python3")
        .current_dir(root())
        .args(["infra/release.py", "rehearse"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let packaged = crate::helpers::template_at(&out.join("packaged.yaml"));
    assert!(packaged["Globals"]["Function"].get("CodeUri").is_none());
    let functions: Vec<(&String, &Value)> = packaged["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Serverless::Function")
        .collect();
    let source = crate::helpers::template();
    let declared = source["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| r["Type"] == "AWS::Serverless::Function")
        .count();
    assert_eq!(functions.len(), declared, "every function of template.yaml");
    for (name, function) in &functions {
        assert!(function.get("Metadata").is_none(), "{name} builds nothing");
        let code = function["Properties"]["CodeUri"].as_str().unwrap();
        assert!(
            out.join(code).is_file(),
            "{name}'s CodeUri {code} is a file of the release"
        );
    }
    // SHA256SUMS covers every file, with its hash.
    let sums = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    let mut listed: Vec<&str> = Vec::new();
    for line in sums.lines() {
        let (hash, file) = line.split_once("  ").unwrap();
        let bytes = std::fs::read(out.join(file)).unwrap();
        assert_eq!(hex::encode(Sha256::digest(&bytes)), hash, "{file}");
        listed.push(file);
    }
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "SHA256SUMS")
        .collect();
    files.sort();
    assert_eq!(listed, files);
    let lint = std::process::Command::new(root().join(".venv/bin/cfn-lint"))
        .arg(out.join("packaged.yaml"))
        .output()
        .unwrap();
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stdout)
    );
    std::fs::remove_dir_all(&out).unwrap();
}
