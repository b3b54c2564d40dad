//! The edge limit: the operator of `deploy/` under a memory limit of 32 MiB (hooks
//! included: they run in its cgroup) watching 5,000 ConfigMaps. It synchronizes them
//! all, then sees each of 200 updates exactly once, and is never OOM-killed. The
//! cgroup's peak usage is printed.
//!
//! Found here: a hook that reads the 5,000-object Synchronization context with the
//! built-in jq is OOM-killed by the kernel under this limit (exit 137, retried
//! forever) while the operator itself stays up; the hook counts with grep instead.

use crate::support::{json, patch, wait_for};
use node_support::Node;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const NS: &str = "shell-operator";
const LOAD: &str = "cm-load";
const COUNT: usize = 5000;
const UPDATED: usize = 200;

const HOOK: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"cms","apiVersion":"v1","kind":"ConfigMap","namespace":{"nameSelector":{"matchNames":["cm-load"]}}}]}'
  exit 0
fi
# Synchronization: 5,000 objects, some MB (events are far smaller); counted with grep, since the built-in jq
# needs more memory than the pod's 32 MiB to read it (the kernel OOM-kills the hook).
if [ "$(wc -c < "$BINDING_CONTEXT_PATH")" -gt 1000000 ]; then
  echo "cms sync $(grep -o '"kind":"ConfigMap"' "$BINDING_CONTEXT_PATH" | wc -l)"
  exit 0
fi
jq -r '.[] | "cms event \(.watchEvent) \(.object.metadata.name)"' "$BINDING_CONTEXT_PATH"
"#;

fn config_maps() -> String {
    let mut out = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..COUNT {
        let batch = if i < UPDATED { "a" } else { "b" };
        out += &format!(
            "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-{i:05}\n    namespace: {LOAD}\n    \
             labels:\n      batch: {batch}\n  data:\n    value: \"{}\"\n",
            "x".repeat(64)
        );
    }
    out
}

pub(crate) fn limit_32mib_5000_configmaps(node: &Node) -> Result<(), String> {
    crate::shell_operator::ensure_deployed(node)?;
    node.kubectl(&["create", "namespace", LOAD])?;
    // What a user adds for such a hook: read access to the ConfigMaps it watches.
    node.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: cm-reader\n  namespace: {LOAD}\n\
         rules:\n- apiGroups: [\"\"]\n  resources: [\"configmaps\"]\n  verbs: [\"get\", \"list\", \"watch\"]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: cm-reader\n  namespace: {LOAD}\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: cm-reader\n\
         subjects:\n- kind: ServiceAccount\n  name: shell-operator\n  namespace: {NS}\n"
    ))?;
    let list = node.dir().join("configmaps.yaml");
    std::fs::write(&list, config_maps()).map_err(|e| e.to_string())?;
    let t = Instant::now();
    node.kubectl(&["create", "-f", &list.display().to_string()])?;
    println!(
        "  {COUNT} ConfigMaps created in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Only this hook (and hello.sh); one replica; the limit.
    let hooks = serde_json::json!({"data": {"cms.sh": HOOK, "slow.sh": null, "policy.sh": null}});
    patch(node, NS, "configmap/shell-operator-hooks", "merge", &hooks)?;
    let deploy = serde_json::json!([
        {"op": "replace", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/template/spec/containers/0/resources/limits/memory", "value": "32Mi"},
    ]);
    patch(node, NS, "deployment/shell-operator", "json", &deploy)?;
    let t = Instant::now();
    let pod = wait_for(
        "the 32 MiB pod synchronized with 5000 ConfigMaps",
        180,
        || {
            for p in json(node, &["-n", NS, "get", "pods", "-l", "app=shell-operator"])?["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                let limited = p["spec"]["containers"][0]["resources"]["limits"]["memory"] == "32Mi";
                let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
                if !limited || p["metadata"]["deletionTimestamp"].is_string() {
                    continue;
                }
                let logs = node.kubectl(&["-n", NS, "logs", &name]).unwrap_or_default();
                let synced = logs.lines().find_map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).ok()?;
                    v["msg"]
                        .as_str()?
                        .strip_prefix("cms sync ")?
                        .trim()
                        .parse::<usize>()
                        .ok()
                });
                if synced.is_some_and(|n| n >= COUNT) {
                    return Ok(Some(name));
                }
            }
            Ok(None)
        },
    )
    .map_err(|e| {
        let pods = node
            .kubectl(&["-n", NS, "get", "pods", "-o", "json"])
            .unwrap_or_else(|e| e);
        let statuses: Vec<String> = serde_json::from_str::<serde_json::Value>(&pods)
            .ok()
            .and_then(|v| v["items"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|p| {
                format!(
                    "{} {}",
                    p["metadata"]["name"], p["status"]["containerStatuses"]
                )
            })
            .collect();
        let logs = node
            .kubectl(&["-n", NS, "logs", "deploy/shell-operator", "--tail=15"])
            .unwrap_or_else(|e| e);
        format!("{e}\n{}\n{logs}", statuses.join("\n"))
    })?;
    println!(
        "  synchronized {COUNT} ConfigMaps {:.1} s after the patch",
        t.elapsed().as_secs_f64()
    );
    node.kubectl(&[
        "-n",
        LOAD,
        "annotate",
        "configmap",
        "-l",
        "batch=a",
        "touched=yes",
    ])?;
    let seen = |logs: &str| -> BTreeMap<String, usize> {
        let mut seen = BTreeMap::new();
        for line in logs.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(name) = v["msg"]
                .as_str()
                .and_then(|m| m.strip_prefix("cms event Modified "))
            {
                *seen.entry(name.to_string()).or_insert(0) += 1;
            }
        }
        seen
    };
    wait_for("the 200 updates seen", 60, || {
        let logs = node.kubectl(&["-n", NS, "logs", &pod])?;
        Ok((seen(&logs).len() >= UPDATED).then_some(()))
    })?;
    std::thread::sleep(Duration::from_secs(3));
    let logs = node.kubectl(&["-n", NS, "logs", &pod])?;
    let seen = seen(&logs);
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    let wrong: Vec<_> = seen.keys().filter(|k| k.as_str() >= "cm-00200").collect();
    if seen.len() != UPDATED || !twice.is_empty() || !wrong.is_empty() {
        return Err(format!(
            "updates seen {} (want {UPDATED} exactly once): more than once {twice:?}, not updated {wrong:?}",
            seen.len()
        ));
    }
    let p = json(node, &["-n", NS, "get", "pod", &pod])?;
    let status = &p["status"]["containerStatuses"][0];
    if status["restartCount"] != 0 || status["lastState"]["terminated"].is_object() {
        return Err(format!("the operator restarted: {status}"));
    }
    let uid = p["metadata"]["uid"].as_str().unwrap_or("");
    println!("  peak memory of the pod's cgroup: {}", peak_memory(uid));
    Ok(())
}

/// `memory.max_usage_in_bytes` of the pod's cgroup (cgroup v1, cgroupfs driver).
fn peak_memory(uid: &str) -> String {
    for qos in ["burstable", "besteffort", ""] {
        let path =
            format!("/sys/fs/cgroup/memory/kubepods/{qos}/pod{uid}/memory.max_usage_in_bytes")
                .replace("//", "/");
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(bytes) = text.trim().parse::<u64>()
        {
            return format!("{:.1} MiB", bytes as f64 / 1048576.0);
        }
    }
    "unknown (no cgroup v1 memory file)".into()
}
