//! The crate's top-level modules depend on each other without a cycle (issue 9: `cluster.rs`,
//! `schedule.rs` and `webhook.rs` used to import each other in a circle), and the core stays free
//! of Python.
//!
//! Read from the sources: a module depends on another when its non-test code names
//! `crate::<other>` outside a comment. Doc links (`[`crate::x`]`) live in comments and do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`src/state/ingest.rs` -> `state`).
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The code of a file without comments and without its `#[cfg(test)]` part (tests may reach anywhere).
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| l.split(" // ").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::<name>` in `code`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .map(|(at, m)| {
            code[at + m.len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files.iter().filter(|f| f.file_name().is_some_and(|n| n != "tests.rs")) {
        let module = module_of(file);
        let deps: Vec<String> = crate_paths(&code(file)).into_iter().filter(|d| *d != module).collect();
        edges.entry(module).or_default().extend(deps);
    }
    edges
}

/// One cycle of the graph as `a -> b -> a`, if there is one (depth-first search).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit<'a>(
        node: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut cycle: Vec<String> = path[at..].iter().map(|s| (*s).to_owned()).collect();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
}

#[test]
fn top_level_modules_form_no_cycle() {
    let edges = graph();
    for module in ["engine", "state", "filter", "mutate", "webhook", "k8s", "policy", "replay", "plan", "error"] {
        assert!(edges.contains_key(module), "module {module} not found under src/: {:?}", edges.keys());
    }
    assert_eq!(find_cycle(&edges), None, "module graph: {edges:#?}");
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let edges: BTreeMap<String, BTreeSet<String>> =
        [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")].iter().fold(BTreeMap::new(), |mut m, (from, to)| {
            m.entry((*from).to_owned()).or_insert_with(BTreeSet::new).insert((*to).to_owned());
            m
        });
    assert_eq!(find_cycle(&edges), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    assert_eq!(crate_paths("use crate::k8s::key; x(crate::error::Error)"), ["error", "k8s"].map(String::from).into());
}

#[test]
fn the_core_does_not_depend_on_python() {
    let manifest = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("pyo3"), "hami-core must stay pure Rust");
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    for file in files {
        assert!(!code(&file).contains("pyo3"), "{} mentions pyo3", file.display());
    }
}
