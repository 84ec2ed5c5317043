//! The docs cannot drift from the repository: every relative link of every
//! Markdown file names a file that exists, and every `#anchor` a heading of it
//! (as a forge renders the heading's anchor); the README links nothing outside
//! the repository. No moto needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// Folders that hold no docs of the repository's own.
const SKIPPED: &[&str] = &[
    ".git",
    "target",
    "node_modules",
    ".venv",
    ".venv-sam",
    ".local",
    "dist",
    ".aws-sam",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
];

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !SKIPPED.contains(&name.as_str()) && !name.starts_with("wt-") {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// Every `[text](target)` link target of a line, inline code aside.
fn links(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut code = false;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '`' => code = !code,
            ']' if !code && chars.get(i + 1) == Some(&'(') => {
                let rest: String = chars[i + 2..].iter().collect();
                if let Some(end) = rest.find(')') {
                    let target = rest[..end].split_whitespace().next().unwrap_or("");
                    found.push(target.to_owned());
                }
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The anchor a forge gives a heading's text: lowercased, punctuation dropped
/// (letters, digits, `-` and `_` kept), spaces made `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a Markdown file's headings (a repeated one numbered `-1`, `-2`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut all = BTreeSet::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = anchor(heading);
        let count = seen.entry(base.clone()).or_default();
        all.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    all
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = root();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    assert!(files.len() > 3, "{files:?}");
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        for (number, line) in prose(&text).iter().enumerate() {
            for target in links(line) {
                if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                    continue;
                }
                let (path, fragment) = match target.split_once('#') {
                    Some((path, fragment)) => (path, Some(fragment)),
                    None => (target.as_str(), None),
                };
                let linked = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                if !linked.exists() {
                    broken.push(format!(
                        "{shown} (line {}): {target}: no such file",
                        number + 1
                    ));
                    continue;
                }
                let Some(fragment) = fragment else { continue };
                if linked.extension().is_some_and(|ext| ext == "md") {
                    let headings = anchors(&std::fs::read_to_string(&linked).unwrap());
                    if !headings.contains(fragment) {
                        broken.push(format!(
                            "{shown} (line {}): {target}: no such heading",
                            number + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_links_nothing_outside_the_repository() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let outside: Vec<String> = prose(&text)
        .iter()
        .flat_map(|line| links(line))
        .filter(|target| target.contains("://"))
        .collect();
    assert!(outside.is_empty(), "{outside:?}");
}

#[test]
fn anchors_are_made_as_a_forge_makes_them() {
    assert_eq!(
        anchor(" Model answers as they come"),
        "model-answers-as-they-come"
    );
    assert_eq!(anchor(" HTTP API (v1)"), "http-api-v1");
    assert_eq!(anchor(" `ask`, streamed"), "ask-streamed");
    let text = "# A\n## B\n```\n# not a heading\n```\n## B\n";
    let found = anchors(text);
    assert_eq!(
        found,
        ["a", "b", "b-1"].iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(
        links("see [the docs](docs/x.md#y) and `[not](a link)`"),
        ["docs/x.md#y"]
    );
}

/// README.md and every page of `docs/`, with their paths.
fn pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap().flatten() {
        if entry.path().extension().is_some_and(|ext| ext == "md") {
            paths.push(entry.path());
        }
    }
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            (path, text)
        })
        .collect()
}

/// A count as the docs write it: digits, or a word up to twelve.
const NUMBER: &str = r"\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve";

fn number(word: &str) -> Option<usize> {
    const WORDS: [&str; 13] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    word.parse()
        .ok()
        .or_else(|| WORDS.iter().position(|w| w.eq_ignore_ascii_case(word)))
}

/// Every count `pattern` finds in the docs (its first group a number, as a digit
/// or a word), with where it was said.
fn counts_said(pattern: &str) -> Vec<(usize, String)> {
    let pattern = regex::Regex::new(pattern).unwrap();
    let mut said = Vec::new();
    for (path, text) in pages() {
        let shown = path.strip_prefix(root()).unwrap().display().to_string();
        let flat = text.replace('\n', " ");
        for found in pattern.captures_iter(&flat) {
            let count = number(&found[1]).unwrap_or_else(|| panic!("{shown}: {}", &found[0]));
            said.push((count, format!("{shown}: \"{}\"", &found[0])));
        }
    }
    said
}

fn assert_all(said: &[(usize, String)], actual: usize, what: &str) {
    assert!(
        !said.is_empty(),
        "the docs state the number of {what} somewhere"
    );
    let wrong: Vec<&String> = said
        .iter()
        .filter(|(count, _)| *count != actual)
        .map(|(_, at)| at)
        .collect();
    assert!(
        wrong.is_empty(),
        "the template has {actual} {what}, but: {wrong:?}"
    );
}

#[test]
fn the_counts_the_docs_state_are_the_templates_and_the_api_documents() {
    let template = crate::helpers::template();
    let resources = template["Resources"].as_object().unwrap();
    let of_type = |kind: &str| resources.values().filter(|r| r["Type"] == kind).count();

    // "the five functions" (a phrase naming all of them; "two functions of its own"
    // and a dated measurement's "the four functions it had then" are not counts of
    // the template's).
    let functions = counts_said(&format!(
        r"(?i)\bthe ({NUMBER}) functions\b(?: it had then)?"
    ))
    .into_iter()
    .filter(|(_, at)| !at.ends_with("it had then\""))
    .collect::<Vec<_>>();
    assert_all(
        &functions,
        of_type("AWS::Serverless::Function"),
        "functions",
    );
    assert_all(
        &counts_said(r"(?i)\b(\w+) (?:Lambda )?functions, one table"),
        of_type("AWS::Serverless::Function"),
        "functions",
    );
    assert_all(
        &counts_said(r"declares (\w+) alarms"),
        of_type("AWS::CloudWatch::Alarm"),
        "alarms",
    );
    assert_all(
        &counts_said(r"takes (\w+) parameters"),
        template["Parameters"].as_object().unwrap().len(),
        "parameters",
    );
    let groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
        .as_array()
        .unwrap()
        .len();
    assert_all(
        &counts_said(r"parameters in (\w+) groups"),
        groups,
        "parameter groups",
    );

    let openapi: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("docs/openapi.json")).unwrap())
            .unwrap();
    let paths = openapi["paths"].as_object().unwrap();
    let operations = paths
        .values()
        .flat_map(|methods| methods.as_object().unwrap().keys())
        .filter(|method| ["get", "put", "post", "delete", "patch"].contains(&method.as_str()))
        .count();
    assert_all(
        &counts_said(r"(\w+) operations on \w+ paths"),
        operations,
        "operations",
    );
    assert_all(
        &counts_said(r"\w+ operations on (\w+) paths"),
        paths.len(),
        "paths",
    );
    // Every path of the API is documented on some page.
    let all: String = pages().into_iter().map(|(_, text)| text).collect();
    for path in paths.keys() {
        assert!(all.contains(path.as_str()), "no page of docs/ names {path}");
    }
}

/// The core's ports as the code declares them: every `pub trait` of `shared/src`
/// outside its test support (`testing/`, `memory/`, `tests.rs`).
fn core_traits() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        let declared = regex::Regex::new(r"(?m)^pub trait (\w+)").unwrap();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "testing" && name != "memory" && name != "tests" {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let text = std::fs::read_to_string(&path).unwrap();
                out.extend(
                    declared
                        .captures_iter(&text)
                        .map(|found| found[1].to_owned()),
                );
            }
        }
    }
    let mut traits = BTreeSet::new();
    walk(&root().join("shared/src"), &mut traits);
    traits
}

#[test]
fn the_ports_design_lists_are_the_traits_the_core_declares() {
    // DESIGN's crate table: "… and their ports (`store` split by caller into
    // `RoundStore`, …; `TenantStore`, …)": every trait named there, and no other.
    let design = std::fs::read_to_string(root().join("docs/DESIGN.md")).unwrap();
    let list = regex::Regex::new(r"and their ports \(([^)]*)\)")
        .unwrap()
        .captures(&design)
        .expect("DESIGN's crate table lists the core's ports")[1]
        .to_owned();
    let named: BTreeSet<String> = regex::Regex::new(r"`([A-Z]\w+)`")
        .unwrap()
        .captures_iter(&list)
        .map(|found| found[1].to_owned())
        .collect();
    let declared = core_traits();
    assert!(declared.len() > 10, "{declared:?}");
    assert_eq!(
        named, declared,
        "DESIGN's list of ports (left) against the core's traits (right)"
    );
    // The store traits by caller, as DESIGN says they are split: the store module's.
    let by_caller = regex::Regex::new(r"`store` split by caller into ([^;]*);")
        .unwrap()
        .captures(&list)
        .expect("the store's split")[1]
        .matches("Store`")
        .count();
    let store_traits = std::fs::read_dir(root().join("shared/src/store"))
        .unwrap()
        .flatten()
        .map(|entry| std::fs::read_to_string(entry.path()).unwrap_or_default())
        .map(|text| {
            regex::Regex::new(r"(?m)^pub trait (\w+Store):")
                .unwrap()
                .captures_iter(&text)
                .count()
        })
        .sum::<usize>();
    assert_eq!(by_caller, store_traits, "the store's traits by caller");
}
