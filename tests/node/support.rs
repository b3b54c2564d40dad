//! Helpers of the node tier: kubectl as JSON, waiting, HTTP to a pod, and the checks
//! of the node itself (version stamps, the host restored after the stop).

use node_support::Node;
use node_support::host::BRIDGE;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `kubectl ... -o json`, parsed.
pub(crate) fn json(node: &Node, args: &[&str]) -> Result<Value, String> {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-o", "json"]);
    let text = node.kubectl(&all)?;
    serde_json::from_str(&text).map_err(|e| format!("kubectl {}: not JSON: {e}", args.join(" ")))
}

/// `kubectl -n <ns> patch <kind> <name> --type=<kind_of_patch> -p <patch>`.
pub(crate) fn patch(
    node: &Node,
    ns: &str,
    object: &str,
    kind_of_patch: &str,
    patch: &Value,
) -> Result<String, String> {
    let (kind, name) = object.split_once('/').unwrap_or((object, ""));
    let patch = patch.to_string();
    let kind_of_patch = format!("--type={kind_of_patch}");
    node.kubectl(&["-n", ns, "patch", kind, name, &kind_of_patch, "-p", &patch])
}

/// Polls `f` every 250 ms until it gives `Some` or `secs` pass; the error says `what`
/// and the last error `f` reported.
pub(crate) fn wait_for<T>(
    what: &str,
    secs: u64,
    mut f: impl FnMut() -> Result<Option<T>, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut last = String::new();
    loop {
        match f() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            // A verdict before the deadline (a crash loop): no use waiting.
            Err(e) if e.starts_with("pod ") && e.contains("crash-looping") => return Err(e),
            Err(e) => last = e,
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {secs} s (last error: {last})"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A plain HTTP/1.0 GET to `ip:port`: (status, body).
pub(crate) fn http_get(ip: &str, port: u16, path: &str) -> Result<(u16, String), String> {
    let addr = format!("{ip}:{port}");
    let sock: std::net::SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {ip}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(|e| format!("read {addr}{path}: {e}"))?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("{addr}{path}: no status in {head:?}"))?;
    Ok((status, body.to_string()))
}

/// The Kubernetes version the binaries were built at (scripts/control-plane/go.mod).
fn pinned_version() -> Result<String, String> {
    let path = control_plane::repo_root().join("scripts/control-plane/go.mod");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("k8s.io/kubernetes v")
                .map(|v| format!("v{v}"))
        })
        .ok_or_else(|| format!("no k8s.io/kubernetes in {}", path.display()))
}

/// Issue 37: built from the module, kube-apiserver reported v0.0.0-master+$Format:%H$
/// (kubectl cannot parse it); the kubelet registered the node with the same.
pub(crate) fn versions_are_stamped(node: &Node) -> Result<(), String> {
    let want = pinned_version()?;
    let version = json(node, &["version"])?;
    let server = version["serverVersion"]["gitVersion"]
        .as_str()
        .unwrap_or("");
    if server != want {
        return Err(format!(
            "kube-apiserver reports {server:?}, want {want}: {version}"
        ));
    }
    let n = json(node, &["get", "node", node_support::config::NODE_NAME])?;
    let info = &n["status"]["nodeInfo"];
    for field in ["kubeletVersion", "kubeProxyVersion"] {
        let got = info[field].as_str().unwrap_or("");
        if got != want && !(field == "kubeProxyVersion" && got.is_empty()) {
            return Err(format!("node {field} {got:?}, want {want}"));
        }
    }
    let runtime = info["containerRuntimeVersion"].as_str().unwrap_or("");
    if !runtime.starts_with("containerd://") {
        return Err(format!("container runtime {runtime:?}"));
    }
    // The endpoint the API server advertises is the node IP, not loopback.
    let ep = json(node, &["-n", "default", "get", "endpoints", "kubernetes"])?;
    let ip = ep["subsets"][0]["addresses"][0]["ip"]
        .as_str()
        .unwrap_or("");
    if ip != node_support::host::NODE_IP {
        return Err(format!("kubernetes endpoints {ip:?}: {ep}"));
    }
    let log = std::fs::read_to_string(node.dir().join("apiserver.log")).unwrap_or_default();
    if log.contains("may not be in the loopback range") {
        return Err("kube-apiserver logs the loopback endpoint error".into());
    }
    Ok(())
}

/// After the stop: nothing of the node is left on the host.
pub(crate) fn host_leftovers(dir: &Path) -> Result<(), String> {
    let mut left = Vec::new();
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        left.push(format!("bridge {BRIDGE}"));
    }
    if dir.exists() {
        left.push(format!("{}", dir.display()));
    }
    for save in ["iptables-save", "ip6tables-save"] {
        let out = Command::new(save)
            .output()
            .map_err(|e| format!("{save}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines() {
            if line.starts_with(":KUBE-")
                || line.starts_with(":CNI-")
                || line.starts_with(":SO-NODE")
            {
                left.push(format!("{save}: {line}"));
            }
        }
    }
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .map_err(|e| e.to_string())?
        .flatten()
    {
        if h.path().join("kubepods").exists() {
            left.push(format!("{}/kubepods", h.path().display()));
        }
    }
    let needle = dir.display().to_string();
    for e in std::fs::read_dir("/proc")
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle) {
            left.push(format!("process {}", e.file_name().to_string_lossy()));
        }
    }
    for p in [
        "/var/lib/kubelet",
        "/var/log/containers",
        "/run/containerd/s",
        "/var/lib/cni",
    ] {
        if Path::new(p).exists() {
            left.push(p.to_string());
        }
    }
    match left.is_empty() {
        true => Ok(()),
        false => Err(left.join(", ")),
    }
}
