//! Values around every hook run ([`HookValues`] for the shared runner): the values
//! files a global or module hook reads, and what its two patch files change.
//!
//! A run's patches change values only whole: both files are parsed and checked (path
//! rules, strict apply, schemas) and the ConfigMap is written before anything is
//! stored; any failure fails the run, which the queue retries, and the values stay
//! as they were. Then the reactions of seed 004, sent to the lifecycle through the
//! router: a global hook's schedule or event run that changed global values (or
//! `*Enabled` flags) asks for a converge; a module hook's that changed its module's
//! values, a run of the module.

use super::configmap;
use super::lifecycle::Input;
use super::modules::Owner;
use super::state::{Shared, State};
use super::values::{PatchOp, parse_patch, root_of};
use crate::executor::ExtraFile;
use crate::hook::context::BindingType;
use crate::log;
use crate::queue::Task;
use crate::runner::{HookValues, RunMetrics};
use serde_json::Value;
use std::sync::Arc;

const PATCH_FILES: [&str; 2] = ["CONFIG_VALUES_JSON_PATCH_PATH", "VALUES_JSON_PATCH_PATH"];

/// The runner's values hook.
pub(crate) struct ValuesHook {
    pub(crate) shared: Arc<Shared>,
}

impl HookValues for ValuesHook {
    fn files(&self, hook: usize) -> Result<Vec<ExtraFile>, String> {
        let st = self.shared.lock();
        let (config, values) = match self.shared.owners.get(hook) {
            Some(Owner::Global) => st.global_files()?,
            Some(Owner::Module(m)) => {
                let enabled = st.enabled_names(&self.shared.layout, None);
                st.module_files(*m, enabled)?
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
        let (family, module, m) = match s.owners.get(hook)? {
            Owner::Global => (&s.metrics.global_hooks, "", None),
            Owner::Module(m) => (
                &s.metrics.module_hooks,
                s.layout.modules.get(*m)?.name.as_str(),
                Some(*m),
            ),
            Owner::ConfigMap => return None,
        };
        Some(RunMetrics {
            family,
            module,
            activation: activation(&s.lock(), m, task.binding_type),
        })
    }

    fn apply(&self, hook: usize, task: &Task, outputs: &[Vec<u8>]) -> Result<(), String> {
        let owner = self.shared.owners.get(hook).copied();
        if !matches!(owner, Some(Owner::Global | Owner::Module(_))) {
            return Ok(());
        }
        let parse = |i: usize| -> Result<Vec<PatchOp>, String> {
            let text = outputs.get(i).map(Vec::as_slice).unwrap_or_default();
            parse_patch(text).map_err(|e| format!("bad ${} file: {e}", PATCH_FILES[i]))
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
    ) -> Result<(), String> {
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
                    return Err(format!(
                        "unacceptable patch operation for path {}",
                        op.path()
                    ));
                }
            }
        }
        let mut st = self.shared.lock();
        let before = (st.global_checksum(), st.dynamic.clone());
        let dynamic = dynamic_flags(&st, &flags)?;
        let config = match global_config.is_empty() {
            true => None,
            false => Some(st.global.try_config_patch(&global_config)?),
        };
        let patches = match global_values.is_empty() {
            true => None,
            false => Some(st.global.try_values_patch(&global_values)?),
        };
        if let Some(config) = &config {
            self.write_back(&mut st, "global", config)?;
            st.global.config = config.clone();
        }
        if let Some(p) = patches {
            st.global.patches = p;
        }
        st.dynamic = dynamic;
        let changed = before != (st.global_checksum(), st.dynamic.clone());
        if changed && reacts(task) {
            let event = event_of(task, "GlobalValues");
            self.shared.send(Input::ConvergeRequested { event });
        }
        Ok(())
    }

    fn apply_module(
        &self,
        m: usize,
        task: &Task,
        config_ops: Vec<PatchOp>,
        values_ops: Vec<PatchOp>,
    ) -> Result<(), String> {
        let mut st = self.shared.lock();
        let key = st
            .modules
            .get(m)
            .map(|s| s.scope.key.clone())
            .ok_or("no such module")?;
        if let Some(op) = config_ops
            .iter()
            .chain(&values_ops)
            .find(|op| root_of(op) != key)
        {
            return Err(format!(
                "unacceptable patch operation for path {}",
                op.path()
            ));
        }
        let before = st.module_checksum(m);
        let module = &st.modules[m];
        let config = match config_ops.is_empty() {
            true => None,
            false => Some(module.scope.try_config_patch(&config_ops)?),
        };
        let patches = match values_ops.is_empty() {
            true => None,
            false => Some(module.scope.try_values_patch(&values_ops)?),
        };
        if let Some(config) = &config {
            self.write_back(&mut st, &key, config)?;
            st.modules[m].scope.config = config.clone();
        }
        if let Some(p) = patches {
            st.modules[m].scope.patches = p;
        }
        if before != st.module_checksum(m) && reacts(task) {
            let event = event_of(task, "ModuleValues");
            self.shared.send(Input::ValuesChanged { module: m, event });
        }
        Ok(())
    }

    /// Writes a config section into the ConfigMap and records it as applied, so the
    /// watch event of our own write changes nothing.
    fn write_back(&self, st: &mut State, key: &str, section: &Value) -> Result<(), String> {
        let s = &self.shared;
        configmap::write_section(&s.client, &s.namespace, &s.config_map, key, section)?;
        if key == "global" {
            st.config.global = section.clone();
        } else {
            st.config.modules.insert(key.to_string(), section.clone());
        }
        log::info("config values saved to the ConfigMap", &[("key", key)]);
        Ok(())
    }
}

/// The dynamic `*Enabled` flags after a global hook's ops on `/<key>Enabled`.
fn dynamic_flags(
    st: &State,
    ops: &[PatchOp],
) -> Result<std::collections::BTreeMap<String, bool>, String> {
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
                        return Err(format!(
                            "path {path}: value must be true or false, got {other}"
                        ));
                    }
                };
                out.insert(key, flag);
            }
        }
    }
    Ok(out)
}
