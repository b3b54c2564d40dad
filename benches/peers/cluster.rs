//! The API server a `make bench-peers` trial runs against: a fresh kube-sim seeded
//! with the 10k pods for each trial, or one real kube-apiserver + etcd
//! (tests/control-plane) seeded once through the API and shared by every trial, so
//! that the figures do not rest on kube-sim's speed.
//!
//! Label patches go through our own kube client without a rate limit; every patch
//! value carries a sequence number, since re-applying a value a real server already
//! holds changes nothing and sends no event.

use crate::common::pods::{KubeSim, PODS};
use control_plane::ControlPlane;
use serde_json::json;
use shell_operator::kube::{Client, KubeSettings};
use shell_operator::kube::{Patch, PatchParams};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// What backs a [`Cluster`].
enum Backing {
    Sim(#[allow(dead_code)] KubeSim),
    Real(#[allow(dead_code)] Box<ControlPlane>),
}

/// A server holding the 10k pods, and how contenders reach it.
pub struct Cluster {
    _backing: Backing,
    pub kubeconfig: PathBuf,
    pub url: String,
    /// A bearer token for clients without kubeconfig support (the floor), real only.
    pub token: Option<String>,
    client: Client,
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A client without rate limit for `kubeconfig`.
fn client(kubeconfig: &Path) -> Result<Client, String> {
    let settings = KubeSettings {
        kubeconfig: kubeconfig.display().to_string(),
        qps: -1.0,
        ..KubeSettings::default()
    };
    Client::from_config(&settings).map_err(|e| e.to_string())
}

impl Cluster {
    /// A fresh kube-sim (`bin`) seeded from `work/seed`.
    pub fn sim(bin: &Path, work: &Path) -> Result<Cluster, String> {
        let sim = KubeSim::start(bin, work);
        Ok(Cluster {
            kubeconfig: sim.kubeconfig.clone(),
            url: sim.url.clone(),
            token: None,
            client: client(&sim.kubeconfig)?,
            _backing: Backing::Sim(sim),
        })
    }

    /// A real control plane in `work/control-plane`, seeded with the 10k pods (the
    /// same objects as kube-sim's seed, status aside: create ignores it).
    pub fn real(work: &Path) -> Result<Cluster, String> {
        let cp = ControlPlane::start(&work.join("control-plane"))?;
        cp.kubectl(&["-n", "default", "create", "serviceaccount", "bench"])?;
        cp.kubectl(&[
            "create",
            "clusterrolebinding",
            "bench",
            "--clusterrole=cluster-admin",
            "--serviceaccount=default:bench",
        ])?;
        let token = cp
            .kubectl(&[
                "-n",
                "default",
                "create",
                "token",
                "bench",
                "--duration=24h",
            ])?
            .trim()
            .to_string();
        let kubeconfig = cp.admin_kubeconfig();
        let client = client(&kubeconfig)?;
        seed(&client, &work.join("seed/pods.yaml"))?;
        Ok(Cluster {
            url: cp.url(),
            kubeconfig,
            token: Some(token),
            client,
            _backing: Backing::Real(Box::new(cp)),
        })
    }

    /// Merge-patches label `bench=<value>-<seq>` onto pod `i`.
    pub fn patch_label(&self, i: usize, value: &str) -> Result<(), String> {
        let pods = self.pods(&format!("ns-{}", i % 10))?;
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let patch =
            Patch::Merge(json!({"metadata": {"labels": {"bench": format!("{value}-{seq}")}}}));
        let name = crate::scenario::pod_name(i);
        pods.patch(&name, &patch, &PatchParams::default())
            .map(|_| ())
            .map_err(|e| format!("patch pod {name}: {e}"))
    }

    fn pods(&self, namespace: &str) -> Result<shell_operator::kube::Api<'_>, String> {
        let resource = self
            .client
            .resolve("v1", "Pod", "bench")
            .map_err(|e| e.to_string())?;
        Ok(self.client.api(&resource, Some(namespace)))
    }
}

/// Creates the namespaces and every pod of the seed file, from 8 threads.
fn seed(client: &Client, seed_file: &Path) -> Result<(), String> {
    let namespaces = client
        .resolve("v1", "Namespace", "bench")
        .map_err(|e| e.to_string())?;
    for n in 0..10 {
        client
            .api(&namespaces, None)
            .create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n}")}}))
            .map_err(|e| format!("create namespace ns-{n}: {e}"))?;
    }
    let text = std::fs::read_to_string(seed_file).map_err(|e| e.to_string())?;
    let pods: Vec<serde_json::Value> = text
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    assert_eq!(pods.len(), PODS, "the seed file holds every pod");
    let resource = client
        .resolve("v1", "Pod", "bench")
        .map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        let workers: Vec<_> = pods
            .chunks(PODS / 8)
            .map(|chunk| {
                let resource = &resource;
                s.spawn(move || {
                    chunk.iter().try_for_each(|pod| {
                        let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
                        client
                            .api(resource, Some(ns))
                            .create(pod)
                            .map(|_| ())
                            .map_err(|e| format!("create pod: {e}"))
                    })
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| "seeding thread panicked".to_string())?
        })
    })?;
    eprintln!(
        "real API server: {PODS} pods created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
