//! The task handler the queue threads call: turns a task into a hook run (binding
//! context file, executor, metrics, logs) or into enabling a hook's bindings.
//!
//! One `Runner` is shared by every queue thread; it holds only shared, read-mostly
//! state (the hook list, the executor settings, metrics, the scheduler's control
//! channel), so queues run hooks in parallel without contending on it.

use crate::executor::{Executor, ExtraFile, RunLabels, RunResult};
use crate::hook::Hook;
use crate::hook::context::{BindingType, Snapshots, write_file};
use crate::hook::table::HookTable;
use crate::kube::Client;
use crate::log;
use crate::metrics::{HookRunLabels, HookRunMetrics, Metrics, RunOutcome};
use crate::monitor::runtime::KubeRuntime;
use crate::patch;
use crate::queue::worker::Handler;
use crate::queue::{Cause, Outcome, Task, TaskError, TaskKind};
use crate::schedule::Control;
use crossbeam_channel::Sender;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Runs tasks for the queue threads.
pub struct Runner {
    pub(crate) hooks: HookTable,
    pub(crate) executor: Executor,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) scheduler: Sender<Control>,
    /// Startup tasks (onStartup runs and Enable tasks) not yet done; at zero the
    /// operator reports ready.
    pub(crate) startup_left: AtomicUsize,
    pub(crate) ready: Arc<AtomicBool>,
    /// Present when some hook has kubernetes bindings.
    pub(crate) kube: Option<KubeRuntime>,
    /// The object patcher's client, or why there is none (no cluster configured).
    pub(crate) patcher: Result<Client, String>,
    pub(crate) jq_library: Option<PathBuf>,
    /// addon-operator's values around each hook run; `None` for shell-operator.
    pub(crate) values: Option<Arc<dyn HookValues>>,
}

/// What addon-operator adds to a hook run: the values files the hook reads and the
/// values patches it writes. A patch that cannot be applied fails the run, which is
/// then retried like any failed run; the values stay as they were. Its errors say
/// their cause (a bad patch is invalid input, a ConfigMap write that timed out is
/// transient), which the failed run is counted under.
pub trait HookValues: Send + Sync {
    /// The hook's extra files (`CONFIG_VALUES_PATH`, `VALUES_PATH` and the two patch
    /// files); an `Err` fails the run before the hook starts.
    fn files(&self, hook: usize) -> Result<Vec<ExtraFile>, TaskError>;
    /// Takes the output files of a successful run (in the order of `files`).
    fn apply(&self, hook: usize, task: &Task, outputs: &[Vec<u8>]) -> Result<(), TaskError>;
    /// Where the metrics of this run of `hook` go: addon-operator's global or
    /// module family, with the `module` and `activation` labels. `None` keeps
    /// shell-operator's family ([`Metrics::hook_run`]).
    fn run_metrics(&self, hook: usize, task: &Task) -> Option<RunMetrics<'_>>;
}

/// The family a hook run is recorded in and the labels the runner cannot know.
pub struct RunMetrics<'a> {
    pub(crate) family: &'a HookRunMetrics,
    /// The module's name; "" for global hooks.
    pub(crate) module: String,
    /// The event that led to the run (`OperatorStartup`, ...); "" when unknown.
    pub(crate) activation: String,
}

impl Runner {
    /// A runner for `hooks` with no cluster (no kubernetes bindings, no object
    /// patcher) and no values: shell-operator's hooks driven directly, as the
    /// benchmarks do. Ready from the start.
    pub fn without_cluster(
        hooks: HookTable,
        executor: Executor,
        metrics: Arc<Metrics>,
        scheduler: Sender<Control>,
    ) -> Runner {
        Runner {
            hooks,
            executor,
            metrics,
            scheduler,
            startup_left: AtomicUsize::new(0),
            ready: Arc::new(AtomicBool::new(true)),
            kube: None,
            patcher: Err("no cluster configured".into()),
            jq_library: None,
            values: None,
        }
    }

    /// True when the task's hook was removed by a reload (`hook/table.rs`).
    fn is_retired(&self, task: &Task) -> bool {
        let hooks = self.hooks.load();
        task.hook()
            .and_then(|i| hooks.get(i))
            .is_some_and(|h| h.retired)
    }

    /// Counts down the startup work: onStartup runs, Enable tasks and the
    /// Synchronization tasks those queue (`queued` more). At zero the operator is ready.
    fn startup_task_done(&self, task: &Task, queued: usize) {
        let is_startup = task.kind != TaskKind::HookRun
            || task.binding_type == BindingType::OnStartup
            || !task.sync_bindings.is_empty();
        // Once ready, Enable and Synchronization tasks come from a reload.
        if !is_startup || self.ready.load(Ordering::Acquire) {
            return;
        }
        let done = if task.kind == TaskKind::HookRun {
            task.sync_bindings.len().max(1)
        } else {
            1
        };
        self.startup_left.fetch_add(queued, Ordering::AcqRel);
        if self.startup_left.fetch_sub(done, Ordering::AcqRel) == done {
            self.ready.store(true, Ordering::Release);
            log::info(
                "startup finished: onStartup hooks ran and bindings are synchronized",
                &[],
            );
        }
    }

    /// Runs the hook of a HookRun task once (see [`Runner::hook_outcome`]); an
    /// allowed failure is `Ok`. addon-operator calls it for the hooks a module run
    /// runs itself: a failure that is not allowed fails the module run.
    pub(crate) fn run_hook(&self, task: &Task, queue: &str) -> Result<(), TaskError> {
        match self.hook_outcome(task, queue) {
            Outcome::Done(_) | Outcome::Fail(_) => Ok(()),
            Outcome::Retry(e) | Outcome::Stop(e) => Err(e),
        }
    }

    /// Runs the hook of a HookRun task once: context, values, executor, patches,
    /// metrics; counts and logs the outcome.
    fn hook_outcome(&self, task: &Task, queue: &str) -> Outcome {
        let hooks = self.hooks.load();
        let found = task.hook().and_then(|i| Some((i, hooks.get(i)?)));
        let Some((index, hook)) = found else {
            let error = format!("{}: no hook for task {:?}", task.hook_name, task.target);
            return Outcome::Stop(TaskError::new(Cause::Internal, error));
        };
        let labels = RunLabels {
            hook: hook.name.clone(),
            binding: task.binding.clone(),
            queue: queue.to_string(),
            task: "HookRun".into(),
            event: task.binding_type.as_str().into(),
        };
        let target = self
            .values
            .as_ref()
            .and_then(|v| v.run_metrics(index, task));
        let (family, module, activation) = match &target {
            Some(t) => (t.family, t.module.as_str(), t.activation.as_str()),
            None => (&self.metrics.hook_run, "", ""),
        };
        let metric_labels = HookRunLabels {
            module,
            hook: &labels.hook,
            binding: &labels.binding,
            queue,
            activation,
        };
        family.waited(&metric_labels, task.queued_at.elapsed().as_secs_f64());
        let snapshots = match &self.kube {
            Some(kube) => kube.prepare(index, &task.contexts),
            None => Snapshots::default(),
        };
        log::info(
            "Execute hook",
            &[
                ("hook", &labels.hook),
                ("binding", &labels.binding),
                ("queue", queue),
                ("event", &labels.event),
            ],
        );
        // The values files are the operator's, not the hook's: a failure to write
        // them is retried even with allowFailure (it was retried silently before).
        let extra = match self.values.as_ref().map(|v| v.files(index)) {
            Some(Ok(files)) => files,
            None => Vec::new(),
            Some(Err(e)) => {
                let e = e.prefixed(&format!("{} FAILED: ", hook.name));
                log::error(
                    "Hook failed, will retry",
                    &[
                        ("hook", &labels.hook),
                        ("binding", &labels.binding),
                        ("queue", queue),
                        ("error", e.as_str()),
                    ],
                );
                return Outcome::Retry(e);
            }
        };
        let result = self
            .executor
            .run_with(
                &hook.path,
                &|w| write_file(w, &task.contexts, hook.is_v0(), &snapshots),
                &labels,
                &extra,
            )
            .map_err(|e| {
                let message = format!("{} FAILED: cannot run: {e}", hook.name);
                TaskError::new(Cause::of_run(&e), message)
            });
        let outcome = match &result {
            Ok(run) => {
                let patched = self
                    .apply_values(task, run)
                    .and_then(|()| self.apply_patches(run));
                match (run.success(), patched) {
                    (true, Ok(())) => Ok(()),
                    (true, Err(e)) => Err(e.prefixed(&format!("{} FAILED: ", hook.name))),
                    (false, _) => {
                        let message = format!("{} FAILED: {}", hook.name, run.error_text());
                        Err(TaskError::new(Cause::Hook, message))
                    }
                }
            }
            Err(e) => Err(e.clone()),
        };
        // Hook metrics come last, after the object patches (as in flant). The whole
        // file is validated first, so a bad file fails the run and changes nothing.
        let outcome = outcome.and_then(|()| match &result {
            Ok(run) => self.hook_metrics(hook, module, run),
            Err(_) => Ok(()),
        });
        if let Ok(run) = &result {
            family.observe(&metric_labels, run.duration, &run.usage);
        }
        let count = |outcome| family.count(&metric_labels, outcome);
        if let (Ok(run), Err(e)) = (&result, &outcome)
            && run.stopped_by_shutdown()
        {
            // The operator stopped the hook (SIGTERM at shutdown): neither a hook
            // error nor a retry, since the queue runs nothing more.
            log::info(
                "Hook stopped by the operator's shutdown",
                &[
                    ("hook", &labels.hook),
                    ("binding", &labels.binding),
                    ("queue", queue),
                    ("status", &run.status.to_string()),
                ],
            );
            return Outcome::Retry(e.clone());
        }
        let outcome = match outcome {
            Ok(()) => Outcome::done(),
            Err(e) => Outcome::hook_failed(task.allow_failure, e),
        };
        let (hook_name, binding) = (labels.hook.as_str(), labels.binding.as_str());
        match &outcome {
            Outcome::Done(_) => count(RunOutcome::Success),
            Outcome::Fail(e) => {
                count(RunOutcome::AllowedError);
                let fields = [("hook", hook_name), ("binding", binding), ("queue", queue)];
                log::info(
                    "Hook failed, but allowed to fail",
                    &[fields[0], fields[1], fields[2], ("error", e.as_str())],
                );
            }
            Outcome::Retry(e) | Outcome::Stop(e) => {
                count(RunOutcome::Error);
                let fields = [("hook", hook_name), ("binding", binding), ("queue", queue)];
                log::error(
                    "Hook failed, will retry",
                    &[fields[0], fields[1], fields[2], ("error", e.as_str())],
                );
            }
        }
        outcome
    }

    /// Hands a successful run's values patches to addon-operator's values store.
    fn apply_values(&self, task: &Task, run: &RunResult) -> Result<(), TaskError> {
        match &self.values {
            Some(values) if run.success() => match task.hook() {
                Some(hook) => values.apply(hook, task, &run.extra),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Parses and applies the `$METRICS_PATH` file of a successful run.
    /// A module hook's series also get the `module` label (addon-operator).
    fn hook_metrics(&self, hook: &Hook, module: &str, run: &RunResult) -> Result<(), TaskError> {
        let bad = |e: String| {
            let message = format!("{} FAILED: bad metrics file: {e}", hook.name);
            TaskError::new(Cause::InvalidInput, message)
        };
        let mut ops =
            (crate::hook_metrics::parse::parse(&run.metrics)).map_err(|e| bad(e.to_string()))?;
        if !module.is_empty() {
            for op in &mut ops {
                op.labels.insert("module".into(), module.into());
            }
        }
        self.metrics
            .apply_hook_metrics(&hook.name, &ops)
            .map_err(bad)
    }

    /// Applies `$KUBERNETES_PATCH_PATH`. After a failed run only the operations
    /// marked `ignoreHookError: true` run.
    fn apply_patches(&self, run: &RunResult) -> Result<(), TaskError> {
        let ops = patch::parse(&run.kubernetes_patch).map_err(|e| {
            let message = format!("bad {}: {e}", "KUBERNETES_PATCH_PATH file");
            TaskError::new(e.cause(), message)
        })?;
        if ops.is_empty() {
            return Ok(());
        }
        let client = self.patcher.as_ref().map_err(|e| {
            let message = format!("cannot apply object patches: {e}");
            TaskError::new(Cause::InvalidInput, message)
        })?;
        patch::apply(client, &ops, !run.success(), self.jq_library.as_deref())
            .map(drop)
            .map_err(|e| TaskError::new(e.cause(), e.to_string()))
    }
}

impl Handler for Runner {
    fn rate_limit(&self, task: &Task) -> Duration {
        let hooks = self.hooks.load();
        match (task.kind, task.hook().and_then(|h| hooks.get(h))) {
            (TaskKind::HookRun, Some(hook)) => hook
                .limiter
                .lock()
                .map(|mut b| b.reserve(Instant::now()))
                .unwrap_or_default(),
            _ => Duration::ZERO,
        }
    }

    fn handle(&self, task: &Task, queue: &str) -> Outcome {
        crate::latency_trace::mark(crate::latency_trace::Stage::RunStarted);
        if self.is_retired(task) {
            log::info(
                "task dropped: its hook was removed by a reload",
                &[("hook", &task.hook_name), ("queue", queue)],
            );
            return Outcome::done();
        }
        let outcome = match (task.kind, &self.kube) {
            (TaskKind::HookRun, kube) => {
                let outcome = self.hook_outcome(task, queue);
                if let (Some(kube), Outcome::Done(_) | Outcome::Fail(_)) = (kube, &outcome) {
                    kube.unlock(task);
                }
                outcome
            }
            (TaskKind::EnableScheduleBindings, _) => {
                let Some(hook) = task.hook() else {
                    let message = format!("{}: not a hook's task", task.hook_name);
                    return Outcome::Stop(TaskError::new(Cause::Internal, message));
                };
                match self.scheduler.send(Control::Enable(hook)) {
                    Ok(()) => Outcome::done(),
                    Err(_) => Outcome::Stop(TaskError::new(
                        Cause::Internal,
                        format!("{}: the scheduler thread is not running", task.hook_name),
                    )),
                }
            }
            (TaskKind::EnableKubernetesBindings, Some(kube)) => {
                // Enabling fails on its list calls to the API server.
                let enabled = kube.enable(task);
                Outcome::from_result(enabled.map_err(|e| TaskError::new(Cause::Transient, e)))
            }
            (TaskKind::EnableKubernetesBindings, None) => Outcome::Stop(TaskError::new(
                Cause::Internal,
                format!(
                    "{}: kubernetes bindings but no Kubernetes client",
                    task.hook_name
                ),
            )),
            // addon-operator's own tasks are handled by its engine, never here.
            (kind, _) => {
                let message = format!("{kind:?} task reached the shell-operator runner");
                Outcome::Stop(TaskError::new(Cause::Internal, message))
            }
        };
        match &outcome {
            Outcome::Done(next) => self.startup_task_done(task, next.len()),
            Outcome::Fail(_) => self.startup_task_done(task, 0),
            Outcome::Retry(e) if task.kind != TaskKind::HookRun => log::error(
                &format!("{task_kind:?} failed, will retry", task_kind = task.kind),
                &[("hook", &task.hook_name), ("error", e.as_str())],
            ),
            Outcome::Retry(_) | Outcome::Stop(_) => {}
        }
        outcome
    }

    fn queue_action(&self, queue: &str, action: &str, took: Duration) {
        self.metrics.queue_action(queue, action, took.as_secs_f64());
    }

    fn queue_length(&self, queue: &str, len: usize) {
        self.metrics
            .tasks_queue_length
            .with_label_values(&[queue])
            .set(len as f64);
    }

    /// Counts the failure by its cause; a run the operator's own shutdown
    /// stopped is no failure.
    fn failed(&self, queue: &str, task: &Task, error: &TaskError) {
        if crate::process::shutdown_requested() {
            return;
        }
        (self.metrics).task_error(queue, task.kind.as_str(), error.cause().as_str());
    }

    fn compacted(&self, queue: &str, hook: &str) {
        self.metrics
            .tasks_queue_compaction_operations_total
            .with_label_values(&[queue, hook])
            .inc();
        log::warn(
            "queue compaction: merged a hook's queued tasks into one",
            &[("queue", queue), ("hook", hook)],
        );
    }
}
