//! Admission webhooks as `deploy/` ships them: the certificates in the Secret the
//! Deployment mounts, the API server reaching the pod through the Service
//! (`shell-operator-validating-svc`, kube-proxy's DNAT), the operator writing the
//! caBundle, and `kubectl apply` of a refused object returning the hook's message;
//! then a new certificate (same CA) written into the Secret is served without a
//! restart once the kubelet has rewritten the volume.

use crate::support::{json, patch, wait_for};
use node_support::Node;
use std::time::Instant;

const NS: &str = "shell-operator";
const MESSAGE: &str = "ConfigMap holds a password: use a Secret";

/// A validating hook for ConfigMaps labelled `policy-test: "yes"`.
const POLICY_HOOK: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  cat <<'CONFIG'
configVersion: v1
kubernetesValidating:
- name: no-passwords.example.com
  labelSelector:
    matchLabels:
      policy-test: "yes"
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["configmaps"]
    scope: Namespaced
CONFIG
  exit 0
fi
if jq -e '.[0].review.request.object.data.password' "$BINDING_CONTEXT_PATH" >/dev/null; then
  echo '{"allowed":false,"message":"ConfigMap holds a password: use a Secret"}' > "$VALIDATING_RESPONSE_PATH"
else
  echo '{"allowed":true}' > "$VALIDATING_RESPONSE_PATH"
fi
"#;

fn config_map(name: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n  \
         labels:\n    policy-test: \"yes\"\ndata:\n{data}"
    )
}

pub(crate) fn validating_through_the_service(node: &Node) -> Result<(), String> {
    crate::shell_operator::ensure_deployed(node)?;
    let pki = node.dir().join("pki");
    put_certificate(node, "webhook")?;
    let hooks = serde_json::json!({ "data": { "policy.sh": POLICY_HOOK } });
    patch(node, NS, "configmap/shell-operator-hooks", "merge", &hooks)?;
    node.kubectl(&["-n", NS, "rollout", "restart", "deployment/shell-operator"])?;
    node.kubectl(&[
        "-n",
        NS,
        "rollout",
        "status",
        "deployment/shell-operator",
        "--timeout=120s",
    ])?;
    // The operator registers the configuration with the CA of its Secret.
    let ca = std::fs::read(pki.join("ca.crt")).map_err(|e| e.to_string())?;
    let config = wait_for(
        "the ValidatingWebhookConfiguration with a caBundle",
        60,
        || {
            let v = json(
                node,
                &[
                    "get",
                    "validatingwebhookconfiguration",
                    "shell-operator-hooks-hooks",
                ],
            )?;
            let has = v["webhooks"][0]["clientConfig"]["caBundle"]
                .as_str()
                .is_some_and(|b| !b.is_empty());
            Ok(has.then_some(v))
        },
    )?;
    let bundle = config["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .unwrap_or("");
    let decoded = base64_decode(bundle)?;
    if decoded != ca {
        return Err(format!(
            "caBundle is not the Secret's ca.crt: {}",
            config["webhooks"][0]["clientConfig"]
        ));
    }
    if config["webhooks"][0]["clientConfig"]["service"]["name"] != "shell-operator-validating-svc" {
        return Err(format!(
            "clientConfig: {}",
            config["webhooks"][0]["clientConfig"]
        ));
    }
    // Refused with the hook's message, through the Service. Until kube-proxy has the
    // new pod's endpoint the Service rejects connections ("connection refused"):
    // that is retried for a while, anything else is the answer.
    let t = Instant::now();
    loop {
        match node.apply(&config_map("with-password", "  password: hunter2\n")) {
            Ok(out) => return Err(format!("a ConfigMap with a password was accepted: {out}")),
            Err(e) if e.contains(MESSAGE) => break,
            Err(e) if e.contains("connection refused") && t.elapsed().as_secs() < 30 => {
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            Err(e) => return Err(format!("refused, but not with the hook's message: {e}")),
        }
    }
    println!(
        "  admission through the Service: refused with the hook's message {:.1} s after the rollout",
        t.elapsed().as_secs_f64()
    );
    node.apply(&config_map("no-password", "  user: alice\n"))
        .map_err(|e| format!("a ConfigMap without a password was refused: {e}"))?;
    certificate_rotated_through_the_secret(node)
}

/// Makes a serving certificate `name`.{crt,key} signed by the node's CA for the
/// webhook Service and writes it into the Secret the Deployment mounts.
fn put_certificate(node: &Node, name: &str) -> Result<(), String> {
    let pki = node.dir().join("pki");
    let svc = format!("shell-operator-validating-svc.{NS}.svc");
    control_plane::pki::server_cert(&pki, name, &[&svc], &[])?;
    let file = |f: &str| pki.join(f).display().to_string();
    let secret = node.kubectl(&[
        "-n",
        NS,
        "create",
        "secret",
        "generic",
        "shell-operator-validating-certs",
        &format!("--from-file=tls.crt={}", file(&format!("{name}.crt"))),
        &format!("--from-file=tls.key={}", file(&format!("{name}.key"))),
        &format!("--from-file=ca.crt={}", file("ca.crt")),
        "--dry-run=client",
        "-o",
        "yaml",
    ])?;
    node.apply(&secret).map(|_| ())
}

/// A new server certificate (same CA) written into the Secret: once the kubelet has
/// rewritten the volume the pod serves it (seen from the host with `openssl
/// s_client`), the API server's calls still pass, and the operator did not restart.
fn certificate_rotated_through_the_secret(node: &Node) -> Result<(), String> {
    let pods = json(node, &["-n", NS, "get", "pods", "-l", "app=shell-operator"])?;
    let pod = pods["items"]
        .as_array()
        .and_then(|i| {
            i.iter()
                .find(|p| p["metadata"]["deletionTimestamp"].is_null())
        })
        .cloned()
        .ok_or("no operator pod")?;
    let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
    let ip = pod["status"]["podIP"].as_str().unwrap_or("").to_string();
    let pki = node.dir().join("pki");
    let old = served_fingerprint(&ip)?;
    if old != fingerprint(&std::fs::read(pki.join("webhook.crt")).map_err(|e| e.to_string())?)? {
        return Err(format!(
            "the pod serves {old}, not the Secret's first certificate"
        ));
    }
    put_certificate(node, "webhook-rotated")?;
    let new =
        fingerprint(&std::fs::read(pki.join("webhook-rotated.crt")).map_err(|e| e.to_string())?)?;
    let t = Instant::now();
    wait_for("the rotated certificate served", 120, || {
        Ok((served_fingerprint(&ip)? == new).then_some(()))
    })?;
    println!(
        "  rotated certificate served {:.1} s after the Secret's update",
        t.elapsed().as_secs_f64()
    );
    match node.apply(&config_map("with-password-2", "  password: hunter3\n")) {
        Ok(out) => return Err(format!("accepted after the rotation: {out}")),
        Err(e) if e.contains(MESSAGE) => {}
        Err(e) => return Err(format!("after the rotation, not the hook's message: {e}")),
    }
    let pod = json(node, &["-n", NS, "get", "pod", &name])?;
    let status = &pod["status"]["containerStatuses"][0];
    if status["restartCount"] != 0 {
        return Err(format!("the operator restarted: {status}"));
    }
    let log = node.kubectl(&["-n", NS, "logs", &name])?;
    if !log.contains("webhook certificate reloaded") {
        return Err(format!("no reload logged:\n{log}"));
    }
    Ok(())
}

/// The SHA-256 fingerprint of the certificate the webhook server at `ip` presents.
fn served_fingerprint(ip: &str) -> Result<String, String> {
    let connect = format!("{ip}:9680");
    let out = std::process::Command::new("timeout")
        .args(["10", "openssl", "s_client", "-connect", &connect])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("openssl s_client: {e}"))?;
    fingerprint(&out.stdout).map_err(|e| format!("s_client {connect}: {e}"))
}

/// `openssl x509 -fingerprint -sha256` of the first certificate in `pem`.
fn fingerprint(pem: &[u8]) -> Result<String, String> {
    let out = run_with_stdin(
        &["openssl", "x509", "-noout", "-fingerprint", "-sha256"],
        pem,
    )?;
    let text = String::from_utf8_lossy(&out).trim().to_string();
    match text.split_once('=') {
        Some((_, f)) => Ok(f.to_string()),
        None => Err(format!("no certificate ({text:?})")),
    }
}

fn run_with_stdin(cmd: &[&str], input: &[u8]) -> Result<Vec<u8>, String> {
    let out = std::process::Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().map(|mut s| s.write_all(input));
            c.wait_with_output()
        })
        .map_err(|e| format!("{}: {e}", cmd.join(" ")))?;
    Ok(out.stdout)
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    run_with_stdin(&["base64", "-d"], text.as_bytes())
}
