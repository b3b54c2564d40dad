//! addon-operator's reload (issue 39): a change under the modules dirs or the
//! global hooks dir, or SIGHUP, re-runs the modules whose files changed, and
//! only them. The `reload` thread (started by `operator.rs`, its loop and
//! debounce in `reload/`) calls [`ModulesReload::reload`].
//!
//! A reload discovers the modules again and runs every hook's `--config`. If a
//! module appeared, a hook's path or `--config` output changed, or a module's
//! static `<key>Enabled` changed, it changes nothing and fails (this version
//! needs a restart for those; the error says which). Otherwise:
//!
//! - a module whose directory is gone is marked removed (`State::removed`): it
//!   is never enabled again, and the converge the reload asks for purges it as
//!   it would a disabled module (watches and schedules off, webhook entries
//!   removed, `helm uninstall`), skipping its lifecycle hooks whose files went
//!   with it; one that comes back at the same path is no longer removed;
//! - each module whose directory changed (its chart, `values.yaml`,
//!   `openapi/`, hooks' scripts) gets its new static values and schemas and a
//!   `ModuleRun` through the lifecycle (`ValuesChanged`, event
//!   `ModuleFilesChanged`), which upgrades its release when the chart or values
//!   changed; other modules do not run;
//! - a changed `global:` section of a modules dir's `values.yaml` asks for a
//!   converge.

use super::Input;
use super::modules::chart_dir;
use super::modules::{self, Layout, Owner};
use super::state::Shared;
use crate::flags::addon::AddonFlags;
use crate::hook::Hook;
use crate::log;
use crate::metrics::Families;
use crate::reload::tree;
use crate::reload::trigger::Cause;
use prometheus::{IntCounterVec, Opts};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Why an addon-operator reload changed nothing.
#[derive(Debug)]
pub(crate) enum ReloadError {
    /// Discovery, a `values.yaml`, a schema or a hook's `--config` failed.
    Load(crate::addon::modules::ModulesError),
    /// Modules appeared (not reloadable yet), or one moved to another path.
    Added(Vec<String>),
    /// Hooks were added, removed or got another `--config` output.
    Hooks(Vec<String>),
    /// A module's static `<key>Enabled` changed.
    Enabled(String),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let restart = "restart the operator to apply it";
        match self {
            ReloadError::Load(e) => e.fmt(f),
            ReloadError::Added(names) => {
                write!(f, "modules added: {}: {restart}", names.join(","))
            }
            ReloadError::Hooks(names) => write!(
                f,
                "hooks added, removed or with another --config: {}: {restart}",
                names.join(",")
            ),
            ReloadError::Enabled(m) => {
                write!(
                    f,
                    "module '{m}': its static <key>Enabled changed: {restart}"
                )
            }
        }
    }
}

/// What a successful reload did.
#[derive(Debug, Default)]
struct Changes {
    /// Modules run again.
    modules: Vec<String>,
    /// Modules found removed (purged by the converge asked for).
    removed: Vec<String>,
    /// Removed modules found back.
    returned: Vec<String>,
    global: bool,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.modules.is_empty()
            && self.removed.is_empty()
            && self.returned.is_empty()
            && !self.global
    }
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
    /// `<prefix>modules_reloads_total{outcome}`.
    pub(super) reloads: IntCounterVec,
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

/// Registers `<prefix>modules_reloads_total{outcome}`.
pub(crate) fn register_metric(
    registry: &Families,
    prefix: &str,
) -> Result<IntCounterVec, prometheus::Error> {
    let opts = Opts::new(
        format!("{prefix}modules_reloads_total"),
        "Reloads of the modules and global hooks dirs, by outcome (success, unchanged, error).",
    );
    let counter = IntCounterVec::new(opts, &["outcome"])?;
    registry.register(Box::new(counter.clone()))?;
    Ok(counter)
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
        self.reloads.with_label_values(&[outcome]).inc();
        match result {
            Ok(c) => log::info(
                "modules reloaded",
                &[
                    ("cause", cause.as_str()),
                    ("outcome", outcome),
                    ("modules", &c.modules.join(",")),
                    ("removed", &c.removed.join(",")),
                    ("returned", &c.returned.join(",")),
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
        let found = found_modules(&self.shared.layout, &layout)?;
        chart_dir::generate_charts(&mut layout.modules, &self.tmp_dir)
            .map_err(ReloadError::Load)?;
        let trees = self.trees_by_running_index(&layout, &found);
        let (hooks, _) = modules::load_hooks(&layout, self.timeout, self.jq_library.as_deref())
            .map_err(ReloadError::Load)?;
        same_hooks(&self.shared, &found, &hooks)?;
        let changes = self.apply(layout, &found, &trees);
        self.trees = trees;
        Ok(changes)
    }

    /// The new fingerprints, by running module index (`None` for a module gone).
    fn trees_by_running_index(&self, layout: &Layout, found: &[Option<usize>]) -> Trees {
        let new = Trees::of(&self.flags, layout, self.trees.skip.clone());
        let modules = (found.iter())
            .map(|f| f.and_then(|n| new.modules.get(n).copied().flatten()))
            .collect();
        Trees { modules, ..new }
    }

    /// Marks removed and returned modules, gives changed ones their new static
    /// values and schemas, and asks for their runs and the converge.
    fn apply(&self, mut layout: Layout, found: &[Option<usize>], trees: &Trees) -> Changes {
        let mut changes = Changes::default();
        let mut st = self.shared.lock();
        for (m, f) in found.iter().enumerate() {
            let name = self.shared.layout.modules[m].name.clone();
            let Some(n) = *f else {
                if st.removed.insert(m) {
                    changes.removed.push(name);
                }
                continue;
            };
            if st.removed.remove(&m) {
                changes.returned.push(name.clone());
            }
            let new = &mut layout.modules[n];
            let scope = &mut st.modules[m].scope;
            let moved = trees.modules.get(m) != self.trees.modules.get(m);
            if moved {
                // Its drift.yaml may have changed (or changed back).
                let settings = std::mem::take(&mut new.drift);
                let notice = super::release::drift::watcher::Notice::Settings {
                    module: m,
                    settings,
                };
                self.shared.drift_notice(notice);
            }
            if moved || scope.static_values != new.static_values {
                scope.static_values = new.static_values.clone();
                scope.schemas = std::mem::replace(&mut new.schemas, super::Schemas::none());
                changes.modules.push(name);
            }
        }
        if st.global.static_values != layout.global_static {
            st.global.static_values = layout.global_static.clone();
            st.global.schemas =
                std::mem::replace(&mut layout.global_schemas, super::Schemas::none());
            changes.global = true;
        }
        drop(st);
        let event = "ModuleFilesChanged".to_string();
        for name in &changes.modules {
            if let Some(module) = self
                .shared
                .layout
                .modules
                .iter()
                .position(|m| &m.name == name)
            {
                let event = event.clone();
                self.shared.send(Input::ValuesChanged { module, event });
            }
        }
        if changes.global || !changes.removed.is_empty() || !changes.returned.is_empty() {
            let event = "ModulesChanged".to_string();
            self.shared.send(Input::ConvergeRequested { event });
        }
        changes
    }
}

/// Where each running module is in the new layout (`None`: gone); an error
/// when the new layout has a module the running one has not (by name and
/// path), or a module's static `<key>Enabled` changed.
fn found_modules(running: &Layout, new: &Layout) -> Result<Vec<Option<usize>>, ReloadError> {
    let same = |a: &modules::Module, b: &modules::Module| a.name == b.name && a.path == b.path;
    let added: Vec<String> = (new.modules.iter())
        .filter(|m| !running.modules.iter().any(|r| same(r, m)))
        .map(|m| m.name.clone())
        .collect();
    if !added.is_empty() {
        return Err(ReloadError::Added(added));
    }
    let found: Vec<Option<usize>> = (running.modules.iter())
        .map(|r| new.modules.iter().position(|m| same(r, m)))
        .collect();
    for (r, f) in running.modules.iter().zip(&found) {
        if f.is_some_and(|n| new.modules[n].static_enabled != r.static_enabled) {
            return Err(ReloadError::Enabled(r.name.clone()));
        }
    }
    Ok(found)
}

/// The same hooks (by name and `--config` output), the operator's own and
/// those of modules now gone left out.
fn same_hooks(shared: &Shared, found: &[Option<usize>], new: &[Hook]) -> Result<(), ReloadError> {
    let kept = |o: &Owner| match o {
        Owner::ConfigMap => false,
        Owner::Module(m) => found.get(*m).is_some_and(Option::is_some),
        Owner::Global => true,
    };
    let old: Vec<(&str, u128)> = (shared.hooks.iter().zip(&shared.owners))
        .filter(|(_, o)| kept(o))
        .map(|(h, _)| (h.name.as_str(), h.config_sum))
        .collect();
    let now: Vec<(&str, u128)> = new
        .iter()
        .map(|h| (h.name.as_str(), h.config_sum))
        .collect();
    let d = crate::reload::diff::diff(old, now);
    if d.is_empty() {
        return Ok(());
    }
    let mut names = d.added;
    names.extend(d.removed);
    names.extend(d.changed);
    Err(ReloadError::Hooks(names))
}
