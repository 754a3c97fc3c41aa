//! The crate's top-level modules keep the layer order `lib.rs` declares, and the core stays free
//! of Python.
//!
//! Read from the sources: a module depends on another when the code it builds outside `cargo test`
//! names `crate::<other>`. Comments, string literals and test-only items (`#[cfg(test)]` modules,
//! inline or in files of their own, and any other `#[cfg(test)]` item) do not count.

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

/// `text` with comments and the contents of string and character literals blanked (newlines
/// kept), so that braces and `crate::` inside them are not read as code.
fn strip_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i..].starts_with(&['/', '*']) {
                    depth += 1;
                    i += 2;
                } else if chars[i..].starts_with(&['*', '/']) {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(rest) {
            // r"...", r#"..."#, br"...": no escapes; ends at a quote followed by as many hashes.
            let open = rest.iter().position(|&c| c == '"').unwrap();
            out.push('"');
            i += open + 1;
            let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            while i < chars.len() && !chars[i..].starts_with(&close) {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push('"');
            i += close.len();
        } else if chars[i] == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let step = if chars[i] == '\\' { 2 } else { 1 };
                chars[i..(i + step).min(chars.len())].iter().for_each(|&c| out.push(blank(c)));
                i += step;
            }
            out.push('"');
            i += 1;
        } else if let Some(len) = char_literal_len(rest) {
            out.push_str("' '");
            i += len;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// How many `#` a raw string literal starting here has (`None`: no raw string starts here).
fn raw_string_start(rest: &[char]) -> Option<usize> {
    let after_prefix = match rest {
        ['r', ..] => &rest[1..],
        ['b', 'r', ..] => &rest[2..],
        _ => return None,
    };
    let hashes = after_prefix.iter().take_while(|&&c| c == '#').count();
    (after_prefix.get(hashes) == Some(&'"')).then_some(hashes)
}

/// The length of a character literal starting here (`'x'`, `'\n'`, `'\u{..}'`); `None` for a
/// lifetime (`'a`) or anything else.
fn char_literal_len(rest: &[char]) -> Option<usize> {
    match rest {
        ['\'', '\\', ..] => rest[3..].iter().position(|&c| c == '\'').map(|at| at + 4),
        ['\'', _, '\'', ..] => Some(3),
        _ => None,
    }
}

/// `code` without its `#[cfg(test)]` items, and the names of the modules declared test-only
/// in files of their own (`#[cfg(test)] mod tests;`).
fn without_test_items(code: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let (mut out, mut test_files, mut rest) = (String::new(), Vec::new(), code);
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let end = item_end(item);
        let words: Vec<&str> = item[..end].split_whitespace().collect();
        if let ["mod", name] = words.as_slice() {
            test_files.push(name.trim_end_matches(';').to_owned());
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, test_files)
}

/// Where the item at the start of `item` ends: after its `;`, or after the brace that closes its
/// body, whichever comes first (comments and literals are already blanked).
fn item_end(item: &str) -> usize {
    let mut depth = 0usize;
    for (at, c) in item.char_indices() {
        match c {
            ';' if depth == 0 => return at + 1,
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
    }
    item.len()
}

/// The file a module declared in `parent` as `mod name;` lives in.
fn module_file(parent: &Path, name: &str) -> Vec<PathBuf> {
    let stem = parent.file_stem().unwrap().to_string_lossy();
    let dir = match stem.as_ref() {
        "mod" | "lib" => parent.parent().unwrap().to_path_buf(),
        _ => parent.with_extension(""),
    };
    vec![dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")]
}

/// Every source file's code as built outside `cargo test`, by path; test-only files left out.
fn product_code() -> BTreeMap<PathBuf, String> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut code = BTreeMap::new();
    let mut test_files = BTreeSet::new();
    for file in files {
        let text = strip_comments_and_literals(&fs::read_to_string(&file).unwrap());
        let (kept, tests) = without_test_items(&text);
        test_files.extend(tests.iter().flat_map(|name| module_file(&file, name)));
        code.insert(file, kept);
    }
    code.retain(|file, _| !test_files.contains(file));
    code
}

/// Every `crate::<name>` in `code`, grouped imports (`crate::{a::x, b}`) included.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let mut out = BTreeSet::new();
    for (at, m) in code.match_indices("crate::") {
        let after = code[at + m.len()..].trim_start();
        let Some(group) = after.strip_prefix('{') else {
            out.insert(ident(after));
            continue;
        };
        // The group's top-level entries: the first name after its opening brace and each comma.
        let (mut depth, mut entry_start) = (0usize, true);
        for (k, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => entry_start = true,
                c if entry_start && !c.is_whitespace() => {
                    out.insert(ident(&group[k..]));
                    entry_start = false;
                }
                _ => {}
            }
        }
    }
    out.remove("");
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, code) in product_code() {
        if file.ends_with("src/lib.rs") {
            continue;
        }
        let module = module_of(&file);
        let deps: Vec<String> = crate_paths(&code).into_iter().filter(|d| *d != module).collect();
        edges.entry(module).or_default().extend(deps);
    }
    edges
}

/// The layers `lib.rs` declares in its doc: one per bullet under "Layers", each the top-level
/// modules it links (`[`fit::reason`]` counts as `fit`), in the order written.
fn declared_layers() -> Vec<Vec<String>> {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let doc: Vec<&str> = lib.lines().map_while(|l| l.strip_prefix("//!")).collect();
    let start = doc.iter().position(|l| l.contains("Layers")).expect("lib.rs declares its layers");
    let mut layers: Vec<Vec<String>> = Vec::new();
    for line in doc[start + 1..].iter().take_while(|l| !l.trim().is_empty()) {
        if line.trim_start().starts_with("- ") {
            layers.push(Vec::new());
        }
        let Some(layer) = layers.last_mut() else { continue }; // the heading's own lines
        for link in line.split("[`").skip(1) {
            let module = link.split(['`', ':']).next().unwrap().to_owned();
            if !layer.contains(&module) {
                layer.push(module);
            }
        }
    }
    layers
}

/// The modules `lib.rs` declares (`pub mod x;`).
fn declared_modules() -> BTreeSet<String> {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    lib.lines().filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';').map(str::to_owned)).collect()
}

/// Every import that breaks the order: a module may import the layers above its own and, within
/// its layer, the modules written before it. As `importer -> imported`.
fn order_violations(layers: &[Vec<String>], edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let position: BTreeMap<&str, (usize, usize)> = layers
        .iter()
        .enumerate()
        .flat_map(|(k, layer)| layer.iter().enumerate().map(move |(i, m)| (m.as_str(), (k, i))))
        .collect();
    let mut out = Vec::new();
    for (module, deps) in edges {
        let Some(&at) = position.get(module.as_str()) else { continue };
        for dep in deps {
            match position.get(dep.as_str()) {
                Some(&dep_at) if dep_at < at => {}
                Some(&(layer, _)) => out.push(format!("{module} (layer {}) -> {dep} (layer {})", at.0 + 1, layer + 1)),
                None => out.push(format!("{module} -> {dep} (not in any layer)")),
            }
        }
    }
    out
}

#[test]
fn every_module_is_in_one_declared_layer() {
    let layers = declared_layers();
    let listed: Vec<&String> = layers.iter().flatten().collect();
    let unique: BTreeSet<&String> = listed.iter().copied().collect();
    assert_eq!(listed.len(), unique.len(), "a module listed twice: {layers:?}");
    let declared = declared_modules();
    assert!(declared.len() > 10, "lib.rs modules: {declared:?}");
    assert_eq!(unique.into_iter().cloned().collect::<BTreeSet<_>>(), declared, "lib.rs layers vs modules");
}

#[test]
fn each_module_imports_only_what_is_declared_above_it() {
    let edges = graph();
    for module in ["engine", "state", "filter", "plan", "replay", "error"] {
        assert!(edges.contains_key(module), "module {module} not found under src/: {:?}", edges.keys());
    }
    assert_eq!(order_violations(&declared_layers(), &edges), Vec::<String>::new(), "module graph: {edges:#?}");
}

#[test]
fn the_order_check_reports_an_import_from_below() {
    let layers: Vec<Vec<String>> = vec![vec!["error".into(), "k8s".into()], vec!["state".into()]];
    let edges: BTreeMap<String, BTreeSet<String>> =
        [("k8s", "error"), ("state", "k8s"), ("error", "k8s"), ("k8s", "state"), ("state", "plan")].iter().fold(
            BTreeMap::new(),
            |mut m, (from, to)| {
                m.entry((*from).to_owned()).or_insert_with(BTreeSet::new).insert((*to).to_owned());
                m
            },
        );
    assert_eq!(
        order_violations(&layers, &edges),
        ["error (layer 1) -> k8s (layer 1)", "k8s (layer 1) -> state (layer 2)", "state -> plan (not in any layer)"]
    );
}

#[test]
fn only_test_items_are_cut_out() {
    let text = r#"
use crate::a::x;
#[cfg(test)]
mod mig_tests;
pub fn f() -> &'static str { let _ = '}'; "}" }
#[cfg(test)]
use crate::t1;
/* crate::c1 { */ fn g<'a>(s: &'a str) -> &'a str { s } // crate::c2 }
#[cfg(test)]
mod tests {
    use crate::t2;
    fn h() { let _ = "{"; }
}
use crate::{b::y, d, e::{z, w}};
"#;
    let (kept, test_files) = without_test_items(&strip_comments_and_literals(text));
    assert_eq!(test_files, ["mig_tests"]);
    assert_eq!(crate_paths(&kept), ["a", "b", "d", "e"].map(String::from).into());
    assert!(kept.contains("fn g<'a>"), "{kept}");
}

#[test]
fn the_core_does_not_depend_on_python() {
    let manifest = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("pyo3"), "hami-core must stay pure Rust");
    for (file, code) in product_code() {
        assert!(!code.contains("pyo3"), "{} mentions pyo3", file.display());
    }
}
