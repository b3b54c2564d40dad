//! addon-operator's reload (issue 39): a change under the modules dirs or the
//! global hooks dir, or SIGHUP, applies what changed without a restart. The
//! `reload` thread (started by `operator.rs`, its loop and debounce in
//! `reload/`) calls [`ModulesReload::reload`].
//!
//! A reload discovers the modules again and runs every hook's `--config`
//! (`try_reload`), decides what changes (`plan.rs`, pure), reads the
//! ConfigMap sections of modules it adds (`config.rs`), then changes the
//! running operator (`apply.rs`):
//!
//! - a module whose directory is gone is marked removed (`State::removed`) and
//!   purged by the converge the reload asks for; one that comes back at the
//!   same path is no longer removed;
//! - a module found added gets the next module index, its static values,
//!   schemas and ConfigMap section, and is enabled (or not) by that converge,
//!   which installs it like a module present at startup;
//! - hooks are compared by name and `--config` output: removed and changed
//!   ones are retired (watches, schedules, admission entries off), added and
//!   changed ones appended; a started module whose hooks changed enables the
//!   new ones (their Synchronization) and runs once, without an uninstall;
//!   global hooks added get their onStartup run and Enable tasks and a
//!   converge follows;
//! - each module whose directory changed gets its new static values and
//!   schemas and a `ModuleRun`; a changed static `<key>Enabled` or `global:`
//!   section asks for a converge.
//!
//! Anything that fails before `apply` changes nothing: the old set keeps
//! running, the error is logged and counted.

mod apply;
mod config;
mod plan;

use super::modules::chart_dir;
use super::modules::{self, Layout, Owner};
use super::state::Shared;
use crate::flags::addon::AddonFlags;
use crate::hook::Hook;
use crate::log;
use crate::metrics::Families;
use crate::queue::Task;
use crate::reload::tree;
use crate::reload::trigger::Cause;
use crossbeam_channel::Sender;
use prometheus::{IntCounterVec, Opts};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Why an addon-operator reload changed nothing.
#[derive(Debug)]
pub(crate) enum ReloadError {
    /// Discovery, a `values.yaml`, a schema or a hook's `--config` failed.
    Load(crate::addon::modules::ModulesError),
    /// Modules found under another path than the one they run from.
    Moved(Vec<String>),
    /// A hook to add or change has admission or conversion bindings.
    Webhooks(String),
    /// A hook to remove or change has conversion bindings.
    Conversion(String),
    /// A hook to add names a queue the operator did not start with.
    NewQueue { hook: String, queue: String },
    /// A schedule binding of a hook to add does not parse.
    Schedule(String),
    /// The ConfigMap section of a module to add fails its config schema.
    Config { module: String, error: String },
    /// An added module's `crds/` dir could not be read.
    Crds(crate::addon::release::crds::CrdFilesError),
    /// A thread the reload needs has stopped (the operator is shutting down).
    Stopped(&'static str),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let restart = "restart the operator to apply it";
        match self {
            ReloadError::Load(e) => e.fmt(f),
            ReloadError::Schedule(e) => f.write_str(e),
            ReloadError::Moved(names) => write!(
                f,
                "modules moved to another path: {}: {restart}",
                names.join(",")
            ),
            ReloadError::Webhooks(hook) => write!(
                f,
                "hook '{hook}': validating, mutating and conversion bindings are bound at startup only: {restart}"
            ),
            ReloadError::Conversion(hook) => write!(
                f,
                "hook '{hook}': a hook with conversion bindings cannot be removed or changed: {restart}"
            ),
            ReloadError::NewQueue { hook, queue } => write!(
                f,
                "hook '{hook}': queue '{queue}' did not exist at startup: {restart}"
            ),
            ReloadError::Config { module, error } => {
                write!(f, "module '{module}': its ConfigMap section: {error}")
            }
            ReloadError::Crds(e) => e.fmt(f),
            ReloadError::Stopped(what) => write!(f, "the {what} is not running"),
        }
    }
}

/// What a successful reload did.
#[derive(Debug, Default)]
struct Changes {
    /// Modules run again (their files changed).
    modules: Vec<String>,
    /// Modules found removed (purged by the converge asked for).
    removed: Vec<String>,
    /// Removed modules found back.
    returned: Vec<String>,
    /// Modules found added.
    added: Vec<String>,
    /// Modules whose static `<key>Enabled` changed.
    enabled: Vec<String>,
    /// Hooks added, removed or changed (by name).
    hooks: Vec<String>,
    global: bool,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.modules.is_empty()
            && self.removed.is_empty()
            && self.returned.is_empty()
            && self.added.is_empty()
            && self.enabled.is_empty()
            && self.hooks.is_empty()
            && !self.global
    }

    /// How many of each kind of change, as `modules_reload_changes_total`
    /// counts them.
    fn counts(&self) -> [(&'static str, usize); 9] {
        let hooks = |mark: char| self.hooks.iter().filter(|h| h.starts_with(mark)).count();
        [
            ("module_added", self.added.len()),
            ("module_removed", self.removed.len()),
            ("module_returned", self.returned.len()),
            ("module_run", self.modules.len()),
            ("enabled_changed", self.enabled.len()),
            ("hook_added", hooks('+')),
            ("hook_removed", hooks('-')),
            ("hook_changed", hooks('~')),
            ("global_changed", usize::from(self.global)),
        ]
    }

    /// A converge is needed: modules come or go, or global settings changed.
    fn converge(&self) -> bool {
        self.global
            || !self.removed.is_empty()
            || !self.returned.is_empty()
            || !self.added.is_empty()
            || !self.enabled.is_empty()
    }
}

/// What a reload hands work to besides `Shared`: set at spawn.
pub(crate) struct Wiring {
    /// The main queue (Enable and onStartup tasks of added hooks).
    pub(crate) main: Sender<Task>,
    /// The queues started at startup (a reload cannot add one).
    pub(crate) queues: BTreeSet<String>,
    /// The monitor's control channel (stops a retired hook's watches).
    pub(crate) monitor: Option<Sender<crate::monitor::Control>>,
    /// The operator's metrics (each hook's module, for the kube_* series).
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
}

/// The reload of modules and global hooks; owned by the `reload` thread.
pub(crate) struct ModulesReload {
    pub(super) shared: Arc<Shared>,
    pub(super) flags: AddonFlags,
    pub(super) tmp_dir: PathBuf,
    pub(super) timeout: Option<Duration>,
    pub(super) jq_library: Option<PathBuf>,
    /// Every watched tree's fingerprint, and each module dir's, when loaded.
    pub(super) trees: Trees,
    pub(super) reloads: ReloadMetrics,
    pub(super) wiring: Wiring,
    /// The ModuleSettings webhook's schemas (`--module-settings-resources`).
    pub(super) validator: Option<Arc<crate::addon::config::settings::admission::Validator>>,
}

/// Fingerprints taken at bind, before the hooks loaded.
#[derive(Debug, Default, Clone)]
pub(crate) struct Trees {
    pub(crate) all: Option<u128>,
    /// Same index as `Layout::modules`.
    pub(crate) modules: Vec<Option<u128>>,
    /// What they leave out (`tree::skipped`: the tmp dir, should it be inside).
    pub(crate) skip: Vec<PathBuf>,
}

impl Trees {
    /// The fingerprints of `layout`'s trees (`flags` names the dirs), without
    /// `skip`.
    pub(crate) fn of(flags: &AddonFlags, layout: &Layout, skip: Vec<PathBuf>) -> Trees {
        Trees {
            all: tree::fingerprint_all(&roots(flags), &skip),
            modules: (layout.modules.iter())
                .map(|m| tree::fingerprint(&m.path, &skip).ok())
                .collect(),
            skip,
        }
    }
}

/// The dirs a reload watches: every modules dir and the global hooks dir.
pub(crate) fn roots(flags: &AddonFlags) -> Vec<PathBuf> {
    let mut roots = flags.modules_dirs.clone();
    roots.push(flags.global_hooks_dir.clone());
    roots
}

/// The reload's counters.
pub(crate) struct ReloadMetrics {
    /// `<prefix>modules_reloads_total{outcome}`.
    reloads: IntCounterVec,
    /// `<prefix>modules_reload_changes_total{change}`: what the successful
    /// reloads changed, one per module or hook.
    changes: IntCounterVec,
}

/// Registers `<prefix>modules_reloads_total{outcome}` and
/// `<prefix>modules_reload_changes_total{change}`.
pub(crate) fn register_metric(
    registry: &Families,
    prefix: &str,
) -> Result<ReloadMetrics, prometheus::Error> {
    let counter = |name: &str, help: &str, label: &str| {
        let opts = Opts::new(format!("{prefix}{name}"), help);
        let counter = IntCounterVec::new(opts, &[label])?;
        registry.register(Box::new(counter.clone()))?;
        Ok::<_, prometheus::Error>(counter)
    };
    Ok(ReloadMetrics {
        reloads: counter(
            "modules_reloads_total",
            "Reloads of the modules and global hooks dirs, by outcome (success, unchanged, error).",
            "outcome",
        )?,
        changes: counter(
            "modules_reload_changes_total",
            "What reloads changed: modules added, removed, returned or run, static Enabled flags, hooks added, removed or changed, global values.",
            "change",
        )?,
    })
}

impl crate::reload::Reload for ModulesReload {
    fn loaded_tree(&self) -> Option<u128> {
        self.trees.all
    }

    fn tree(&self) -> Option<u128> {
        tree::fingerprint_all(&roots(&self.flags), &self.trees.skip)
    }

    fn ready(&self) -> bool {
        self.shared.ready.load(Ordering::Acquire)
    }

    fn reload(&mut self, cause: Cause) {
        let result = self.try_reload();
        let outcome = match &result {
            Ok(c) if c.is_empty() => "unchanged",
            Ok(_) => "success",
            Err(_) => "error",
        };
        self.reloads.reloads.with_label_values(&[outcome]).inc();
        if let Ok(c) = &result {
            for (change, n) in c.counts() {
                (self.reloads.changes.with_label_values(&[change])).inc_by(n as u64);
            }
        }
        match result {
            Ok(c) => log::info(
                "modules reloaded",
                &[
                    ("cause", cause.as_str()),
                    ("outcome", outcome),
                    ("modules", &c.modules.join(",")),
                    ("added", &c.added.join(",")),
                    ("removed", &c.removed.join(",")),
                    ("returned", &c.returned.join(",")),
                    ("enabled_changed", &c.enabled.join(",")),
                    ("hooks", &c.hooks.join(",")),
                    ("global", if c.global { "changed" } else { "unchanged" }),
                ],
            ),
            Err(e) => log::error(
                "modules reload failed: the running modules are kept",
                &[("cause", cause.as_str()), ("error", &e.to_string())],
            ),
        }
    }
}

impl ModulesReload {
    fn try_reload(&mut self) -> Result<Changes, ReloadError> {
        let mut layout = modules::discover(&self.flags).map_err(ReloadError::Load)?;
        let running = self.shared.layout();
        let matched = plan::match_modules(&running.modules, &layout.modules)?;
        chart_dir::generate_charts(&mut layout.modules, &self.tmp_dir)
            .map_err(ReloadError::Load)?;
        let trees = self.trees_by_running_index(&layout, &matched);
        let jq = self.jq_library.as_deref();
        let (hooks, owners) =
            modules::load_hooks(&layout, self.timeout, jq).map_err(ReloadError::Load)?;
        let index = matched.running_index(layout.modules.len());
        let loaded: Vec<(Hook, Owner)> = (hooks.into_iter().zip(owners))
            .map(|(h, o)| match o {
                Owner::Module(n) => (h, Owner::Module(index[n])),
                other => (h, other),
            })
            .collect();
        let kept = |o: &Owner| match o {
            Owner::ConfigMap => false,
            Owner::Module(m) => matched.found.get(*m).is_some_and(Option::is_some),
            Owner::Global => true,
        };
        let limits = plan::Limits {
            queues: &self.wiring.queues,
        };
        let (current, owners) = (self.shared.hook_list(), self.shared.owners.load());
        let hooks = plan::plan_hooks(&current, &owners, kept, loaded, &limits)?;
        let added = config::added_scopes(&self.shared, &mut layout, &matched.added)?;
        let enabled = plan::enabled_changed(&running, &layout, &matched);
        let changes = self.apply(apply::Prepared {
            layout,
            matched,
            hooks,
            added,
            enabled,
            trees: &trees,
        })?;
        self.trees = trees;
        if let Some(v) = &self.validator
            && !(changes.added.is_empty() && changes.modules.is_empty() && !changes.global)
        {
            let st = self.shared.lock();
            v.replace(super::settings_scopes(&self.shared.layout(), &st));
        }
        Ok(changes)
    }

    /// The new fingerprints by running module index (`None` for a module
    /// gone), the added modules' after the running ones.
    fn trees_by_running_index(&self, layout: &Layout, matched: &plan::Matched) -> Trees {
        let new = Trees::of(&self.flags, layout, self.trees.skip.clone());
        let at = |n: usize| new.modules.get(n).copied().flatten();
        let modules = (matched.found.iter())
            .map(|f| f.and_then(at))
            .chain(matched.added.iter().map(|&n| at(n)))
            .collect();
        Trees { modules, ..new }
    }
}
