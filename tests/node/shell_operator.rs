//! shell-operator from `kubectl apply -k deploy/`, through an overlay that changes
//! only the image names and the pull policy (no registry here): the ConfigMap's hook
//! runs with the init container's busybox, `/metrics` is scraped from the pod, the
//! log is JSON, the shipped probes pass; and, with a hook that watches pods through
//! the ServiceAccount (in-cluster), deleting the pod while that hook runs stops it and
//! exits 0 within the grace period, without "will retry".

use crate::support::{http_get, json, patch, wait_for};
use node_support::{BUSYBOX_IMAGE, Node, OPERATOR_IMAGE};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NS: &str = "shell-operator";

/// Writes the overlay (the images and `imagePullPolicy: Never`, nothing else) under
/// the node's dir and returns its directory.
fn overlay(node: &Node) -> Result<String, String> {
    let dir = node.dir().join("overlay");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let deploy = control_plane::repo_root()
        .join("deploy")
        .canonicalize()
        .map_err(|e| format!("deploy/: {e}"))?;
    // kustomize takes a base outside the overlay by a relative path.
    let up = "../".repeat(dir.components().count() - 1);
    let base = format!(
        "{up}{}",
        deploy.display().to_string().trim_start_matches('/')
    );
    let (bb_name, bb_tag) = BUSYBOX_IMAGE.rsplit_once(':').ok_or("busybox tag")?;
    let (op_name, op_tag) = OPERATOR_IMAGE.rsplit_once(':').ok_or("operator tag")?;
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {base}\n\
         images:\n- name: busybox\n  newName: {bb_name}\n  newTag: {bb_tag}\n\
         - name: shell-operator\n  newName: {op_name}\n  newTag: {op_tag}\n\
         patches:\n- target:\n    kind: Deployment\n    name: shell-operator\n  patch: |-\n\
         \x20   - op: replace\n      path: /spec/template/spec/containers/0/imagePullPolicy\n      value: Never\n\
         \x20   - op: add\n      path: /spec/template/spec/initContainers/0/imagePullPolicy\n      value: Never\n"
    );
    std::fs::write(dir.join("kustomization.yaml"), text).map_err(|e| e.to_string())?;
    Ok(dir.display().to_string())
}

/// The operator's pod(s), newest first.
fn pods(node: &Node) -> Result<Vec<Value>, String> {
    let list = json(node, &["-n", NS, "get", "pods", "-l", "app=shell-operator"])?;
    let mut items = list["items"].as_array().cloned().unwrap_or_default();
    items.sort_by(|a, b| {
        let t = |v: &Value| {
            v["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or("")
                .to_string()
        };
        t(b).cmp(&t(a))
    });
    Ok(items)
}

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

pub(crate) fn deploy_kustomize(node: &Node) -> Result<(), String> {
    let dir = overlay(node)?;
    let t = Instant::now();
    node.kubectl(&["apply", "-k", &dir])?;
    let pod = wait_for("the operator pod Ready", 120, || {
        let pods = pods(node)?;
        crash_looping(node, &pods)?;
        Ok(pods.into_iter().find(ready))
    })
    .map_err(|e| format!("{e}\n{}", describe(node)))?;
    println!(
        "  rollout: pod Ready {:.1} s after kubectl apply -k",
        t.elapsed().as_secs_f64()
    );
    check_operator_pod(node, NS, &pod)
}

/// The checks of a running operator pod of `deploy/` (or the chart) in `ns`: the init
/// container's exit 0, the example hook's output (run with the init container's
/// busybox), JSON log lines, the hook metric from the pod's `/metrics`, and the
/// probes passing for two liveness periods.
pub(crate) fn check_operator_pod(node: &Node, ns: &str, pod: &Value) -> Result<(), String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
    let ip = pod["status"]["podIP"].as_str().unwrap_or("").to_string();
    let init = &pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"];
    if init != 0 {
        return Err(format!(
            "init container: {}",
            pod["status"]["initContainerStatuses"]
        ));
    }
    // The hook ran with busybox's sh from the init container: its output is logged.
    let logs = wait_for("hello.sh's output in kubectl logs", 30, || {
        let logs = node.kubectl(&["-n", ns, "logs", &name])?;
        Ok(logs.contains("hello from onStartup").then_some(logs))
    })?;
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("log line is not JSON ({e}): {line}"))?;
        if !v["msg"].is_string() || !v["level"].is_string() {
            return Err(format!("log line without level/msg: {line}"));
        }
    }
    // /metrics from the pod, over the node's bridge.
    let series = "example_hook_runs_total{binding=\"onStartup\",hook=\"hello.sh\"}";
    let (status, body) = http_get(&ip, 9115, "/metrics")?;
    let value = body
        .lines()
        .find_map(|l| l.strip_prefix(series))
        .map(|v| v.trim().to_string());
    if status != 200 || value.as_deref() != Some("1") {
        return Err(format!(
            "GET {ip}:9115/metrics: {status}, {series} = {value:?}"
        ));
    }
    // The probes as shipped: Ready (readiness passed), and liveness for two periods
    // with no restart and no Unhealthy event.
    std::thread::sleep(Duration::from_secs(21));
    let pod = json(node, &["-n", ns, "get", "pod", &name])?;
    let restarts = &pod["status"]["containerStatuses"][0]["restartCount"];
    if restarts != 0 || !ready(&pod) {
        return Err(format!(
            "after 21 s: restarts {restarts}, ready {}",
            ready(&pod)
        ));
    }
    let events = node.kubectl(&[
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={name}"),
    ])?;
    if events.contains("Unhealthy") {
        return Err(format!("probe failures:\n{events}"));
    }
    Ok(())
}

/// Runs [`deploy_kustomize`] unless the operator's Deployment exists (so a check run
/// alone by name has the operator it needs).
pub(crate) fn ensure_deployed(node: &Node) -> Result<(), String> {
    match node.kubectl(&[
        "-n",
        NS,
        "get",
        "deployment",
        "shell-operator",
        "-o",
        "name",
    ]) {
        Ok(_) => Ok(()),
        Err(_) => deploy_kustomize(node),
    }
}

/// A hook added to the ConfigMap for this check: it watches the namespace's pods
/// (through the ServiceAccount's token, in-cluster) and sleeps on Synchronization.
const SLOW_HOOK: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"pods","apiVersion":"v1","kind":"Pod","namespace":{"nameSelector":{"matchNames":["shell-operator"]}}}]}'
  exit 0
fi
echo "slow hook started: $(jq -r '.[0].type' "$BINDING_CONTEXT_PATH")"
sleep 600
"#;

pub(crate) fn pod_deletion(node: &Node) -> Result<(), String> {
    ensure_deployed(node)?;
    let before: Vec<String> = pods(node)?
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect();
    let hooks = serde_json::json!({ "data": { "slow.sh": SLOW_HOOK } });
    patch(node, NS, "configmap/shell-operator-hooks", "merge", &hooks)?;
    node.kubectl(&["-n", NS, "rollout", "restart", "deployment/shell-operator"])?;
    let name = wait_for("a new operator pod running slow.sh", 120, || {
        for p in pods(node)? {
            let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
            if before.contains(&name) || p["metadata"]["deletionTimestamp"].is_string() {
                continue;
            }
            if node
                .kubectl(&["-n", NS, "logs", &name])
                .is_ok_and(|l| l.contains("slow hook started: Synchronization"))
            {
                return Ok(Some(name));
            }
        }
        Ok(None)
    })
    .map_err(|e| format!("{e}\n{}", describe(node)))?;
    // The Synchronization slow.sh got came through the token as the kubelet mounts
    // it: a projected serviceAccountToken volume at the ServiceAccount path.
    projected_token_mounted(&json(node, &["-n", NS, "get", "pod", &name])?)?;
    // Follow the log and the pod's status while it is deleted.
    let logs_file = node.dir().join("deleted-pod.log");
    let watch_file = node.dir().join("deleted-pod.watch");
    let mut follow = kubectl_to_file(node, &["-n", NS, "logs", "-f", &name], &logs_file)?;
    let mut watch = kubectl_to_file(
        node,
        &["-n", NS, "get", "pod", &name, "-w", "-o", "json"],
        &watch_file,
    )?;
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let deleted = node.kubectl(&[
        "-n",
        NS,
        "delete",
        "pod",
        &name,
        "--wait=true",
        "--timeout=60s",
    ]);
    let took = t.elapsed();
    let _ = wait_child(&mut follow, Duration::from_secs(10));
    let _ = watch.kill();
    let _ = watch.wait();
    deleted?;
    println!(
        "  pod deletion took {:.1} s (grace period 30 s)",
        took.as_secs_f64()
    );
    let logs = std::fs::read_to_string(&logs_file).map_err(|e| e.to_string())?;
    let statuses = std::fs::read_to_string(&watch_file).map_err(|e| e.to_string())?;
    let exit = serde_json::Deserializer::from_str(&statuses)
        .into_iter::<Value>()
        .flatten()
        .filter_map(|v| {
            v["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"].as_i64()
        })
        .last();
    let mut problems = Vec::new();
    if exit != Some(0) {
        problems.push(format!("exit code {exit:?}"));
    }
    if took > Duration::from_secs(20) {
        problems.push(format!("deletion took {took:?}"));
    }
    if !logs.contains("in-cluster") {
        problems.push("no in-cluster client configuration logged".into());
    }
    if logs.contains("will retry") {
        problems.push("\"will retry\" logged during shutdown".into());
    }
    if !logs.contains("Hook stopped by the operator's shutdown") {
        problems.push("the running hook's stop is not logged".into());
    }
    if !logs.contains("\"signal\":\"15\"") && !logs.contains("SIGTERM") {
        problems.push("no SIGTERM logged".into());
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{}\nlog of the deleted pod:\n{logs}",
            problems.join("; ")
        )),
    }
}

/// The pod's ServiceAccount directory is the kubelet's projected token volume
/// (`kube-api-access-*`: serviceAccountToken, kube-root-ca.crt, the namespace).
fn projected_token_mounted(pod: &Value) -> Result<(), String> {
    let sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    let mounts = pod["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let volume = mounts
        .iter()
        .find(|m| m["mountPath"] == sa_dir)
        .and_then(|m| m["name"].as_str())
        .ok_or_else(|| format!("nothing mounted at {sa_dir}: {mounts:?}"))?;
    let volumes = pod["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let projected = volumes
        .iter()
        .find(|v| v["name"] == volume)
        .and_then(|v| v["projected"]["sources"].as_array().cloned())
        .unwrap_or_default();
    match projected
        .iter()
        .any(|s| s["serviceAccountToken"].is_object())
    {
        true => Ok(()),
        false => Err(format!(
            "{sa_dir} is not a projected serviceAccountToken volume: {volumes:?}"
        )),
    }
}

pub(crate) fn kubectl_to_file(
    node: &Node,
    args: &[&str],
    out: &Path,
) -> Result<std::process::Child, String> {
    let file = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    Command::new(control_plane::kubectl_path())
        .arg("--kubeconfig")
        .arg(node.kubeconfig())
        .args(args)
        .stdout(file)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("kubectl {}: {e}", args.join(" ")))
}

pub(crate) fn wait_child(child: &mut std::process::Child, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// An error with the container's last log when a pod is in CrashLoopBackOff (the
/// busybox loop of issue 37 showed that way: `Symbolic link loop` at `--config`).
fn crash_looping(node: &Node, pods: &[Value]) -> Result<(), String> {
    for p in pods {
        let status = &p["status"]["containerStatuses"][0];
        if status["state"]["waiting"]["reason"] == "CrashLoopBackOff" {
            let name = p["metadata"]["name"].as_str().unwrap_or("");
            let last = node
                .kubectl(&["-n", NS, "logs", name, "--previous"])
                .unwrap_or_else(|e| e);
            return Err(format!(
                "pod {name} is crash-looping; its last log:\n{last}"
            ));
        }
    }
    Ok(())
}

/// What a failed check shows: the pods, the events and the kubelet's last lines.
fn describe(node: &Node) -> String {
    let pods = node
        .kubectl(&["-n", NS, "get", "pods", "-o", "wide"])
        .unwrap_or_else(|e| e);
    let events = node
        .kubectl(&["-n", NS, "get", "events"])
        .unwrap_or_else(|e| e);
    format!("{pods}\n{events}\n{}", node.log_tail("kubelet.log"))
}
