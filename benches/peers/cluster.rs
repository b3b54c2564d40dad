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
    /// How many pods it holds (`pod-00000` on).
    pub pods: usize,
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
            pods: PODS,
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
        crate::common::pods::create_namespaces(&client)?;
        let mut cluster = Cluster {
            url: cp.url(),
            kubeconfig,
            token: Some(token),
            pods: 0,
            client,
            _backing: Backing::Real(Box::new(cp)),
        };
        cluster.grow(work, PODS)?;
        Ok(cluster)
    }

    /// Creates pods until the (real) server holds `pods` of them (`PEERS_SCALE`).
    pub fn grow(&mut self, work: &Path, pods: usize) -> Result<(), String> {
        if pods <= self.pods {
            return Ok(());
        }
        let file = work.join(format!("seed-{}-{pods}.yaml", self.pods));
        crate::common::pods::write_pod_range(&file, self.pods..pods);
        let started = std::time::Instant::now();
        let n = crate::common::pods::create_pods(&self.client, &file)?;
        let _ = std::fs::remove_file(&file);
        eprintln!(
            "real API server: {n} pods created in {:.1} s, {pods} in all",
            started.elapsed().as_secs_f64()
        );
        self.pods = pods;
        Ok(())
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
