//! Values around every hook run ([`HookValues`] for the shared runner): the values
//! files a global or module hook reads, and what its two patch files change.
//!
//! A run's patches change values only whole: both files are parsed and checked (path
//! rules, strict apply, schemas) and the ConfigMap is written before anything is
//! stored; any failure fails the run, which the queue retries, and the values stay
//! as they were. The check holds the addon state's lock, the ConfigMap write does
//! not (a slow API server must not stall the router, which takes that lock), and
//! the result is stored under the lock only if the values it was computed from did
//! not move meanwhile; else it is computed and written again. Then the reactions of seed 004, sent to the lifecycle through the
//! router: a global hook's schedule or event run that changed global values (or
//! `*Enabled` flags) asks for a converge; a module hook's that changed its module's
//! values, a run of the module.

use crate::addon::Error;
use crate::addon::config::configmap;
use crate::addon::config::settings::spec;
use crate::addon::config::values::{PatchOp, parse_patch, root_of};
use crate::addon::modules::Owner;
use crate::addon::run::lifecycle::Input;
use crate::addon::run::settings_report as report;
use crate::addon::state::{Shared, State};
use crate::executor::ExtraFile;
use crate::hook::context::BindingType;
use crate::log;
use crate::queue::{Task, TaskError};
use crate::runner::{HookValues, RunMetrics};
use serde_json::Value;
use std::sync::Arc;

const PATCH_FILES: [&str; 2] = ["CONFIG_VALUES_JSON_PATCH_PATH", "VALUES_JSON_PATCH_PATH"];

/// How many times a patch is computed and written while its values keep moving.
const WRITE_ATTEMPTS: usize = 5;

/// The error when the values moved under every attempt.
fn kept_moving(what: &str) -> Error {
    Error::KeptMoving {
        what: what.to_string(),
        attempts: WRITE_ATTEMPTS,
    }
}

/// The runner's values hook.
pub(crate) struct ValuesHook {
    pub(crate) shared: Arc<Shared>,
}

impl HookValues for ValuesHook {
    fn files(&self, hook: usize) -> Result<Vec<ExtraFile>, TaskError> {
        let st = self.shared.lock();
        let (config, values) = match self.shared.owner(hook) {
            Some(Owner::Global) => st.global_files()?,
            Some(Owner::Module(m)) => {
                let enabled = st.enabled_names(&self.shared.layout(), None);
                st.module_files(m, enabled)?
            }
            _ => return Ok(Vec::new()),
        };
        let input = |env, v: &Value| ExtraFile {
            env,
            content: Some(serde_json::to_vec(v).unwrap_or_default()),
        };
        Ok(vec![
            input("CONFIG_VALUES_PATH", &config),
            input("VALUES_PATH", &values),
            ExtraFile {
                env: PATCH_FILES[0],
                content: None,
            },
            ExtraFile {
                env: PATCH_FILES[1],
                content: None,
            },
        ])
    }

    fn run_metrics(&self, hook: usize, task: &Task) -> Option<RunMetrics<'_>> {
        let s = &self.shared;
        let (family, module, m) = match s.owner(hook)? {
            Owner::Global => (&s.metrics.global_hooks, String::new(), None),
            Owner::Module(m) => (
                &s.metrics.module_hooks,
                s.layout().modules.get(m)?.name.clone(),
                Some(m),
            ),
            Owner::ConfigMap => return None,
        };
        Some(RunMetrics {
            family,
            module,
            activation: activation(&s.lock(), m, task.binding_type),
        })
    }

    fn apply(&self, hook: usize, task: &Task, outputs: &[Vec<u8>]) -> Result<(), TaskError> {
        self.apply_outputs(hook, task, outputs)
            .map_err(TaskError::from)
    }
}

impl ValuesHook {
    /// [`HookValues::apply`]: parses both patch files and applies them.
    fn apply_outputs(&self, hook: usize, task: &Task, outputs: &[Vec<u8>]) -> Result<(), Error> {
        let owner = self.shared.owner(hook);
        if !matches!(owner, Some(Owner::Global | Owner::Module(_))) {
            return Ok(());
        }
        let parse = |i: usize| -> Result<Vec<PatchOp>, Error> {
            let text = outputs.get(i).map(Vec::as_slice).unwrap_or_default();
            let env = PATCH_FILES[i];
            parse_patch(text).map_err(|error| Error::PatchFile { env, error })
        };
        let (config_ops, values_ops) = (parse(0)?, parse(1)?);
        if config_ops.is_empty() && values_ops.is_empty() {
            return Ok(());
        }
        match owner {
            Some(Owner::Module(m)) => self.apply_module(m, task, config_ops, values_ops),
            _ => self.apply_global(task, config_ops, values_ops),
        }
    }
}

/// The `activation` label of a hook run: global onStartup hooks run at
/// `OperatorStartup`, beforeAll/afterAll hooks in the current converge, module
/// `m`'s onStartup and lifecycle hooks inside its current run or delete; the runs
/// of schedule and kubernetes events have none ("").
fn activation(st: &State, m: Option<usize>, binding: BindingType) -> String {
    use BindingType::*;
    match (m, binding) {
        (None, OnStartup) => "OperatorStartup".into(),
        (None, BeforeAll | AfterAll) => st.lifecycle.converge_event().to_string(),
        (Some(m), OnStartup | BeforeHelm | AfterHelm | BeforeDeleteHelm | AfterDeleteHelm) => {
            st.lifecycle.activation(m)
        }
        _ => String::new(),
    }
}

/// Whether a run of this task reacts to changed values (schedule and kubernetes
/// events; never onStartup, Synchronization or the lifecycle bindings).
fn reacts(task: &Task) -> bool {
    match task.binding_type {
        BindingType::Schedule => true,
        BindingType::Kubernetes => task.sync_bindings.is_empty(),
        _ => false,
    }
}

fn event_of(task: &Task, what: &str) -> String {
    let source = if task.binding_type == BindingType::Schedule {
        "Schedule"
    } else {
        "Kubernetes"
    };
    format!("{source}-Change-{what}")
}

impl ValuesHook {
    fn apply_global(
        &self,
        task: &Task,
        config_ops: Vec<PatchOp>,
        values_ops: Vec<PatchOp>,
    ) -> Result<(), Error> {
        let (mut flags, mut global_config, mut global_values) =
            (Vec::new(), Vec::new(), Vec::new());
        for (ops, out) in [
            (config_ops, &mut global_config),
            (values_ops, &mut global_values),
        ] {
            for op in ops {
                let root = root_of(&op).to_string();
                if root == "global" {
                    out.push(op);
                } else if root.ends_with("Enabled") && op.path() == format!("/{root}") {
                    flags.push(op);
                } else {
                    let path = op.path().to_string();
                    return Err(Error::ForeignPath { path });
                }
            }
        }
        for _ in 0..WRITE_ATTEMPTS {
            // Checked under the lock ...
            let (seen, dynamic, config, patches) = {
                let mut st = self.shared.lock();
                let seen = global_state(&st);
                let dynamic = dynamic_flags(&st, &flags)?;
                let config = match global_config.is_empty() {
                    true => None,
                    false => Some(st.global.try_config_patch(&global_config)?),
                };
                let patches = match global_values.is_empty() {
                    true => None,
                    false => Some(st.global.try_values_patch(&global_values)?),
                };
                let config = config.map(|c| (expect_section(&mut st, "global", &c), c));
                (seen, dynamic, config, patches)
            };
            // ... written without it ...
            if let Some((prior, config)) = &config {
                self.write_section("global", config, prior)?;
            }
            // ... stored under it, unless the values moved meanwhile.
            let mut st = self.shared.lock();
            if global_state(&st) != seen {
                continue;
            }
            let before = (st.global_checksum(), st.dynamic.clone());
            if let Some((_, config)) = config {
                st.global.config = config;
            }
            if let Some(p) = patches {
                st.global.patches = p;
            }
            st.dynamic = dynamic;
            let changed = before != (st.global_checksum(), st.dynamic.clone());
            drop(st);
            if changed && reacts(task) {
                let event = event_of(task, "GlobalValues");
                self.shared.send(Input::ConvergeRequested { event });
            }
            return Ok(());
        }
        Err(kept_moving("global"))
    }

    fn apply_module(
        &self,
        m: usize,
        task: &Task,
        config_ops: Vec<PatchOp>,
        values_ops: Vec<PatchOp>,
    ) -> Result<(), Error> {
        let key = {
            let st = self.shared.lock();
            let scope = st.modules.get(m).map(|s| &s.scope);
            scope.map(|s| s.key.clone()).ok_or(Error::NoSuchModule)?
        };
        if let Some(op) = config_ops
            .iter()
            .chain(&values_ops)
            .find(|op| root_of(op) != key)
        {
            let path = op.path().to_string();
            return Err(Error::ForeignPath { path });
        }
        for _ in 0..WRITE_ATTEMPTS {
            let (seen, config, patches) = {
                let mut st = self.shared.lock();
                let scope = &st.modules[m].scope;
                let config = match config_ops.is_empty() {
                    true => None,
                    false => Some(scope.try_config_patch(&config_ops)?),
                };
                let patches = match values_ops.is_empty() {
                    true => None,
                    false => Some(scope.try_values_patch(&values_ops)?),
                };
                let seen = (scope.config.clone(), scope.patches.clone());
                let config = config.map(|c| (expect_section(&mut st, &key, &c), c));
                (seen, config, patches)
            };
            if let Some((prior, config)) = &config {
                self.write_section(&key, config, prior)?;
            }
            let mut st = self.shared.lock();
            let scope = &st.modules[m].scope;
            if (&scope.config, &scope.patches) != (&seen.0, &seen.1) {
                continue;
            }
            let before = st.module_checksum(m);
            if let Some((_, config)) = config {
                st.modules[m].scope.config = config;
            }
            if let Some(p) = patches {
                st.modules[m].scope.patches = p;
            }
            let changed = before != st.module_checksum(m);
            drop(st);
            if changed && reacts(task) {
                let event = event_of(task, "ModuleValues");
                self.shared.send(Input::ValuesChanged { module: m, event });
            }
            return Ok(());
        }
        Err(kept_moving(&format!("module {key}'s")))
    }

    /// Writes a config section where the module's settings live (no lock held):
    /// its ModuleSettings object when it has one, else the ConfigMap. It was
    /// recorded as the applied section before ([`expect_section`]), so the watch
    /// event of our own write changes nothing; a failed write puts `prior` back.
    fn write_section(&self, key: &str, section: &Value, prior: &Value) -> Result<(), Error> {
        let s = &self.shared;
        let written: Result<(), Error> = match self.settings_object(key) {
            Some(name) => report::write_settings(&s.client, &name, section).map_err(Into::into),
            None => configmap::write_section(&s.client, &s.namespace, &s.config_map, key, section)
                .map(|()| log::info("config values saved to the ConfigMap", &[("key", key)]))
                .map_err(Into::into),
        };
        if let Err(e) = written {
            let mut st = s.lock();
            if st.config.section(key) == *section {
                set_section(&mut st, key, prior.clone());
            }
            return Err(e);
        }
        Ok(())
    }

    /// The name of the ModuleSettings object that configures `key` ("global" or
    /// a module's values key), if one does.
    fn settings_object(&self, key: &str) -> Option<String> {
        let s = &self.shared;
        s.settings.as_ref()?;
        if !s.lock().config.resources.contains_key(key) {
            return None;
        }
        if key == spec::GLOBAL {
            return Some(key.to_string());
        }
        let layout = s.layout();
        let module = layout.modules.iter().find(|m| m.key == key)?;
        Some(module.name.clone())
    }
}

/// Records `section` as the ConfigMap's applied `key` before it is written, so the
/// watch event of the write is no change; returns what it replaced.
fn expect_section(st: &mut State, key: &str, section: &Value) -> Value {
    let prior = st.config.section(key);
    set_section(st, key, section.clone());
    prior
}

fn set_section(st: &mut State, key: &str, section: Value) {
    match key {
        "global" => st.config.global = section,
        _ => {
            st.config.modules.insert(key.to_string(), section);
        }
    }
}

/// What a global hook's patch is computed from: the global config and patches and
/// the dynamic flags.
fn global_state(
    st: &State,
) -> (
    Value,
    Vec<PatchOp>,
    std::collections::BTreeMap<String, bool>,
) {
    (
        st.global.config.clone(),
        st.global.patches.clone(),
        st.dynamic.clone(),
    )
}

/// The dynamic `*Enabled` flags after a global hook's ops on `/<key>Enabled`.
fn dynamic_flags(
    st: &State,
    ops: &[PatchOp],
) -> Result<std::collections::BTreeMap<String, bool>, Error> {
    let mut out = st.dynamic.clone();
    for op in ops {
        let key = root_of(op).trim_end_matches("Enabled").to_string();
        match op {
            PatchOp::Remove { .. } => {
                out.remove(&key);
            }
            PatchOp::Add { value, path } => {
                let flag = match value {
                    Value::Bool(b) => *b,
                    Value::String(s) if s == "true" => true,
                    Value::String(s) if s == "false" => false,
                    other => {
                        let (path, got) = (path.clone(), other.to_string());
                        return Err(Error::EnabledFlag { path, got });
                    }
                };
                out.insert(key, flag);
            }
        }
    }
    Ok(out)
}
