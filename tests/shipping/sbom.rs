//! The CycloneDX bill of materials `make static` ships beside each binary
//! (scripts/sbom.py): it names the binary's exact bytes, lists exactly the crates
//! `cargo tree` says are linked in for that target (a second way to the same set:
//! the script walks `cargo metadata`), every crates.io entry carries the checksum
//! Cargo.lock records, and `version --verbose` counts the same crates.

use crate::{root, run, sha256, static_binary, triple};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// (name, version) -> checksum, from Cargo.lock's [[package]] entries.
fn lock_checksums() -> BTreeMap<(String, String), String> {
    let text = std::fs::read_to_string(root().join("Cargo.lock")).expect("Cargo.lock");
    let quoted = |l: &str| l.split('"').nth(1).unwrap_or_default().to_string();
    let mut sums = BTreeMap::new();
    for block in text.split("[[package]]").skip(1) {
        let field = |key: &str| block.lines().find(|l| l.starts_with(key)).map(quoted);
        if let (Some(n), Some(v), Some(c)) =
            (field("name = "), field("version = "), field("checksum = "))
        {
            sums.insert((n, v), c);
        }
    }
    sums
}

/// What `cargo tree` lists as linked in for `target`: (name, version).
fn tree(target: &str) -> BTreeSet<(String, String)> {
    let out = run(Command::new(env!("CARGO"))
        .current_dir(root())
        .args(["tree", "--offline", "--locked", "-p", "shell-operator"])
        .args([
            "-e",
            "normal,no-proc-macro",
            "--prefix",
            "none",
            "-f",
            "{p}",
        ])
        .args(["--target", target]));
    out.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?.to_string();
            let version = words.next()?.strip_prefix('v')?.to_string();
            Some((name, version))
        })
        .collect()
}

/// Generates the SBOM for `arch` as `make static` does and checks it.
fn check(arch: &str) -> usize {
    let target = triple(arch);
    let bin = static_binary(arch);
    let dir = crate::common::TempDir::new("sbom");
    let out = dir.0.join("sbom.json");
    run(Command::new("python3")
        .arg(root().join("scripts/sbom.py"))
        .arg(target)
        .arg(&bin)
        .arg(&out));
    let bom: Value =
        serde_json::from_slice(&std::fs::read(&out).expect("sbom")).expect("sbom json");
    assert_eq!(bom["bomFormat"], "CycloneDX");
    let app = &bom["metadata"]["component"];
    assert_eq!(app["name"], "shell-operator");
    assert_eq!(
        app["hashes"][0]["content"],
        sha256(&bin),
        "names the binary's bytes"
    );
    let listed: Vec<&Value> = bom["components"]
        .as_array()
        .expect("components")
        .iter()
        .collect();
    let mut names: BTreeSet<(String, String)> = listed
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().expect("string").to_string();
            (s("name"), s("version"))
        })
        .collect();
    assert_eq!(names.len(), listed.len(), "no crate twice");
    names.insert(("shell-operator".into(), env!("CARGO_PKG_VERSION").into()));
    assert_eq!(names, tree(target), "SBOM vs cargo tree for {target}");
    assert!(names.iter().any(|(n, _)| n == "ring"));
    assert!(
        !names
            .iter()
            .any(|(n, _)| n == "serde_derive" || n == "kube-sim" || n == "cc")
    );
    let sums = lock_checksums();
    for c in &listed {
        let key = (
            c["name"].as_str().expect("name").to_string(),
            c["version"].as_str().expect("version").to_string(),
        );
        let licence = c["licenses"][0]["expression"].as_str().unwrap_or_default();
        assert!(!licence.is_empty() && !licence.contains('/'), "{c}");
        if key.0 == "vendor-k8s-types" {
            continue; // our own path crate: no registry checksum
        }
        assert_eq!(c["hashes"][0]["alg"], "SHA-256", "{c}");
        assert_eq!(
            c["hashes"][0]["content"].as_str(),
            sums.get(&key).map(String::as_str),
            "{key:?}: checksum vs Cargo.lock"
        );
    }
    names.len()
}

#[test]
fn sboms_list_every_linked_crate_with_cargo_lock_checksums() {
    let amd64 = check("amd64");
    let arm64 = check("arm64");
    // `version --verbose` of the amd64 binary (native here) counts the same set.
    let out = run(Command::new(static_binary("amd64")).args(["version", "--verbose"]));
    assert!(
        out.contains(&format!("\ncrates: {amd64}\n")),
        "{out} vs {amd64}"
    );
    assert!(
        out.contains("\ntarget: x86_64-unknown-linux-musl\n"),
        "{out}"
    );
    eprintln!("linked crates: amd64 {amd64}, arm64 {arm64}");
}
