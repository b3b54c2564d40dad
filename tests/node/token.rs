//! In-cluster credentials replaced under a running operator (issue 37): a token
//! swapped in the ServiceAccount directory, the old one then revoked, is used from
//! the next request on, without a restart and without a 401 first.
//!
//! The kubelet's own rotation of the projected token comes after 80 % of its
//! lifetime (at least 8 minutes), too slow for this tier; and a token written into
//! the projected volume from outside is overwritten by the kubelet at its next sync.
//! So the pod here mounts a Secret at the ServiceAccount path
//! (`automountServiceAccountToken: false`), holding `ca.crt`, `namespace` and a
//! *bound* token (`kubectl create token --bound-object-kind Secret`): such a token
//! is revoked when its bound object is deleted. Token 1 is bound to Secret
//! `anchor-1`, token 2 to `anchor-2`. The kubelet rewrites the Secret volume (an
//! atomic `..data` swap, as for projected tokens) at its next sync of the pod:
//! every `syncFrequency` (5 s on this node instead of 1 min) when nothing else
//! happens to the pod.
//!
//! The hook watches labelled ConfigMaps and writes `seen-<name>` for each through
//! `KUBERNETES_PATCH_PATH`: an object written by the operator's client, so with the
//! token it holds at that moment (an open watch would keep delivering events on
//! its old authenticated connection and prove nothing).

use crate::support::{http_get, json, wait_for};
use node_support::{BUSYBOX_IMAGE, Node, OPERATOR_IMAGE};
use std::process::Command;
use std::time::Instant;

const NS: &str = "token-rotation";
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Writes `seen-<name>` for every labelled ConfigMap it is told about.
const HOOK: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  cat <<'CONFIG'
configVersion: v1
kubernetes:
- name: probes
  apiVersion: v1
  kind: ConfigMap
  namespace: {nameSelector: {matchNames: [token-rotation]}}
  labelSelector: {matchLabels: {rotation-probe: "yes"}}
CONFIG
  exit 0
fi
for name in $(jq -r '.[] | if .type == "Event" then .object.metadata.name else (.objects[]?.object.metadata.name) end' "$BINDING_CONTEXT_PATH"); do
  echo "probe seen: $name"
  echo "{\"operation\":\"CreateOrUpdate\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"seen-$name\",\"namespace\":\"token-rotation\"},\"data\":{\"by\":\"hook\"}}}" >> "$KUBERNETES_PATCH_PATH"
done
"#;

/// The namespace, the ServiceAccount (no automounted token), what it may do, the
/// two anchors, the hook and the first probe.
fn base_manifests() -> String {
    let hook = HOOK.replace('\n', "\n    ");
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: rotator, namespace: {NS}}}
automountServiceAccountToken: false
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: rotator, namespace: {NS}}}
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: rotator, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: rotator}}
subjects: [{{kind: ServiceAccount, name: rotator, namespace: {NS}}}]
---
apiVersion: v1
kind: Secret
metadata: {{name: anchor-1, namespace: {NS}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: anchor-2, namespace: {NS}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: rotation-hooks, namespace: {NS}}}
data:
  probes.sh: |
    {hook}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: probe-0, namespace: {NS}, labels: {{rotation-probe: "yes"}}}}
"#
    )
}

/// The operator as a bare Pod (restartCount is the container's), its
/// ServiceAccount directory the Secret `rotator-token`, a shell from busybox.
fn pod_manifest() -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: operator, namespace: {NS}}}
spec:
  serviceAccountName: rotator
  automountServiceAccountToken: false
  securityContext: {{runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534}}
  initContainers:
  - name: busybox-tools
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", 'cp /bin/busybox /tools/busybox && for a in $(/tools/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "/tools/$a"; done']
    volumeMounts: [{{name: bin, mountPath: /tools}}]
  containers:
  - name: shell-operator
    image: {OPERATOR_IMAGE}
    imagePullPolicy: Never
    args: ["start"]
    env:
    - {{name: PATH, value: /bin}}
    - {{name: SHELL_OPERATOR_HOOKS_DIR, value: /hooks}}
    - {{name: SHELL_OPERATOR_TMP_DIR, value: /tmp/shell-operator}}
    - {{name: LOG_TYPE, value: json}}
    volumeMounts:
    - {{name: hooks, mountPath: /hooks, readOnly: true}}
    - {{name: tmp, mountPath: /tmp}}
    - {{name: debug, mountPath: /var/run/shell-operator}}
    - {{name: bin, mountPath: /bin, readOnly: true}}
    - {{name: token, mountPath: {SA_DIR}, readOnly: true}}
  volumes:
  - {{name: hooks, configMap: {{name: rotation-hooks, defaultMode: 0755}}}}
  - {{name: tmp, emptyDir: {{}}}}
  - {{name: debug, emptyDir: {{}}}}
  - {{name: bin, emptyDir: {{}}}}
  - {{name: token, secret: {{secretName: rotator-token}}}}
"#
    )
}

/// A token of `rotator` bound to Secret `anchor` (revoked when it is deleted).
fn bound_token(node: &Node, anchor: &str) -> Result<String, String> {
    let t = node.kubectl(&[
        "-n",
        NS,
        "create",
        "token",
        "rotator",
        "--bound-object-kind=Secret",
        &format!("--bound-object-name={anchor}"),
        "--duration=1h",
    ])?;
    Ok(t.trim().to_string())
}

/// Writes `token` (with the CA and the namespace) into Secret `rotator-token`.
fn put_token(node: &Node, token: &str) -> Result<(), String> {
    let ca = node.dir().join("pki/ca.crt").display().to_string();
    let secret = node.kubectl(&[
        "-n",
        NS,
        "create",
        "secret",
        "generic",
        "rotator-token",
        &format!("--from-literal=token={token}"),
        &format!("--from-file=ca.crt={ca}"),
        &format!("--from-literal=namespace={NS}"),
        "--dry-run=client",
        "-o",
        "yaml",
    ])?;
    node.apply(&secret).map(|_| ())
}

/// `kubectl get configmaps` in the namespace with `token` alone: Ok, or the error.
fn request_with(node: &Node, token: &str) -> Result<(), String> {
    let out = Command::new(control_plane::kubectl_path())
        .arg("--kubeconfig=/dev/null")
        .arg(format!("--server={}", node.url()))
        .arg(format!(
            "--certificate-authority={}",
            node.dir().join("pki/ca.crt").display()
        ))
        .arg(format!("--token={token}"))
        .args([
            "--request-timeout=20s",
            "-n",
            NS,
            "get",
            "configmaps",
            "-o",
            "name",
        ])
        .output()
        .map_err(|e| format!("kubectl: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

/// Waits for the ConfigMap `seen-<probe>` the hook writes.
fn wait_seen(node: &Node, probe: &str, secs: u64) -> Result<(), String> {
    let name = format!("seen-{probe}");
    wait_for(&format!("the hook's ConfigMap {name}"), secs, || {
        let out = node.kubectl(&[
            "-n",
            NS,
            "get",
            "configmap",
            &name,
            "--ignore-not-found",
            "-o",
            "name",
        ])?;
        Ok((!out.trim().is_empty()).then_some(()))
    })
}

pub(crate) fn token_replaced_and_revoked(node: &Node) -> Result<(), String> {
    let token1 = start_with_token1(node)?;
    let token2 = replace_with_token2(node)?;
    revoke(node, &token1, &token2)?;
    // A new probe: the hook's write goes out with token 2.
    node.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: probe-1, namespace: {NS}, \
         labels: {{rotation-probe: \"yes\"}}}}\n"
    ))?;
    wait_seen(node, "probe-1", 60).map_err(|e| format!("{e}\n{}", operator_log(node)))?;
    no_restart_and_no_401(node)?;
    let _ = node.kubectl(&["delete", "namespace", NS, "--wait=false"]);
    Ok(())
}

fn operator_log(node: &Node) -> String {
    node.kubectl(&["-n", NS, "logs", "operator"])
        .unwrap_or_else(|e| e)
}

/// The operator running on token 1: its hook wrote `seen-probe-0` on
/// Synchronization, and token 1 works from outside too.
fn start_with_token1(node: &Node) -> Result<String, String> {
    node.apply(&base_manifests())?;
    let token1 = bound_token(node, "anchor-1")?;
    put_token(node, &token1)?;
    node.apply(&pod_manifest())?;
    wait_seen(node, "probe-0", 120).map_err(|e| format!("{e}\n{}", operator_log(node)))?;
    request_with(node, &token1).map_err(|e| format!("token 1 does not work before: {e}"))?;
    Ok(token1)
}

/// Token 2 into the Secret, then waits until the pod's token file holds it (the
/// kubelet rewrites the volume at its next sync of the pod).
fn replace_with_token2(node: &Node) -> Result<String, String> {
    let token2 = bound_token(node, "anchor-2")?;
    put_token(node, &token2)?;
    let t = Instant::now();
    let token_path = format!("{SA_DIR}/token");
    wait_for("token 2 in the pod's token file", 120, || {
        let now = node.kubectl(&["-n", NS, "exec", "operator", "--", "cat", &token_path])?;
        Ok((now.trim() == token2).then_some(()))
    })?;
    println!(
        "  the kubelet rewrote the Secret volume {:.1} s after the Secret's update",
        t.elapsed().as_secs_f64()
    );
    Ok(token2)
}

/// Deletes token 1's bound object and waits until the API server refuses it (401);
/// token 2 still works.
fn revoke(node: &Node, token1: &str, token2: &str) -> Result<(), String> {
    node.kubectl(&["-n", NS, "delete", "secret", "anchor-1"])?;
    let refused = wait_for("token 1 refused with 401", 30, || {
        match request_with(node, token1) {
            Ok(()) => Ok(None),
            Err(e) if e.contains("Unauthorized") => Ok(Some(e)),
            Err(e) => Err(e),
        }
    })?;
    println!("  token 1 after its anchor's deletion: {refused}");
    request_with(node, token2).map_err(|e| format!("token 2 does not work: {e}"))
}

/// restartCount 0, the in-cluster configuration and probe-1 in the log, no
/// `Unauthorized` there, and no request answered 401 among the pod's
/// `kubernetes_client_request_result_total` series: every attempt is counted,
/// retries included, so a client that re-read its token only after a 401 (which
/// it retries silently) fails here.
fn no_restart_and_no_401(node: &Node) -> Result<(), String> {
    let pod = json(node, &["-n", NS, "get", "pod", "operator"])?;
    let status = &pod["status"]["containerStatuses"][0];
    if status["restartCount"] != 0 {
        return Err(format!("the operator restarted: {status}"));
    }
    let log = operator_log(node);
    if !log.contains("in-cluster") || !log.contains("probe seen: probe-1") {
        return Err(format!(
            "no in-cluster configuration or no probe-1 in the log:\n{log}"
        ));
    }
    if log.contains("Unauthorized") {
        return Err(format!("the operator met a 401:\n{log}"));
    }
    let ip = pod["status"]["podIP"].as_str().unwrap_or("");
    let (_, metrics) = http_get(ip, 9115, "/metrics")?;
    let requests: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains("kubernetes_client_request_result_total{"))
        .collect();
    if requests.is_empty() || requests.iter().any(|l| l.contains("code=\"401\"")) {
        return Err(format!("requests by code: {requests:#?}"));
    }
    Ok(())
}
