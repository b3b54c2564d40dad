//! The Helm charts `deploy/helm/shell-operator` and `deploy/helm/addon-operator`,
//! each installed with helm 3 and helm 4 (`.tools/bin/helm3`, `.tools/bin/helm`) into
//! a namespace each, with values for the local images: each release passes the
//! checks the kustomize manifests pass ([`check_operator_pod`],
//! [`check_addon_pod`]). Values beyond the images: shell-operator's chart with a
//! namespaced Role and a hook watching its namespace (helm 4); addon-operator's with
//! cluster-wide RBAC (helm 3), and HA with two replicas on its default Role (helm 4).

use crate::addon::{check_addon_pod, wait_ready};
use crate::shell_operator::check_operator_pod;
use crate::support::{http_get, json, wait_for};
use node_support::{ADDON_IMAGE, BUSYBOX_IMAGE, Node, OPERATOR_IMAGE};
use serde_json::Value;
use std::process::Command;
use std::time::Instant;

fn helm(node: &Node, helm: &str, args: &[&str]) -> Result<String, String> {
    let bin = control_plane::repo_root().join(".tools/bin").join(helm);
    let out = Command::new(&bin)
        .arg("--kubeconfig")
        .arg(node.kubeconfig())
        .args(args)
        .env("HOME", node.dir().join(format!("home-{helm}")))
        .output()
        .map_err(|e| format!("{}: {e} (scripts/install-k8s-clients.sh)", bin.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{helm} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

pub(crate) fn chart_with_helm3_and_helm4(node: &Node) -> Result<(), String> {
    let chart = control_plane::repo_root().join("deploy/helm/shell-operator");
    let chart = chart.display().to_string();
    let (repo, tag) = OPERATOR_IMAGE.rsplit_once(':').ok_or("operator tag")?;
    let image_repo = format!("image.repository={repo}");
    let image_tag = format!("image.tag={tag}");
    let busybox = format!("busybox.image={BUSYBOX_IMAGE}");
    let pods_hook = node.dir().join("pods.sh");
    std::fs::write(&pods_hook, PODS_HOOK).map_err(|e| e.to_string())?;
    let pods_hook = format!("hooks.files.pods\\.sh={}", pods_hook.display());
    let namespaced: &[&str] = &["--set", "rbac.clusterWide=false", "--set-file", &pods_hook];
    for (bin, ns, extra) in [
        ("helm3", "chart-helm3", &[][..]),
        ("helm", "chart-helm4", namespaced),
    ] {
        let version = helm(node, bin, &["version", "--short"])?;
        let t = Instant::now();
        let mut args = vec![
            "install",
            "so",
            &chart,
            "--namespace",
            ns,
            "--create-namespace",
            "--set",
            &image_repo,
            "--set",
            &image_tag,
            "--set",
            "image.pullPolicy=Never",
            "--set",
            &busybox,
            "--set",
            "busybox.pullPolicy=Never",
            "--wait",
            "--timeout=120s",
        ];
        args.extend_from_slice(extra);
        helm(node, bin, &args)?;
        println!(
            "  {} ({}) {}: installed and Ready in {:.1} s",
            bin,
            version.trim(),
            extra.join(" "),
            t.elapsed().as_secs_f64()
        );
        let pod = wait_for("the chart's pod", 30, || {
            let list = json(node, &["-n", ns, "get", "pods", "-l", "app=so"])?;
            Ok(list["items"].as_array().and_then(|i| i.first().cloned()))
        })?;
        check_operator_pod(node, ns, &pod).map_err(|e| format!("installed with {bin}: {e}"))?;
        if !extra.is_empty() {
            namespaced_rbac_works(node, ns, &pod)?;
        }
    }
    Ok(())
}

/// A hook for the namespaced-RBAC install: it lists its namespace's pods (with only
/// the chart's Role) and logs their names on Synchronization.
const PODS_HOOK: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"pods","apiVersion":"v1","kind":"Pod","namespace":{"nameSelector":{"matchNames":["chart-helm4"]}},"executeHookOnEvent":[]}]}'
  exit 0
fi
echo "pods seen: $(jq -r '[.[0].objects[]?.object.metadata.name] | join(",")' "$BINDING_CONTEXT_PATH")"
"#;

/// With `rbac.clusterWide=false` the chart made a Role and no ClusterRole, and the
/// hook watching the release's namespace got its Synchronization through it (its
/// own pod among the objects).
fn namespaced_rbac_works(node: &Node, ns: &str, pod: &Value) -> Result<(), String> {
    let role = node.kubectl(&["-n", ns, "get", "role", "so", "-o", "name"])?;
    let cluster_role = node.kubectl(&[
        "get",
        "clusterrole",
        &format!("{ns}-so"),
        "--ignore-not-found",
        "-o",
        "name",
    ])?;
    if role.trim().is_empty() || !cluster_role.trim().is_empty() {
        return Err(format!("role {role:?}, cluster role {cluster_role:?}"));
    }
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    wait_for("pods.sh's Synchronization through the Role", 30, || {
        let log = node.kubectl(&["-n", ns, "logs", name])?;
        let seen = log
            .lines()
            .any(|l| l.contains("pods seen: ") && l.contains(name));
        Ok(seen.then_some(()))
    })?;
    println!("  rbac.clusterWide=false: pods.sh listed its namespace's pods through the Role");
    Ok(())
}

/// The addon-operator chart's values for the node: the local image, examples/addon's
/// echo values in the ConfigMap, and a resources check period of 5 s (healing is
/// seen within the check), as the kustomize overlay sets them.
fn addon_values(node: &Node) -> Result<String, String> {
    let (repo, tag) = ADDON_IMAGE.rsplit_once(':').ok_or("addon tag")?;
    let text = format!(
        "image: {{repository: {repo}, tag: {tag}, pullPolicy: Never}}\n\
         config:\n  data:\n    global: \"owner: cluster-admins\\n\"\n    \
         echo: \"message: hello from the ConfigMap\\n\"\n    echoEnabled: \"true\"\n\
         env:\n- {{name: ADDON_OPERATOR_RESOURCES_CHECK_PERIOD, value: 5s}}\n"
    );
    let path = node.dir().join("addon-chart-values.yaml");
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.display().to_string())
}

/// `deploy/helm/addon-operator` with helm 3 (cluster-wide RBAC, one replica) and
/// helm 4 (the namespaced Role, HA with two replicas), each in a namespace of its
/// own: the checks of the kustomize deployment ([`check_addon_pod`]) on the acting
/// pod; with HA, exactly one replica holds the Lease and `/readyz` answers 200 on
/// both.
pub(crate) fn addon_chart_with_helm3_and_helm4(node: &Node) -> Result<(), String> {
    let chart = control_plane::repo_root().join("deploy/helm/addon-operator");
    let chart = chart.display().to_string();
    let values = addon_values(node)?;
    let installs: [(&str, &str, &[&str], usize); 2] = [
        (
            "helm3",
            "chart-addon-helm3",
            &["--set", "rbac.clusterWide=true"],
            1,
        ),
        (
            "helm",
            "chart-addon-helm4",
            &["--set", "ha.enabled=true"],
            2,
        ),
    ];
    for (bin, ns, extra, replicas) in installs {
        let version = helm(node, bin, &["version", "--short"])?;
        let t = Instant::now();
        let mut args = vec![
            "install",
            "ao",
            &chart,
            "--namespace",
            ns,
            "--create-namespace",
            "--values",
            &values,
            "--wait",
            "--timeout=180s",
        ];
        args.extend_from_slice(extra);
        helm(node, bin, &args)?;
        let pods = wait_ready(node, ns, "app=ao", replicas)
            .map_err(|e| format!("installed with {bin}: {e}"))?;
        println!(
            "  {} ({}) {}: {replicas} replica(s) Ready in {:.1} s",
            bin,
            version.trim(),
            extra.join(" "),
            t.elapsed().as_secs_f64()
        );
        let acting = match replicas {
            1 => pods[0].clone(),
            _ => one_leader(node, ns, &pods)?,
        };
        check_addon_pod(node, ns, "ao", &acting)
            .map_err(|e| format!("installed with {bin}: {e}"))?;
    }
    Ok(())
}

/// With HA: the Lease's holder is one of `pods` (its identity starts with the pod's
/// name), and every replica's `/readyz` answers 200 (a standby answers with the
/// leader's). Returns the leader.
fn one_leader(node: &Node, ns: &str, pods: &[Value]) -> Result<Value, String> {
    let name = |p: &Value| p["metadata"]["name"].as_str().unwrap_or("").to_string();
    let holder = wait_for("the Lease's holder", 60, || {
        let lease = json(node, &["-n", ns, "get", "lease", "ao-leader-election"])?;
        let h = lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .to_string();
        Ok((!h.is_empty()).then_some(h))
    })?;
    let leaders: Vec<&Value> = pods
        .iter()
        .filter(|p| holder.starts_with(&format!("{}.", name(p))))
        .collect();
    let [leader] = leaders[..] else {
        return Err(format!(
            "Lease holder {holder:?} is not exactly one of the replicas"
        ));
    };
    for p in pods {
        let ip = p["status"]["podIP"].as_str().unwrap_or("");
        let (status, body) = http_get(ip, 9650, "/readyz")?;
        if status != 200 {
            return Err(format!("{} /readyz: {status} {body}", name(p)));
        }
        let log = node.kubectl(&["-n", ns, "logs", &name(p)])?;
        let leads = log.contains("leadership acquired");
        if leads != (name(p) == name(leader)) {
            return Err(format!(
                "{}: leadership logged {leads}, holder {holder}:\n{log}",
                name(p)
            ));
        }
    }
    println!("  HA: {holder} leads, /readyz 200 on both replicas");
    Ok(leader.clone())
}
