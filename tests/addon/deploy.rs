//! What we ship for addon-operator besides the binary: `deploy/addon-operator/`
//! (locked down, probed on flant's port and paths, every RBAC rule explained) applies
//! to kube-sim with the real kubectl, and its ConfigMap configures `examples/addon`
//! the way the comments say when the real operator runs them.

use crate::harness::{Addon, repo_root};
use kube_sim::Sim;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

fn docs(file: &str) -> Vec<Value> {
    let path = repo_root().join("deploy/addon-operator").join(file);
    let text = std::fs::read_to_string(&path).expect("manifest");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("YAML document"))
        .collect()
}

fn find(file: &str, kind: &str) -> Value {
    docs(file)
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {file}"))
}

#[test]
fn addon_deployment_is_locked_down_and_probed() {
    let d = find("deployment.yaml", "Deployment");
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["args"], serde_json::json!(["addon-operator", "start"]));
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["ports"][0]["containerPort"], 9650);
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let env = |name: &str| {
        c["env"]
            .as_array()
            .and_then(|e| e.iter().find(|v| v["name"] == name))
            .cloned()
    };
    assert_eq!(
        env("ADDON_OPERATOR_NAMESPACE").expect("namespace env")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    assert!(
        mounts.contains(&"/tmp") && mounts.contains(&"/var/run/addon-operator"),
        "{mounts:?}"
    );
    assert_eq!(
        pod["serviceAccountName"],
        find("rbac.yaml", "ServiceAccount")["metadata"]["name"]
    );
}

#[test]
fn every_addon_rbac_rule_has_a_comment() {
    let text =
        std::fs::read_to_string(repo_root().join("deploy/addon-operator/rbac.yaml")).expect("rbac");
    let rules = find("rbac.yaml", "Role")["rules"]
        .as_array()
        .map_or(0, Vec::len);
    crate::common::assert_rules_commented(&text, rules);
}

#[test]
fn addon_manifests_apply_with_kubectl() {
    let sim = Sim::start();
    let dir = crate::common::TempDir::new("addon-deploy");
    sim.write_kubeconfig(&dir.0.join("kubeconfig"))
        .expect("kubeconfig");
    let out = std::process::Command::new(repo_root().join(".tools/bin/kubectl"))
        .args(["apply", "-k"])
        .arg(repo_root().join("deploy/addon-operator"))
        .arg("--kubeconfig")
        .arg(dir.0.join("kubeconfig"))
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (api, kind, name) in [
        ("v1", "ServiceAccount", "addon-operator"),
        ("rbac.authorization.k8s.io/v1", "Role", "addon-operator"),
        (
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            "addon-operator",
        ),
        ("v1", "ConfigMap", "addon-operator"),
        ("apps/v1", "Deployment", "addon-operator"),
    ] {
        assert!(
            sim.get(api, kind, "addon-operator", name).is_some(),
            "{kind} {name} not applied"
        );
    }
}

/// Every file under `dir`, relative to `base`, with its content.
fn tree(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            tree(base, &path, out);
        } else {
            let rel = path.strip_prefix(base).expect("rel").display().to_string();
            out.push((rel, std::fs::read_to_string(&path).expect("file")));
        }
    }
}

#[test]
fn the_deployed_configmap_configures_the_example() {
    let base = repo_root().join("examples/addon");
    let mut files = Vec::new();
    tree(&base, &base.join("modules"), &mut files);
    tree(&base, &base.join("global-hooks"), &mut files);
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let data = find("configmap.yaml", "ConfigMap")["data"].clone();
    let addon = Addon::start(&refs, Some(data), 4);
    addon.wait_ready();
    let cm = addon
        .wait_object("ConfigMap", "echo", |o| o.is_some())
        .expect("echo");
    assert_eq!(cm["data"]["message"], "hello from the ConfigMap");
    assert_eq!(
        cm["data"]["discovered"], "cluster-1",
        "the global hook's value"
    );
}
