//! Addon-operator benchmark helpers shared by `make bench-addon` (benches/addon_scale.rs)
//! and the addon part of `make bench-peers` (benches/peers/addon.rs): the module set
//! (N modules, each a chart of a ConfigMap, a Service and a Deployment plus one
//! `beforeHelm` hook), the `addon-operator` ConfigMap, counting helm's release
//! Secrets, and reading a process's memory from /proc.

use serde_json::json;
use shell_operator::kube::{Client, ListParams, Patch, PatchParams};
use std::path::Path;
use std::time::{Duration, Instant};

/// Module `i`'s directory (its order: `i`, or 1 for all) and release name.
pub fn module_name(i: usize, one_order: bool) -> (String, String) {
    let order = if one_order { 1 } else { i };
    (format!("{order:03}-m{i:03}"), format!("m{i:03}"))
}

/// `root/modules`: N modules enabled in `values.yaml`, each a ConfigMap, a Service
/// and a Deployment reading the module's `message`, and a `beforeHelm` hook; an
/// empty `root/global-hooks`.
pub fn write_layout(root: &Path, n: usize, one_order: bool) {
    let _ = std::fs::remove_dir_all(root);
    let modules = root.join("modules");
    std::fs::create_dir_all(root.join("global-hooks")).expect("global hooks dir");
    let mut values = String::from("global:\n  cluster: bench\n");
    for i in 1..=n {
        let (dir, name) = module_name(i, one_order);
        values.push_str(&format!("{name}Enabled: true\n{name}:\n  message: hello\n"));
        let m = modules.join(&dir);
        std::fs::create_dir_all(m.join("templates")).expect("module dir");
        std::fs::write(
            m.join("Chart.yaml"),
            format!("apiVersion: v2\nname: {name}\nversion: 0.0.1\n"),
        )
        .expect("Chart.yaml");
        std::fs::write(m.join("templates/all.yaml"), chart(&name)).expect("template");
        super::write_exec(
            &m.join("hooks/before-helm.sh"),
            "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"configVersion\":\"v1\",\"beforeHelm\":1}'; exit 0; fi\nexit 0\n",
        );
    }
    std::fs::write(modules.join("values.yaml"), values).expect("values.yaml");
}

/// A ConfigMap, a Service and a Deployment; only the module's `message` is read.
fn chart(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  message: {{{{ .Values.{name}.message | quote }}}}\n\
---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector:\n    app: {name}\n  ports:\n  - port: 80\n\
---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: {name}\n  \
template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - name: app\n        image: busybox\n"
    )
}

/// Creates namespace `ns` and an empty `addon-operator` ConfigMap in it.
pub fn create_namespace(client: &Client, ns: &str) {
    let namespaces = client.resolve("v1", "Namespace", "bench").expect("resolve");
    (client.api(&namespaces, None))
        .create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .unwrap_or_else(|e| panic!("create namespace {ns}: {e}"));
    let cms = client.resolve("v1", "ConfigMap", "bench").expect("resolve");
    (client.api(&cms, Some(ns)))
        .create(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "addon-operator", "namespace": ns}, "data": {}}))
        .unwrap_or_else(|e| panic!("create ConfigMap in {ns}: {e}"));
}

/// Sets `key` of the `addon-operator` ConfigMap in `ns`.
pub fn set_config(client: &Client, ns: &str, key: &str, value: &str) {
    let cms = client.resolve("v1", "ConfigMap", "bench").expect("resolve");
    let patch = Patch::Merge(json!({"data": {key: value}}));
    (client.api(&cms, Some(ns)))
        .patch("addon-operator", &patch, &PatchParams::default())
        .unwrap_or_else(|e| panic!("patch ConfigMap in {ns}: {e}"));
}

/// Release revisions stored in `ns` (helm's Secrets).
pub fn revisions(client: &Client, ns: &str) -> usize {
    helm_secrets(client, ns, "owner=helm")
}

/// helm's release Secrets in `ns` matching `selector` (helm labels them `owner`,
/// `name`, `version` and `status`).
pub fn helm_secrets(client: &Client, ns: &str, selector: &str) -> usize {
    let secrets = client.resolve("v1", "Secret", "bench").expect("resolve");
    let params = ListParams {
        label_selector: selector.into(),
        ..ListParams::default()
    };
    (client.api(&secrets, Some(ns)))
        .list_all(&params)
        .unwrap_or_else(|e| panic!("list secrets in {ns}: {e}"))
        .items
        .len()
}

/// A `/proc/<pid>/status` field in kB (0 when unreadable).
pub fn proc_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with(field))?.to_string();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// How a bench starts `addon-operator start`: the binary, the cluster's
/// kubeconfig, helm, and the HOME it gets.
pub struct AddonStart<'a> {
    pub operator: &'a Path,
    pub kubeconfig: &'a Path,
    pub helm: &'a Path,
    pub home: &'a Path,
}

/// An operator that answered `/ready`.
pub struct Ready {
    /// From spawn to the first `/ready`.
    pub took: Duration,
    pub child: std::process::Child,
    /// Its metrics port.
    pub port: u16,
    /// Its run dir (tmp dir, debug socket, `operator.log`).
    pub run: std::path::PathBuf,
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl AddonStart<'_> {
    /// Starts the operator for namespace `ns` on `layout`'s `modules` and
    /// `global-hooks`, with `env` added: its tmp dir, debug socket and
    /// `operator.log` under `layout/run-<ns>`, metrics on a free port of 127.0.0.1.
    /// Waits for `/ready` (polled every 10 ms); panics with the log if the process
    /// exits first or `timeout` passes.
    pub fn ready(&self, ns: &str, layout: &Path, env: &[(&str, &str)], timeout: Duration) -> Ready {
        let port = free_port();
        let run = layout.join(format!("run-{ns}"));
        std::fs::create_dir_all(&run).expect("run dir");
        let log = run.join("operator.log");
        let file = std::fs::File::create(&log).expect("log file");
        let started = Instant::now();
        let mut child = std::process::Command::new(self.operator)
            .args(["addon-operator", "start", "--namespace", ns])
            .arg("--modules-dir")
            .arg(layout.join("modules"))
            .arg("--global-hooks-dir")
            .arg(layout.join("global-hooks"))
            .arg("--tmp-dir")
            .arg(run.join("tmp"))
            .arg("--debug-unix-socket")
            .arg(run.join("debug.socket"))
            .args(["--prometheus-listen-address", "127.0.0.1"])
            .args(["--prometheus-listen-port", &port.to_string()])
            .arg("--kube-config")
            .arg(self.kubeconfig)
            .env("HELM_BIN_PATH", self.helm)
            .env("HOME", self.home)
            .envs(env.iter().copied())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.operator.display()));
        let deadline = Instant::now() + timeout;
        while !super::ready(port) {
            let exited = child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > deadline {
                let _ = child.kill();
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("addon-operator not ready ({exited:?}); log:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ready {
            took: started.elapsed(),
            child,
            port,
            run,
        }
    }
}

/// Runs `helm` with `args` and HOME `home`; its wall time. Panics, with helm's
/// stderr, unless it exits as `must_succeed` says.
pub fn timed_helm(helm: &Path, home: &Path, args: &[&str], must_succeed: bool) -> Duration {
    let started = Instant::now();
    let out = std::process::Command::new(helm)
        .args(args)
        .env("HOME", home)
        .output()
        .expect("run helm");
    let took = started.elapsed();
    assert_eq!(
        out.status.success(),
        must_succeed,
        "helm {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}
