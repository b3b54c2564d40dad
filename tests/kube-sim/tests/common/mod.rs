//! Shared helpers for kube-sim's integration tests: a tiny blocking HTTP
//! client over ureq that keeps Status bodies, a watch reader that turns a
//! chunked NDJSON stream into a channel of events, and the locator for the real
//! kubectl/helm binaries used by the fidelity tests.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// A plain-HTTP client for one Sim.
pub struct Client {
    pub base: String,
    agent: ureq::Agent,
}

/// An HTTP answer: status code, headers we care about, JSON body (Null if not JSON).
#[derive(Debug)]
pub struct Answer {
    pub code: u16,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl Client {
    pub fn new(base: &str) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .new_agent();
        Client {
            base: base.to_string(),
            agent,
        }
    }

    fn finish(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
        let mut r = r.expect("HTTP request failed");
        let retry_after = r
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = r.body_mut().read_to_string().unwrap_or_default();
        Answer {
            code: r.status().as_u16(),
            retry_after,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
        }
    }

    pub fn get(&self, path: &str) -> Answer {
        Self::finish(self.agent.get(format!("{}{path}", self.base)).call())
    }

    pub fn get_with(&self, path: &str, header: (&str, &str)) -> Answer {
        Self::finish(
            self.agent
                .get(format!("{}{path}", self.base))
                .header(header.0, header.1)
                .call(),
        )
    }

    pub fn send(&self, method: &str, path: &str, content_type: &str, body: &[u8]) -> Answer {
        let url = format!("{}{path}", self.base);
        let r = match method {
            "POST" => self
                .agent
                .post(url)
                .header("Content-Type", content_type)
                .send(body),
            "PUT" => self
                .agent
                .put(url)
                .header("Content-Type", content_type)
                .send(body),
            "PATCH" => self
                .agent
                .patch(url)
                .header("Content-Type", content_type)
                .send(body),
            "DELETE" => self
                .agent
                .delete(url)
                .header("Content-Type", content_type)
                .force_send_body()
                .send(body),
            m => panic!("unsupported method {m}"),
        };
        Self::finish(r)
    }

    pub fn post(&self, path: &str, v: &Value) -> Answer {
        self.send("POST", path, "application/json", v.to_string().as_bytes())
    }

    pub fn put(&self, path: &str, v: &Value) -> Answer {
        self.send("PUT", path, "application/json", v.to_string().as_bytes())
    }

    pub fn patch(&self, path: &str, content_type: &str, body: &str) -> Answer {
        self.send("PATCH", path, content_type, body.as_bytes())
    }

    pub fn delete(&self, path: &str) -> Answer {
        Self::finish(self.agent.delete(format!("{}{path}", self.base)).call())
    }

    /// Opens a watch; events (or `{"type":"END"}` when the stream ends) arrive on the channel.
    pub fn watch(&self, path_and_query: &str) -> Receiver<Value> {
        let url = format!("{}{path_and_query}", self.base);
        let resp = self.agent.get(url).call().expect("watch request failed");
        assert_eq!(resp.status().as_u16(), 200, "watch status");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let reader = BufReader::new(resp.into_body().into_reader());
            for line in reader.lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(&line).expect("watch line is JSON");
                if tx.send(v).is_err() {
                    return;
                }
            }
            let _ = tx.send(serde_json::json!({"type": "END"}));
        });
        rx
    }
}

/// Next event within 5 s, or panic.
pub fn next(rx: &Receiver<Value>) -> Value {
    rx.recv_timeout(Duration::from_secs(5))
        .expect("no watch event within 5s")
}

/// Next event that is not a BOOKMARK.
pub fn next_non_bookmark(rx: &Receiver<Value>) -> Value {
    loop {
        let e = next(rx);
        if e["type"] != "BOOKMARK" {
            return e;
        }
    }
}

/// `(TYPE, name)` of an event.
pub fn brief(e: &Value) -> (String, String) {
    (
        e["type"].as_str().unwrap_or("").to_string(),
        e["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

/// A ConfigMap manifest.
/// The `metadata.name` of every item of a list response.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

pub fn cm(ns: &str, name: &str, labels: Value) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"k": "v"}})
}

/// A Deployment a real server accepts: a selector matching its template's labels
/// and one container with a name and an image.
pub fn deployment(ns: &str, name: &str, replicas: i64) -> Value {
    serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// Path of a real client binary: `$ENV_VAR` or `<repo>/.tools/bin/<name>`; fails loudly if absent.
pub fn tool(name: &str, env_var: &str) -> PathBuf {
    if let Ok(p) = std::env::var(env_var) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{env_var}={} does not exist", p.display());
        return p;
    }
    let p = repo_root().join(".tools/bin").join(name);
    assert!(
        p.is_file(),
        "{name} not found at {} and {env_var} is not set: run scripts/install-k8s-clients.sh first",
        p.display()
    );
    p
}

/// Output of a finished client command.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with `env`, killing it after `secs` seconds.
pub fn run(cmd: &std::path::Path, args: &[&str], env: &[(&str, String)], secs: u64) -> Run {
    use std::io::Read;
    let mut c = std::process::Command::new(cmd);
    c.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", cmd.display()));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (t_out.join().unwrap(), t_err.join().unwrap());
    Run {
        ok: status.is_some_and(|s| s.success()),
        stdout,
        stderr,
    }
}

/// A fresh per-test temp directory, removed again when dropped.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Creates `$TMPDIR/kube-sim-<name>-<pid>`, empty.
pub fn temp_dir(name: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("kube-sim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    TempDir(d)
}
