//! Kubernetes benchmark helpers: 10k seeded pods, a kube-sim process serving them,
//! and the monitor enabling one binding over them in-process.

use shell_operator::hook::{self, Hook};
use shell_operator::kube::{Client, KubeSettings};
use shell_operator::metrics::Metrics;
use shell_operator::monitor::store::SnapshotStore;
use shell_operator::monitor::{Control, Monitor};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

pub const PODS: usize = 10_000;

/// Writes `PODS` pods (~720 bytes of JSON each) as a kube-sim seed file.
pub fn write_pods(path: &Path) {
    write_n_pods(path, PODS);
}

/// Writes `n` pods like [`write_pods`].
pub fn write_n_pods(path: &Path, n: usize) {
    write_pod_range(path, 0..n);
}

/// Writes pods `range` (names `pod-NNNNN`, namespaces `ns-0`..`ns-9`) like
/// [`write_pods`].
pub fn write_pod_range(path: &Path, range: std::ops::Range<usize>) {
    let mut out = std::fs::File::create(path).expect("seed file");
    for i in range {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pod-{i:05}"), "namespace": format!("ns-{}", i % 10),
                "labels": {"app": format!("app-{}", i % 50), "tier": "backend", "pod-template-hash": "5d8f9c7b6"},
                "annotations": {"prometheus.io/scrape": "true"}},
            "spec": {"containers": [{"name": "main", "image": "registry.example.com/team/app:1.2.3",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "env": [{"name": "MODE", "value": "production"}]}],
                "nodeName": format!("node-{}", i % 20), "serviceAccountName": "default"},
            "status": {"phase": "Running", "podIP": format!("10.0.{}.{}", i / 250, i % 250),
                "conditions": [{"type": "Ready", "status": "True"}]}
        });
        writeln!(out, "---\n{pod}").expect("write");
    }
}

/// A kube-sim process serving the seeded pods.
pub struct KubeSim {
    child: Child,
    pub kubeconfig: PathBuf,
    pub url: String,
}

impl KubeSim {
    /// Starts `bin` seeded from `work/seed`, writing `work/kubeconfig`.
    pub fn start(bin: &Path, work: &Path) -> KubeSim {
        let kubeconfig = work.join("kubeconfig");
        let mut child = Command::new(bin)
            .args(["--port", "0", "--history", "50000", "--seed"])
            .arg(work.join("seed"))
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "start {}: {e} (run `cargo build --release -p kube-sim`)",
                    bin.display()
                )
            });
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("listening line");
        let url = line.trim().trim_start_matches("listening on ").to_string();
        KubeSim {
            child,
            kubeconfig,
            url,
        }
    }
}

impl Drop for KubeSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates namespaces `ns-0`..`ns-9` and every pod of `seed_file` through the API
/// of a real server, from 8 threads; returns how many pods it created.
pub fn seed_api(client: &Client, seed_file: &Path) -> Result<usize, String> {
    create_namespaces(client)?;
    create_pods(client, seed_file)
}

/// Creates namespaces `ns-0`..`ns-9`.
pub fn create_namespaces(client: &Client) -> Result<(), String> {
    let namespaces = client
        .resolve("v1", "Namespace", "bench")
        .map_err(|e| e.to_string())?;
    for n in 0..10 {
        client
            .api(&namespaces, None)
            .create(&serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n}")}}))
            .map_err(|e| format!("create namespace ns-{n}: {e}"))?;
    }
    Ok(())
}

/// Creates every pod of `seed_file` from 8 threads; returns how many.
pub fn create_pods(client: &Client, seed_file: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(seed_file).map_err(|e| e.to_string())?;
    let pods: Vec<serde_json::Value> = text
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let resource = client
        .resolve("v1", "Pod", "bench")
        .map_err(|e| e.to_string())?;
    std::thread::scope(|s| {
        let workers: Vec<_> = pods
            .chunks(pods.len().div_ceil(8).max(1))
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
    Ok(pods.len())
}

/// A client for `kubeconfig` with no client-side rate limit.
pub fn client_for(kubeconfig: &Path) -> Client {
    let settings = KubeSettings {
        kubeconfig: kubeconfig.display().to_string(),
        qps: -1.0,
        ..KubeSettings::default()
    };
    Client::from_config(&settings).expect("client")
}

/// A client for `sim` with no client-side rate limit.
pub fn client(sim: &KubeSim) -> Client {
    let settings = KubeSettings {
        kubeconfig: sim.kubeconfig.display().to_string(),
        qps: -1.0,
        ..KubeSettings::default()
    };
    Client::from_config(&settings).expect("client")
}

/// A monitor thread with one hook whose only binding is `binding` (YAML under
/// `kubernetes:`), its jqFilter `filter` compiled as the operator does.
pub struct MonitorRun {
    pub store: Arc<SnapshotStore>,
    control: crossbeam_channel::Sender<Control>,
    stop: Option<crossbeam_channel::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MonitorRun {
    pub fn start(client: &Client, binding: &str, filter: &str) -> MonitorRun {
        let text = format!("configVersion: v1\nkubernetes:\n- name: pods\n  {binding}");
        let config = hook::config::parse("bench.sh", &text).expect("config");
        let jq = shell_operator::jq::JqFilter::compile(filter, None, &[]).expect("jq");
        let hook = Hook {
            name: "bench.sh".into(),
            path: PathBuf::from("/bin/true"),
            limiter: Arc::new(Mutex::new(
                shell_operator::hook::limiter::TokenBucket::from_settings(&config.settings),
            )),
            config_sum: 0,
            retired: false,
            jq_filters: vec![Some(Arc::new(jq))],
            config,
        };
        let store = Arc::new(SnapshotStore::new([(0, 1)]));
        let (events, _) = crossbeam_channel::unbounded();
        let metrics = Arc::new(Metrics::new("bench_").expect("metrics"));
        let (watch_tx, watch_rx) = crossbeam_channel::unbounded();
        let monitor = Monitor::new(
            client.clone(),
            Arc::new(vec![hook]).into(),
            Arc::clone(&store),
            metrics,
            watch_tx,
            watch_rx,
            events,
        );
        let (control, control_rx) = crossbeam_channel::unbounded();
        let (stop, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let thread = std::thread::spawn(move || monitor.run(control_rx, stop_rx));
        MonitorRun {
            store,
            control,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Enables the binding; returns once its snapshot holds the initial list.
    pub fn enable(&self) {
        let (reply, reply_rx) = crossbeam_channel::bounded(1);
        self.control
            .send(Control::Enable { hook: 0, reply })
            .expect("enable");
        reply_rx.recv().expect("reply").expect("enabled");
    }
}

impl Drop for MonitorRun {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
