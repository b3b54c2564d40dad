//! kube-sim: an in-memory Kubernetes API server that speaks the real wire
//! protocol on loopback, for tests (this library) and demos (the `kube-sim`
//! binary). Real `kubectl` and `helm` work against it; see `docs/kube-sim.md`.
//!
//! # Layout
//! - [`Sim`] (this file): start/stop, direct store access, fault injection.
//! - `server`: accept loop, per-connection threads, faults, auth; `http`: HTTP/1.1;
//!   `clients`: one client's pause and cut.
//! - `router` → `handlers` (CRUD, patch, list; `scale`) / `watch` (streams) / `discovery`
//!   (group and resource lists) / `openapi` (v2 and v3 documents).
//! - `store`: objects, the resourceVersion counter, history, subscriptions;
//!   `objmeta`: the metadata rules it applies on writes.
//! - `registry`: built-in kinds (the table in `builtins`) and CRD-defined resources;
//!   `crd`: CRD write rules.
//! - `certs`: openssl-made test certificates for TLS tests; `controllers`:
//!   opt-in instant readiness for workloads.
//! - `listopts`: list/watch option validation; `typing`: the decoder's type checks
//!   (400); `validation`: field validation (422), both worded as kube-apiserver's.
//! - `admission` (+ `admission_match`, `admitted`): admission webhooks on writes;
//!   `conversion`: CRD conversion webhooks; `webhook_client` (+ `webhook_http`): the
//!   HTTPS client both use.
//! - `defaults`, `selector`, `patch` + `strategic`, `table`, `protobuf`, `seed`, `tls`, `util`: helpers.

mod admission;
mod admission_match;
mod admitted;
mod builtins;
pub mod certs;
mod clients;
mod controllers;
mod conversion;
mod crd;
mod defaults;
mod discovery;
mod handlers;
mod http;
mod listopts;
mod objmeta;
mod openapi;
mod patch;
pub mod protobuf;
mod registry;
mod router;
mod scale;
mod seed;
pub mod selector;
mod server;
mod status;
mod store;
mod strategic;
mod table;
mod tls;
mod typing;
mod util;
mod validation;
mod watch;
mod webhook_client;
mod webhook_http;

pub use seed::parse_docs;
pub use status::ApiError;

use serde_json::Value;
use server::{FailRule, Faults, Shared, lock};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Store, WriteMode};

/// PEM files for HTTPS mode.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// When set, client certificates signed by this CA authenticate requests.
    pub client_ca: Option<PathBuf>,
}

/// How to start a [`Sim`].
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Directory of manifests to create at start.
    pub seed_dir: Option<PathBuf>,
    /// Serve HTTPS with these files instead of plain HTTP.
    pub tls: Option<TlsFiles>,
    /// Change events kept for watch replay and paged lists (older → 410).
    pub history_limit: usize,
    /// Require `Authorization: Bearer <token>` (or a verified client cert).
    pub require_token: Option<String>,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            seed_dir: None,
            tls: None,
            history_limit: 10_000,
            require_token: None,
        }
    }
}

/// A running kube-sim server; it stops when dropped.
pub struct Sim {
    shared: Arc<Shared>,
    addr: std::net::SocketAddr,
    token: Option<String>,
}

impl Sim {
    /// Starts plain HTTP on a random loopback port. Panics if that fails (test helper).
    pub fn start() -> Sim {
        match Sim::start_with(SimOptions::default()) {
            Ok(s) => s,
            Err(e) => panic!("kube-sim failed to start: {e}"),
        }
    }

    /// Starts with options on a random loopback port.
    pub fn start_with(opts: SimOptions) -> std::io::Result<Sim> {
        Sim::start_on(0, opts)
    }

    /// Starts with options on a given loopback port (0 = any free port).
    pub fn start_on(port: u16, opts: SimOptions) -> std::io::Result<Sim> {
        let tls = opts.tls.as_ref().map(tls::server_config).transpose()?;
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let addr = listener.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(opts.history_limit)),
            faults: Mutex::new(Faults::default()),
            log: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            conns: Mutex::new(Default::default()),
            next_conn: AtomicU64::new(1),
            require_token: opts.require_token.clone(),
            clients: Default::default(),
            bookmark_ms: AtomicU64::new(1000),
            no_watch_list: AtomicBool::new(false),
            trace: std::env::var_os("KUBE_SIM_TRACE").is_some_and(|v| !v.is_empty() && v != "0"),
            url: format!("{scheme}://{addr}"),
        });
        let sim = Sim {
            shared: shared.clone(),
            addr,
            token: opts.require_token.clone(),
        };
        if let Some(dir) = &opts.seed_dir {
            sim.seed(dir)?;
        }
        server::spawn_acceptor(listener, shared, tls);
        Ok(sim)
    }

    fn seed(&self, dir: &Path) -> std::io::Result<()> {
        let objs = seed::load_dir(dir).map_err(std::io::Error::other)?;
        for o in objs {
            let what = format!(
                "{} {}",
                o["kind"].as_str().unwrap_or("?"),
                o["metadata"]["name"].as_str().unwrap_or("?")
            );
            self.create(o)
                .map_err(|e| std::io::Error::other(format!("seeding {what}: {e}")))?;
        }
        Ok(())
    }

    /// Base URL: `http://127.0.0.1:PORT` (or https).
    pub fn url(&self) -> String {
        self.shared.url.clone()
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Writes a kubeconfig (context `kube-sim`) pointing at this server. For
    /// HTTPS it sets `insecure-skip-tls-verify`; the token is included when required.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let tls = if self.shared.url.starts_with("https") {
            "\n    insecure-skip-tls-verify: true"
        } else {
            ""
        };
        let user = match &self.token {
            Some(t) => format!("\n    token: {t}"),
            None => " {}".to_string(),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-sim\n  cluster:\n    server: {}{tls}\n\
             contexts:\n- name: kube-sim\n  context:\n    cluster: kube-sim\n    user: kube-sim\n    namespace: default\n\
             current-context: kube-sim\nusers:\n- name: kube-sim\n  user:{user}\n",
            self.shared.url
        );
        std::fs::write(path, text)
    }

    /// Like [`write_kubeconfig`](Self::write_kubeconfig) with bearer token `client`,
    /// which names this client for [`pause_client`](Self::pause_client) and
    /// [`cut_client`](Self::cut_client). Not for a Sim that requires a token.
    pub fn write_kubeconfig_for(&self, path: &Path, client: &str) -> std::io::Result<()> {
        self.write_kubeconfig(path)?;
        let text = std::fs::read_to_string(path)?;
        let user = format!("user:\n    token: {client}\n");
        std::fs::write(path, text.replace("user: {}\n", &user))
    }

    fn resource_of(&self, obj: &Value) -> Result<registry::ResourceType, String> {
        let (av, kind) = (
            obj["apiVersion"].as_str().unwrap_or(""),
            obj["kind"].as_str().unwrap_or(""),
        );
        self.shared
            .store()
            .registry
            .by_kind(av, kind)
            .cloned()
            .ok_or_else(|| format!("no resource for apiVersion {av:?} kind {kind:?}"))
    }

    /// Creates an object directly (status kept as given). Bumps the RV and notifies watches.
    pub fn create(&self, obj: Value) -> Result<Value, String> {
        let rt = self.resource_of(&obj)?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        self.shared
            .store()
            .create(&rt, &ns, obj, WriteMode::Whole, false)
            .map_err(|e| e.to_string())
    }

    /// Reads an object (`namespace` is ignored for cluster-scoped kinds).
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let st = self.shared.store();
        let rt = st.registry.by_kind(api_version, kind)?.clone();
        st.get(&rt, namespace, name).ok()
    }

    /// Replaces an object whole (including status). A non-empty stale resourceVersion fails.
    pub fn update(&self, obj: Value) -> Result<Value, String> {
        let rt = self.resource_of(&obj)?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        self.shared
            .store()
            .update(&rt, &ns, &name, obj, WriteMode::Whole, false)
            .map_err(|e| e.to_string())
    }

    /// Deletes an object (finalizers are honoured: it is then only marked).
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), String> {
        let mut st = self.shared.store();
        let rt = st
            .registry
            .by_kind(api_version, kind)
            .cloned()
            .ok_or_else(|| format!("no resource for {api_version} {kind}"))?;
        st.delete(&rt, namespace, name, None, None, false)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Objects of a kind; `namespace` "" means all namespaces.
    pub fn list(&self, api_version: &str, kind: &str, namespace: &str) -> Vec<Value> {
        let st = self.shared.store();
        let Some(rt) = st.registry.by_kind(api_version, kind).cloned() else {
            return Vec::new();
        };
        st.list(&rt)
            .into_iter()
            .filter(|o| {
                namespace.is_empty() || o["metadata"]["namespace"].as_str() == Some(namespace)
            })
            .collect()
    }

    /// The current resourceVersion of the whole store.
    pub fn resource_version(&self) -> String {
        self.shared.store().rv().to_string()
    }

    /// How often idle watches with `allowWatchBookmarks` get a BOOKMARK (default 1 s, minimum 10 ms).
    pub fn set_bookmark_interval(&self, d: Duration) {
        let ms = d.as_millis().clamp(10, u128::from(u32::MAX)) as u64;
        self.shared.bookmark_ms.store(ms, Ordering::SeqCst);
    }

    /// When on, workloads (Deployments, StatefulSets, ReplicaSets, DaemonSets,
    /// Jobs, Pods) get a ready/complete status right after each write, as a
    /// separate MODIFIED event, so rollout waits finish. Off by default.
    pub fn set_auto_ready(&self, on: bool) {
        self.shared.store().auto_ready = on;
    }

    /// When on, creating a namespaced object in a namespace that does not exist
    /// fails with 404 `namespaces "x" not found`, as on a real server. Off by
    /// default, so tests may use any namespace without creating it.
    pub fn set_strict_namespaces(&self, on: bool) {
        self.shared.store().strict_namespaces = on;
    }

    /// Off: watches with `sendInitialEvents` are refused with 422, as by a server
    /// whose WatchList feature is off (1.33's default, or older than 1.27), so
    /// clients must fall back to paged LISTs. On (the default): 1.35's behaviour.
    pub fn set_watch_list(&self, on: bool) {
        self.shared.no_watch_list.store(!on, Ordering::SeqCst);
    }

    /// Ends every open watch stream now.
    pub fn drop_watches(&self) {
        self.shared.store().drop_watches();
    }

    /// Number of open watch streams.
    pub fn watch_count(&self) -> usize {
        self.shared.store().watch_count()
    }

    /// Forgets history: watches and continue tokens from older RVs get 410 Expired.
    pub fn compact(&self) {
        self.shared.store().compact();
    }

    /// The next `n` requests answer `code` with a Status body (429 adds Retry-After: 1).
    pub fn fail_next(&self, n: usize, code: u16) {
        let mut f = lock(&self.shared.faults);
        f.fail_left = n;
        f.fail_code = code;
    }

    /// The next `n` requests whose `VERB /path?query` line (as in `requests()`)
    /// contains `pattern` answer `code` with a Status; other requests are served
    /// normally. Example: `sim.fail_matching("PUT /api/v1/namespaces/a/configmaps/x", 2, 409)`.
    pub fn fail_matching(&self, pattern: &str, n: usize, code: u16) {
        lock(&self.shared.faults).rules.push(FailRule {
            pattern: pattern.to_string(),
            left: n,
            code,
        });
    }

    /// Delays every response by `d` (zero to stop).
    pub fn set_delay(&self, d: Duration) {
        lock(&self.shared.faults).delay = d;
    }

    /// Requests of `client` (its bearer token) hang until [`resume_client`](Self::resume_client);
    /// its open watch streams keep streaming.
    pub fn pause_client(&self, client: &str) {
        self.shared.clients.pause(client);
    }

    /// Serves `client`'s held and new requests again.
    pub fn resume_client(&self, client: &str) {
        self.shared.clients.resume(client);
    }

    /// Closes `client`'s open connections (watches too) and closes every new
    /// connection of it at its first request, unanswered, until
    /// [`restore_client`](Self::restore_client): the client sees a network failure.
    pub fn cut_client(&self, client: &str) {
        self.shared.clients.cut(client);
    }

    /// Ends [`cut_client`](Self::cut_client) for `client`.
    pub fn restore_client(&self, client: &str) {
        self.shared.clients.restore(client);
    }

    /// Requests of `client` (its bearer token; "" for none) served so far.
    pub fn client_requests(&self, client: &str) -> usize {
        self.shared.clients.served(client)
    }

    /// Requests served so far.
    pub fn request_count(&self) -> usize {
        self.shared.count.load(Ordering::SeqCst)
    }

    /// `VERB /path?query` for every request so far, in order.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.shared.log).clone()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.store().drop_watches();
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        for (_, c) in lock(&self.shared.conns).drain() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}
