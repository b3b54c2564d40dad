//! Helpers shared by the `kube_client_*` integration tests: a client pointed at a
//! kube-sim, fast watch parameters, object builders and event formatting.
#![allow(dead_code)]

use crossbeam_channel::Receiver;
use kube_sim::Sim;
use serde_json::{Value, json};
use shell_operator::kube::{
    AuthSettings, Client, ClusterConfig, Event, KubeSettings, RetryPolicy, TlsSettings, WatchParams,
};
use std::time::{Duration, Instant};

/// Settings without rate limiting.
pub fn unlimited() -> KubeSettings {
    KubeSettings {
        qps: -1.0,
        burst: 1,
        timeout: Duration::from_secs(10),
        ..Default::default()
    }
}

/// A client for a plain-HTTP kube-sim, no QPS limit, short retry delays.
pub fn client_for(sim: &Sim) -> Client {
    client_with(sim, &unlimited())
}

/// A client for a plain-HTTP kube-sim with the given settings.
pub fn client_with(sim: &Sim, s: &KubeSettings) -> Client {
    let cfg = ClusterConfig {
        server: sim.url(),
        tls: TlsSettings::default(),
        auth: AuthSettings::None,
        namespace: "default".into(),
        origin: "test".into(),
    };
    Client::new(&cfg, s)
        .expect("client")
        .with_retry(RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(200),
        })
}

/// Watch parameters with short backoff, for one namespace.
pub fn fast_params(ns: &str) -> WatchParams {
    WatchParams {
        namespace: Some(ns.into()),
        backoff_base: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        watch_timeout: Duration::from_secs(60),
        ..Default::default()
    }
}

/// A ConfigMap with one data key and labels.
pub fn cm(ns: &str, name: &str, value: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": labels},
           "data": {"v": value}})
}

/// Compact names of events: `sync[a,b]`, `relist[a,b]`, `+a`, `~a:<data.v>`, `-a`; watch errors dropped.
pub fn show(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Synced(objs) | Event::Relisted(objs, _) => {
                let values: Vec<Value> = objs
                    .iter()
                    .filter_map(|j| serde_json::from_str(&j.json).ok())
                    .collect();
                let mut n: Vec<&str> = values.iter().map(name).collect();
                n.sort();
                let what = if matches!(e, Event::Synced(_)) {
                    "sync"
                } else {
                    "relist"
                };
                Some(format!("{what}[{}]", n.join(",")))
            }
            Event::Added(o) => Some(format!("+{}", o.meta.name)),
            Event::Modified(o) => Some(format!(
                "~{}:{}",
                o.meta.name,
                o.value()["data"]["v"].as_str().unwrap_or("")
            )),
            Event::Deleted(o) => Some(format!("-{}", o.meta.name)),
            Event::WatchError { .. } => None,
        })
        .collect()
}

pub fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or("?")
}

/// Receives until `n` non-error events arrived (or panics after `timeout`).
pub fn take(rx: &Receiver<Event>, n: usize, timeout: Duration) -> Vec<Event> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out
        .iter()
        .filter(|e| !matches!(e, Event::WatchError { .. }))
        .count()
        < n
    {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(e) => out.push(e),
            Err(_) => panic!("timed out waiting for {n} events; got {:?}", show(&out)),
        }
    }
    out
}

/// Every event arriving within `quiet` of the previous one.
pub fn drain(rx: &Receiver<Event>, quiet: Duration) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.recv_timeout(quiet) {
        out.push(e);
    }
    out
}

/// Waits until `f` holds (polling), panicking after `timeout`.
pub fn eventually(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub mod pki;

/// A fresh temp dir for one test.
pub fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kube-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Settings pointing at one kubeconfig file, no rate limit.
pub fn settings_for(kubeconfig: &std::path::Path) -> KubeSettings {
    KubeSettings {
        kubeconfig: kubeconfig.to_string_lossy().into(),
        ..unlimited()
    }
}

/// The names of the ConfigMaps in `ns`, through `client` (proves the connection works).
pub fn configmap_names(
    client: &Client,
    ns: &str,
) -> Result<Vec<String>, shell_operator::kube::KubeError> {
    let r = client.resolve("v1", "ConfigMap", "test")?;
    let l = client.api(&r, Some(ns)).list(&Default::default())?;
    Ok(l.items.iter().map(|o| name(o).to_string()).collect())
}
