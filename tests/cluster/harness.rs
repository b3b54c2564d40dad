//! What the cluster tests share: the control plane, an operator started against it,
//! and waiting for a condition with a deadline.
#![allow(dead_code)]

use crate::common::Operator;
use control_plane::ControlPlane;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a test waits for an outcome before it fails.
pub const WAIT: Duration = Duration::from_secs(30);

/// This test binary's control plane (started by the first test that asks).
pub fn cp() -> &'static ControlPlane {
    control_plane::shared()
}

/// Starts the shell-operator on `hooks` with `kubeconfig` and extra `args`/`env`.
pub fn operator(
    hooks: &[(&str, String)],
    kubeconfig: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Operator {
    let path = kubeconfig.to_str().expect("utf8 kubeconfig path");
    let mut all = vec!["--kube-config", path];
    all.extend_from_slice(args);
    Operator::start(hooks, &all, env)
}

/// Starts the shell-operator on `hooks` as cluster-admin.
pub fn admin_operator(hooks: &[(&str, String)]) -> Operator {
    operator(hooks, &cp().admin_kubeconfig(), &[], &[])
}

/// Polls `f` until it returns `Some`, or panics with `what` after [`WAIT`].
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// kubectl as cluster-admin; panics with kubectl's error.
pub fn kubectl(args: &[&str]) -> String {
    cp().kubectl(args).unwrap_or_else(|e| panic!("{e}"))
}

/// `kubectl apply` of `yaml` as cluster-admin; panics with kubectl's error.
pub fn apply(yaml: &str) {
    cp().apply(yaml)
        .unwrap_or_else(|e| panic!("apply: {e}\n{yaml}"));
}

/// Every binding context every run of the operator's hooks received, in order.
pub fn contexts(op: &Operator) -> Vec<Value> {
    op.runs()
        .into_iter()
        .flat_map(|(_, c)| c.as_array().cloned().unwrap_or_default())
        .collect()
}

/// Waits until the hooks received at least `n` contexts; returns them all.
pub fn wait_contexts(op: &Operator, n: usize) -> Vec<Value> {
    op.wait_runs(WAIT, |r| {
        r.iter()
            .map(|(_, c)| c.as_array().map_or(0, Vec::len))
            .sum::<usize>()
            >= n
    });
    contexts(op)
}

/// Guards the shared API server against restarts. `cp().kill_apiserver()` breaks
/// every request of every test in this process until `start_apiserver()` returns, so:
/// every test that runs an operator (or otherwise talks to the API server) holds
/// `RESTART.read()` for its whole body ([`api_shared`]; declare the guard first so it
/// is dropped last, after the operator), and a test that restarts the API server
/// holds `RESTART.write()` ([`api_exclusive`]): it waits until no other test runs and
/// none starts until it is done.
pub static RESTART: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// `RESTART.read()`, whether or not a test panicked while holding it.
pub fn api_shared() -> std::sync::RwLockReadGuard<'static, ()> {
    RESTART
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `RESTART.write()`, whether or not a test panicked while holding it.
pub fn api_exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    RESTART
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Kills kube-apiserver, runs `down` (etcd keeps running), and starts it again, also
/// when `down` panics (so one failing test does not leave the API server down for
/// the others). Hold [`api_exclusive`] around it.
pub fn with_apiserver_down<T>(down: impl FnOnce() -> T) -> T {
    cp().kill_apiserver();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(down));
    cp().start_apiserver()
        .unwrap_or_else(|e| panic!("restart kube-apiserver: {e}"));
    result.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Whether a kubectl error says the server could not be reached (kube-apiserver
/// restarted by another test), as opposed to an answer from the server.
fn unreachable(error: &str) -> bool {
    [
        "connection to the server",
        "connection refused",
        "was refused",
        "EOF",
        "ServiceUnavailable",
        "the server is currently unable",
        "i/o timeout",
        "TLS handshake timeout",
    ]
    .iter()
    .any(|n| error.contains(n))
}

/// kubectl as cluster-admin, retried for up to 60 s while the API server cannot be
/// reached; after such a retry, AlreadyExists counts as done (the lost attempt did
/// it). Panics with kubectl's error otherwise.
pub fn kubectl_retry(args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut retried = false;
    loop {
        match cp().kubectl(args) {
            Ok(out) => return out,
            Err(e) if retried && e.contains("AlreadyExists") => return e,
            Err(e) if unreachable(&e) && Instant::now() < deadline => {
                retried = true;
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// [`apply`], retried like [`kubectl_retry`] (apply is idempotent).
pub fn apply_retry(yaml: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match cp().apply(yaml) {
            Ok(_) => return,
            Err(e) if unreachable(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => panic!("apply: {e}\n{yaml}"),
        }
    }
}

/// The object as stored (managedFields included), `None` when it does not exist;
/// unlike `cp().get`, an unreachable server is waited for (60 s), not taken for
/// "does not exist".
pub fn get_retry(kind: &str, namespace: &str, name: &str) -> Option<Value> {
    let text = kubectl_retry(&control_plane::get_args(kind, namespace, name));
    if text.trim().is_empty() {
        return None;
    }
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{kind} {namespace}/{name}: {e}")))
}

/// A fresh namespace `<prefix>-<pid>-r<n>` (see `cp().namespace`), its creation
/// retried like [`kubectl_retry`]. Never deleted.
pub fn namespace_retry(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{prefix}-{}-r{n}", std::process::id());
    kubectl_retry(&["create", "namespace", &name]);
    name
}
