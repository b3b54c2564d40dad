//! A real single-node Kubernetes for the node tier (tests/node) and for people
//! (`make node`): etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
//! containerd, kubelet and kube-proxy, built by `scripts/install-control-plane.sh` and
//! `scripts/install-node.sh`, with the images the tier needs built locally (no
//! registry: `imagePullPolicy: Never`).
//!
//! Network rule: everything stays on this machine. The API server, the kubelet and the
//! pods use a bridge made here ([`host::BRIDGE`], node IP [`host::NODE_IP`]); pods have
//! no default route and the guard chain drops anything leaving the bridge.
//!
//! [`Node::start`] records the host first ([`host`]); dropping the [`Node`] stops every
//! process by its pid and undoes every host change, also when a start step failed.
//! Needs root. Start it from a thread that outlives it (its processes die with the
//! thread that started them: `PR_SET_PDEATHSIG`).

pub mod config;
pub mod host;
pub mod images;
mod procs;

use crate::procs::{Procs, log_tail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use images::{ADDON_IMAGE, BUSYBOX_IMAGE, OPERATOR_IMAGE};

/// A running node.
pub struct Node {
    dir: PathBuf,
    api_port: u16,
    kubectl: PathBuf,
    cp_bins: PathBuf,
    node_bins: PathBuf,
    procs: Procs,
    host: Option<host::Host>,
    /// Seconds from the start to each stage, for the tier's report.
    pub timings: Vec<(&'static str, f64)>,
}

/// Runs an install script; its last stdout line is the directory of its binaries.
fn install(script: &str) -> Result<PathBuf, String> {
    let path = control_plane::repo_root().join("scripts").join(script);
    let out = Command::new("bash")
        .arg(&path)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed ({})", path.display(), out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(PathBuf::from(
        text.lines().last().unwrap_or_default().trim(),
    ))
}

/// A free TCP port on `ip`.
fn free_port(ip: &str) -> Result<u16, String> {
    let l = std::net::TcpListener::bind((ip, 0)).map_err(|e| format!("bind {ip}:0: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// The static release build `make static` makes (Dockerfile.scratch copies it), or
/// the file `SO_NODE_OPERATOR` names.
pub fn static_operator() -> PathBuf {
    match std::env::var_os("SO_NODE_OPERATOR") {
        Some(p) => PathBuf::from(p),
        None => control_plane::repo_root()
            .join("target/x86_64-unknown-linux-musl/release/shell-operator"),
    }
}

impl Node {
    /// Builds (once) what is missing, starts everything with its files in `dir` and
    /// waits until the node is Ready and the `default` ServiceAccount exists.
    pub fn start(dir: &Path) -> Result<Node, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("the node tier needs root (bridge, iptables, containerd, kubelet)".into());
        }
        let started = Instant::now();
        let cp_bins = install("install-control-plane.sh")?;
        let node_bins = install("install-node.sh")?;
        let operator = static_operator();
        if !operator.exists() {
            return Err(format!(
                "{} is missing: run `make static` first",
                operator.display()
            ));
        }
        let host = host::Host::record(dir)?;
        let mut node = Node {
            dir: dir.to_path_buf(),
            api_port: 0,
            kubectl: control_plane::kubectl_path(),
            cp_bins,
            node_bins,
            procs: Procs::default(),
            host: Some(host),
            timings: Vec::new(),
        };
        // From here on, an error drops `node`: what started stops, the host is undone.
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mark = |node: &mut Node, stage: &'static str| {
            node.timings.push((stage, started.elapsed().as_secs_f64()));
        };
        mark(&mut node, "binaries");
        node.host.as_ref().ok_or("no host record")?.network()?;
        node.api_port = free_port(host::NODE_IP)?;
        config::pki(&dir.join("pki"), &node.url())?;
        mark(&mut node, "bridge and certificates");
        node.start_etcd_and_apiserver()?;
        mark(&mut node, "kube-apiserver ready");
        node.start_controllers()?;
        node.start_containerd()?;
        mark(&mut node, "containerd up");
        let docker = images::Docker::start(dir, &mut node.procs)?;
        docker.build_images(dir, &operator)?;
        let sock = dir.join("containerd/containerd.sock");
        for image in [
            config::PAUSE_IMAGE,
            BUSYBOX_IMAGE,
            OPERATOR_IMAGE,
            ADDON_IMAGE,
        ] {
            docker.import(image, &sock)?;
        }
        node.procs.stop("dockerd", Duration::from_secs(10));
        mark(&mut node, "images built and imported");
        node.start_kubelet_and_proxy()?;
        node.wait_ready()?;
        mark(&mut node, "node Ready");
        Ok(node)
    }

    /// `https://<node IP>:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}:{}", host::NODE_IP, self.api_port)
    }

    /// The cluster-admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("pki/admin.kubeconfig")
    }

    /// The node's directory (logs: `*.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs kubectl as cluster-admin; stdout, or an error with stderr.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        procs::run(
            Command::new(&self.kubectl)
                .arg("--kubeconfig")
                .arg(self.kubeconfig())
                .arg("--request-timeout=30s")
                .args(args),
        )
    }

    /// `kubectl apply -f -` of `yaml`.
    pub fn apply(&self, yaml: &str) -> Result<String, String> {
        let path = self.dir.join(format!("apply-{}.yaml", std::process::id()));
        std::fs::write(&path, yaml).map_err(|e| e.to_string())?;
        let path = path.display().to_string();
        self.kubectl(&["apply", "-f", &path])
    }

    /// The last lines of one of the node's logs (`kubelet.log`, ...).
    pub fn log_tail(&self, file: &str) -> String {
        log_tail(&self.dir.join(file), 30)
    }

    fn start_etcd_and_apiserver(&mut self) -> Result<(), String> {
        let d = self.dir.clone();
        let (client, peer) = (free_port("127.0.0.1")?, free_port("127.0.0.1")?);
        let data = d.join("etcd");
        let mut etcd = Command::new(self.cp_bins.join("etcd"));
        etcd.arg("--name=node")
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
            ))
            .arg(format!("--initial-cluster=node=http://127.0.0.1:{peer}"))
            .args(["--unsafe-no-fsync=true", "--log-level=warn"]);
        self.procs.start("etcd", etcd, &d.join("etcd.log"))?;
        let p = |f: &str| d.join("pki").join(f).display().to_string();
        let mut api = Command::new(self.cp_bins.join("kube-apiserver"));
        api.arg(format!("--etcd-servers=http://127.0.0.1:{client}"))
            .arg(format!("--bind-address={}", host::NODE_IP))
            // The node IP, so the `kubernetes` Service's endpoint is real: kube-proxy
            // sends pods' 10.0.0.1:443 there (not loopback, which the endpoints
            // reconciler refuses every 10 s).
            .arg(format!("--advertise-address={}", host::NODE_IP))
            .arg(format!("--secure-port={}", self.api_port))
            .arg(format!(
                "--cert-dir={}",
                d.join("apiserver-certs").display()
            ))
            .arg(format!("--tls-cert-file={}", p("apiserver.crt")))
            .arg(format!("--tls-private-key-file={}", p("apiserver.key")))
            .arg(format!("--client-ca-file={}", p("ca.crt")))
            .arg(format!("--service-account-key-file={}", p("sa.pub")))
            .arg(format!(
                "--service-account-signing-key-file={}",
                p("sa.key")
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            .arg(format!(
                "--service-cluster-ip-range={}",
                host::SERVICE_SUBNET
            ))
            .arg("--authorization-mode=Node,RBAC")
            .arg("--enable-admission-plugins=NodeRestriction")
            .arg(format!(
                "--kubelet-client-certificate={}",
                p("apiserver-kubelet.crt")
            ))
            .arg(format!(
                "--kubelet-client-key={}",
                p("apiserver-kubelet.key")
            ))
            // Reach the kubelet (logs, exec) by the node IP: its name is in no DNS,
            // and a lookup would leave the machine.
            .arg("--kubelet-preferred-address-types=InternalIP")
            .arg("--allow-privileged=true")
            .arg("--profiling=false")
            .arg("--v=1");
        self.procs
            .start("kube-apiserver", api, &d.join("apiserver.log"))?;
        self.wait("kube-apiserver", 90, |n| {
            n.kubectl(&["get", "--raw", "/readyz"])
                .is_ok_and(|t| t.trim() == "ok")
        })
    }

    fn start_controllers(&mut self) -> Result<(), String> {
        let d = self.dir.clone();
        let p = |f: &str| d.join("pki").join(f).display().to_string();
        let mut kcm = Command::new(self.node_bins.join("kube-controller-manager"));
        kcm.arg(format!("--kubeconfig={}", p("kcm.kubeconfig")))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", free_port("127.0.0.1")?))
            .arg("--leader-elect=false")
            .arg("--use-service-account-credentials=true")
            .arg(format!(
                "--service-account-private-key-file={}",
                p("sa.key")
            ))
            .arg(format!("--root-ca-file={}", p("ca.crt")))
            .arg("--cluster-name=so-node")
            .arg("--v=1");
        self.procs
            .start("kube-controller-manager", kcm, &d.join("kcm.log"))?;
        let mut sched = Command::new(self.node_bins.join("kube-scheduler"));
        sched
            .arg(format!("--kubeconfig={}", p("scheduler.kubeconfig")))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", free_port("127.0.0.1")?))
            .arg("--leader-elect=false")
            .arg("--v=1");
        self.procs
            .start("kube-scheduler", sched, &d.join("scheduler.log"))
    }

    fn start_containerd(&mut self) -> Result<(), String> {
        let d = self.dir.clone();
        for sub in ["containerd", "cni/net.d", "pod-logs", "kubelet"] {
            std::fs::create_dir_all(d.join(sub)).map_err(|e| e.to_string())?;
        }
        let write = |f: &str, text: String| {
            std::fs::write(d.join(f), text).map_err(|e| format!("{f}: {e}"))
        };
        write(
            "containerd/config.toml",
            config::containerd(&d, &self.node_bins.join("cni")),
        )?;
        write("cni/net.d/10-so-node.conflist", config::cni(&d))?;
        let mut cmd = Command::new("containerd");
        cmd.arg("--config").arg(d.join("containerd/config.toml"));
        self.procs
            .start("containerd", cmd, &d.join("containerd.log"))?;
        let sock = d.join("containerd/containerd.sock");
        self.wait("containerd", 30, |_| {
            Command::new("ctr")
                .arg("--address")
                .arg(&sock)
                .arg("version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
    }

    fn start_kubelet_and_proxy(&mut self) -> Result<(), String> {
        let d = self.dir.clone();
        let port = free_port(host::NODE_IP)?;
        let healthz = free_port("127.0.0.1")?;
        std::fs::write(
            d.join("kubelet/config.yaml"),
            config::kubelet(&d, port, healthz),
        )
        .map_err(|e| e.to_string())?;
        let mut kubelet = Command::new(self.node_bins.join("kubelet"));
        kubelet
            .arg(format!(
                "--config={}",
                d.join("kubelet/config.yaml").display()
            ))
            .arg(format!(
                "--kubeconfig={}",
                d.join("pki/kubelet.kubeconfig").display()
            ))
            .arg(format!("--root-dir={}", d.join("kubelet/root").display()))
            .arg(format!("--cert-dir={}", d.join("kubelet/pki").display()))
            .arg(format!("--node-ip={}", host::NODE_IP))
            .arg(format!("--hostname-override={}", config::NODE_NAME))
            .arg("--v=1");
        self.procs
            .start("kubelet", kubelet, &d.join("kubelet.log"))?;
        let (h, m) = (free_port("127.0.0.1")?, free_port("127.0.0.1")?);
        std::fs::write(d.join("kube-proxy.yaml"), config::kube_proxy(&d, h, m))
            .map_err(|e| e.to_string())?;
        let mut proxy = Command::new(self.node_bins.join("kube-proxy"));
        proxy.arg(format!("--config={}", d.join("kube-proxy.yaml").display()));
        self.procs
            .start("kube-proxy", proxy, &d.join("kube-proxy.log"))
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let jsonpath = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
        self.wait("kubelet", 90, |n| {
            n.kubectl(&["get", "node", config::NODE_NAME, "-o", jsonpath])
                .is_ok_and(|t| t.trim() == "True")
        })?;
        // Pods need their namespace's `default` ServiceAccount and kube-root-ca.crt
        // (the controller-manager makes both).
        self.wait("kube-controller-manager", 60, |n| {
            n.kubectl(&["get", "serviceaccount", "default", "-o", "name"])
                .is_ok()
        })
    }

    /// Waits up to `secs` for `ready`, failing early when `name` has exited.
    fn wait(&mut self, name: &str, secs: u64, ready: impl Fn(&Node) -> bool) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if ready(self) {
                return Ok(());
            }
            self.procs.check(name)?;
            if Instant::now() > deadline {
                let log = self.procs_log(name);
                return Err(format!(
                    "{name} not ready in {secs} s; {}",
                    self.log_tail(&log)
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn procs_log(&self, name: &str) -> String {
        match name {
            "kube-apiserver" => "apiserver.log".into(),
            "kube-controller-manager" => "kcm.log".into(),
            "kube-scheduler" => "scheduler.log".into(),
            other => format!("{other}.log"),
        }
    }

    /// Deletes every pod (so the kubelet tears down their networks and mounts), then
    /// stops every process and undoes the host changes.
    fn stop(&mut self) {
        let _ = self.kubectl(&[
            "delete",
            "pods",
            "--all",
            "--all-namespaces",
            "--grace-period=2",
            "--timeout=30s",
        ]);
        self.procs.stop("kubelet", Duration::from_secs(10));
        let sock = self.dir.join("containerd/containerd.sock");
        if let Ok(list) = procs::run(
            Command::new("ctr")
                .arg("--address")
                .arg(&sock)
                .args(["-n", "k8s.io", "tasks", "ls", "-q"]),
        ) {
            for id in list.lines().filter(|l| !l.is_empty()) {
                let ctr = |args: &[&str]| {
                    let _ = procs::run(
                        Command::new("ctr")
                            .arg("--address")
                            .arg(&sock)
                            .args(["-n", "k8s.io", "tasks"])
                            .args(args),
                    );
                };
                ctr(&["kill", "-s", "SIGKILL", id]);
                ctr(&["delete", "-f", id]);
            }
        }
        self.procs.stop_all(Duration::from_secs(10));
        let _ = procs::run(Command::new(self.node_bins.join("kube-proxy")).arg("--cleanup"));
        if let Some(host) = self.host.take() {
            host.undo();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}
