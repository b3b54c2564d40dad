//! Our Kubernetes client: configuration (kubeconfig, in-cluster, exec plugins), one
//! pooled HTTP/1.1 + rustls connection set with QPS limiting, retries and metrics,
//! discovery, object calls and reflectors (list + watch + cache). Synchronous:
//! callers block, each watch runs on its own thread.
//!
//! # Layout
//! - `config`, `kubeconfig`: where the cluster is ([`KubeSettings`] → [`ClusterConfig`]).
//! - `auth`, `tls`: credentials and TLS material.
//! - `http`, `ratelimit`, `backoff`, `metrics`: the transport.
//! - `discovery`: kind → [`Resource`].
//! - `write`: [`Api`], calls on one resource.
//! - `reflector`, `cache`: list/watch state machine and its cache.
//! - `selector`: label and field selector encoding.
//!
//! [`Client`] is cheap to clone and shared by every thread of the operator.

pub(crate) mod auth;
mod backoff;
mod cache;
mod config;
pub mod decode;
mod discovery;
mod error;
mod http;
mod interrupt;
pub(crate) mod kubeconfig;
mod metrics;
mod ratelimit;
pub(crate) mod reflector;
pub mod selector;
mod tls;
mod write;

pub use cache::{Cache, Store};
pub use config::{AuthSettings, ClusterConfig, KubeSettings, SERVICE_ACCOUNT_DIR, TlsSettings};
pub use discovery::Resource;
pub use error::KubeError;
pub use http::RetryPolicy;
pub(crate) use metrics::ClientMetrics;
pub use reflector::{Event, Object, ReflectorHandle, WatchErrorKind, WatchParams};
pub use write::{Api, ListParams, Patch, PatchParams, Propagation};

use std::sync::Arc;

/// A connection to one API server. Clone it freely: clones share the connection
/// pool, the QPS bucket, the discovery cache and the metrics.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    transport: http::Transport,
    discovery: discovery::Discovery,
    namespace: String,
    origin: String,
}

impl Client {
    /// Builds a client from the operator's settings and the process environment
    /// (`KUBECONFIG`, `HOME`, `KUBERNETES_SERVICE_HOST/PORT`, `KUBE_SERVICE_ACCOUNT_DIR`).
    pub fn from_config(settings: &KubeSettings) -> Result<Client, KubeError> {
        let cfg = config::resolve(settings, &config::process_env)?;
        Client::new(&cfg, settings)
    }

    /// Like [`Client::from_config`] with metrics the caller created (e.g. with its prefix).
    pub(crate) fn from_config_with_metrics(
        settings: &KubeSettings,
        metrics: ClientMetrics,
    ) -> Result<Client, KubeError> {
        let cfg = config::resolve(settings, &config::process_env)?;
        Client::with_metrics(&cfg, settings, metrics)
    }

    /// Builds a client for an already resolved configuration; `settings` gives QPS,
    /// burst, timeout and the metrics component.
    pub fn new(cfg: &ClusterConfig, settings: &KubeSettings) -> Result<Client, KubeError> {
        let metrics = ClientMetrics::new("", &settings.component);
        Client::with_metrics(cfg, settings, metrics)
    }

    /// Like [`Client::new`] with metrics the caller created (e.g. with its prefix).
    pub(crate) fn with_metrics(
        cfg: &ClusterConfig,
        settings: &KubeSettings,
        metrics: ClientMetrics,
    ) -> Result<Client, KubeError> {
        let transport =
            http::Transport::new(cfg, settings.qps, settings.burst, settings.timeout, metrics)?;
        Ok(Client {
            inner: Arc::new(Inner {
                transport,
                discovery: discovery::Discovery::new(),
                namespace: cfg.namespace.clone(),
                origin: cfg.origin.clone(),
            }),
        })
    }

    /// Replaces the retry policy (tests shorten delays). Only before sharing.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Client {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.transport.retry = retry;
        }
        self
    }

    /// The default namespace (context namespace or the pod's).
    pub fn default_namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// Where the configuration came from, for startup logs.
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }

    /// This client's request metrics, for registration.
    pub fn metrics(&self) -> &ClientMetrics {
        &self.inner.transport.metrics
    }

    pub(crate) fn transport(&self) -> &http::Transport {
        &self.inner.transport
    }

    /// Resolves a hook's `apiVersion` (may be empty) and `kind` (any spelling) to a
    /// resource; `context` (e.g. `hook a.sh, binding pods`) prefixes the error.
    pub fn resolve(
        &self,
        api_version: &str,
        kind: &str,
        context: &str,
    ) -> Result<Resource, KubeError> {
        self.inner
            .discovery
            .resolve(&self.inner.transport, api_version, kind, context)
    }

    /// Calls on `resource` in `namespace` (ignored for cluster-scoped resources).
    pub fn api(&self, resource: &Resource, namespace: Option<&str>) -> Api<'_> {
        Api::new(self, resource.clone(), namespace)
    }

    /// Starts a reflector thread; events arrive on the returned channel.
    pub fn watch(
        &self,
        resource: &Resource,
        params: WatchParams,
    ) -> (ReflectorHandle, crossbeam_channel::Receiver<Event>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        (
            reflector::spawn(self.clone(), resource.clone(), params, tx),
            rx,
        )
    }

    /// Starts a reflector thread that calls `sink` with each event on that thread;
    /// `sink` returning false stops it.
    pub fn watch_with_sink(
        &self,
        resource: &Resource,
        params: WatchParams,
        sink: impl FnMut(Event) -> bool + Send + 'static,
    ) -> ReflectorHandle {
        reflector::spawn_with_sink(self.clone(), resource.clone(), params, Box::new(sink))
    }
}
