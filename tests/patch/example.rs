//! The secret-copier example end to end without the operator's monitors: its
//! `--config` parses, and one run of the hook on a Group context built from
//! kube-sim's seeded objects writes a patch file that, applied, leaves a copy
//! of the labelled Secret in every other namespace and removes the stale copy.
//! A second run on the new state writes nothing.

use crate::patch_common;

use kube_sim::{Sim, SimOptions};
use patch_common::World;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const EXAMPLE: &str = "examples/secret-copier";

fn hook() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(EXAMPLE)
        .join("hooks/copier.py")
}

fn seeded_world() -> World {
    let opts = SimOptions {
        seed_dir: Some(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(EXAMPLE)
                .join("seed"),
        ),
        ..Default::default()
    };
    World::on(Sim::start_with(opts).expect("kube-sim"))
}

/// The Group context the operator would pass: snapshots of the three bindings.
fn context(sim: &Sim) -> Value {
    let items = |objs: Vec<Value>| {
        objs.into_iter()
            .map(|o| json!({"object": o}))
            .collect::<Vec<_>>()
    };
    let secrets = sim.list("v1", "Secret", "");
    let sources = secrets
        .iter()
        .filter(|s| {
            s["metadata"]["namespace"] == "default"
                && s["metadata"]["labels"]["secret-copier"] == "yes"
        })
        .cloned()
        .collect();
    let copies = secrets
        .iter()
        .filter(|s| s["metadata"]["labels"]["copied-by"] == "secret-copier")
        .cloned()
        .collect();
    json!([{"binding": "copier", "type": "Group", "snapshots": {
        "sources": items(sources), "namespaces": items(sim.list("v1", "Namespace", "")), "copies": items(copies)}}])
}

/// Runs the hook once; returns the patch file's text.
fn run_hook(sim: &Sim, dir: &Path) -> String {
    let (ctx, patch) = (dir.join("context.json"), dir.join("patch.json"));
    std::fs::write(&ctx, context(sim).to_string()).expect("context");
    std::fs::write(&patch, "").expect("patch file");
    let out = Command::new(hook())
        .env("BINDING_CONTEXT_PATH", &ctx)
        .env("KUBERNETES_PATCH_PATH", &patch)
        .output()
        .expect("python3 hook");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&patch).expect("patch text")
}

#[test]
fn config_is_valid() {
    let out = Command::new(hook())
        .arg("--config")
        .output()
        .expect("python3 hook");
    let text = String::from_utf8_lossy(&out.stdout);
    shell_operator::hook::config::parse("copier.py", &text).expect("valid hook config");
}

#[test]
fn copies_secrets_and_removes_stale_copies() {
    let w = seeded_world();
    let dir = std::env::temp_dir().join(format!("patch-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let text = run_hook(&w.sim, &dir);
    assert_eq!(w.run(&text, false), Ok(3), "{text}");
    for ns in ["team-a", "team-b"] {
        let copy = w
            .sim
            .get("v1", "Secret", ns, "registry-credentials")
            .expect("copy");
        assert_eq!(
            copy["data"],
            json!({"username": "ZGVtbw==", "password": "czNjcjN0"})
        );
        assert_eq!(
            copy["metadata"]["labels"],
            json!({"app": "registry", "copied-by": "secret-copier"})
        );
    }
    assert_eq!(w.sim.get("v1", "Secret", "team-b", "retired-token"), None);
    assert_eq!(w.sim.get("v1", "Secret", "team-a", "local-only"), None);
    assert_eq!(run_hook(&w.sim, &dir), "", "a second run has nothing to do");
    let _ = std::fs::remove_dir_all(&dir);
}
