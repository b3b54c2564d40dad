//! Running flant's addon-operator v1.5.0 and ours on the same modules corpus and the
//! same real API server, each in a namespace of its own (its releases and its
//! ConfigMap live there), and reading back what to compare: what every hook and
//! `enabled` script received (`$OUT_DIR/runs.log`, one `<tag> {"ctx","values",
//! "config"}` line per run), the releases `helm` lists with their revisions, values
//! and manifests, and the metric names and label names each exports.
//!
//! Both operators run helm 3.17 as a binary (`HELM_BIN_PATH`), which is how flant's
//! v1.5.0 runs it when given one (its `Helm3` client; `HELM3LIB=yes` would use the
//! library built in instead).

use crate::common::{TempDir, http_get, write_hooks};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Which operator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Who {
    Flant,
    Ours,
}

/// flant's addon-operator v1.5.0 (built once per machine, cached in .tools/flant).
pub fn flant_addon_operator() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let script = control_plane::repo_root().join("scripts/install-flant.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("addon-operator")
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/install-flant.sh addon-operator");
        assert!(out.status.success(), "{} failed", script.display());
        let text = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(text.lines().last().unwrap_or_default().trim())
    })
    .clone()
}

/// helm 3.17 (`$HELM3` or `.tools/bin/helm3`); missing is a failure, never a skip.
pub fn helm3() -> PathBuf {
    crate::common::helm_bin(3)
}

/// A running addon-operator (flant's or ours) on its own copy of a corpus.
pub struct AddonOp {
    pub who: Who,
    pub ns: String,
    pub port: u16,
    child: Child,
    pub dir: TempDir,
    logs: Arc<Mutex<Vec<String>>>,
}

impl AddonOp {
    /// Writes `files` (relative: `modules/...`, `global-hooks/...`) into a fresh dir
    /// and starts `who` on it in `ns` as cluster-admin with helm 3.
    pub fn start(who: Who, ns: &str, files: &[(&str, String)]) -> AddonOp {
        let dir = TempDir::new("compat-addon");
        write_hooks(&dir.0, files);
        for d in ["modules", "global-hooks", "out", "home", "tmp"] {
            std::fs::create_dir_all(dir.0.join(d)).expect("mkdir");
        }
        let port = crate::common::listen_port();
        let mut cmd = match who {
            Who::Flant => Command::new(flant_addon_operator()),
            Who::Ours => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_shell-operator"));
                c.arg("addon-operator");
                c
            }
        };
        cmd.arg("start")
            .args([
                "--namespace",
                ns,
                "--prometheus-listen-address",
                "127.0.0.1",
            ])
            .args(["--prometheus-listen-port", &port.to_string()])
            .args([
                "--modules-dir",
                "modules",
                "--global-hooks-dir",
                "global-hooks",
            ])
            .arg("--kube-config")
            .arg(control_plane::shared().admin_kubeconfig())
            .arg("--tmp-dir")
            .arg(dir.0.join("tmp"))
            .arg("--debug-unix-socket")
            .arg(dir.0.join("debug.socket"))
            .current_dir(&dir.0)
            // flant's helm child finds the cluster through KUBECONFIG only.
            .env("KUBECONFIG", control_plane::shared().admin_kubeconfig())
            .env("HELM_BIN_PATH", helm3())
            // Ours: store flant's checksum too (the way back to flant without a
            // revision, README "Migrating from flant's addon-operator"); flant's
            // operator ignores the variable.
            .env("ADDON_OPERATOR_FLANT_CHECKSUM", "true")
            .env("HOME", dir.0.join("home"))
            .env("LOG_TYPE", "json")
            .env("OUT_DIR", dir.0.join("out"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start addon-operator");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let pipes: [Option<Box<dyn std::io::Read + Send>>; 2] = [
            child.stdout.take().map(|p| Box::new(p) as _),
            child.stderr.take().map(|p| Box::new(p) as _),
        ];
        for pipe in pipes.into_iter().flatten() {
            let lines = Arc::clone(&logs);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    lines.lock().expect("lock").push(line);
                }
            });
        }
        AddonOp {
            who,
            ns: ns.to_string(),
            port,
            child,
            dir,
            logs,
        }
    }

    /// Whether the process still runs.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn logs(&self) -> String {
        self.logs.lock().expect("lock").join("\n")
    }

    /// Every run recorded so far: (tag, `{"ctx","values","config"}`), the namespace's
    /// name replaced by `NS` (each operator has its own).
    pub fn records(&self) -> Vec<(String, Value)> {
        let text = std::fs::read_to_string(self.dir.0.join("out/runs.log")).unwrap_or_default();
        text.replace(&self.ns, "NS")
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(tag, json)| {
                let v = serde_json::from_str(json)
                    .unwrap_or_else(|e| panic!("{:?} recorded bad JSON ({e}): {json}", self.who));
                (tag.to_string(), v)
            })
            .collect()
    }

    /// Waits until `cond(records)` holds (at most 120 s; panics with the logs).
    pub fn wait_records(&self, what: &str, cond: impl Fn(&[(String, Value)]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !cond(&self.records()) {
            assert!(
                Instant::now() < deadline,
                "{:?}: timed out waiting for {what}; records: {:?}\nlogs:\n{}",
                self.who,
                self.records().iter().map(|r| &r.0).collect::<Vec<_>>(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The metric names with their label names (`name {a,b}`), `prefix` ones only.
    pub fn metric_shapes(&self, prefix: &str) -> BTreeSet<String> {
        let (code, body) = http_get(self.port, "/metrics");
        assert_eq!(code, 200, "{:?} /metrics", self.who);
        body.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| {
                let name_end = l.find(['{', ' '])?;
                let (name, rest) = l.split_at(name_end);
                let labels: BTreeSet<&str> = match rest.strip_prefix('{') {
                    Some(r) => r
                        .split("\",")
                        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.trim()))
                        .collect(),
                    None => BTreeSet::new(),
                };
                let labels: Vec<&str> = labels.into_iter().collect();
                Some(format!("{name} {{{}}}", labels.join(",")))
            })
            .collect()
    }

    /// SIGTERM, then requires the exit within 30 s (0 for ours, 1 for flant's).
    pub fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                // flant's v1.5.0 always exits 1 after a stop signal (main.go:
                // `operator.Stop(); os.Exit(1)`); ours exits 0.
                let expected = if self.who == Who::Flant { 1 } else { 0 };
                assert_eq!(
                    status.code(),
                    Some(expected),
                    "{:?} stopped with {status}",
                    self.who
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{:?} did not stop; logs:\n{}",
                self.who,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for AddonOp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until none of `ops` recorded a run for `quiet` (at most 120 s).
pub fn settle(ops: &[&AddonOp], quiet: Duration) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let counts = || ops.iter().map(|o| o.records().len()).collect::<Vec<_>>();
    let mut last = counts();
    let mut since = Instant::now();
    while since.elapsed() < quiet {
        assert!(Instant::now() < deadline, "hooks never settled: {last:?}");
        std::thread::sleep(Duration::from_millis(200));
        let now = counts();
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}

/// helm 3 as cluster-admin in `ns`; stdout, or panics with stderr.
pub fn helm(ns: &str, args: &[&str]) -> String {
    crate::common::run_helm(
        &helm3(),
        &control_plane::shared().admin_kubeconfig(),
        ns,
        args,
    )
}

/// Every release in `ns` (any status): name → (revision, status).
pub fn releases(ns: &str) -> BTreeMap<String, (u64, String)> {
    let list: Value =
        serde_json::from_str(&helm(ns, &["list", "--all", "-o", "json"])).expect("helm list json");
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some((
                r["name"].as_str()?.to_string(),
                // helm 3 writes the revision as a string.
                (
                    r["revision"].as_str()?.parse().ok()?,
                    r["status"].as_str()?.to_string(),
                ),
            ))
        })
        .collect()
}

/// `helm get values` (user-supplied, JSON) and `helm get manifest` of `release`,
/// the namespace's name replaced by `NS`.
pub fn release_content(ns: &str, release: &str) -> (Value, String) {
    let values = helm(ns, &["get", "values", release, "-o", "json"]).replace(ns, "NS");
    let manifest = helm(ns, &["get", "manifest", release]).replace(ns, "NS");
    (
        serde_json::from_str(&values).expect("helm get values json"),
        manifest,
    )
}

/// Creates `ns` with the operator's ConfigMap `addon-operator` holding `data`.
pub fn namespace_with_config(prefix: &str, data: &[(&str, &str)]) -> String {
    let cp = control_plane::shared();
    let ns = cp.namespace(prefix);
    let mut args = vec!["-n", ns.as_str(), "create", "configmap", "addon-operator"];
    let literals: Vec<String> = data
        .iter()
        .map(|(k, v)| format!("--from-literal={k}={v}"))
        .collect();
    args.extend(literals.iter().map(String::as_str));
    cp.kubectl(&args).unwrap_or_else(|e| panic!("{e}"));
    ns
}

/// `kubectl patch --type merge` of the ConfigMap in `ns` with `data` (JSON object).
pub fn patch_config(ns: &str, data: &Value) {
    let patch = serde_json::json!({ "data": data }).to_string();
    control_plane::shared()
        .kubectl(&[
            "-n",
            ns,
            "patch",
            "configmap",
            "addon-operator",
            "--type",
            "merge",
            "-p",
            &patch,
        ])
        .unwrap_or_else(|e| panic!("{e}"));
}
