//! The operator's own Prometheus metrics, named as flant names them under
//! `--prometheus-metrics-prefix`, the hooks' own metrics ([`HookMetrics`]), and
//! their text exposition for `/metrics` and `/metrics/hooks`.
//!
//! Hook runs are recorded in a [`HookRunMetrics`] family set: shell-operator's
//! (`hook_run_*{hook,binding,queue}`) lives in [`Metrics::hook_run`];
//! addon-operator ([`Metrics::for_addon`]) keeps it out of the registry and
//! registers flant's `global_hook_*` and `module_hook_*` families instead (see
//! `addon::state::AddonMetrics`); the runner picks the family per hook.
//!
//! One [`Metrics`] value is created at startup and shared (`Arc`) by the queue
//! threads, the ticker, the HTTP thread and (later) the watch and webhook threads;
//! the prometheus types are internally synchronised. The kube_* series are
//! registered here with flant's names and labels and filled by the Kubernetes
//! monitors; the client's kubernetes_client_* series are registered on
//! [`Metrics::registry`] by the operator.

mod families;

use crate::hook_metrics::HookMetrics;
use crate::process::Usage;
pub use families::{Families, Family};
use prometheus::{
    CounterVec, Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, Opts, TextEncoder,
};

/// Buckets of the hook run histograms (flant's declared buckets).
const RUN_BUCKETS: &[f64] = &[
    0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
];
/// Buckets of the kube event and jq histograms and of addon-operator's own
/// histograms (flant's 0, 0.001 … 10).
pub(crate) const KUBE_BUCKETS: &[f64] = &[
    0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];
const HOOK_LABELS: &[&str] = &["hook", "binding", "queue"];
/// addon-operator's kube_* metrics carry the hook's module ("" for global hooks)
/// and the binding's `kind`, as flant's do.
const ADDON_KUBE_LABELS: &[&str] = &["module", "hook", "binding", "queue", "kind"];
/// Buckets of the queue action histogram (flant's).
const QUEUE_ACTION_BUCKETS: &[f64] = &[
    0.0, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
];

/// Every self metric.
pub struct Metrics {
    registry: Families,
    /// `--prometheus-metrics-prefix`; hook metrics may not use it.
    prefix: String,
    pub(crate) live_ticks: IntCounter,
    pub(crate) tasks_queue_length: GaugeVec,
    /// shell-operator's `hook_run_*` and `task_wait_in_queue_seconds_total`.
    pub(crate) hook_run: HookRunMetrics,
    pub(crate) tasks_queue_compaction_operations_total: CounterVec,
    /// `{queue,task,cause}`: failed task runs by the kind of failure (the
    /// label values of `queue::Cause`); ours, flant has no such family.
    task_errors_total: CounterVec,
    /// `d8_telemetry_<prefix>tasks_queue_compaction_tasks_by_hook{queue_name,hook}`:
    /// registered so flant's name exists, never set (flant sets it only in code paths
    /// we do not have).
    #[allow(dead_code)]
    pub(crate) tasks_queue_compaction_tasks_by_hook: GaugeVec,
    /// `{queue_name,queue_action}`; `None` when `QUEUE_ACTIONS_METRICS=no`.
    pub(crate) tasks_queue_action_duration_seconds: Option<HistogramVec>,
    /// `{hook}`: seconds the last enabling of a hook's kubernetes bindings took.
    pub(crate) hook_enable_kubernetes_bindings_seconds: GaugeVec,
    pub(crate) hook_enable_kubernetes_bindings_errors_total: CounterVec,
    /// `{hook}`: 1 once the bindings are enabled (flant adds 1 per success).
    pub(crate) hook_enable_kubernetes_bindings_success: GaugeVec,
    /// `{hook,binding,queue}`: objects in a binding's snapshot.
    pub(crate) kube_snapshot_objects: GaugeVec,
    pub(crate) kube_snapshot_bytes: GaugeVec,
    pub(crate) kube_jq_filter_duration_seconds: HistogramVec,
    pub(crate) kube_event_duration_seconds: HistogramVec,
    /// `{error_type}`.
    pub(crate) kubernetes_client_watch_errors_total: CounterVec,
    /// `{binding}`: a snapshot was asked for a binding with no monitor. Registered
    /// so flant's name exists; our snapshots never lack their monitor.
    #[allow(dead_code)]
    pub(crate) binding_monitor_missing_total: CounterVec,
    /// `{gvr,namespace}`: registered so flant's name exists; a watch of ours that
    /// ends is restarted by its reflector, never left dead.
    #[allow(dead_code)]
    pub(crate) factory_informer_dead_total: CounterVec,
    /// addon-operator: each hook's module ("" for global hooks), by hook index; when
    /// set, the kube_* metrics carry it as their `module` label.
    /// (A reload replaces it with the longer list of its new hook table.)
    hook_modules: std::sync::RwLock<Option<Vec<String>>>,
    /// Metrics written by hooks to `$METRICS_PATH`.
    pub hooks: HookMetrics,
    /// The length of the last `/metrics` text, to size the next one's buffer.
    last_render_len: std::sync::atomic::AtomicUsize,
}

/// A metric could not be registered (a bad prefix).
#[derive(Debug)]
pub struct MetricsError(pub String);

impl std::fmt::Display for MetricsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Metrics {
    /// Registers every metric under `prefix`; the queue action histogram only if
    /// `queue_actions` (flant's `QUEUE_ACTIONS_METRICS` is not `no`).
    pub(crate) fn with_options(prefix: &str, queue_actions: bool) -> Result<Metrics, MetricsError> {
        Metrics::switch_queue_actions(Metrics::new(prefix)?, queue_actions)
    }

    /// As [`Metrics::with_options`], for addon-operator: shell-operator's hook run
    /// family is kept out of the registry (never exported), so that addon-operator
    /// can register flant's `global_hook_*`/`module_hook_*` families and its own
    /// `task_wait_in_queue_seconds_total{module,…}` (a registry refuses a name
    /// once seen with other labels, even after unregistering it).
    pub(crate) fn for_addon(prefix: &str, queue_actions: bool) -> Result<Metrics, MetricsError> {
        Metrics::switch_queue_actions(Metrics::build(prefix, false)?, queue_actions)
    }

    fn switch_queue_actions(mut m: Metrics, queue_actions: bool) -> Result<Metrics, MetricsError> {
        if !queue_actions {
            if let Some(h) = m.tasks_queue_action_duration_seconds.take() {
                let _ = m.registry.unregister(Box::new(h));
            }
        }
        Ok(m)
    }

    /// Registers every metric under `prefix`.
    pub fn new(prefix: &str) -> Result<Metrics, MetricsError> {
        Metrics::build(prefix, true)
    }

    /// Registers every metric under `prefix`; shell-operator's hook run family
    /// only if `shell_hook_runs` (else in a registry nobody reads).
    fn build(prefix: &str, shell_hook_runs: bool) -> Result<Metrics, MetricsError> {
        let registry = Families::default();
        let runs_registry = match shell_hook_runs {
            true => registry.clone(),
            false => Families::default(),
        };
        let r = Reg {
            registry: &registry,
            prefix,
        };
        let kube_labels = match shell_hook_runs {
            true => HOOK_LABELS,
            false => ADDON_KUBE_LABELS,
        };
        Ok(Metrics {
            hook_modules: std::sync::RwLock::new(None),
            tasks_queue_compaction_tasks_by_hook: r.reg(GaugeVec::new(
                Opts::new(
                    format!("d8_telemetry_{prefix}tasks_queue_compaction_tasks_by_hook"),
                    "Tasks of one hook in a queue when over 20.",
                ),
                &["queue_name", "hook"],
            ))?,
            tasks_queue_action_duration_seconds: Some(
                r.reg(HistogramVec::new(
                    HistogramOpts::new(
                        r.name("tasks_queue_action_duration_seconds"),
                        "Duration of low-level queue operations.",
                    )
                    .buckets(QUEUE_ACTION_BUCKETS.to_vec()),
                    &["queue_name", "queue_action"],
                ))?,
            ),
            binding_monitor_missing_total: r.reg(CounterVec::new(
                Opts::new(
                    r.name("binding_monitor_missing_total"),
                    "Snapshot reads for a binding without a monitor.",
                ),
                &["binding"],
            ))?,
            factory_informer_dead_total: r.reg(CounterVec::new(
                Opts::new(
                    r.name("factory_informer_dead_total"),
                    "Watches that stopped for good.",
                ),
                &["gvr", "namespace"],
            ))?,
            hooks: HookMetrics::default(),
            last_render_len: Default::default(),
            live_ticks: r.reg(IntCounter::with_opts(Opts::new(
                r.name("live_ticks"),
                "Increased every 10 seconds while the operator lives.",
            )))?,
            tasks_queue_length: r.reg(GaugeVec::new(
                Opts::new(r.name("tasks_queue_length"), "Tasks waiting in each queue."),
                &["queue"],
            ))?,
            hook_run: HookRunMetrics::register(
                &runs_registry,
                prefix,
                HookRunKind::Shell,
                task_wait_counter(&runs_registry, prefix, HOOK_LABELS)?,
            )?,
            tasks_queue_compaction_operations_total: r.reg(CounterVec::new(
                Opts::new(
                    format!("d8_telemetry_{prefix}tasks_queue_compaction_operations_total"),
                    "Queue-level compactions of a hook's tasks.",
                ),
                &["queue_name", "hook"],
            ))?,
            task_errors_total: r.reg(CounterVec::new(
                Opts::new(
                    r.name("task_errors_total"),
                    "Failed task runs by queue, task kind and cause.",
                ),
                &["queue", "task", "cause"],
            ))?,
            hook_enable_kubernetes_bindings_seconds: r.reg(GaugeVec::new(
                Opts::new(
                    r.name("hook_enable_kubernetes_bindings_seconds"),
                    "Time to start a hook's watches.",
                ),
                &["hook"],
            ))?,
            hook_enable_kubernetes_bindings_errors_total: r.reg(CounterVec::new(
                Opts::new(
                    r.name("hook_enable_kubernetes_bindings_errors_total"),
                    "Failed starts of a hook's watches.",
                ),
                &["hook"],
            ))?,
            hook_enable_kubernetes_bindings_success: r.reg(GaugeVec::new(
                Opts::new(
                    r.name("hook_enable_kubernetes_bindings_success"),
                    "1 once a hook's watches started.",
                ),
                &["hook"],
            ))?,
            kube_snapshot_objects: r.reg(GaugeVec::new(
                Opts::new(
                    r.name("kube_snapshot_objects"),
                    "Objects in a binding's snapshot.",
                ),
                kube_labels,
            ))?,
            kube_snapshot_bytes: r.reg(GaugeVec::new(
                Opts::new(
                    r.name("kube_snapshot_bytes"),
                    "Text bytes a binding's snapshot refers to: keys, filter results, object JSON.",
                ),
                kube_labels,
            ))?,
            kube_jq_filter_duration_seconds: r.reg(HistogramVec::new(
                HistogramOpts::new(
                    r.name("kube_jq_filter_duration_seconds"),
                    "jqFilter run time per object.",
                )
                .buckets(KUBE_BUCKETS.to_vec()),
                kube_labels,
            ))?,
            kube_event_duration_seconds: r.reg(HistogramVec::new(
                HistogramOpts::new(
                    r.name("kube_event_duration_seconds"),
                    "Handling time of one watch event.",
                )
                .buckets(KUBE_BUCKETS.to_vec()),
                kube_labels,
            ))?,
            kubernetes_client_watch_errors_total: r.reg(CounterVec::new(
                Opts::new(
                    r.name("kubernetes_client_watch_errors_total"),
                    "Watch stream errors by type.",
                ),
                &["error_type"],
            ))?,
            registry,
            prefix: prefix.to_string(),
        })
    }

    /// Counts one failed run of a `task` (its kind's name) on `queue`, by its
    /// `cause` (a `queue::Cause` label value: metrics does not depend on queue).
    pub(crate) fn task_error(&self, queue: &str, task: &str, cause: &str) {
        self.task_errors_total
            .with_label_values(&[queue, task, cause])
            .inc();
    }

    /// The registry, for collectors defined elsewhere (the kube client's).
    pub(crate) fn registry(&self) -> &Families {
        &self.registry
    }

    /// Every family registered so far, with or without samples (the reference
    /// test's source: `docs/reference.md`).
    pub fn families(&self) -> Vec<Family> {
        self.registry.list()
    }

    /// Registers a collector owned by another module (the webhook metrics).
    pub(crate) fn register(
        &self,
        c: Box<dyn prometheus::core::Collector>,
    ) -> Result<(), MetricsError> {
        self.registry
            .register(c)
            .map_err(|e| MetricsError(e.to_string()))
    }

    /// The Prometheus text exposition of every metric: self metrics, then the
    /// hooks' metrics.
    pub fn render(&self) -> Vec<u8> {
        // Sized from the last scrape, so a text of megabytes (addon-operator's
        // histograms of 100 modules) is not copied at each doubling of the buffer.
        let last = self
            .last_render_len
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut out = Vec::with_capacity(last + last / 8);
        for family in self.registry.gather() {
            let _ = TextEncoder::new().encode(std::slice::from_ref(&family), &mut out);
        }
        out.extend_from_slice(self.hooks.render().as_bytes());
        (self.last_render_len).store(out.len(), std::sync::atomic::Ordering::Relaxed);
        out
    }

    /// Applies a hook's metric operations (see [`HookMetrics::apply`]). Names under
    /// the operator's own prefix are refused: they could clash with a self metric
    /// and break the whole `/metrics` scrape.
    pub(crate) fn apply_hook_metrics(
        &self,
        hook: &str,
        ops: &[crate::hook_metrics::Op],
    ) -> Result<(), String> {
        let reserved = |n: &str| !self.prefix.is_empty() && n.starts_with(&self.prefix);
        if let Some(op) = ops.iter().find(|op| reserved(&op.name)) {
            return Err(format!(
                "line {}: field 'name': {:?} starts with the operator's own prefix {:?}",
                op.line, op.name, self.prefix
            ));
        }
        self.hooks.apply(hook, ops)
    }

    /// Only the hooks' metrics (flant's `/metrics/hooks`).
    pub(crate) fn render_hooks(&self) -> Vec<u8> {
        self.hooks.render().into_bytes()
    }

    /// Sets the module of each hook (addon-operator: before any watch starts,
    /// and again by a reload that appended hooks).
    pub(crate) fn set_hook_modules(&self, modules: Vec<String>) {
        let mut slot = self.hook_modules.write().unwrap_or_else(|p| p.into_inner());
        *slot = Some(modules);
    }

    /// The label values of a kubernetes binding's kube_* series: `[hook, binding,
    /// queue]`; for addon-operator `[module, hook, binding, queue, kind]`.
    pub(crate) fn kube_labels(
        &self,
        hook: usize,
        hook_name: &str,
        binding: &str,
        queue: &str,
        kind: &str,
    ) -> Vec<String> {
        let mut labels = Vec::with_capacity(5);
        let modules = self.hook_modules.read().unwrap_or_else(|p| p.into_inner());
        if let Some(modules) = modules.as_ref() {
            labels.push(modules.get(hook).cloned().unwrap_or_default());
        }
        labels.extend([
            hook_name.to_string(),
            binding.to_string(),
            queue.to_string(),
        ]);
        if modules.is_some() {
            labels.push(kind.to_string());
        }
        labels
    }

    /// Records one queue operation's duration, unless switched off.
    pub(crate) fn queue_action(&self, queue: &str, action: &str, seconds: f64) {
        if let Some(h) = &self.tasks_queue_action_duration_seconds {
            h.with_label_values(&[queue, action]).observe(seconds);
        }
    }
}

struct Reg<'a> {
    registry: &'a Families,
    prefix: &'a str,
}

impl Reg<'_> {
    fn name(&self, base: &str) -> String {
        format!("{}{base}", self.prefix)
    }

    fn reg<M: prometheus::core::Collector + Clone + 'static>(
        &self,
        m: Result<M, prometheus::Error>,
    ) -> Result<M, MetricsError> {
        let m = m.map_err(|e| {
            MetricsError(format!(
                "--prometheus-metrics-prefix {:?}: {e}",
                self.prefix
            ))
        })?;
        self.registry
            .register(Box::new(m.clone()))
            .map_err(|e| MetricsError(e.to_string()))?;
        Ok(m)
    }

    fn histogram(
        &self,
        base: &str,
        help: &str,
        kind: HookRunKind,
    ) -> Result<HistogramVec, MetricsError> {
        let opts = HistogramOpts::new(self.name(base), help).buckets(kind.buckets().to_vec());
        self.reg(HistogramVec::new(opts, kind.labels()))
    }

    fn counter(&self, base: &str, help: &str, labels: &[&str]) -> Result<CounterVec, MetricsError> {
        self.reg(CounterVec::new(Opts::new(self.name(base), help), labels))
    }
}

/// Registers `<prefix>task_wait_in_queue_seconds_total` with `labels`, for
/// [`HookRunMetrics::register`] (addon-operator's two families share one).
pub(crate) fn task_wait_counter(
    registry: &Families,
    prefix: &str,
    labels: &'static [&'static str],
) -> Result<TaskWait, MetricsError> {
    let r = Reg { registry, prefix };
    let counter = r.counter(
        "task_wait_in_queue_seconds_total",
        "Seconds tasks waited in queues before running.",
        labels,
    )?;
    Ok(TaskWait { counter, labels })
}

/// The queue wait counter and the label names it was registered with.
#[derive(Clone)]
pub(crate) struct TaskWait {
    pub(crate) counter: CounterVec,
    labels: &'static [&'static str],
}

/// Which hook run family: its metric names, labels and buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookRunKind {
    /// shell-operator's `hook_run_*{hook,binding,queue}`.
    Shell,
    /// addon-operator's `global_hook_*{hook,binding,queue,activation}`.
    Global,
    /// addon-operator's `module_hook_*{module,hook,binding,queue,activation}`.
    Module,
}

impl HookRunKind {
    fn labels(self) -> &'static [&'static str] {
        match self {
            HookRunKind::Shell => HOOK_LABELS,
            HookRunKind::Global => &["hook", "binding", "queue", "activation"],
            HookRunKind::Module => &["module", "hook", "binding", "queue", "activation"],
        }
    }

    /// (stem of the histograms and the gauge, stem of the counters): flant's
    /// addon-operator drops `_run` from its counters' names.
    fn stems(self) -> (&'static str, &'static str) {
        match self {
            HookRunKind::Shell => ("hook_run", "hook_run"),
            HookRunKind::Global => ("global_hook_run", "global_hook"),
            HookRunKind::Module => ("module_hook_run", "module_hook"),
        }
    }

    fn buckets(self) -> &'static [f64] {
        match self {
            HookRunKind::Shell => RUN_BUCKETS,
            HookRunKind::Global | HookRunKind::Module => KUBE_BUCKETS,
        }
    }
}

/// The label values of one hook run; each family takes the ones it has.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HookRunLabels<'a> {
    pub(crate) module: &'a str,
    pub(crate) hook: &'a str,
    pub(crate) binding: &'a str,
    pub(crate) queue: &'a str,
    pub(crate) activation: &'a str,
}

impl<'a> HookRunLabels<'a> {
    fn value(&self, name: &str) -> &'a str {
        match name {
            "module" => self.module,
            "hook" => self.hook,
            "binding" => self.binding,
            "queue" => self.queue,
            "activation" => self.activation,
            _ => "",
        }
    }

    fn values(&self, names: &[&str]) -> Vec<&'a str> {
        names.iter().map(|n| self.value(n)).collect()
    }
}

/// How a hook run ended, for the three counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    Success,
    /// Failed; the task is retried.
    Error,
    /// Failed with `allowFailure: true`.
    AllowedError,
}

/// One family of hook run metrics: durations, CPU, memory, outcomes, queue wait.
pub(crate) struct HookRunMetrics {
    kind: HookRunKind,
    pub(crate) run_seconds: HistogramVec,
    pub(crate) user_cpu_seconds: HistogramVec,
    pub(crate) sys_cpu_seconds: HistogramVec,
    pub(crate) max_rss_bytes: GaugeVec,
    pub(crate) success_total: CounterVec,
    pub(crate) errors_total: CounterVec,
    pub(crate) allowed_errors_total: CounterVec,
    /// The same three counters under the seeds' names (`<run stem>_{success,errors,
    /// allowed_errors}_total`) where flant's binary names them differently (global
    /// and module hooks): alerts written from either keep working.
    pub(crate) seed_names: Option<[CounterVec; 3]>,
    pub(crate) task_wait: TaskWait,
}

impl HookRunMetrics {
    /// Registers family `kind` under `prefix`; `task_wait` is registered already.
    pub(crate) fn register(
        registry: &Families,
        prefix: &str,
        kind: HookRunKind,
        task_wait: TaskWait,
    ) -> Result<HookRunMetrics, MetricsError> {
        let r = Reg { registry, prefix };
        let (run, count) = kind.stems();
        let labels = kind.labels();
        Ok(HookRunMetrics {
            kind,
            run_seconds: r.histogram(&format!("{run}_seconds"), "Duration of hook runs.", kind)?,
            user_cpu_seconds: r.histogram(
                &format!("{run}_user_cpu_seconds"),
                "User CPU time of hook runs.",
                kind,
            )?,
            sys_cpu_seconds: r.histogram(
                &format!("{run}_sys_cpu_seconds"),
                "System CPU time of hook runs.",
                kind,
            )?,
            max_rss_bytes: r.reg(GaugeVec::new(
                Opts::new(
                    r.name(&format!("{run}_max_rss_bytes")),
                    "Peak memory of the last hook run.",
                ),
                labels,
            ))?,
            success_total: r.counter(
                &format!("{count}_success_total"),
                "Successful hook runs.",
                labels,
            )?,
            errors_total: r.counter(
                &format!("{count}_errors_total"),
                "Failed hook runs that will be retried.",
                labels,
            )?,
            allowed_errors_total: r.counter(
                &format!("{count}_allowed_errors_total"),
                "Failed hook runs with allowFailure: true.",
                labels,
            )?,
            seed_names: if run == count {
                None
            } else {
                Some(seed_outcome_counters(&r, run, labels)?)
            },
            task_wait,
        })
    }

    /// Adds the seconds a task waited in its queue.
    pub(crate) fn waited(&self, l: &HookRunLabels, seconds: f64) {
        let values = l.values(self.task_wait.labels);
        self.task_wait
            .counter
            .with_label_values(&values)
            .inc_by(seconds);
    }

    /// Records a finished run's duration and resource usage.
    pub(crate) fn observe(&self, l: &HookRunLabels, took: std::time::Duration, usage: &Usage) {
        let values = l.values(self.kind.labels());
        self.run_seconds
            .with_label_values(&values)
            .observe(took.as_secs_f64());
        self.observe_usage(l, usage);
    }

    /// Records a run's CPU and memory only (as flant does for `enabled` scripts).
    pub(crate) fn observe_usage(&self, l: &HookRunLabels, usage: &Usage) {
        let values = l.values(self.kind.labels());
        self.user_cpu_seconds
            .with_label_values(&values)
            .observe(usage.user_cpu.as_secs_f64());
        self.sys_cpu_seconds
            .with_label_values(&values)
            .observe(usage.sys_cpu.as_secs_f64());
        self.max_rss_bytes
            .with_label_values(&values)
            .set(usage.max_rss_bytes as f64);
    }

    /// Counts a run's outcome; the other two counters get their series too (at 0).
    pub(crate) fn count(&self, l: &HookRunLabels, outcome: RunOutcome) {
        let values = l.values(self.kind.labels());
        let add = |c: &CounterVec, o: RunOutcome| {
            c.with_label_values(&values)
                .inc_by(if o == outcome { 1.0 } else { 0.0 });
        };
        add(&self.success_total, RunOutcome::Success);
        add(&self.errors_total, RunOutcome::Error);
        add(&self.allowed_errors_total, RunOutcome::AllowedError);
        if let Some([success, errors, allowed]) = &self.seed_names {
            add(success, RunOutcome::Success);
            add(errors, RunOutcome::Error);
            add(allowed, RunOutcome::AllowedError);
        }
    }
}

/// The outcome counters under the seeds' names (`<run>_success_total`, …), the
/// documented twins of flant's binary's `<count>_success_total`, ….
fn seed_outcome_counters(
    r: &Reg,
    run: &str,
    labels: &[&str],
) -> Result<[CounterVec; 3], MetricsError> {
    let help =
        "Same as the name without '_run' (the seeds' name; flant's binary exports the other).";
    Ok([
        r.counter(&format!("{run}_success_total"), help, labels)?,
        r.counter(&format!("{run}_errors_total"), help, labels)?,
        r.counter(&format!("{run}_allowed_errors_total"), help, labels)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_prefix() {
        let m = Metrics::new("my_").expect("metrics");
        m.live_ticks.inc();
        let l = HookRunLabels {
            hook: "a.sh",
            binding: "every",
            queue: "main",
            ..HookRunLabels::default()
        };
        m.hook_run.count(&l, RunOutcome::Success);
        let text = String::from_utf8(m.render()).expect("utf8");
        assert!(text.contains("my_live_ticks 1"), "{text}");
        assert!(
            text.contains(
                "my_hook_run_success_total{binding=\"every\",hook=\"a.sh\",queue=\"main\"} 1"
            ),
            "{text}"
        );
    }

    /// Encoded a family at a time into a buffer sized from the last scrape, the text
    /// is the one the encoder gives for all families at once, scrape after scrape.
    #[test]
    fn render_is_the_whole_exposition_every_time() {
        let m = Metrics::for_addon("ao_", true).expect("metrics");
        m.live_ticks.inc();
        m.kube_jq_filter_duration_seconds
            .with_label_values(&["m", "h", "b", "q", "Pod"])
            .observe(0.2);
        let whole = || {
            let mut out = Vec::new();
            TextEncoder::new()
                .encode(&m.registry().gather(), &mut out)
                .unwrap();
            out
        };
        let first = m.render();
        assert!(first.len() > 1000);
        assert_eq!(first, whole());
        m.live_ticks.inc();
        assert_eq!(m.render(), whole());
    }

    #[test]
    fn hook_metrics_may_not_use_the_prefix() {
        let m = Metrics::new("my_").expect("metrics");
        let ops = crate::hook_metrics::parse::parse(
            b"{\"name\":\"ok\",\"add\":1}\n{\"name\":\"my_live_ticks\",\"add\":1}",
        )
        .expect("parse");
        assert_eq!(
            m.apply_hook_metrics("a.sh", &ops),
            Err("line 2: field 'name': \"my_live_ticks\" starts with the operator's own prefix \"my_\"".into())
        );
        assert_eq!(m.hooks.series_count(), 0);
    }

    #[test]
    fn addon_families_replace_the_shell_family() {
        let m = Metrics::for_addon("ao_", true).expect("metrics");
        let reg = m.registry();
        let wait =
            task_wait_counter(reg, "ao_", &["module", "hook", "binding", "queue"]).expect("wait");
        let global = HookRunMetrics::register(reg, "ao_", HookRunKind::Global, wait.clone())
            .expect("global");
        let module =
            HookRunMetrics::register(reg, "ao_", HookRunKind::Module, wait).expect("module");
        let l = HookRunLabels {
            module: "echo",
            hook: "001-echo/hooks/h",
            binding: "beforeHelm",
            queue: "main",
            activation: "OperatorStartup",
        };
        module.count(&l, RunOutcome::Error);
        module.waited(&l, 0.5);
        global.count(
            &HookRunLabels {
                module: "ignored",
                ..l
            },
            RunOutcome::Success,
        );
        let text = String::from_utf8(m.render()).expect("utf8");
        let module_labels = "{activation=\"OperatorStartup\",binding=\"beforeHelm\",hook=\"001-echo/hooks/h\",module=\"echo\",queue=\"main\"}";
        let global_labels = "{activation=\"OperatorStartup\",binding=\"beforeHelm\",hook=\"001-echo/hooks/h\",queue=\"main\"}";
        for line in [
            format!("ao_module_hook_errors_total{module_labels} 1"),
            format!("ao_module_hook_success_total{module_labels} 0"),
            format!("ao_module_hook_allowed_errors_total{module_labels} 0"),
            format!("ao_global_hook_success_total{global_labels} 1"),
            "ao_task_wait_in_queue_seconds_total{binding=\"beforeHelm\",hook=\"001-echo/hooks/h\",module=\"echo\",queue=\"main\"} 0.5".to_string(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("ao_hook_run_"), "{text}");
    }

    #[test]
    fn addon_histograms_use_the_fine_buckets() {
        let m = Metrics::for_addon("ao_", true).expect("metrics");
        let reg = m.registry();
        let wait =
            task_wait_counter(reg, "ao_", &["module", "hook", "binding", "queue"]).expect("wait");
        let global =
            HookRunMetrics::register(reg, "ao_", HookRunKind::Global, wait).expect("global");
        let l = HookRunLabels {
            hook: "g",
            ..HookRunLabels::default()
        };
        let usage = Usage::default();
        global.observe(&l, std::time::Duration::from_millis(3), &usage);
        let text = String::from_utf8(m.render()).expect("utf8");
        let bucket = |le: &str| {
            format!(
                "ao_global_hook_run_seconds_bucket{{activation=\"\",binding=\"\",hook=\"g\",queue=\"\",le=\"{le}\"}}"
            )
        };
        assert!(text.contains(&format!("{} 0", bucket("0.002"))), "{text}");
        assert!(text.contains(&format!("{} 1", bucket("0.005"))), "{text}");
    }

    #[test]
    fn only_shell_operator_exports_the_shell_family() {
        let shell = Metrics::new("ao_").expect("metrics");
        let taken = task_wait_counter(shell.registry(), "ao_", &["module", "hook"]);
        assert!(taken.is_err(), "the shell family holds the name");
        let addon = Metrics::for_addon("ao_", true).expect("metrics");
        addon.hook_run.count(
            &HookRunLabels {
                hook: "h",
                ..HookRunLabels::default()
            },
            RunOutcome::Success,
        );
        let text = String::from_utf8(addon.render()).expect("utf8");
        assert!(!text.contains("hook_run"), "{text}");
        assert!(text.contains("ao_live_ticks 0"), "{text}");
    }

    #[test]
    fn bad_prefix_is_an_error() {
        assert!(Metrics::new("bad-prefix-").is_err());
    }
}
