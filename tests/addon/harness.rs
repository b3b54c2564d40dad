//! Harness for addon-operator end-to-end tests: a kube-sim, a modules dir and a
//! global hooks dir in a temp dir, the real binary started as `addon-operator` with
//! the real helm (wrapped so each helm command is recorded), and readers for what
//! hooks and helm recorded.
//!
//! Hooks written with `common::hook` append `<tag> <binding context>` to
//! `$OUT_DIR/runs.log`; the helm wrapper appends `helm:<command>:<release> null` to
//! the same file, so one list shows hook runs and helm commands in their real order.

use crate::common::{TempDir, hook, http_get, write_hooks};
use kube_sim::Sim;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const NS: &str = "addons";

/// The repository root (the main package's manifest dir).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub use crate::common::helm_bin;

/// A module hook or global hook: records its context, then runs `body`.
pub fn rec(tag: &str, config: &str, body: &str) -> String {
    hook(tag, config, body)
}

/// A running addon-operator with its kube-sim.
pub struct Addon {
    pub sim: Arc<Sim>,
    pub dir: TempDir,
    pub child: Option<Child>,
    pub stdout: Arc<Mutex<Vec<String>>>,
}

impl Addon {
    /// Writes `files` (relative to the temp dir: `modules/...`, `global-hooks/...`;
    /// hooks and scripts get mode 0755), seeds the ConfigMap data if given, starts
    /// the operator with helm `major`.
    pub fn start(files: &[(&str, String)], configmap: Option<Value>, major: u32) -> Addon {
        Addon::start_with(files, configmap, major, &[])
    }

    pub fn start_with(
        files: &[(&str, String)],
        configmap: Option<Value>,
        major: u32,
        env: &[(&str, &str)],
    ) -> Addon {
        Addon::start_after(files, configmap, major, env, &|_| {})
    }

    /// [`start_with`](Self::start_with), running `before(root)` once kube-sim and the
    /// kubeconfig (`root/kubeconfig`) exist, before the operator starts.
    pub fn start_after(
        files: &[(&str, String)],
        configmap: Option<Value>,
        major: u32,
        env: &[(&str, &str)],
        before: &dyn Fn(&std::path::Path),
    ) -> Addon {
        let sim = Arc::new(Sim::start());
        sim.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
            .expect("namespace");
        if let Some(data) = configmap {
            sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "addon-operator", "namespace": NS}, "data": data}))
                .expect("configmap");
        }
        Addon::launch(sim, files, major, env, &[], before)
    }

    /// Another operator (a replica) on `sim`, which already has the namespace and
    /// ConfigMap; `args` come last, so they override the harness's flags.
    pub fn replica(
        sim: Arc<Sim>,
        files: &[(&str, String)],
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Addon {
        Addon::launch(sim, files, 4, env, args, &|_| {})
    }

    /// The operator started again on `sim` (a restart) with helm `major`.
    pub fn restart(sim: Arc<Sim>, files: &[(&str, String)], major: u32) -> Addon {
        Addon::launch(sim, files, major, &[], &[], &|_| {})
    }

    fn launch(
        sim: Arc<Sim>,
        files: &[(&str, String)],
        major: u32,
        env: &[(&str, &str)],
        args: &[&str],
        before: &dyn Fn(&std::path::Path),
    ) -> Addon {
        let dir = TempDir::new("addon");
        let root = dir.0.clone();
        write_hooks(&root, files);
        for d in ["modules", "global-hooks", "out", "home"] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        sim.write_kubeconfig(&root.join("kubeconfig"))
            .expect("kubeconfig");
        before(&root);
        let modules_dir = env
            .iter()
            .find(|(k, _)| *k == "MODULES_DIR")
            .map_or("modules", |(_, v)| *v);
        let wrapper = root.join("helm-wrapper");
        let script = format!(
            "#!/bin/sh\necho \"helm:$1:$2 null\" >> \"$OUT_DIR/runs.log\"\n\
             echo \"$1 ${{GOGC:-unset}}\" >> \"$OUT_DIR/helm-env.log\"\nexec '{}' \"$@\"\n",
            helm_bin(major).display()
        );
        write_hooks(&root, &[("helm-wrapper", script)]);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_shell-operator"));
        cmd.arg("addon-operator")
            .arg("start")
            .args([
                "--namespace",
                NS,
                "--prometheus-listen-address",
                "127.0.0.1",
            ])
            .args(["--prometheus-listen-port", "0"])
            // Relative, as in flant's image (WORKDIR /, MODULES_DIR=modules).
            .current_dir(&root)
            // `MODULES_DIR` in `env` (flant's variable) replaces the flag's `modules`.
            .args(["--modules-dir", modules_dir])
            .args(["--global-hooks-dir", "global-hooks"])
            .arg("--tmp-dir")
            .arg(root.join("tmp"))
            .arg("--debug-unix-socket")
            .arg(root.join("debug.socket"))
            .env("HELM_BIN_PATH", &wrapper)
            .env("KUBECONFIG", root.join("kubeconfig"))
            .env("HOME", root.join("home"))
            .env("LOG_TYPE", "json")
            .env("OUT_DIR", root.join("out"))
            .envs(env.iter().copied())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start addon-operator");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let lines = Arc::clone(&stdout);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    lines.lock().expect("lock").push(line);
                }
            });
        }
        Addon {
            sim,
            dir,
            child: Some(child),
            stdout,
        }
    }

    /// (tag, JSON) of every recorded hook run and helm command, in order.
    pub fn runs(&self) -> Vec<(String, Value)> {
        let text = std::fs::read_to_string(self.dir.0.join("out/runs.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(t, j)| {
                (
                    t.to_string(),
                    serde_json::from_str(j).unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    /// Each helm command the operator ran, with the `GOGC` it got (`unset` if none).
    pub fn helm_gogc(&self) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(self.dir.0.join("out/helm-env.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(c, g)| (c.to_string(), g.to_string()))
            .collect()
    }

    /// Tags of runs, without helm's read-only commands (version, template, history,
    /// get, list), which depend on what the upgrade decision needs to ask.
    pub fn steps(&self) -> Vec<String> {
        self.runs()
            .into_iter()
            .map(|(t, _)| t)
            .filter(|t| {
                !t.starts_with("helm:")
                    || t.starts_with("helm:upgrade")
                    || t.starts_with("helm:uninstall")
            })
            .collect()
    }

    /// Waits until `cond(steps)` holds.
    pub fn wait_steps(&self, timeout: Duration, cond: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let steps = self.steps();
            if cond(&steps) {
                return steps;
            }
            assert!(
                Instant::now() < deadline,
                "condition not met in {timeout:?}\nsteps: {steps:#?}\nlogs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn logs(&self) -> String {
        self.stdout.lock().expect("lock").join("\n")
    }

    /// Waits for a log line containing every one of `needles`.
    pub fn wait_log(&self, needles: &[&str], timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self
                .stdout
                .lock()
                .expect("lock")
                .iter()
                .find(|l| needles.iter().all(|n| l.contains(n)))
                .cloned();
            if let Some(l) = found {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no log line with {needles:?} in {timeout:?}; logs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs `addon-operator <args>` against this operator's debug socket; its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        crate::common::addon_cli(&self.dir.0.join("debug.socket"), args)
    }

    /// The metrics port.
    pub fn port(&self) -> u16 {
        let line = self.wait_log(&["HTTP server listening"], Duration::from_secs(30));
        let v: Value = serde_json::from_str(&line).expect("json log");
        v["address"]
            .as_str()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("port")
    }

    pub fn metrics(&self) -> String {
        http_get(self.port(), "/metrics").1
    }

    /// Waits until the first converge is done (`/ready` answers 200).
    pub fn wait_ready(&self) {
        let port = self.port();
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(port, "/ready").0 != 200 {
            assert!(
                Instant::now() < deadline,
                "not ready in 60 s; logs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The ConfigMap data; sets key `k` to `v` (a string) and writes it back.
    pub fn set_config(&self, k: &str, v: &str) {
        let mut cm = self
            .sim
            .get("v1", "ConfigMap", NS, "addon-operator")
            .unwrap_or_else(|| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "addon-operator", "namespace": NS}, "data": {}})
            });
        let existed = cm["metadata"]["resourceVersion"].is_string();
        cm["data"][k] = json!(v);
        if existed {
            self.sim.update(cm).expect("update configmap");
        } else {
            self.sim.create(cm).expect("create configmap");
        }
    }

    pub fn configmap_data(&self) -> Value {
        self.sim
            .get("v1", "ConfigMap", NS, "addon-operator")
            .map(|c| c["data"].clone())
            .unwrap_or(Value::Null)
    }

    /// A helm release Secret's revisions for `release`.
    pub fn revisions(&self, release: &str) -> Vec<u64> {
        let mut r: Vec<u64> = self
            .sim
            .list("v1", "Secret", NS)
            .into_iter()
            .filter(|s| {
                s["metadata"]["labels"]["owner"] == "helm"
                    && s["metadata"]["labels"]["name"] == release
            })
            .filter_map(|s| {
                s["metadata"]["labels"]["version"]
                    .as_str()
                    .and_then(|v| v.parse().ok())
            })
            .collect();
        r.sort();
        r
    }

    pub fn object(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        self.sim.get(api_version, kind, NS, name)
    }

    /// Waits until the object `name` satisfies `cond` (`None`: absent). The helm
    /// wrapper records a command when it starts, so tests wait for its effect here.
    pub fn wait_object(
        &self,
        kind: &str,
        name: &str,
        cond: impl Fn(Option<&Value>) -> bool,
    ) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let obj = self.object("v1", kind, name);
            if cond(obj.as_ref()) {
                return obj;
            }
            assert!(
                Instant::now() < deadline,
                "{kind} {name} is {obj:?}; logs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Addon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A minimal chart: one ConfigMap named `name` with `data` from the module values.
pub fn chart(module_dir: &str, name: &str, key: &str) -> Vec<(String, String)> {
    vec![
        (
            format!("{module_dir}/Chart.yaml"),
            format!("apiVersion: v2\nname: {name}\nversion: 0.0.1\n"),
        ),
        (
            format!("{module_dir}/templates/cm.yaml"),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  values: {{{{ .Values.{key} | toJson | quote }}}}\n  enabledModules: {{{{ .Values.global.enabledModules | join \",\" | quote }}}}\n"
            ),
        ),
    ]
}

/// The non-empty documents of a rendered manifest stream (the post-renderer writes
/// each object as JSON, which is YAML), parsed.
pub fn manifest_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{e}: {text}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// The files of a layout as `Addon::start` takes them.
pub fn refs(list: &[(String, String)]) -> Vec<(&str, String)> {
    list.iter().map(|(p, c)| (p.as_str(), c.clone())).collect()
}

/// Polls `f` until it is true; panics after `within`, with the operator's logs.
/// Returns how long it took.
pub fn within(addon: &Addon, what: &str, within: Duration, f: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < within,
            "{what}: not within {within:?}; logs:\n{}",
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// [`within`] 60 s.
pub fn eventually(addon: &Addon, what: &str, f: impl Fn() -> bool) {
    within(addon, what, Duration::from_secs(60), f);
}

/// The module values the chart of [`chart`] for `name` rendered into its ConfigMap.
pub fn rendered_values(addon: &Addon, name: &str) -> Option<Value> {
    let cm = addon.object("v1", "ConfigMap", name)?;
    serde_json::from_str(cm["data"]["values"].as_str()?).ok()
}
