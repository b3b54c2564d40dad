//! addon-operator: modules (a Helm chart, hooks and values), global hooks, the values
//! store, the ConfigMap and the converge cycle, built on the shell-operator engine
//! (queues, runner, executor, monitors, scheduler, kube client).
//!
//! `operator.rs` drives it in its usual three steps. **Bind** ([`bind`]): discover
//! modules, load every global and module hook (`--config`), read and validate the
//! ConfigMap, set up the kube client and helm; any failure exits 1 before a hook
//! ran. **Spawn** ([`Bound::start`]): the shared state, the values hook the runner
//! calls around each hook run, and the queue handler ([`engine::AddonHandler`]).
//! The main queue starts with the global onStartup hooks, the Enable tasks of global
//! hooks and of the operator's own ConfigMap watch, then `ConvergeModules`.
//!
//! The ConfigMap is watched through the monitor like any kubernetes binding: it is
//! the binding of an internal hook (owner [`Owner::ConfigMap`]) whose runs the
//! engine handles instead of executing anything.
//!
//! The folders, by concept: [`modules`] (discovery, chart dirs, `enabled`
//! scripts), [`config`] (the ConfigMap, settings objects, values and hooks' value
//! patches), [`release`] (helm, the release record, the post-renderer, checksums,
//! auto-heal and drift), [`run`] (the lifecycle, converges, module runs); this
//! file, `engine.rs` and `state.rs` are the wiring, `status.rs` and `debug.rs`
//! what it shows.

mod bind_error;
pub(crate) mod config;
mod debug;
mod engine;
mod error;
pub(crate) mod modules;
pub mod release;
pub(crate) mod reload;
pub(crate) mod run;
mod state;
mod status;
mod swap;

pub(crate) use bind_error::BindError;
pub(crate) use error::Error;

use crate::addon::config::configmap::KubeConfig;
use crate::addon::config::values::{Schemas, Scope};
use crate::addon::modules::{Layout, Owner};
use crate::addon::release::helm::Helm;
use crate::addon::run::lifecycle::{Input, Lifecycle};
use crate::flags::Config;
use crate::flags::addon::AddonFlags;
use crate::hook::Hook;
use crate::hook::config::{
    ConfigVersion, HookConfig, KubernetesBinding, NamespaceSelector, Settings, WatchEventType,
};
use crate::hook::limiter::TokenBucket;
use crate::kube::Client;
use crate::log;
use crate::metrics::Metrics;
use crate::queue::worker::Handler;
use crate::queue::{ConvergePhase, Step, Task};
use crate::runner::{HookValues, Runner};
use crate::schedule::Control;
use crossbeam_channel::Sender;
pub(crate) use state::AddonMetrics;
use state::{ModuleState, Shared, State};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Name of the operator's own ConfigMap watch in the hook list (and in `hook list`).
const CONFIGMAP_HOOK: &str = "addon-operator/configmap";

/// Everything addon-operator bound, before any thread runs.
pub(crate) struct Bound {
    layout: Layout,
    owners: Vec<Owner>,
    cm_hook: usize,
    helm: Helm,
    client: Client,
    /// Values of every scope with the ConfigMap applied (its schemas checked).
    state: State,
    flags: AddonFlags,
    namespace: String,
    tmp_dir: std::path::PathBuf,
    script_timeout: Option<std::time::Duration>,
    metrics: AddonMetrics,
    /// Filled at spawn: the debug routes read the state through it.
    debug: debug::Slot,
    /// The resource monitor's own client (`HELM_MONITOR_KUBE_CLIENT_*`).
    monitor_client: Client,
    /// The operator's own reads and writes of its releases during converges.
    bookkeeping_client: Client,
    /// What the resource monitor watches (the debug CLI shows it).
    watched: crate::addon::release::resources::WatchedModules,
    /// The drift watcher's view, for the debug socket.
    drift_report: crate::addon::release::drift::watcher::DriftReport,
    /// Every module's `crds/` files and the labels written on them.
    crds: crate::addon::release::crds::ModuleCrds,
    /// The hook that watches ModuleSettings objects (the ConfigMap's), when that
    /// feature is on.
    settings_hook: Option<usize>,
    /// Its webhook's check of the objects against the config schemas.
    validator: Option<Arc<crate::addon::config::settings::admission::Validator>>,
    /// The trees a reload watches, as they were when the hooks loaded.
    trees: reload::Trees,
    /// `<prefix>modules_reloads_total` and `modules_reload_changes_total`.
    reloads: reload::ReloadMetrics,
    jq_library: Option<std::path::PathBuf>,
}

/// Step 1: discovery, hooks, the ConfigMap's first read, helm. Returns the hook list
/// the engine runs: global hooks, the ConfigMap watch, then every module's hooks.
pub(crate) fn bind(config: &Config, metrics: &Metrics) -> Result<(Bound, Vec<Hook>), BindError> {
    let mut flags =
        (config.addon.clone()).ok_or(BindError::Setting("not started as addon-operator"))?;
    // Absolute paths: hooks run (and answer --config) in their own directory.
    flags.global_hooks_dir = config.hooks_dir.clone();
    for dir in &mut flags.modules_dirs {
        *dir = std::fs::canonicalize(&*dir).map_err(|error| BindError::ModulesDir {
            dir: dir.clone(),
            error,
        })?;
    }
    let namespace = config.namespace.clone();
    if namespace.is_empty() {
        let text = "ADDON_OPERATOR_NAMESPACE (--namespace) is required";
        return Err(BindError::Setting(text));
    }
    for setting in &flags.ignored {
        log::warn(
            "setting accepted for compatibility has no effect",
            &[("flag", setting)],
        );
    }
    if flags.resources_check_period.is_zero() {
        let text =
            "--resources-check-period (ADDON_OPERATOR_RESOURCES_CHECK_PERIOD) must be above 0";
        return Err(BindError::Setting(text));
    }
    let mut layout = crate::addon::modules::discover(&flags)?;
    let skip = crate::reload::tree::skipped(&config.tmp_dir);
    let trees = reload::Trees::of(&flags, &layout, skip);
    crate::addon::modules::chart_dir::generate_charts(&mut layout.modules, &config.tmp_dir)?;
    for m in &layout.modules {
        log::info(
            "module found",
            &[("module", &m.name), ("path", &m.path.display().to_string())],
        );
    }
    let crds = crd_settings(&flags)
        .and_then(|s| crate::addon::release::crds::ModuleCrds::discover(&layout.modules, &s))?;
    let helm = helm_client(config, &flags, &namespace)?;
    // `helm version` (the major version decides the post-renderer's arguments) runs
    // while the hooks' `--config` do: both are on the way to the first converge.
    let (loaded, helm_major) = std::thread::scope(|scope| {
        let probe = crate::threads::spawn_scoped(scope, "helm-version", || helm.major_version());
        let loaded = crate::addon::modules::load_hooks(
            &layout,
            config.hook_run_timeout,
            config.jq_library_path.as_deref(),
        );
        let major = match probe {
            Ok(probe) => probe.join().unwrap_or_else(|_| helm.major_version()),
            Err(_) => helm.major_version(),
        };
        (loaded, major)
    });
    let (mut hooks, mut owners) = loaded?;
    let cm_hook = owners.iter().take_while(|o| **o == Owner::Global).count();
    hooks.insert(cm_hook, configmap_hook(&namespace, &flags.config_map));
    owners.insert(cm_hook, Owner::ConfigMap);
    let settings_hook = flags.settings_resources.then_some(cm_hook);
    if flags.settings_resources {
        crate::addon::config::settings::extend_hook(&mut hooks[cm_hook]);
    }
    for h in &hooks {
        log::info("hook loaded", &[("hook", &h.name)]);
    }
    // The kube_* metrics' `module` label of every hook ("" for global ones).
    metrics.set_hook_modules(
        owners
            .iter()
            .map(|o| match o {
                Owner::Module(m) => layout.modules[*m].name.clone(),
                _ => String::new(),
            })
            .collect(),
    );
    let client = kube_client(config)?;
    let mut monitor_settings = crate::kube::KubeSettings::from_flags(&config.kube, "helm_monitor");
    monitor_settings.qps = flags.monitor_qps;
    monitor_settings.burst = flags.monitor_burst;
    let monitor_metrics = crate::kube::ClientMetrics::new(&config.metrics_prefix, "helm_monitor");
    monitor_metrics
        .register(metrics.registry())
        .map_err(|e| BindError::metrics("resource monitor client metrics", e))?;
    let monitor_client = Client::from_config_with_metrics(&monitor_settings, monitor_metrics)
        .map_err(|error| BindError::Client {
            what: "kubernetes client of the resource monitor",
            error: Box::new(error),
        })?;
    let bookkeeping_client = bookkeeping_client(config, metrics)?;
    let cm = crate::addon::config::configmap::read(&client, &namespace, &flags.config_map)?;
    let configmap = format!("{namespace}/{}", flags.config_map);
    let refused = |objects: &'static str| {
        let configmap = configmap.clone();
        move |e: BindError| BindError::Refused {
            configmap,
            objects,
            error: Box::new(e),
        }
    };
    let kube_config = KubeConfig::from_object(cm.as_ref(), &layout.module_keys())
        .map_err(|e| refused("")(e.into()))?;
    let kube_config = match settings_hook {
        Some(_) => settings_overlay(&client, &layout, kube_config)?,
        None => kube_config,
    };
    // Without a chart module helm is only needed to purge foreign releases.
    let bin = flags.helm_bin.display().to_string();
    match helm_major {
        Ok(major) => log::info(
            "helm found",
            &[("bin", &bin), ("major", &major.to_string())],
        ),
        Err(e) if layout.modules.iter().any(|m| m.has_chart) => return Err(e.into()),
        Err(e) => log::warn(
            "helm not usable; no module has a chart",
            &[("error", &e.to_string())],
        ),
    }
    let reloads = reload::register_metric(metrics.registry(), &config.metrics_prefix)
        .map_err(|e| BindError::metrics("--prometheus-metrics-prefix", e))?;
    let metrics = AddonMetrics::register(&config.metrics_prefix, metrics.registry())
        .map_err(|e| BindError::metrics("", e))?;
    let configmap_name = format!("{namespace}/{}", flags.config_map);
    crate::addon::run::config_changes::report_unknown_keys(
        &metrics,
        &configmap_name,
        &kube_config.unknown,
    );
    metrics.count_bindings(&hooks, &owners, &layout);
    let mut layout = layout;
    let objects = match settings_hook {
        Some(_) => " and ModuleSettings objects",
        None => "",
    };
    let state = initial_state(&mut layout, kube_config, flags.module_run_parallelism)
        .map_err(|e| refused(objects)(e.into()))?;
    let validator = settings_hook.map(|_| Arc::new(validator(&layout, &state)));
    let bound = Bound {
        layout,
        owners,
        cm_hook,
        helm,
        client,
        state,
        flags,
        namespace,
        tmp_dir: config.tmp_dir.clone(),
        script_timeout: config.hook_run_timeout,
        metrics,
        debug: Default::default(),
        monitor_client,
        bookkeeping_client,
        watched: Default::default(),
        drift_report: Default::default(),
        crds,
        settings_hook,
        validator,
        trees,
        reloads,
        jq_library: config.jq_library_path.clone(),
    };
    Ok((bound, hooks))
}

/// What the operator wires in at spawn.
pub(crate) struct Started {
    pub(crate) values: Arc<dyn HookValues>,
    shared: Arc<Shared>,
    monitor: Option<crate::addon::release::resources::ResourceMonitor>,
    drift: Option<crate::addon::release::drift::watcher::DriftWatcher>,
    inputs: Option<crossbeam_channel::Receiver<Input>>,
    /// The reload of modules and global hooks (taken once, for its thread).
    reload: Option<reload::ModulesReload>,
}

/// The router's side of the module lifecycle: the inputs sent to it, stepped on the
/// router thread; their tasks go to the main queue.
pub(crate) struct Inputs {
    rx: crossbeam_channel::Receiver<Input>,
    shared: Arc<Shared>,
}

impl Inputs {
    pub(crate) fn receiver(&self) -> &crossbeam_channel::Receiver<Input> {
        &self.rx
    }

    /// Steps one input; returns its tasks with their queue, and when the next
    /// retry is due. A step on another thread that changes that time sends a
    /// `Tick` here (`Shared::step`), so the router learns it without asking.
    pub(crate) fn step(&self, input: Input) -> (Vec<(String, Task)>, Option<Instant>) {
        let mut st = self.shared.lock();
        let tasks = st.lifecycle.step(input);
        (on_main(tasks), st.lifecycle.next_due())
    }

    /// Queues the retries that are due; when the next one is.
    pub(crate) fn tick(&self) -> (Vec<(String, Task)>, Option<Instant>) {
        self.step(Input::Tick {
            now: Instant::now(),
        })
    }
}

/// The helm client: the flags' settings, helm's dirs under the tmp dir, and our own
/// binary as its post-renderer.
fn helm_client(config: &Config, flags: &AddonFlags, namespace: &str) -> Result<Helm, BindError> {
    let mut helm = Helm::new(flags.helm_bin.clone(), namespace);
    helm.history_max = flags.helm_history_max;
    helm.flant_checksum = flags.flant_checksum;
    helm.timeout = flags.helm_timeout;
    helm.kubeconfig = Some(config.kube.config.clone())
        .filter(|s| !s.is_empty())
        .map(Into::into);
    helm.kube_context = Some(config.kube.context.clone()).filter(|s| !s.is_empty());
    helm.work_dir = Some(config.tmp_dir.clone());
    helm.go_env = crate::addon::release::helm_go_env::helm_go_env(flags.module_run_parallelism);
    // Every released object gets `heritage: addon-operator` from our own binary as
    // helm's post-renderer (a plugin for helm 4, written into the tmp dir).
    match crate::builtin_jq::own_path() {
        Some(binary) => {
            let plugins = crate::addon::release::post_render::write_plugin(
                &config.tmp_dir.join("helm-plugins"),
                &binary,
            )
            .map_err(BindError::Plugin)?;
            helm.post_renderer = Some((binary, plugins));
        }
        None => log::warn(
            "cannot find the operator's own path (no /proc and argv[0] is relative): \
             releases get no heritage label",
            &[],
        ),
    }
    Ok(helm)
}

fn on_main(tasks: Vec<Task>) -> Vec<(String, Task)> {
    let main = crate::startup::MAIN_QUEUE;
    tasks.into_iter().map(|t| (main.to_string(), t)).collect()
}

impl Bound {
    /// The main queue's first tasks: global onStartup runs, Enable tasks of global
    /// hooks and of the ConfigMap watch, then the startup converge.
    pub(crate) fn startup_tasks(&self, hooks: &[Hook]) -> Vec<Task> {
        let mut tasks = crate::startup::startup_tasks(&hooks[..=self.cm_hook.min(hooks.len() - 1)]);
        tasks.push(Task::addon(Step::Converge {
            phase: ConvergePhase::BeforeAll,
            event: "OperatorStartup".into(),
        }));
        tasks
    }

    /// `/ready`, `/readyz` and `/status/converge` on the metrics port; `main` is the
    /// main queue's view.
    pub(crate) fn http_routes(
        &self,
        main: crate::queue::worker::SharedView,
    ) -> crate::http::ExtraRoutes {
        status::routes(Arc::clone(&self.debug), main)
    }

    /// The debug socket's `/global/...` and `/module/...` routes.
    pub(crate) fn debug_routes(&self) -> crate::debug::ExtraRoutes {
        let report = Arc::clone(&self.drift_report);
        debug::routes(Arc::clone(&self.debug), Arc::clone(&self.watched), report)
    }

    /// The ModuleSettings webhook, answered by the operator itself.
    pub(crate) fn admission_builtins(&self) -> crate::webhook::admission::Builtins {
        let mut out = crate::webhook::admission::Builtins::new();
        if let (Some(i), Some(v)) = (self.settings_hook, &self.validator) {
            out.insert(
                i,
                Arc::clone(v) as Arc<dyn crate::webhook::admission::BuiltinAdmission>,
            );
        }
        out
    }

    /// Which hooks' admission entries are registered at startup: not those of
    /// module hooks (a module's run registers them, its delete removes them).
    pub(crate) fn webhooks_at_start(&self) -> Vec<bool> {
        let of_module = |o: &Owner| matches!(o, Owner::Module(_));
        self.owners.iter().map(|o| !of_module(o)).collect()
    }

    /// Step 2: the shared state the engine, the values hook and the routes use.
    pub(crate) fn start(
        self,
        hooks: crate::hook::table::HookTable,
        scheduler: Sender<Control>,
        ready: Arc<AtomicBool>,
        store: Option<Arc<crate::monitor::store::SnapshotStore>>,
        webhooks: crate::webhook::ModuleWebhooks,
        wiring: reload::Wiring,
    ) -> Started {
        let state = self.state;
        let debug = Arc::clone(&self.debug);
        let (inputs, inputs_rx) = crossbeam_channel::unbounded();
        let client_copy = self.client.clone();
        let (drift, drift_rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared {
            modules: swap::Swap::new(self.layout),
            hooks,
            owners: swap::Swap::new(self.owners),
            cm_hook: self.cm_hook,
            state: Mutex::new(state),
            helm: self.helm,
            client: self.client,
            bookkeeping: self.bookkeeping_client,
            namespace: self.namespace,
            config_map: self.flags.config_map.clone(),
            ignore_release: self.flags.helm_ignore_release.clone(),
            tmp_dir: self.tmp_dir,
            script_timeout: self.script_timeout,
            metrics: self.metrics,
            ready,
            inputs,
            scheduler,
            store,
            refused_config: Mutex::new(None),
            crds: self.crds,
            webhooks,
            settings: self
                .settings_hook
                .map(|i| crate::addon::config::settings::Runtime::new(client_copy, i)),
            drift,
        });
        let _ = debug.set(Arc::clone(&shared));
        let values = Arc::new(crate::addon::run::hook_values::ValuesHook {
            shared: Arc::clone(&shared),
        });
        let drift = crate::addon::release::drift::watcher::DriftWatcher::new(
            Arc::clone(&shared),
            self.monitor_client.clone(),
            // A Choice flag: parsed already.
            crate::addon::release::drift::Mode::parse(&self.flags.drift_mode)
                .unwrap_or(crate::addon::release::drift::Mode::Warn),
            self.flags.resources_check_period,
            drift_rx,
            self.drift_report,
        );
        let monitor = crate::addon::release::resources::ResourceMonitor {
            shared: Arc::clone(&shared),
            client: self.monitor_client,
            period: self.flags.resources_check_period,
            watched: self.watched,
        };
        let reload = reload::ModulesReload {
            shared: Arc::clone(&shared),
            flags: self.flags,
            tmp_dir: shared.tmp_dir.clone(),
            timeout: self.script_timeout,
            jq_library: self.jq_library,
            trees: self.trees,
            reloads: self.reloads,
            wiring,
            validator: self.validator.clone(),
        };
        Started {
            values,
            shared,
            monitor: Some(monitor),
            drift: Some(drift),
            inputs: Some(inputs_rx),
            reload: Some(reload),
        }
    }
}

impl Started {
    /// The resource monitor's thread body (once): checks until `stop` closes.
    pub(crate) fn resource_monitor(
        &mut self,
        stop: crossbeam_channel::Receiver<()>,
    ) -> Option<impl FnOnce() + Send + 'static> {
        let monitor = self.monitor.take()?;
        Some(move || monitor.run(stop))
    }

    /// The drift watcher's thread body (once): watches until `stop` closes.
    pub(crate) fn drift_watcher(
        &mut self,
        stop: crossbeam_channel::Receiver<()>,
    ) -> Option<impl FnOnce() + Send + 'static> {
        let watcher = self.drift.take()?;
        Some(move || watcher.run(stop))
    }

    /// The reload of modules and global hooks, for the `reload` thread (once).
    pub(crate) fn modules_reload(&mut self) -> Option<reload::ModulesReload> {
        self.reload.take()
    }

    /// The router's side of the lifecycle (once).
    pub(crate) fn inputs(&mut self) -> Option<Inputs> {
        Some(Inputs {
            rx: self.inputs.take()?,
            shared: Arc::clone(&self.shared),
        })
    }

    /// The handler every queue thread uses.
    pub(crate) fn handler(&self, runner: Arc<Runner>) -> Arc<dyn Handler> {
        Arc::new(engine::AddonHandler {
            shared: Arc::clone(&self.shared),
            runner,
        })
    }
}

/// The engine's first state: every scope with its static values, schemas and the
/// ConfigMap's section, each section checked against its config schema (a bad one
/// stops startup in the bind step, as in flant).
fn initial_state(
    layout: &mut Layout,
    config: KubeConfig,
    parallelism: usize,
) -> Result<State, config::values::ValuesError> {
    let schemas = std::mem::replace(&mut layout.global_schemas, Schemas::none());
    let mut global = Scope::new("global", layout.global_static.clone(), schemas);
    global.check_config(&config.global)?;
    global.config = config.global.clone();
    let mut modules = Vec::new();
    for m in &mut layout.modules {
        let schemas = std::mem::replace(&mut m.schemas, Schemas::none());
        let mut scope = Scope::new(&m.key, m.static_values.clone(), schemas);
        let section = config.section(&m.key);
        if config.modules.contains_key(&m.key) {
            scope.check_config(&section)?;
        }
        scope.config = section;
        modules.push(ModuleState { scope });
    }
    Ok(State {
        global,
        modules,
        config,
        dynamic: Default::default(),
        lifecycle: Lifecycle::new(
            layout.modules.iter().map(|m| (m.name.clone(), m.order)),
            parallelism,
        ),
        releases: Default::default(),
        listed: Default::default(),
        removed: Default::default(),
    })
}

/// Installs (or updates) the ModuleSettings CRD and waits until the API server
/// serves it: the watch and the first read come right after.
fn install_settings_crd(client: &Client) -> Result<(), config::settings::SettingsError> {
    use config::settings::{CRD_NAME, ESTABLISH_TIMEOUT, SettingsError, crd};
    release::crds::apply(client, &crd()).map_err(|e| SettingsError::Crd(e.to_string()))?;
    release::crds::wait_established(client, &[CRD_NAME.to_string()], ESTABLISH_TIMEOUT)
        .map_err(|e| SettingsError::Crd(e.to_string()))
}

/// With `--module-settings-resources`: the CRD installed (the watch starts right
/// after bind) and the objects laid over the ConfigMap (`settings/spec.rs`).
fn settings_overlay(
    client: &Client,
    layout: &Layout,
    config: KubeConfig,
) -> Result<KubeConfig, config::settings::SettingsError> {
    install_settings_crd(client)?;
    log::info(
        "CRD installed",
        &[("crd", crate::addon::config::settings::CRD_NAME)],
    );
    let objects = crate::addon::config::settings::list(client)?;
    let overlay =
        crate::addon::config::settings::spec::overlay(config, &objects, &layout.settings_names());
    crate::addon::run::config_changes::report_overlay(&overlay);
    Ok(overlay.config)
}

/// The webhook's copy of every config schema, by object name.
fn validator(
    layout: &Layout,
    state: &State,
) -> crate::addon::config::settings::admission::Validator {
    crate::addon::config::settings::admission::Validator::new(settings_scopes(layout, state))
}

/// Every module's (and `global`'s) scope, by ModuleSettings object name.
fn settings_scopes(layout: &Layout, state: &State) -> std::collections::BTreeMap<String, Scope> {
    let mut scopes = std::collections::BTreeMap::new();
    scopes.insert(
        crate::addon::config::settings::spec::GLOBAL.to_string(),
        state.global.clone(),
    );
    for (m, module) in layout.modules.iter().enumerate() {
        scopes.insert(module.name.clone(), state.modules[m].scope.clone());
    }
    scopes
}

/// `--crd-extra-labels` and `--crd-filters`, parsed.
fn crd_settings(
    flags: &AddonFlags,
) -> Result<crate::addon::release::crds::CrdSettings, crate::addon::release::crd_error::CrdError> {
    Ok(crate::addon::release::crds::CrdSettings {
        extra_labels: crate::addon::release::crds::parse_extra_labels(&flags.crd_extra_labels)?,
        filters: crate::addon::release::crds::parse_filters(&flags.crd_filters),
    })
}

/// addon-operator's own client (ConfigMap reads and writes, resource checks).
fn kube_client(config: &Config) -> Result<Client, BindError> {
    let settings = crate::kube::KubeSettings::from_flags(&config.kube, "addon");
    Client::from_config(&settings).map_err(|error| BindError::Client {
        what: "kubernetes client",
        error: Box::new(error),
    })
}

/// Requests per second and burst of the operator's bookkeeping client.
const BOOKKEEPING_QPS: f32 = 50.0;
const BOOKKEEPING_BURST: u32 = 100;

/// The client of the operator's own bookkeeping during a converge: one list of the
/// release Secrets, one list per kind and namespace for the drift check, and a label
/// patch per module whose new checksum rendered no change. Those are bounded by the
/// module count, so they get a loose limit of their own: behind the resource
/// monitor's (flant's `HELM_MONITOR_KUBE_CLIENT_QPS`, 5/s) they made a `global` change
/// of 100 modules wait 18 s for its label patches (BENCHMARKS.md, issue 28).
fn bookkeeping_client(config: &Config, metrics: &Metrics) -> Result<Client, BindError> {
    let mut settings = crate::kube::KubeSettings::from_flags(&config.kube, "addon_bookkeeping");
    settings.qps = BOOKKEEPING_QPS;
    settings.burst = BOOKKEEPING_BURST;
    let client_metrics =
        crate::kube::ClientMetrics::new(&config.metrics_prefix, "addon_bookkeeping");
    client_metrics
        .register(metrics.registry())
        .map_err(|e| BindError::metrics("bookkeeping client metrics", e))?;
    Client::from_config_with_metrics(&settings, client_metrics).map_err(|error| BindError::Client {
        what: "kubernetes client of the operator's bookkeeping",
        error: Box::new(error),
    })
}

/// The internal hook whose one kubernetes binding watches the ConfigMap.
fn configmap_hook(namespace: &str, name: &str) -> Hook {
    let binding = KubernetesBinding {
        name: "configmap".into(),
        api_version: Some("v1".into()),
        kind: "ConfigMap".into(),
        execute_hook_on_event: WatchEventType::ALL.to_vec(),
        execute_hook_on_synchronization: true,
        wait_for_synchronization: true,
        keep_full_objects_in_memory: true,
        name_selector: Some(vec![name.to_string()]),
        label_selector: None,
        field_selector: Vec::new(),
        namespace: Some(NamespaceSelector {
            name_selector: Some(vec![namespace.to_string()]),
            label_selector: None,
        }),
        jq_filter: None,
        allow_failure: false,
        include_snapshots_from: Vec::new(),
        queue: crate::startup::MAIN_QUEUE.into(),
        group: None,
        resynchronization_period: None,
    };
    let config = HookConfig {
        version: ConfigVersion::V1,
        on_startup: None,
        schedule: Vec::new(),
        kubernetes: vec![binding],
        validating: Vec::new(),
        mutating: Vec::new(),
        conversion: Vec::new(),
        settings: Settings::default(),
        lifecycle: Default::default(),
    };
    Hook {
        name: CONFIGMAP_HOOK.into(),
        path: std::path::PathBuf::new(),
        limiter: Arc::new(Mutex::new(TokenBucket::from_settings(&config.settings))),
        config_sum: 0,
        retired: false,
        jq_filters: vec![None],
        config,
    }
}
