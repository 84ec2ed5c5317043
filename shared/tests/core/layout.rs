//! The code's layout, checked: the core's modules import one another without a
//! circle (by file, and by top-level module), and no product source file of the
//! workspace grows past about 700 lines (test files aside). A newcomer reads the
//! core in the order `lib.rs` lists it; a circle would make that order a lie.
//!
//! The import graph is read from the source as `crate::…` paths (a `use` or a path
//! in code; comments and inline test modules aside): the edges rustc resolves,
//! without needing rustc's output.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Most lines a product source file may have ("about 700").
const MAX_FILE_LINES: usize = 720;

fn core_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The module a file of `src` defines, as `a::b` (`lib.rs` is the crate root: "").
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|last| last == "mod" || last == "lib")
    {
        parts.pop();
    }
    parts.join("::")
}

/// The source without comment lines and without an inline `mod tests`.
fn product_code(text: &str) -> String {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b` path the code names, `crate::a::{b, c::d}` expanded.
fn crate_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let path: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == ':')
            .collect();
        let path = path.trim_end_matches(':').to_owned();
        let after = &rest[path.len()..];
        if let Some(group) = after.strip_prefix("::{") {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            for item in group[..end].split(',') {
                let item = item.trim();
                if item.starts_with(|c: char| c.is_ascii_lowercase()) {
                    let name: String = item
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_' || *c == ':')
                        .collect();
                    paths.push(format!("{path}::{}", name.trim_end_matches(':')));
                }
            }
        }
        paths.push(path);
    }
    paths
}

/// Every `super::…` path the code of `module` names, as the `crate::…` path it
/// is (`super::super::x` in `a::b::c` is `a::x`), so a circle through a parent's
/// items is seen too.
fn super_paths(module: &str, code: &str) -> Vec<String> {
    let parts: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        let before = &rest[..at];
        rest = &rest[at..];
        if before.ends_with("::") || before.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            rest = &rest["super::".len()..];
            continue;
        }
        let mut ups = 0;
        while let Some(tail) = rest.strip_prefix("super::") {
            ups += 1;
            rest = tail;
        }
        if ups > parts.len() {
            continue;
        }
        let base = parts[..parts.len() - ups].join("::");
        let named: String = format!("crate::{base}{}", if base.is_empty() { "" } else { "::" });
        let tail: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != ';' && *c != ')' && *c != '(')
            .collect();
        paths.extend(crate_paths(&format!("{named}{tail}")));
    }
    paths
}

/// The longest prefix of `path` that is a module of `modules`.
fn resolve<'a>(modules: &'a BTreeSet<String>, path: &str) -> Option<&'a String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .find_map(|n| modules.get(&parts[..n].join("::")))
}

/// The core's import graph: module → the modules it names, leaving out a
/// module's own ancestors and descendants (a parent declares its children) and
/// the test helpers. With `top`, modules are folded into their top-level one.
fn import_graph(top: bool) -> BTreeMap<String, BTreeSet<String>> {
    let src = core_src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|file| module_of(&src, file)).collect();
    let fold = |module: &str| {
        if top {
            module.split("::").next().unwrap_or_default().to_owned()
        } else {
            module.to_owned()
        }
    };
    let related = |a: &str, b: &str| {
        a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let is_testing =
            module == "testing" || module.starts_with("testing::") || module.ends_with("::tests");
        if module.is_empty() || is_testing {
            continue;
        }
        let code = product_code(&fs::read_to_string(file).unwrap());
        let from = fold(&module);
        let edges = graph.entry(from.clone()).or_default();
        let mut paths = crate_paths(&code);
        paths.extend(super_paths(&module, &code));
        for path in paths {
            let Some(target) = resolve(&modules, &path) else {
                continue;
            };
            if target == "testing" || related(&module, target) {
                continue;
            }
            let to = fold(target);
            if to != from {
                edges.insert(to);
            }
        }
    }
    graph
}

/// A circle of the graph, if it has one.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|step| step == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_core_has_no_import_circle_by_file_or_by_module() {
    for top in [false, true] {
        let graph = import_graph(top);
        assert!(graph.len() > 20, "read too few modules: {graph:?}");
        assert!(
            graph["converse"].contains("store")
                && graph[if top {
                    "compaction"
                } else {
                    "compaction::step"
                }]
                .contains(if top { "plan" } else { "plan::step_plan" })
                && graph[if top { "records" } else { "records::sessions" }].contains(if top {
                    "plan"
                } else {
                    "plan::recall"
                }),
            "the graph misses known edges: {graph:?}"
        );
        if let Some(circle) = find_circle(&graph) {
            panic!("an import circle: {}", circle.join(" → "));
        }
    }
}

#[test]
fn a_circle_is_found_when_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(from, to)| (from.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(find_circle(&graph).unwrap(), vec!["a", "b", "c", "a"]);
    assert_eq!(
        crate_paths("use crate::store::{ContactKey, memory::sim};\nlet x = crate::sweep::f();"),
        vec!["store::memory::sim", "store", "sweep::f"]
    );
}

#[test]
fn no_product_file_is_over_about_700_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in [
        "shared/src",
        "adapters/src",
        "channels",
        "functions",
        "infra",
        "sim/src",
        "bench/src",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut long: Vec<String> = files
        .iter()
        .filter(|file| {
            let path = file.to_string_lossy();
            !path.contains("/target/") && !path.contains("/tests/") && !path.ends_with("/tests.rs")
        })
        .filter_map(|file| {
            let lines = fs::read_to_string(file).ok()?.lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{} ({lines} lines)", file.display()))
        })
        .collect();
    long.sort();
    assert!(files.len() > 100, "read too few files: {}", files.len());
    assert!(long.is_empty(), "split these by concern: {long:#?}");
}
