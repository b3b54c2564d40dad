//! Running a hook for a webhook request, directly on the handler thread (not
//! through a queue, as in flant): the hook's rate limiter first, then snapshots
//! (from the monitors, through [`SnapshotSource`]), the binding context file, the
//! executor with the request's time budget, the hook's object patches
//! (`$KUBERNETES_PATCH_PATH`), and the usual hook run metrics (with an empty
//! `queue` label, as flant's webhook tasks have no queue).

use crate::executor::{Executor, RunLabels, RunResult};
use crate::hook::Hook;
use crate::hook::context::{BindingContext, Snapshots, write_file};
use crate::log;
use crate::metrics::{HookRunLabels, Metrics};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Snapshots for a hook's webhook run: `(hook name, binding names)` → items per
/// binding name. The operator passes the monitors' store here.
pub(crate) type SnapshotSource = Arc<dyn Fn(&str, &[String]) -> Snapshots + Send + Sync>;

/// Why a hook produced no result.
#[derive(Debug)]
pub(crate) enum RunError {
    /// The hook's `settings.executionMinInterval` would delay it past the budget.
    RateLimited(Duration),
    /// The hook could not be started (temp files, exec).
    Start(String),
    /// The hook's object patches could not be applied.
    Patch(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::RateLimited(d) => write!(
                f,
                "rate limited by settings.executionMinInterval (next run in {:.1}s)",
                d.as_secs_f64()
            ),
            RunError::Start(e) => write!(f, "cannot run: {e}"),
            RunError::Patch(e) => write!(f, "object patches failed: {e}"),
        }
    }
}

/// Shared by the admission and conversion handlers.
pub struct HookRunner {
    pub(crate) hooks: Arc<Vec<Hook>>,
    pub(crate) executor: Executor,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) snapshots: SnapshotSource,
    /// The object patcher's client; `None` when no cluster is configured.
    pub(crate) patcher: Option<crate::kube::Client>,
    pub(crate) jq_library: Option<std::path::PathBuf>,
}

impl HookRunner {
    /// A runner of `hooks`' webhook runs with no cluster (no object patcher)
    /// and no jq library; `snapshots` answers their snapshot reads.
    pub fn new(
        hooks: Arc<Vec<Hook>>,
        executor: Executor,
        metrics: Arc<Metrics>,
        snapshots: SnapshotSource,
    ) -> HookRunner {
        HookRunner {
            hooks,
            executor,
            metrics,
            snapshots,
            patcher: None,
            jq_library: None,
        }
    }

    /// Runs hook `index` with one context; `budget` caps the rate-limit wait and
    /// the run itself (the operator's `--hook-run-timeout` also applies).
    pub(crate) fn run(
        &self,
        index: usize,
        ctx: BindingContext,
        budget: Duration,
    ) -> Result<RunResult, RunError> {
        let hook = self
            .hooks
            .get(index)
            .ok_or_else(|| RunError::Start(format!("no hook #{index}")))?;
        let started = Instant::now();
        let wait = hook
            .limiter
            .lock()
            .map(|mut b| b.reserve(started))
            .unwrap_or_default();
        if wait >= budget {
            if let Ok(mut b) = hook.limiter.lock() {
                b.refund();
            }
            return Err(RunError::RateLimited(wait));
        }
        std::thread::sleep(wait);
        let snapshots = if ctx.snapshot_names.is_empty() {
            Snapshots::default()
        } else {
            (self.snapshots)(&hook.name, &ctx.snapshot_names)
        };
        let labels = RunLabels {
            hook: hook.name.clone(),
            binding: ctx.binding.clone(),
            queue: String::new(),
            task: "HookRun".into(),
            event: ctx.binding_type.as_str().into(),
        };
        let mut executor = self.executor.clone();
        let left = budget.saturating_sub(wait);
        executor.timeout = Some(executor.timeout.map_or(left, |t| t.min(left)));
        log::info(
            "Execute hook",
            &[
                ("hook", &labels.hook),
                ("binding", &labels.binding),
                ("event", &labels.event),
            ],
        );
        let run = executor
            .run(
                &hook.path,
                &|w| write_file(w, std::slice::from_ref(&ctx), hook.is_v0(), &snapshots),
                &labels,
            )
            .map_err(|e| RunError::Start(e.to_string()))?;
        self.observe(&labels, &run);
        self.apply_patches(&run).map_err(RunError::Patch)?;
        Ok(run)
    }

    /// Applies `$KUBERNETES_PATCH_PATH` (after a failed run only the operations
    /// marked `ignoreHookError`), as queued runs do.
    fn apply_patches(&self, run: &RunResult) -> Result<(), String> {
        let ops = crate::patch::parse(&run.kubernetes_patch).map_err(|e| e.to_string())?;
        if ops.is_empty() {
            return Ok(());
        }
        let client = self
            .patcher
            .as_ref()
            .ok_or("no Kubernetes client configured")?;
        crate::patch::apply(client, &ops, !run.success(), self.jq_library.as_deref())
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn observe(&self, labels: &RunLabels, run: &RunResult) {
        let family = &self.metrics.hook_run;
        let l = HookRunLabels {
            hook: &labels.hook,
            binding: &labels.binding,
            ..HookRunLabels::default()
        };
        family.observe(&l, run.duration, &run.usage);
        // Only the one counter (no zero series for the others, as before).
        let counter = if run.success() {
            &family.success_total
        } else {
            &family.errors_total
        };
        counter.with_label_values(&[l.hook, l.binding, ""]).inc();
    }
}
