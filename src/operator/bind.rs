//! The bind step's parts (`operator.rs` drives them): signal handlers, the hooks
//! and tmp dirs, the queue views, the metrics and debug servers, the object
//! patcher's client, and the Kubernetes side with the monitor's control and event
//! channels (made here, in the bind step, because webhook runs read snapshots
//! through them). Nothing here starts a thread that outlives the bind step (the
//! hooks' `--config` run a few at a time on scoped threads, `threads::map_parallel`).

use super::start_error::StartError;
use super::{IGNORED_SIGNALS, RELOAD_SIGNAL, STOP_SIGNALS};
use crate::debug::DebugState;
use crate::debug::runtime::RuntimeConfig;
use crate::debug::server::DebugServer;
use crate::executor::Executor;
use crate::flags::Config;
use crate::hook::context::BindingContext;
use crate::hook::table::HookTable;
use crate::hook::{self, Hook};
use crate::http;
use crate::kube::{Client, KubeSettings};
use crate::listen::Server;
use crate::log;
use crate::metrics::Metrics;
use crate::monitor;
use crate::monitor::runtime::KubeRuntime;
use crate::monitor::store::{KubeEvent, SnapshotStore};
use crate::process;
use crate::queue::Task;
use crate::queue::worker::{QueueView, SharedView};
use crate::startup::queue_names;
use crate::webhook;
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// Registers the stop signals' flag and the signal iterator the `signals` thread
/// reads; first, so a SIGTERM during a slow startup is not lost: the flag stops a
/// hook's `--config` still running (process/run.rs), the iterator reaches the
/// main loop once it runs.
pub(super) fn bind_signals(config: &Config) -> Result<signal_hook::iterator::Signals, StartError> {
    // SIGHUP is not one of them: it reloads (`reload/`).
    for sig in STOP_SIGNALS {
        signal_hook::flag::register(sig, process::shutdown_flag()).map_err(|error| {
            StartError::Signals {
                signal: Some(sig),
                error,
            }
        })?;
    }
    process::set_shutdown_grace(config.shutdown_grace);
    let handled = (STOP_SIGNALS.iter())
        .chain(IGNORED_SIGNALS.iter())
        .chain(std::iter::once(&RELOAD_SIGNAL));
    signal_hook::iterator::Signals::new(handled).map_err(|error| StartError::Signals {
        signal: None,
        error,
    })
}

/// With `--ha`: the election's handle and its thread body (not started yet).
pub(super) fn bind_election(
    config: &Config,
    metrics: &Metrics,
) -> Result<Option<(crate::leader::Handle, super::ThreadBody)>, StartError> {
    let found = crate::leader::settings(config, &|k| std::env::var(k).ok());
    let Some(settings) = found.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let elector = crate::leader::elector(config, &settings, metrics).map_err(|e| e.to_string())?;
    let (handle, body) = elector.start();
    Ok(Some((handle, Box::new(body))))
}

/// Makes the hooks dir absolute, creates the tmp dir (and the built-in jq when
/// there is none on PATH); returns the executor that uses them.
pub(super) fn prepare_dirs(config: &mut Config) -> Result<Executor, StartError> {
    config.hooks_dir =
        std::fs::canonicalize(&config.hooks_dir).map_err(|error| StartError::Dir {
            what: "hooks dir",
            path: config.hooks_dir.clone(),
            error,
        })?;
    if config.tmp_dir.as_os_str().is_empty() {
        let name = config.program.name();
        config.tmp_dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    }
    let executor = Executor {
        tmp_dir: config.tmp_dir.clone(),
        keep_tmp_files: config.debug.keep_tmp_files,
        timeout: config.hook_run_timeout,
        ..Default::default()
    };
    executor
        .prepare_tmp_dir()
        .map_err(|e| format!("tmp dir '{}': {e}", config.tmp_dir.display()))?;
    if let Some(link) = crate::builtin_jq::install(&config.tmp_dir)? {
        log::info(
            "no jq on PATH: hooks get the built-in one",
            &[("path", &link.display().to_string())],
        );
    }
    Ok(executor)
}

/// One view per queue ("main" and every queue a binding names), for the debug
/// socket and the queue-length metric.
pub(super) fn queue_views(hooks: &[Hook]) -> BTreeMap<String, SharedView> {
    queue_names(hooks)
        .into_iter()
        .map(|name| {
            let view = QueueView {
                name: name.clone(),
                ..QueueView::default()
            };
            (name, Arc::new(Mutex::new(view)))
        })
        .collect()
}

/// Binds the metrics port (with the program's and the election's routes).
pub(super) fn bind_http(
    config: &Config,
    metrics: &Arc<Metrics>,
    ready: &Arc<AtomicBool>,
    routes: Option<crate::http::ExtraRoutes>,
) -> Result<Server, StartError> {
    let http = http::bind(
        &config.listen_address,
        config.listen_port,
        Arc::clone(metrics),
        Arc::clone(ready),
        routes,
    )?;
    let port = http.local_addr().map_or(0, |a| a.port());
    let address = format!("{}:{port}", config.listen_address);
    log::info("HTTP server listening", &[("address", &address)]);
    Ok(http)
}

pub(super) fn load_hooks(config: &Config) -> Result<Vec<Hook>, StartError> {
    let dir = config.hooks_dir.display().to_string();
    log::info("loading hooks", &[("dir", &dir)]);
    let hooks = hook::load_all(
        &config.hooks_dir,
        config.hook_run_timeout,
        config.jq_library_path.as_deref(),
    )
    .map_err(|e| e.to_string())?;
    for h in &hooks {
        log::info("hook loaded", &[("hook", &h.name)]);
    }
    Ok(hooks)
}

/// Binds the debug socket; `hook snapshot` shows each kubernetes binding's current
/// snapshot from the store.
pub(super) fn bind_debug_server(
    config: &Config,
    hooks: &HookTable,
    kube: Option<&KubeParts>,
    views: &BTreeMap<String, SharedView>,
    extra: Option<crate::debug::ExtraRoutes>,
) -> Result<DebugServer, StartError> {
    // The addon-operator's internal ConfigMap watch is no hook of the user's, and
    // a hook a reload removed is no hook any more.
    let table = hooks.clone();
    let names = Arc::new(move || {
        (table.load().iter())
            .filter(|h| !h.is_internal() && !h.retired)
            .map(|h| h.name.clone())
            .collect()
    });
    let all = hooks.clone();
    let store = kube.map(|k| Arc::clone(&k.store));
    let state = Arc::new(DebugState {
        queues: views.values().cloned().collect(),
        hooks: names,
        snapshots: Arc::new(move |name: &str| {
            let all = all.load();
            let index = all.iter().position(|h| h.name == name && !h.retired)?;
            let mut view = serde_json::Map::new();
            for (bi, b) in all[index].config.kubernetes.iter().enumerate() {
                let items: Vec<serde_json::Value> = store
                    .as_ref()
                    .map(|s| s.snapshot(index, bi).iter().map(|i| i.to_json()).collect())
                    .unwrap_or_default();
                view.entry(b.name.clone())
                    .or_insert_with(|| serde_json::json!({ "snapshot": items }));
            }
            Some(serde_json::Value::Object(view))
        }),
        config: RuntimeConfig::new(&config.log.level),
        extra,
    });
    let server = DebugServer::bind(&config.debug.unix_socket, &config.debug.http_addr, state)?;
    let socket = config.debug.unix_socket.display().to_string();
    log::info("debug server listening", &[("socket", &socket)]);
    Ok(server)
}

/// The object patcher's own client (its QPS, burst and timeout), its requests
/// counted on `/metrics` with `component="object_patcher"` as flant's are. Not
/// having a cluster is not an error until a hook writes a patch.
pub(super) fn patcher_client(config: &Config, metrics: &Metrics) -> Result<Client, StartError> {
    let settings = KubeSettings {
        server: config.kube.server.clone(),
        kubeconfig: config.kube.config.clone(),
        context: config.kube.context.clone(),
        qps: config.kube.patcher_qps,
        burst: config.kube.patcher_burst,
        timeout: config.kube.patcher_timeout,
        component: "object_patcher".into(),
    };
    let client_metrics = crate::kube::ClientMetrics::new(&config.metrics_prefix, "object_patcher");
    client_metrics
        .register(metrics.registry())
        .map_err(|e| StartError::Metrics {
            what: "object patcher client metrics",
            error: e.to_string(),
        })?;
    Client::from_config_with_metrics(&settings, client_metrics).map_err(|e| StartError::Client {
        what: "no Kubernetes client for the object patcher",
        error: Box::new(e),
    })
}

/// Snapshots for webhook runs, read from the monitors' store when the hook starts.
pub(super) fn webhook_snapshots(
    kube: Option<&KubeParts>,
    hooks: &HookTable,
) -> webhook::SnapshotSource {
    // Webhook handlers only read snapshots: nothing is ever forwarded, so the
    // forward channel's receiver is dropped at once.
    let rt = kube.map(|k| k.runtime(hooks, unbounded().0));
    Arc::new(move |hook: &str, names: &[String]| {
        let Some(rt) = &rt else {
            return Default::default();
        };
        let hooks = rt.hooks.load();
        let Some(index) = hooks.iter().position(|h| h.name == hook && !h.retired) else {
            return Default::default();
        };
        let probe = BindingContext::schedule("webhook", None, names.to_vec());
        rt.prepare(index, &[probe])
    })
}

/// The Kubernetes side, present when some hook has kubernetes bindings: the client,
/// the snapshots, and the channels of the monitor thread.
pub(super) struct KubeParts {
    pub(super) client: Client,
    pub(super) store: Arc<SnapshotStore>,
    pub(super) control_tx: Sender<monitor::Control>,
    pub(super) control_rx: Receiver<monitor::Control>,
    pub(super) events_tx: Sender<KubeEvent>,
    pub(super) events_rx: Receiver<KubeEvent>,
}

impl KubeParts {
    pub(super) fn new(
        config: &Config,
        hooks: &[Hook],
        metrics: &Metrics,
    ) -> Result<Option<KubeParts>, StartError> {
        if !hooks.iter().any(Hook::has_kube_bindings) {
            return Ok(None);
        }
        let settings = crate::kube::KubeSettings::from_flags(&config.kube, "main");
        let client_metrics = crate::kube::ClientMetrics::new(&config.metrics_prefix, "main");
        client_metrics
            .register(metrics.registry())
            .map_err(|e| StartError::Metrics {
                what: "kubernetes client metrics",
                error: e.to_string(),
            })?;
        let client = Client::from_config_with_metrics(&settings, client_metrics).map_err(|e| {
            StartError::Client {
                what: "kubernetes client",
                error: Box::new(e),
            }
        })?;
        log::info(
            "kubernetes client configured",
            &[("source", client.origin())],
        );
        let counts = hooks
            .iter()
            .enumerate()
            .map(|(i, h)| (i, h.config.kubernetes.len()));
        let (control_tx, control_rx) = unbounded();
        let (events_tx, events_rx) = unbounded();
        Ok(Some(KubeParts {
            client,
            store: Arc::new(SnapshotStore::new(counts)),
            control_tx,
            control_rx,
            events_tx,
            events_rx,
        }))
    }

    pub(super) fn runtime(
        &self,
        hooks: &HookTable,
        forward: Sender<(String, Task)>,
    ) -> KubeRuntime {
        KubeRuntime {
            hooks: hooks.clone(),
            store: Arc::clone(&self.store),
            monitor: self.control_tx.clone(),
            events: self.events_tx.clone(),
            forward,
        }
    }
}
