//! A real Kubernetes control plane for tests: etcd and kube-apiserver, built from
//! their Go modules by `scripts/install-control-plane.sh`, run on loopback.
//!
//! What it sets up (docs/testing-real-api-server.md has the whole story):
//! - etcd on a tmpfs directory when one exists, one member, no fsync;
//! - kube-apiserver on `https://127.0.0.1:<port>` with certificates made by openssl,
//!   RBAC authorization, objects stored as JSON (so tests can change etcd behind its
//!   back) and no automatic compaction (tests compact when they want a 410);
//! - `admin.kubeconfig` (group `system:masters`) and `operator.kubeconfig`, a token of
//!   the ServiceAccount `shell-operator/shell-operator` bound by `deploy/rbac.yaml`.
//!
//! There is no kubelet, scheduler or controller-manager: pods stay Pending, nobody
//! deletes a namespace's content, so tests isolate themselves by namespace and never
//! delete one. The ServiceAccount admission plugin is off, since no controller
//! creates the `default` ServiceAccount a pod would otherwise need.
//!
//! One process per test binary ([`shared`]); the servers get SIGKILL when that process
//! ends (they are started from a thread that lives as long as the process, with
//! `PR_SET_PDEATHSIG`). The `control-plane` binary runs one in the foreground.

mod endpoint;
pub mod etcd;
pub mod fixtures;
pub mod pki;
mod spawn;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use endpoint::WebhookEndpoint;
pub use etcd::Etcd;
pub use spawn::{logged_and_tied, wait_for_stop_signal};

/// A running etcd + kube-apiserver pair and the files to reach it.
pub struct ControlPlane {
    dir: PathBuf,
    data_dir: PathBuf,
    bins: PathBuf,
    kubectl: PathBuf,
    api_port: u16,
    etcd: Etcd,
    etcd_child: Mutex<Option<Child>>,
    apiserver_child: Mutex<Option<Child>>,
}

/// The repository root (this crate lives in `tests/control-plane`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The kubectl the tests use: `.tools/bin/kubectl` (scripts/install-k8s-clients.sh),
/// else the one on PATH.
pub fn kubectl_path() -> PathBuf {
    let local = repo_root().join(".tools/bin/kubectl");
    if local.exists() {
        local
    } else {
        PathBuf::from("kubectl")
    }
}

/// kubectl's arguments for one object as stored, as JSON (managedFields included;
/// nothing printed when it does not exist).
pub fn get_args<'a>(kind: &'a str, namespace: &'a str, name: &'a str) -> [&'a str; 9] {
    [
        "-n",
        namespace,
        "get",
        kind,
        name,
        "-o",
        "json",
        "--ignore-not-found",
        "--show-managed-fields",
    ]
}

/// Builds (once) or finds the binaries; returns their directory.
pub fn install() -> Result<PathBuf, String> {
    let script = repo_root().join("scripts/install-control-plane.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}); it needs Go and the Go module proxy",
            script.display(),
            out.status
        ));
    }
    let dir = stdout.lines().last().unwrap_or_default().trim();
    Ok(PathBuf::from(dir))
}

/// A free port on 127.0.0.1 (bound and released; good enough on a test machine).
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// The process-wide control plane of this test binary, started on first use.
/// Panics with the reason when it cannot start: a test that needs it cannot run.
pub fn shared() -> &'static ControlPlane {
    static SHARED: OnceLock<ControlPlane> = OnceLock::new();
    SHARED.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("control-plane-{}", std::process::id()));
        ControlPlane::start(&dir).unwrap_or_else(|e| panic!("control plane: {e}"))
    })
}

/// Removes the directories of earlier test processes that are gone (a shared control
/// plane is never dropped, so its files outlive it).
fn remove_stale_dirs() {
    for root in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix("control-plane-")
                .and_then(|p| p.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver with their files in `dir` (made anew), waits
    /// until the API server is ready, applies `deploy/namespace.yaml` and
    /// `deploy/rbac.yaml` and writes both kubeconfigs.
    pub fn start(dir: &Path) -> Result<ControlPlane, String> {
        remove_stale_dirs();
        let bins = install()?;
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmpfs = Path::new("/dev/shm");
        let data_root = if tmpfs.is_dir() { tmpfs } else { dir };
        let data_dir = data_root.join(format!(
            "control-plane-{}-etcd-{}",
            std::process::id(),
            free_port()?
        ));
        pki::make(dir)?;
        let cp = ControlPlane {
            dir: dir.to_path_buf(),
            data_dir,
            bins,
            kubectl: kubectl_path(),
            api_port: free_port()?,
            etcd: Etcd { port: free_port()? },
            etcd_child: Mutex::new(None),
            apiserver_child: Mutex::new(None),
        };
        cp.write_admin_kubeconfig()?;
        cp.start_etcd()?;
        cp.start_apiserver()?;
        cp.apply_deploy_rbac()?;
        Ok(cp)
    }

    fn start_etcd(&self) -> Result<(), String> {
        let peer = free_port()?;
        let client = format!("http://127.0.0.1:{}", self.etcd.port);
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new(self.bins.join("etcd"));
        cmd.arg("--name=cp")
            .arg(format!("--data-dir={}", self.data_dir.display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=cp={peer_url}"))
            .arg("--unsafe-no-fsync=true")
            .arg("--log-level=warn");
        let child = spawn::kept(cmd, &self.dir.join("etcd.log"))?;
        *self.etcd_child.lock().expect("etcd lock") = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.etcd.revision().is_err() {
            if Instant::now() > deadline {
                return Err(format!(
                    "etcd did not answer in 30 s; {}",
                    self.log_tail("etcd.log")
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    fn apiserver_command(&self) -> Command {
        let d = |f: &str| self.dir.join(f).display().to_string();
        let mut cmd = Command::new(self.bins.join("kube-apiserver"));
        cmd.arg(format!(
            "--etcd-servers=http://127.0.0.1:{}",
            self.etcd.port
        ))
        .arg("--bind-address=127.0.0.1")
        .arg("--advertise-address=127.0.0.1")
        // No node and no pod here, so nothing needs the `kubernetes` Service's
        // endpoints; reconciling them to a loopback address logged "may not be in
        // the loopback range" every 10 s (issue 37). The node tier advertises its
        // bridge address instead (tests/node-support).
        .arg("--endpoint-reconciler-type=none")
        .arg(format!("--secure-port={}", self.api_port))
        .arg(format!("--cert-dir={}", d("certs")))
        .arg(format!("--tls-cert-file={}", d("apiserver.crt")))
        .arg(format!("--tls-private-key-file={}", d("apiserver.key")))
        .arg(format!("--client-ca-file={}", d("ca.crt")))
        .arg(format!("--service-account-key-file={}", d("sa.pub")))
        .arg(format!(
            "--service-account-signing-key-file={}",
            d("sa.key")
        ))
        .arg("--service-account-issuer=https://kubernetes.default.svc")
        .arg("--service-cluster-ip-range=10.0.0.0/24")
        .arg("--authorization-mode=RBAC")
        .arg("--disable-admission-plugins=ServiceAccount")
        .arg("--storage-media-type=application/json")
        .arg("--etcd-compaction-interval=0")
        .arg("--profiling=false")
        .arg("--v=1");
        cmd
    }

    /// Starts kube-apiserver (again, after [`kill_apiserver`](Self::kill_apiserver))
    /// on the same port and waits until `/readyz` answers ok.
    pub fn start_apiserver(&self) -> Result<(), String> {
        let child = spawn::kept(self.apiserver_command(), &self.dir.join("apiserver.log"))?;
        *self.apiserver_child.lock().expect("apiserver lock") = Some(child);
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(text) = self.kubectl(&["get", "--raw", "/readyz"])
                && text.trim() == "ok"
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "kube-apiserver not ready in 90 s; {}",
                    self.log_tail("apiserver.log")
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGKILLs kube-apiserver (etcd keeps running) and waits for it to be gone.
    pub fn kill_apiserver(&self) {
        if let Some(mut child) = self.apiserver_child.lock().expect("apiserver lock").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last lines of one of the servers' logs, for error messages.
    pub fn log_tail(&self, file: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(15);
        format!(
            "last lines of {}:\n{}",
            self.dir.join(file).display(),
            lines[from..].join("\n")
        )
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// The directory holding certificates, kubeconfigs and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA that signed the API server's certificate (and may sign test servers').
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// etcd's gateway.
    pub fn etcd(&self) -> &Etcd {
        &self.etcd
    }

    /// The cluster-admin kubeconfig.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// The kubeconfig of `deploy/rbac.yaml`'s ServiceAccount `shell-operator`.
    pub fn operator_kubeconfig(&self) -> PathBuf {
        self.dir.join("operator.kubeconfig")
    }

    fn write_admin_kubeconfig(&self) -> Result<(), String> {
        let user = format!(
            "    client-certificate: {}\n    client-key: {}\n",
            self.dir.join("admin.crt").display(),
            self.dir.join("admin.key").display()
        );
        self.write_kubeconfig(&self.admin_kubeconfig(), "admin", &user)
    }

    fn write_kubeconfig(&self, path: &Path, name: &str, user: &str) -> Result<(), String> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: control-plane\n  cluster:\n    \
             server: {}\n    certificate-authority: {}\nusers:\n- name: {name}\n  user:\n{user}\
             contexts:\n- name: {name}\n  context:\n    cluster: control-plane\n    user: {name}\n\
             current-context: {name}\n",
            self.url(),
            self.ca_file().display()
        );
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes a kubeconfig that authenticates with a token of ServiceAccount
    /// `namespace/name` (TokenRequest, valid 24 h) and returns its path.
    pub fn token_kubeconfig(&self, namespace: &str, name: &str) -> Result<PathBuf, String> {
        let token = self.kubectl(&["-n", namespace, "create", "token", name, "--duration=24h"])?;
        let path = self.dir.join(format!("sa-{namespace}-{name}.kubeconfig"));
        let user = format!("    token: {}\n", token.trim());
        self.write_kubeconfig(&path, &format!("{namespace}-{name}"), &user)?;
        Ok(path)
    }

    fn apply_deploy_rbac(&self) -> Result<(), String> {
        let deploy = repo_root().join("deploy");
        for file in ["namespace.yaml", "rbac.yaml"] {
            let path = deploy.join(file).display().to_string();
            self.kubectl(&["apply", "-f", &path])?;
        }
        let path = self.token_kubeconfig("shell-operator", "shell-operator")?;
        std::fs::rename(&path, self.operator_kubeconfig()).map_err(|e| e.to_string())
    }

    /// Runs kubectl as cluster-admin; returns stdout, or an error with stderr.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        self.kubectl_as(&self.admin_kubeconfig(), args, None)
    }

    /// Runs kubectl with `kubeconfig`, feeding `stdin` if given.
    pub fn kubectl_as(
        &self,
        kubeconfig: &Path,
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<String, String> {
        spawn::run(
            Command::new(&self.kubectl)
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .arg("--request-timeout=30s")
                .args(args),
            stdin,
        )
        .map_err(|e| format!("kubectl {}: {e}", args.join(" ")))
    }

    /// `kubectl apply -f -` of `yaml` as cluster-admin.
    pub fn apply(&self, yaml: &str) -> Result<String, String> {
        self.kubectl_as(&self.admin_kubeconfig(), &["apply", "-f", "-"], Some(yaml))
    }

    /// `kubectl get -o json` of one object as stored (managedFields included), parsed;
    /// `None` when it does not exist.
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<serde_json::Value> {
        let text = self.kubectl(&get_args(kind, namespace, name)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Creates a namespace of its own for one test: `<prefix>-<n>`, unique in this
    /// process and across processes (the pid is part of it). Never deleted.
    pub fn namespace(&self, prefix: &str) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        self.kubectl(&["create", "namespace", &name])
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        name
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill_apiserver();
        if let Some(mut child) = self.etcd_child.lock().expect("etcd lock").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}
