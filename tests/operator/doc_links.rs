//! The docs can be walked: every relative link in README.md, BENCHMARKS.md and
//! docs/*.md names a file that exists and, with `#anchor`, a heading of that file
//! (GitHub's anchor: lowercased, punctuation but `-` and `_` dropped, spaces as `-`).
//! Links inside code blocks and to other sites are not checked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text of `path` without its fenced code blocks.
fn prose(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = String::new();
    let mut code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            code = !code;
        } else if !code {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn anchor(heading: &str) -> String {
    let lower = heading.trim().to_lowercase();
    let kept: String = lower
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .collect();
    kept.replace(' ', "-")
}

fn anchors(path: &Path) -> BTreeSet<String> {
    prose(path)
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

/// Every `](target)` of a markdown text.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            if !target.contains(char::is_whitespace) {
                out.push(target.to_string());
            }
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let mut files = vec![root().join("README.md"), root().join("BENCHMARKS.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/");
    files.extend(
        docs.filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
    let mut broken = Vec::new();
    for file in &files {
        for link in links(&prose(file)) {
            if link.starts_with("http:")
                || link.starts_with("https:")
                || link.starts_with("mailto:")
            {
                continue;
            }
            let (path, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = match path {
                "" => file.clone(),
                p => file.parent().expect("a dir").join(p),
            };
            let name = file
                .strip_prefix(root())
                .unwrap_or(file)
                .display()
                .to_string();
            if !target.exists() {
                broken.push(format!("{name}: {link} (no such file)"));
            } else if !fragment.is_empty()
                && target.extension().is_some_and(|x| x == "md")
                && !anchors(&target).contains(fragment)
            {
                broken.push(format!("{name}: {link} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
