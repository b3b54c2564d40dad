//! addon-operator's shared state: the values of every scope, the ConfigMap's last
//! good content, the enabled modules and the converge bookkeeping, behind one
//! mutex that the queue threads take briefly (never across a hook or helm run).
//!
//! Also the values files hooks and `enabled` scripts read: `CONFIG_VALUES_PATH` is
//! `{"global": …, "<key>": …}` of config values, `VALUES_PATH` the same of effective
//! values, with `global.enabledModules` for module hooks (flant v1.0's contract).

use super::configmap::KubeConfig;
use super::helm::Helm;
use super::modules::{Layout, Owner};
use super::values::{Scope, checksum};
use crate::hook::Hook;
use crate::kube::Client;
use crate::queue::Task;
use crate::schedule::Control;
use crossbeam_channel::Sender;
use prometheus::{IntCounter, IntCounterVec, Opts, Registry};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What the engine reads and writes, shared by the queue threads.
pub struct Shared {
    pub layout: Layout,
    pub hooks: Arc<Vec<Hook>>,
    /// Whose hook each hook index is.
    pub owners: Vec<Owner>,
    /// The index of the operator's own ConfigMap watch in `hooks`.
    pub cm_hook: usize,
    pub state: Mutex<State>,
    pub helm: Helm,
    pub client: Client,
    pub namespace: String,
    pub config_map: String,
    pub ignore_release: String,
    pub tmp_dir: PathBuf,
    pub script_timeout: Option<Duration>,
    pub metrics: AddonMetrics,
    /// Set once the first converge finished (`/ready`).
    pub ready: Arc<AtomicBool>,
    /// The main queue, for tasks queued from other queues (values changes).
    pub main: Sender<Task>,
    pub scheduler: Sender<Control>,
}

/// The mutable part.
#[derive(Clone)]
pub struct State {
    pub global: Scope,
    /// Same index as `Layout::modules`.
    pub modules: Vec<ModuleState>,
    /// The ConfigMap content last applied.
    pub config: KubeConfig,
    /// `<key>Enabled` set by global hooks' patches.
    pub dynamic: BTreeMap<String, bool>,
    /// Enabled modules, in module order.
    pub enabled: Vec<usize>,
    pub converge: ConvergeState,
}

/// One module's run-time state.
#[derive(Clone)]
pub struct ModuleState {
    pub scope: Scope,
    pub enabled: bool,
    /// onStartup hooks ran since it was (re-)enabled.
    pub started: bool,
    /// Its hooks' kubernetes bindings were enabled once (watches keep running).
    pub kube_enabled: bool,
    /// A ModuleRun for it waits in the main queue.
    pub run_pending: bool,
}

/// Where converges are.
#[derive(Debug, Default, Clone)]
pub struct ConvergeState {
    /// A converge is queued or running.
    pub active: bool,
    /// Another one was asked for while one was active.
    pub again: bool,
    pub started_once: bool,
    pub done_once: bool,
}

impl Shared {
    /// The state; a poisoned lock (a panicked thread) still yields it.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hooks of `owner` with their index, in name order.
    pub fn hooks_of(&self, owner: Owner) -> impl Iterator<Item = (usize, &Hook)> {
        self.hooks
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.owners.get(*i) == Some(&owner))
    }
}

impl State {
    /// Names of the enabled modules, in order (`global.enabledModules`).
    pub fn enabled_names(&self, layout: &Layout, upto: Option<usize>) -> Vec<String> {
        let list = match upto {
            Some(n) => &self.enabled[..n.min(self.enabled.len())],
            None => &self.enabled[..],
        };
        list.iter()
            .filter_map(|&m| layout.modules.get(m).map(|m| m.name.clone()))
            .collect()
    }

    /// `(CONFIG_VALUES, VALUES)` of a global hook.
    pub fn global_files(&self) -> Result<(Value, Value), String> {
        Ok((
            json!({"global": self.global.config_values()}),
            json!({"global": self.global.values()?}),
        ))
    }

    /// `(CONFIG_VALUES, VALUES)` of module `m`'s hooks, enabled script and chart;
    /// `enabled_modules` goes into `global.enabledModules` of VALUES.
    pub fn module_files(
        &self,
        m: usize,
        enabled_modules: Vec<String>,
    ) -> Result<(Value, Value), String> {
        let module = self.modules.get(m).ok_or("no such module")?;
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
    pub fn global_checksum(&self) -> String {
        self.global
            .values()
            .map(|v| checksum(&v))
            .unwrap_or_default()
    }

    /// Checksum of module `m`'s values.
    pub fn module_checksum(&self, m: usize) -> String {
        self.modules
            .get(m)
            .and_then(|s| s.scope.values().ok())
            .map(|v| checksum(&v))
            .unwrap_or_default()
    }
}

/// addon-operator's own metrics (flant's names, with the operator's prefix).
pub struct AddonMetrics {
    pub config_values_errors_total: IntCounter,
    pub modules_discover_errors_total: IntCounter,
    pub module_run_errors_total: IntCounterVec,
    pub module_delete_errors_total: IntCounterVec,
    pub convergence_total: IntCounterVec,
}

impl AddonMetrics {
    /// Registers them under `prefix` in `registry`.
    pub fn register(prefix: &str, registry: &Registry) -> Result<AddonMetrics, String> {
        let counter = |name: &str, help: &str| -> Result<IntCounter, String> {
            let c = IntCounter::new(format!("{prefix}{name}"), help).map_err(|e| e.to_string())?;
            registry
                .register(Box::new(c.clone()))
                .map_err(|e| e.to_string())?;
            Ok(c)
        };
        let vec = |name: &str, help: &str, label: &str| -> Result<IntCounterVec, String> {
            let c = IntCounterVec::new(Opts::new(format!("{prefix}{name}"), help), &[label])
                .map_err(|e| e.to_string())?;
            registry
                .register(Box::new(c.clone()))
                .map_err(|e| e.to_string())?;
            Ok(c)
        };
        Ok(AddonMetrics {
            config_values_errors_total: counter(
                "config_values_errors_total",
                "ConfigMap contents rejected (bad YAML, keys or values)",
            )?,
            modules_discover_errors_total: counter(
                "modules_discover_errors_total",
                "Failed computations of the enabled modules",
            )?,
            module_run_errors_total: vec(
                "module_run_errors_total",
                "Failed module runs",
                "module",
            )?,
            module_delete_errors_total: vec(
                "module_delete_errors_total",
                "Failed module deletions",
                "module",
            )?,
            convergence_total: vec("convergence_total", "Converges started", "activation")?,
        })
    }
}
