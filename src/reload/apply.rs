//! Running one reload: load the hooks again, diff, plan, then change the
//! running operator in an order that never lets a removed hook run again nor
//! an added one start before its bindings exist: the added hooks' snapshot
//! slots first, then the table swap (from then on the router and the queues
//! drop what a retired hook still had in flight), then the retired hooks'
//! watches, snapshots, schedules and webhook entries, and last the added hooks'
//! schedules and their onStartup and Enable tasks on the main queue.

use super::ReloadError;
use super::diff::{Diff, diff};
use super::plan::{Limits, Plan, plan};
use super::trigger::Cause;
use crate::hook::Hook;
use crate::hook::table::HookTable;
use crate::log;
use crate::monitor;
use crate::monitor::store::SnapshotStore;
use crate::queue::Task;
use crate::schedule;
use crate::webhook::register::Registrar;
use crossbeam_channel::{Sender, bounded};
use prometheus::{IntCounterVec, Opts};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Kubernetes side a reload changes: the snapshots and the monitor.
pub(crate) struct KubeSide {
    pub(crate) store: Arc<SnapshotStore>,
    pub(crate) monitor: Sender<monitor::Control>,
}

/// Everything a reload reads and changes; owned by the `reload` thread.
pub(crate) struct Reloader {
    /// The hooks dir (absolute) and how `--config` runs.
    pub(crate) root: PathBuf,
    pub(crate) timeout: Option<Duration>,
    pub(crate) jq_library: Option<PathBuf>,
    pub(crate) table: HookTable,
    /// The queues started at startup (a reload cannot add one).
    pub(crate) queues: BTreeSet<String>,
    pub(crate) kube: Option<KubeSide>,
    pub(crate) scheduler: Sender<schedule::Control>,
    /// The main queue, for the added hooks' onStartup and Enable tasks.
    pub(crate) main: Sender<Task>,
    /// The admission webhook registrations, when the operator has any.
    pub(crate) registrar: Option<Arc<Registrar>>,
    /// `<prefix>hooks_reloads_total{outcome}`.
    pub(crate) reloads: IntCounterVec,
    /// The hooks tree's fingerprint when the running hooks were loaded.
    pub(crate) tree: Option<u128>,
    /// What the fingerprint leaves out (`tree::skipped`).
    pub(crate) skip: Vec<PathBuf>,
    /// Set once the startup tasks are done: no reload runs before (the startup
    /// count would take the added hooks' tasks for its own).
    pub(crate) ready: Arc<std::sync::atomic::AtomicBool>,
}

/// Registers `<prefix>hooks_reloads_total{outcome}` (`success`, `unchanged`,
/// `error`).
pub(crate) fn register_metric(
    registry: &crate::metrics::Families,
    prefix: &str,
) -> Result<IntCounterVec, String> {
    let opts = Opts::new(
        format!("{prefix}hooks_reloads_total"),
        "Reloads of the hooks dir, by outcome (success, unchanged, error).",
    );
    let counter = IntCounterVec::new(opts, &["outcome"]).map_err(|e| e.to_string())?;
    registry
        .register(Box::new(counter.clone()))
        .map_err(|e| format!("--prometheus-metrics-prefix {prefix:?}: {e}"))?;
    Ok(counter)
}

impl Reloader {
    /// The hooks dir the reload thread polls.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// True once the startup tasks are done.
    pub(crate) fn ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Acquire)
    }

    /// One reload: logs what changed (or why nothing did) and counts it.
    pub(crate) fn reload(&self, cause: Cause) {
        let started = Instant::now();
        let result = self.try_reload();
        let took = format!("{:?}", started.elapsed());
        let fields = |d: &Diff| {
            [
                ("added", d.added.join(",")),
                ("removed", d.removed.join(",")),
                ("changed", d.changed.join(",")),
                ("unchanged", d.unchanged.len().to_string()),
            ]
        };
        let outcome = match &result {
            Ok(d) if d.is_empty() => "unchanged",
            Ok(_) => "success",
            Err(_) => "error",
        };
        self.reloads.with_label_values(&[outcome]).inc();
        match result {
            Ok(d) => {
                let f = fields(&d);
                let mut all = vec![("cause", cause.as_str()), ("outcome", outcome)];
                all.extend(f.iter().map(|(k, v)| (*k, v.as_str())));
                all.push(("took", &took));
                log::info("hooks reloaded", &all);
            }
            Err(e) => log::error(
                "hooks reload failed: the running hooks are kept",
                &[("cause", cause.as_str()), ("error", &e.to_string())],
            ),
        }
    }

    fn try_reload(&self) -> Result<Diff, ReloadError> {
        let jq = self.jq_library.as_deref();
        let loaded = crate::hook::load_all(&self.root, self.timeout, jq)
            .map_err(|e| ReloadError::Load(e.to_string()))?;
        let current = self.table.load();
        let d = diff(sums(&current), sums(&loaded));
        if d.is_empty() {
            return Ok(d);
        }
        let limits = Limits {
            queues: &self.queues,
            kube: self.kube.is_some(),
        };
        let p = plan(&current, loaded, &d, &limits)?;
        self.execute(&current, p)?;
        Ok(d)
    }

    fn execute(&self, current: &[Hook], p: Plan) -> Result<(), ReloadError> {
        if let Some(k) = &self.kube {
            for &i in &p.added {
                k.store.add_hook(i, p.next[i].config.kubernetes.len());
            }
        }
        let admission: Vec<usize> = (p.retired.iter().copied())
            .filter(|&i| {
                let c = &current[i].config;
                !c.validating.is_empty() || !c.mutating.is_empty()
            })
            .collect();
        let next = Arc::new(p.next);
        self.table.store(Arc::clone(&next));
        for &i in &p.retired {
            self.retire(i)?;
        }
        if let (Some(r), false) = (&self.registrar, admission.is_empty())
            && let Err(e) = r.set_active(&admission, false)
        {
            log::error(
                "reload: cannot remove webhook entries",
                &[("error", &e.to_string())],
            );
        }
        let stopped = |_| ReloadError::Stopped("scheduler");
        if !p.entries.is_empty() {
            (self.scheduler.send(schedule::Control::Add(p.entries))).map_err(stopped)?;
        }
        for task in crate::startup::tasks_for(&next, &p.added) {
            (self.main.send(task)).map_err(|_| ReloadError::Stopped("main queue"))?;
        }
        Ok(())
    }

    /// Stops a retired hook's watches and schedules and forgets its snapshots.
    fn retire(&self, hook: usize) -> Result<(), ReloadError> {
        if let Some(k) = &self.kube {
            let (reply, done) = bounded(1);
            let disable = monitor::Control::Disable { hook, reply };
            let stopped = ReloadError::Stopped("monitor");
            k.monitor.send(disable).map_err(|_| stopped)?;
            done.recv().map_err(|_| ReloadError::Stopped("monitor"))?;
            k.store.remove_hook(hook);
        }
        (self.scheduler.send(schedule::Control::Remove(hook)))
            .map_err(|_| ReloadError::Stopped("scheduler"))
    }
}

/// The live hooks as (name, `--config` sum) pairs.
fn sums(hooks: &[Hook]) -> Vec<(&str, u128)> {
    (hooks.iter().filter(|h| !h.retired))
        .map(|h| (h.name.as_str(), h.config_sum))
        .collect()
}
