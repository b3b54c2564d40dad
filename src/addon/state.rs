//! addon-operator's shared state: the values of every scope, the ConfigMap's last
//! good content and the module lifecycle ([`Lifecycle`], which alone changes the
//! modules' and converges' state), behind one mutex that the queue threads and the
//! router take briefly (never across a hook or helm run).
//!
//! Also the values files hooks and `enabled` scripts read: `CONFIG_VALUES_PATH` is
//! `{"global": …, "<key>": …}` of config values, `VALUES_PATH` the same of effective
//! values, with `global.enabledModules` for module hooks (flant v1.0's contract).
//!
//! And addon-operator's own metrics ([`AddonMetrics`]): flant's `global_hook_*`
//! and `module_hook_*` run families (the runner records into them through
//! `HookValues::run_metrics`), binding counts, module run, helm and converge
//! timings, and the error counters.

use crate::addon::config::configmap::KubeConfig;
use crate::addon::config::values::{Scope, checksum};
use crate::addon::modules::{Layout, Owner};
use crate::addon::release::helm::Helm;
use crate::addon::run::lifecycle::{Input, Lifecycle};
use crate::hook::Hook;
use crate::hook::config::HookConfig;
use crate::kube::Client;
use crate::metrics::{
    Families, HookRunKind, HookRunMetrics, KUBE_BUCKETS, MetricsError, task_wait_counter,
};
use crate::queue::Task;
use crate::schedule::Control;
use crossbeam_channel::Sender;
use prometheus::{
    CounterVec, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What the engine reads and writes, shared by the queue threads.
pub(crate) struct Shared {
    /// The modules; a reload appends the modules it finds added and replaces
    /// their static settings (`reload/`), so it is read through [`Self::layout`].
    pub(crate) modules: super::swap::Swap<Layout>,
    /// The hook table the runner and the monitor read (a reload retires and
    /// appends hooks); read through [`Self::hook_list`].
    pub(crate) hooks: crate::hook::table::HookTable,
    /// Whose hook each hook index is (a reload appends with the table).
    pub(crate) owners: super::swap::Swap<Vec<Owner>>,
    /// The index of the operator's own ConfigMap watch in `hooks`.
    pub(crate) cm_hook: usize,
    pub(crate) state: Mutex<State>,
    pub(crate) helm: Helm,
    pub(crate) client: Client,
    /// The client of the operator's own reads (the drift check's lists, the release
    /// list): the resource monitor's (`HELM_MONITOR_KUBE_CLIENT_QPS/_BURST`), so
    /// they never wait behind hooks for the main client's rate limit.
    pub(crate) bookkeeping: Client,
    pub(crate) namespace: String,
    pub(crate) config_map: String,
    pub(crate) ignore_release: String,
    pub(crate) tmp_dir: PathBuf,
    pub(crate) script_timeout: Option<Duration>,
    pub(crate) metrics: AddonMetrics,
    /// Set once the first converge finished (`/ready`).
    pub(crate) ready: Arc<AtomicBool>,
    /// Lifecycle inputs from outside the main queue, to the router (which steps
    /// them and queues their tasks).
    pub(crate) inputs: Sender<Input>,
    pub(crate) scheduler: Sender<Control>,
    /// The kubernetes bindings' snapshots (the debug socket shows them).
    pub(crate) store: Option<Arc<crate::monitor::store::SnapshotStore>>,
    /// The ConfigMap `data` refused last (logged and counted once, not again when
    /// only its metadata changes); `None` after a good one.
    pub(crate) refused_config: Mutex<Option<serde_json::Value>>,
    /// The webhook registrations module runs follow: a module's admission entries
    /// are registered while it is enabled, its CRDs' conversion set before helm.
    pub(crate) webhooks: crate::webhook::ModuleWebhooks,
    /// Every module's `crds/` files, installed at its startup run (`crds.rs`).
    pub(crate) crds: crate::addon::release::crds::ModuleCrds,
    /// ModuleSettings objects (`--module-settings-resources`); `None` when off.
    pub(crate) settings: Option<crate::addon::config::settings::Runtime>,
    /// Module runs' notices to the drift watcher.
    pub(crate) drift: Sender<crate::addon::release::drift::watcher::Notice>,
}

/// The mutable part.
#[derive(Clone)]
pub(crate) struct State {
    pub(crate) global: Scope,
    /// Same index as `Layout::modules`.
    pub(crate) modules: Vec<ModuleState>,
    /// The ConfigMap content last applied.
    pub(crate) config: KubeConfig,
    /// `<key>Enabled` set by global hooks' patches.
    pub(crate) dynamic: BTreeMap<String, bool>,
    /// Every module's lifecycle and the converges'.
    pub(crate) lifecycle: Lifecycle,
    /// Releases read in one list when a converge computed the enabled modules: each
    /// module run of that converge takes its entry (`None`: no release) instead of
    /// asking the API server again; a retry asks again.
    pub(crate) releases:
        std::collections::HashMap<String, Option<crate::addon::release::helm::Release>>,
    /// The drift check's lists during a converge: the names per apiVersion, kind and
    /// namespace, listed once when the first module run asks and shared by the
    /// converge's later runs; emptied by every helm upgrade or uninstall (objects
    /// change) and when the converge starts and ends.
    pub(crate) listed: std::collections::HashMap<
        crate::addon::release::helm::ListKey,
        std::collections::BTreeSet<String>,
    >,
    /// Modules whose directory a reload found gone (`reload/`): never enabled,
    /// so the next converge purges them; their lifecycle hooks whose files are
    /// gone are skipped.
    pub(crate) removed: std::collections::BTreeSet<usize>,
}

/// One module's values.
#[derive(Clone)]
pub(crate) struct ModuleState {
    pub(crate) scope: Scope,
}

impl Shared {
    /// The state; a poisoned lock (a panicked thread) still yields it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The modules as they are now.
    pub(crate) fn layout(&self) -> Arc<Layout> {
        self.modules.load()
    }

    /// The hooks as they are now (by hook index).
    pub(crate) fn hook_list(&self) -> Arc<Vec<Hook>> {
        self.hooks.load()
    }

    /// Whose hook index `hook` is.
    pub(crate) fn owner(&self, hook: usize) -> Option<Owner> {
        self.owners.load().get(hook).copied()
    }

    /// The live hooks of `owner` with their index, in name order (the slots of
    /// hooks a reload removed left out).
    pub(crate) fn hooks_of(&self, owner: Owner) -> impl Iterator<Item = (usize, Hook)> + use<> {
        let (hooks, owners) = (self.hook_list(), self.owners.load());
        let mine: Vec<(usize, Hook)> = (hooks.iter().enumerate())
            .filter(|(i, h)| !h.retired && owners.get(*i) == Some(&owner))
            .map(|(i, h)| (i, h.clone()))
            .collect();
        mine.into_iter()
    }

    /// Steps the lifecycle with an input that arose in the current main-queue task;
    /// the tasks it returns run next.
    /// A retry it schedules wakes the router, which keeps the retry timer.
    pub(crate) fn step(&self, input: Input) -> Vec<Task> {
        self.step_locked(&mut self.lock(), input)
    }

    /// [`Self::step`] for a caller that holds the state's lock already.
    pub(crate) fn step_locked(&self, st: &mut State, input: Input) -> Vec<Task> {
        let before = st.lifecycle.next_due();
        let tasks = st.lifecycle.step(input);
        let due = st.lifecycle.next_due();
        if due.is_some() && due != before {
            let now = Instant::now();
            self.send(Input::Tick { now });
        }
        tasks
    }

    /// Sends an input that arose outside the main queue to the router.
    pub(crate) fn send(&self, input: Input) {
        let _ = self.inputs.send(input);
    }

    /// Tells the lifecycle that module `m`'s release needs a run for `event` (an
    /// absent object, a release not deployed, drift): the release's monitors reach
    /// the lifecycle through this, not through its inputs.
    pub(crate) fn release_needs_run(&self, m: usize, event: &str) {
        let event = event.to_string();
        self.send(Input::ReleaseDrift { module: m, event });
    }

    /// Tells the drift watcher a module's release may have changed.
    pub(crate) fn drift_notice(&self, notice: crate::addon::release::drift::watcher::Notice) {
        let _ = self.drift.send(notice);
    }
}

impl State {
    /// Names of the enabled modules, in order (`global.enabledModules`).
    pub(crate) fn enabled_names(&self, layout: &Layout, upto: Option<usize>) -> Vec<String> {
        let enabled = self.lifecycle.enabled_modules();
        let list = match upto {
            Some(n) => &enabled[..n.min(enabled.len())],
            None => enabled,
        };
        list.iter()
            .filter_map(|&m| layout.modules.get(m).map(|m| m.name.clone()))
            .collect()
    }

    /// `(CONFIG_VALUES, VALUES)` of a global hook.
    pub(crate) fn global_files(&self) -> Result<(Value, Value), crate::addon::Error> {
        Ok((
            json!({"global": self.global.config_values()}),
            json!({"global": self.global.values()?}),
        ))
    }

    /// `(CONFIG_VALUES, VALUES)` of module `m`'s hooks, enabled script and chart;
    /// `enabled_modules` goes into `global.enabledModules` of VALUES.
    pub(crate) fn module_files(
        &self,
        m: usize,
        enabled_modules: Vec<String>,
    ) -> Result<(Value, Value), crate::addon::Error> {
        let module = (self.modules.get(m)).ok_or(crate::addon::Error::NoSuchModule)?;
        let key = module.scope.key.clone();
        let mut global = self.global.values()?;
        if let Some(g) = global.as_object_mut() {
            g.insert("enabledModules".into(), json!(enabled_modules));
        }
        let mut config = serde_json::Map::new();
        config.insert("global".into(), self.global.config_values());
        config.insert(key.clone(), module.scope.config_values());
        let mut values = serde_json::Map::new();
        values.insert("global".into(), global);
        values.insert(key, module.scope.values()?);
        Ok((Value::Object(config), Value::Object(values)))
    }

    /// Checksum of the global values (changes trigger converges).
    pub(crate) fn global_checksum(&self) -> String {
        self.global
            .values()
            .map(|v| checksum(&v))
            .unwrap_or_default()
    }

    /// Checksum of module `m`'s values.
    pub(crate) fn module_checksum(&self, m: usize) -> String {
        self.modules
            .get(m)
            .and_then(|s| s.scope.values().ok())
            .map(|v| checksum(&v))
            .unwrap_or_default()
    }
}

/// addon-operator's own metrics (flant's names, with the operator's prefix).
pub(crate) struct AddonMetrics {
    pub(crate) config_values_errors_total: IntCounter,
    /// `{key}`: 1 for each ConfigMap key of a module that does not exist (ignored).
    pub(crate) config_unknown_module_keys: GaugeVec,
    pub(crate) modules_discover_errors_total: IntCounter,
    /// The seeds' name of the same counter (flant's binary exports the one above).
    pub(crate) module_discover_errors_total: IntCounter,
    pub(crate) module_run_errors_total: IntCounterVec,
    pub(crate) module_delete_errors_total: IntCounterVec,
    pub(crate) convergence_total: IntCounterVec,
    /// `{activation}`: seconds from a converge's start to its end.
    pub(crate) convergence_seconds: CounterVec,
    /// `global_hook_*{hook,binding,queue,activation}`.
    pub(crate) global_hooks: HookRunMetrics,
    /// `module_hook_*{module,hook,binding,queue,activation}`.
    pub(crate) module_hooks: HookRunMetrics,
    /// `{module,hook}`: bindings of each hook (module "" for global hooks).
    pub(crate) binding_count: GaugeVec,
    /// `{module,activation}`: a ModuleRun task's duration.
    pub(crate) module_run_seconds: HistogramVec,
    /// `{module,activation}`: a module run's helm phase (render, check, upgrade).
    pub(crate) module_helm_seconds: HistogramVec,
    /// `{module,activation,operation}`: one helm operation (`template`,
    /// `check-upgrade`, `upgrade`, `uninstall`).
    pub(crate) helm_operation_seconds: HistogramVec,
    /// `{module}`: releases found not `deployed` by the resource monitor.
    pub(crate) modules_helm_release_redeployed_total: IntCounterVec,
    /// `{module,resource}`: rendered objects found missing by the resource monitor.
    pub(crate) modules_absent_resources_total: IntCounterVec,
    /// `{module,kind}`: resource monitor checks that could not list a module's
    /// objects of a kind (its resource type gone, no permission).
    pub(crate) modules_resource_check_errors_total: IntCounterVec,
    /// `{module,kind}`: release objects that differ from their manifest now.
    pub(crate) module_drift_objects: GaugeVec,
    /// `{module,kind}`: drift corrections asked for (a helm upgrade each).
    pub(crate) module_drift_corrections_total: IntCounterVec,
    /// `{module,kind,reason}`: corrections not made: `refused` (the server's dry run
    /// refused the manifest's object), `fighting` (the drift came back), `failed`
    /// (the correcting run failed).
    pub(crate) module_drift_correction_failures_total: IntCounterVec,
}

/// Registers collectors under one prefix, naming the metric in its errors.
struct Reg<'a> {
    prefix: &'a str,
    registry: &'a Families,
}

impl Reg<'_> {
    fn add<C: prometheus::core::Collector + Clone + 'static>(
        &self,
        name: &str,
        c: Result<C, prometheus::Error>,
    ) -> Result<C, MetricsError> {
        let c = c.map_err(|e| MetricsError(format!("metric {}{name}: {e}", self.prefix)))?;
        self.registry
            .register(Box::new(c.clone()))
            .map_err(|e| MetricsError(format!("metric {}{name}: {e}", self.prefix)))?;
        Ok(c)
    }

    fn counter(&self, name: &str, help: &str) -> Result<IntCounter, MetricsError> {
        let full = format!("{}{name}", self.prefix);
        self.add(name, IntCounter::new(full, help))
    }

    fn int_vec(&self, name: &str, help: &str, label: &str) -> Result<IntCounterVec, MetricsError> {
        let opts = Opts::new(format!("{}{name}", self.prefix), help);
        self.add(name, IntCounterVec::new(opts, &[label]))
    }

    fn histogram(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> Result<HistogramVec, MetricsError> {
        let opts = HistogramOpts::new(format!("{}{name}", self.prefix), help)
            .buckets(KUBE_BUCKETS.to_vec());
        self.add(name, HistogramVec::new(opts, labels))
    }

    /// The global and module hook run families, sharing one queue wait counter.
    fn hook_runs(&self) -> Result<(HookRunMetrics, HookRunMetrics), MetricsError> {
        let wait = task_wait_counter(
            self.registry,
            self.prefix,
            &["module", "hook", "binding", "queue"],
        )?;
        let family =
            |kind| HookRunMetrics::register(self.registry, self.prefix, kind, wait.clone());
        Ok((family(HookRunKind::Global)?, family(HookRunKind::Module)?))
    }
}

impl AddonMetrics {
    /// Registers them under `prefix` in `registry` (one from
    /// `Metrics::for_addon`, without shell-operator's hook run family: the queue
    /// wait counter's name is shared).
    pub(crate) fn register(
        prefix: &str,
        registry: &Families,
    ) -> Result<AddonMetrics, MetricsError> {
        let r = Reg { prefix, registry };
        let (global_hooks, module_hooks) = r.hook_runs()?;
        let module_activation = ["module", "activation"];
        Ok(AddonMetrics {
            config_values_errors_total: r.counter(
                "config_values_errors_total",
                "ConfigMap contents rejected (bad YAML, keys or values)",
            )?,
            config_unknown_module_keys: r.add(
                "config_unknown_module_keys",
                GaugeVec::new(
                    Opts::new(
                        format!("{prefix}config_unknown_module_keys"),
                        "ConfigMap keys of modules that do not exist, ignored (1 each)",
                    ),
                    &["key"],
                ),
            )?,
            modules_discover_errors_total: r.counter(
                "modules_discover_errors_total",
                "Failed computations of the enabled modules",
            )?,
            module_discover_errors_total: r.counter(
                "module_discover_errors_total",
                "Same as modules_discover_errors_total (the seeds' name)",
            )?,
            module_run_errors_total: r.int_vec(
                "module_run_errors_total",
                "Failed module runs",
                "module",
            )?,
            module_delete_errors_total: r.int_vec(
                "module_delete_errors_total",
                "Failed module deletions",
                "module",
            )?,
            convergence_total: r.int_vec("convergence_total", "Converges started", "activation")?,
            modules_helm_release_redeployed_total: r.int_vec(
                "modules_helm_release_redeployed_total",
                "Releases found not deployed and run again",
                "module",
            )?,
            modules_absent_resources_total: r.add(
                "modules_absent_resources_total",
                IntCounterVec::new(
                    Opts::new(
                        format!("{prefix}modules_absent_resources_total"),
                        "Rendered objects found missing, their module run again",
                    ),
                    &["module", "resource"],
                ),
            )?,
            modules_resource_check_errors_total: r.add(
                "modules_resource_check_errors_total",
                IntCounterVec::new(
                    Opts::new(
                        format!("{prefix}modules_resource_check_errors_total"),
                        "Resource monitor checks that could not list a module's objects of a kind",
                    ),
                    &["module", "kind"],
                ),
            )?,
            module_drift_objects: r.add(
                "module_drift_objects",
                GaugeVec::new(
                    Opts::new(
                        format!("{prefix}module_drift_objects"),
                        "Release objects that differ from their manifest",
                    ),
                    &["module", "kind"],
                ),
            )?,
            module_drift_corrections_total: r.add(
                "module_drift_corrections_total",
                IntCounterVec::new(
                    Opts::new(
                        format!("{prefix}module_drift_corrections_total"),
                        "Drift corrections asked for (a helm upgrade of the release each)",
                    ),
                    &["module", "kind"],
                ),
            )?,
            module_drift_correction_failures_total: r.add(
                "module_drift_correction_failures_total",
                IntCounterVec::new(
                    Opts::new(
                        format!("{prefix}module_drift_correction_failures_total"),
                        "Drift corrections not made: refused by the server, fought, or failed",
                    ),
                    &["module", "kind", "reason"],
                ),
            )?,
            convergence_seconds: r.add(
                "convergence_seconds",
                CounterVec::new(
                    Opts::new(
                        format!("{prefix}convergence_seconds"),
                        "Seconds spent in converges",
                    ),
                    &["activation"],
                ),
            )?,
            binding_count: r.add(
                "binding_count",
                GaugeVec::new(
                    Opts::new(format!("{prefix}binding_count"), "Bindings of each hook"),
                    &["module", "hook"],
                ),
            )?,
            module_run_seconds: r.histogram(
                "module_run_seconds",
                "Duration of module runs",
                &module_activation,
            )?,
            module_helm_seconds: r.histogram(
                "module_helm_seconds",
                "Duration of a module run's helm phase",
                &module_activation,
            )?,
            helm_operation_seconds: r.histogram(
                "helm_operation_seconds",
                "Duration of helm operations",
                &["module", "activation", "operation"],
            )?,
            global_hooks,
            module_hooks,
        })
    }

    /// Counts a failed computation of the enabled modules under both names.
    pub(crate) fn discover_error(&self) {
        self.modules_discover_errors_total.inc();
        self.module_discover_errors_total.inc();
    }

    /// Runs `f` (one helm operation) and records its duration.
    pub(crate) fn helm_op<T>(
        &self,
        module: &str,
        activation: &str,
        operation: &str,
        f: impl FnOnce() -> T,
    ) -> T {
        let start = Instant::now();
        let out = f();
        self.helm_operation_seconds
            .with_label_values(&[module, activation, operation])
            .observe(start.elapsed().as_secs_f64());
        out
    }

    /// Sets `binding_count` of every global and module hook.
    pub(crate) fn count_bindings(&self, hooks: &[Hook], owners: &[Owner], layout: &Layout) {
        for (hook, owner) in hooks.iter().zip(owners) {
            let module = match owner {
                Owner::Global => "",
                Owner::Module(m) => match layout.modules.get(*m) {
                    Some(m) => m.name.as_str(),
                    None => continue,
                },
                Owner::ConfigMap => continue,
            };
            self.binding_count
                .with_label_values(&[module, &hook.name])
                .set(bindings_of(&hook.config) as f64);
        }
    }
}

/// A hook's bindings as flant counts them: onStartup and each lifecycle binding
/// once, every schedule and kubernetes binding.
pub(crate) fn bindings_of(c: &HookConfig) -> usize {
    let lifecycle = &c.lifecycle;
    let flags = [
        c.on_startup,
        lifecycle.before_all,
        lifecycle.after_all,
        lifecycle.before_helm,
        lifecycle.after_helm,
        lifecycle.before_delete_helm,
        lifecycle.after_delete_helm,
    ];
    flags.iter().filter(|f| f.is_some()).count() + c.schedule.len() + c.kubernetes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::config::{HookKind, parse_as};

    fn count(kind: HookKind, config: &str) -> usize {
        bindings_of(&parse_as("h", config, kind).expect("config"))
    }

    #[test]
    fn bindings_count_as_flant_counts_them() {
        assert_eq!(
            count(
                HookKind::Global,
                r#"{"configVersion":"v1","onStartup":1,"beforeAll":2,"afterAll":3}"#
            ),
            3
        );
        let module = r#"{"configVersion":"v1","afterHelm":1,
            "schedule":[{"name":"a","crontab":"* * * * *"},{"name":"b","crontab":"* * * * *"}],
            "kubernetes":[{"name":"pods","apiVersion":"v1","kind":"Pod"}]}"#;
        assert_eq!(count(HookKind::Module, module), 4);
        let settings_only = r#"{"configVersion":"v1","settings":{"executionMinInterval":"1s"}}"#;
        assert_eq!(count(HookKind::Module, settings_only), 0);
    }

    #[test]
    fn helm_operations_are_timed_by_module_and_operation() {
        let registry = Families::default();
        let m = AddonMetrics::register("ao_", &registry).expect("metrics");
        let out: Result<u8, std::convert::Infallible> =
            m.helm_op("echo", "OperatorStartup", "upgrade", || Ok(7));
        assert_eq!(out, Ok(7));
        let count = m
            .helm_operation_seconds
            .with_label_values(&["echo", "OperatorStartup", "upgrade"])
            .get_sample_count();
        assert_eq!(count, 1);
        let other = m
            .helm_operation_seconds
            .with_label_values(&["echo", "OperatorStartup", "template"])
            .get_sample_count();
        assert_eq!(other, 0);
    }
}
