//! Helpers shared by the `patch_*` integration tests: a kube-sim with a client
//! pointed at it, seeding, and "parse then apply" of a patch file's text.
#![allow(dead_code)]

use kube_sim::Sim;
use serde_json::{Value, json};
use shell_operator::kube::{
    AuthSettings, Client, ClusterConfig, KubeSettings, RetryPolicy, TlsSettings,
};
use shell_operator::patch;
use std::time::Duration;

/// A kube-sim and a client for it (no QPS limit, short retry delays).
pub struct World {
    pub sim: Sim,
    pub client: Client,
}

/// Starts kube-sim with namespace `ns1` (kube-sim has `default`) and builds a client.
pub fn world() -> World {
    let sim = Sim::start();
    sim.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}))
        .expect("namespace");
    World::on(sim)
}

impl World {
    /// A client for `sim` (no QPS limit, short retry delays).
    pub fn on(sim: Sim) -> World {
        let cfg = ClusterConfig {
            server: sim.url(),
            tls: TlsSettings::default(),
            auth: AuthSettings::None,
            namespace: "default".into(),
            origin: "test".into(),
        };
        let settings = KubeSettings {
            qps: -1.0,
            burst: 1,
            timeout: Duration::from_secs(10),
            ..Default::default()
        };
        let client = Client::new(&cfg, &settings)
            .expect("client")
            .with_retry(RetryPolicy {
                max_retries: 2,
                base_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(50),
            });
        World { sim, client }
    }

    /// Parses `text` as a patch file and applies it; errors as their text.
    pub fn run(&self, text: &str, hook_failed: bool) -> Result<usize, String> {
        let ops = patch::parse(text.as_bytes()).map_err(|e| e.to_string())?;
        patch::apply(&self.client, &ops, hook_failed, None).map_err(|e| e.to_string())
    }

    /// Creates an object directly in the store.
    pub fn seed(&self, obj: Value) -> Value {
        self.sim.create(obj).expect("seed object")
    }

    /// A ConfigMap as kube-sim holds it, if it exists.
    pub fn cm(&self, ns: &str, name: &str) -> Option<Value> {
        self.sim.get("v1", "ConfigMap", ns, name)
    }

    /// Resolves the kinds the tests use, so discovery requests are done.
    pub fn warm(&self) {
        for kind in ["ConfigMap", "Pod", "Secret"] {
            self.client.resolve("v1", kind, "test").expect("resolve");
        }
    }
}

/// A ConfigMap manifest.
pub fn cm(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data})
}

/// A Pod manifest with a status.
pub fn pod(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]},
           "status": {"phase": "Pending"}})
}

/// The resourceVersion of an object.
pub fn rv(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string()
}
