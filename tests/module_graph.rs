//! The crate's top-level modules form no cycle (issue 26 item 3), and neither do
//! addon-operator's concept folders (`src/addon/{modules,config,release,run}`,
//! issue 42 item 5): each may use the ones below it (config < modules < release <
//! run) and the wiring (`addon/mod.rs`, `engine.rs`, `state.rs`, whose shared state
//! every run reads), never one above it.
//!
//! Reads every file under `src/` and collects each path that names a sibling
//! module: `crate::kube::...` anywhere in the code (not only on `use` lines) and the
//! names inside `use crate::{a, b::c}` groups. Unit-test code (`#[cfg(test)] mod
//! tests { .. }` at a file's end, `tests/` folders and `tests.rs` files, `*_tests.rs`) is left out: a
//! test may reach anywhere. The edges give a graph of top-level modules; the test
//! fails with the cycle's modules and the files behind each edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

#[test]
fn top_level_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src, "crate::");
    assert!(graph.len() > 20, "too few modules read: {:?}", graph.keys());
    if let Some(cycle) = find_cycle(&graph) {
        let mut report = String::new();
        for pair in cycle.windows(2) {
            let files = &graph[&pair[0]][&pair[1]];
            report += &format!("\n  {} -> {} ({files:?})", pair[0], pair[1]);
        }
        panic!("module cycle:{report}");
    }
}

#[test]
fn addon_concept_folders_form_no_cycle() {
    let addon = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/addon");
    let mut graph = graph(&addon, "crate::addon::");
    const FOLDERS: [&str; 4] = ["modules", "config", "release", "run"];
    graph.retain(|from, _| FOLDERS.contains(&from.as_str()));
    for edges in graph.values_mut() {
        edges.retain(|to, _| FOLDERS.contains(&to.as_str()));
    }
    assert!(graph.len() == 4, "folders read: {:?}", graph.keys());
    if let Some(cycle) = find_cycle(&graph) {
        panic!("addon folder cycle: {cycle:?}");
    }
}

#[test]
fn the_check_sees_a_cycle() {
    let mut g = Graph::new();
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into()).or_default().entry(b.into()).or_default();
    };
    edge(&mut g, "log", "flags");
    edge(&mut g, "flags", "kube");
    edge(&mut g, "kube", "log");
    let cycle = find_cycle(&g).expect("a cycle");
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4, "{cycle:?}");
}

/// The modules directly under `src` and which of them each one's files name with
/// `prefix` (`crate::` for the crate's top level).
fn graph(src: &Path, prefix: &str) -> Graph {
    let modules: BTreeSet<String> = std::fs::read_dir(src)
        .expect("src")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".rs").unwrap_or(&name).to_string();
            (stem != "lib" && stem != "main").then_some(stem)
        })
        .collect();
    let files = rust_files(src);
    let test_only = test_only_files(src, &files);
    let mut graph = Graph::new();
    for file in files {
        let rel = file
            .strip_prefix(src)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        let top = rel.split('/').next().unwrap_or_default();
        let top = top.strip_suffix(".rs").unwrap_or(top).to_string();
        if !modules.contains(&top) || is_test_file(&rel) || test_only.contains(&file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read");
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        for used in named_modules(code, prefix) {
            if used != top && modules.contains(&used) {
                let files = graph
                    .entry(top.clone())
                    .or_default()
                    .entry(used)
                    .or_default();
                files.insert(rel.clone());
            }
        }
    }
    graph
}

fn is_test_file(rel: &str) -> bool {
    rel.split('/')
        .any(|part| part == "tests" || part == "tests.rs")
        || rel.ends_with("_tests.rs")
        || rel.contains("/tests_")
}

/// Files of modules declared `#[cfg(test)] mod name;` (beside their parent, or in
/// its folder when the parent is `mod.rs`/`lib.rs` or a `name.rs` with a folder).
fn test_only_files(src: &Path, files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("read");
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs") => file.parent().unwrap_or(src).to_path_buf(),
            _ => file.with_extension(""),
        };
        for (i, _) in text.match_indices("#[cfg(test)]\nmod ") {
            let rest = &text[i + "#[cfg(test)]\nmod ".len()..];
            let Some(name) = rest
                .split(';')
                .next()
                .filter(|n| !n.contains(char::is_whitespace))
            else {
                continue;
            };
            out.insert(dir.join(format!("{name}.rs")));
            out.insert(dir.join(name).join("mod.rs"));
        }
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir").filter_map(|e| e.ok()) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The first segment after every `prefix` (e.g. `crate::`), and the names at the
/// start of each item of a `use <prefix>{...}` group.
fn named_modules(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = BTreeSet::new();
    for (i, _) in code.match_indices(prefix) {
        let rest = &code[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = group.split('}').next().unwrap_or_default();
            names.extend(body.split(',').map(|item| ident(item.trim())));
        } else {
            names.insert(ident(rest));
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// A cycle as a path that starts and ends at the same module, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        let mut path = Vec::new();
        if let Some(cycle) = visit(graph, start, &mut path, &mut done) {
            return Some(cycle);
        }
    }
    None
}

fn visit(
    graph: &Graph,
    node: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|n| n == node) {
        let mut cycle = path[at..].to_vec();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_string());
    for next in graph.get(node).into_iter().flat_map(|edges| edges.keys()) {
        if let Some(cycle) = visit(graph, next, path, done) {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(node.to_string());
    None
}
