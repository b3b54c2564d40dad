//! addon-operator from `deploy/addon-operator/` (an overlay: the image, the pull
//! policy, and a resources check period of 5 s so healing is seen within the check),
//! with helm in its image: as uid 65534 on a read-only root filesystem (helm's cache
//! and config under the `/tmp` emptyDir), the echo module's release installed, a
//! ConfigMap value upgrading it, and a deleted object of the release healed.

use crate::support::{json, patch, wait_for};
use node_support::{ADDON_IMAGE, Node};
use serde_json::Value;
use std::time::Instant;

const NS: &str = "addon-operator";

fn overlay(node: &Node) -> Result<String, String> {
    let dir = node.dir().join("overlay-addon");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let deploy = control_plane::repo_root()
        .join("deploy/addon-operator")
        .canonicalize()
        .map_err(|e| format!("deploy/addon-operator/: {e}"))?;
    let up = "../".repeat(dir.components().count() - 1);
    let base = format!(
        "{up}{}",
        deploy.display().to_string().trim_start_matches('/')
    );
    let (name, tag) = ADDON_IMAGE.rsplit_once(':').ok_or("addon tag")?;
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {base}\n\
         images:\n- name: addon-operator\n  newName: {name}\n  newTag: {tag}\n\
         patches:\n- target:\n    kind: Deployment\n    name: addon-operator\n  patch: |-\n\
         \x20   - op: replace\n      path: /spec/template/spec/containers/0/imagePullPolicy\n      value: Never\n\
         \x20   - op: add\n      path: /spec/template/spec/containers/0/env/-\n      value: {{name: ADDON_OPERATOR_RESOURCES_CHECK_PERIOD, value: 5s}}\n"
    );
    std::fs::write(dir.join("kustomization.yaml"), text).map_err(|e| e.to_string())?;
    Ok(dir.display().to_string())
}

/// The `message` of the echo module's ConfigMap in `ns`, once it exists.
fn echo_message(node: &Node, ns: &str) -> Result<Option<String>, String> {
    let cm = node.kubectl(&[
        "-n",
        ns,
        "get",
        "configmap",
        "echo",
        "-o",
        "jsonpath={.data.message}",
        "--ignore-not-found",
    ])?;
    Ok((!cm.is_empty()).then_some(cm))
}

pub(crate) fn addon_operator_deploy(node: &Node) -> Result<(), String> {
    let dir = overlay(node)?;
    let t = Instant::now();
    node.kubectl(&["apply", "-k", &dir])?;
    let pods = wait_ready(node, NS, "app=addon-operator", 1)?;
    println!(
        "  addon-operator Ready (first converge done) {:.1} s after kubectl apply -k",
        t.elapsed().as_secs_f64()
    );
    check_addon_pod(node, NS, "addon-operator", &pods[0])
}

/// Waits until `count` pods in `ns` matching `selector` are Ready (each replica's
/// `/readyz`: the first converge done); fails at once on a crash loop.
pub(crate) fn wait_ready(
    node: &Node,
    ns: &str,
    selector: &str,
    count: usize,
) -> Result<Vec<Value>, String> {
    wait_for("the addon-operator pods Ready", 180, || {
        let list = json(node, &["-n", ns, "get", "pods", "-l", selector])?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        for p in &items {
            if p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "CrashLoopBackOff"
            {
                let name = p["metadata"]["name"].as_str().unwrap_or("");
                let logs = node
                    .kubectl(&["-n", ns, "logs", name, "--previous"])
                    .unwrap_or_else(|e| e);
                return Err(format!(
                    "pod {name} is crash-looping; its last log:\n{logs}"
                ));
            }
        }
        let ready: Vec<Value> = items
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| {
                p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .collect();
        Ok((ready.len() == count).then_some(ready))
    })
    .map_err(|e| {
        let logs = node
            .kubectl(&["-n", ns, "logs", "-l", selector, "--tail=30"])
            .unwrap_or_else(|e| e);
        format!("{e}\n{logs}")
    })
}

/// The checks of a running (acting) addon-operator pod in `ns` whose ConfigMap is
/// `config_map` holding examples/addon's echo values: uid 65534, a read-only root
/// filesystem, the echo module's release and object with the ConfigMap's message, a
/// changed value upgrading it, a deleted object of it healed, no restart.
pub(crate) fn check_addon_pod(
    node: &Node,
    ns: &str,
    config_map: &str,
    pod: &Value,
) -> Result<(), String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
    // uid 65534, read-only root: asked inside the container (busybox is in the image).
    let id = node.kubectl(&["-n", ns, "exec", &name, "--", "id", "-u"])?;
    if id.trim() != "65534" {
        return Err(format!("uid {id:?}"));
    }
    match node.kubectl(&["-n", ns, "exec", &name, "--", "touch", "/probe"]) {
        Ok(_) => return Err("the root filesystem is writable".into()),
        Err(e) if e.contains("Read-only file system") => {}
        Err(e) => return Err(format!("touch /probe: {e}")),
    }
    // The echo module's release and its object, with the ConfigMap's value.
    let message = wait_for("the echo module's ConfigMap", 60, || echo_message(node, ns))?;
    if message != "hello from the ConfigMap" {
        return Err(format!("echo's message {message:?}"));
    }
    let releases = node.kubectl(&[
        "-n",
        ns,
        "get",
        "secrets",
        "-l",
        "owner=helm,name=echo",
        "-o",
        "name",
    ])?;
    if releases.trim().is_empty() {
        return Err("no helm release Secret for echo".into());
    }
    // A value in addon-operator's ConfigMap upgrades the release.
    let value = serde_json::json!({"data": {"echo": "message: changed on the node\n"}});
    patch(
        node,
        ns,
        &format!("configmap/{config_map}"),
        "merge",
        &value,
    )?;
    let t = Instant::now();
    wait_for("the release upgraded with the new value", 60, || {
        Ok(echo_message(node, ns)?.filter(|m| m == "changed on the node"))
    })?;
    println!(
        "  value change to upgraded object: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // A deleted object of the release is put back.
    node.kubectl(&["-n", ns, "delete", "configmap", "echo"])?;
    let t = Instant::now();
    wait_for("the deleted echo ConfigMap healed", 90, || {
        echo_message(node, ns)
    })?;
    println!(
        "  deleted object healed in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let p = json(node, &["-n", ns, "get", "pod", &name])?;
    if p["status"]["containerStatuses"][0]["restartCount"] != 0 {
        return Err(format!(
            "addon-operator restarted: {}",
            p["status"]["containerStatuses"][0]
        ));
    }
    Ok(())
}
