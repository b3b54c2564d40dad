//! Changing the running addon-operator after a reload was planned. Under the
//! state lock, in an order that keeps every reader's index valid: added
//! modules' values and lifecycle slots first, then the layout (so a module
//! index found in the layout always has its values), then the hook owners and
//! the hook table (from then on tasks of retired hooks are dropped), and the
//! lifecycle told which started modules' hooks changed. After the lock: the
//! retired hooks' watches, snapshots, schedules and admission entries go, the
//! added hooks' schedules are added, and their tasks, the module runs and the
//! converge are queued.

use super::config::{Added, merge};
use super::plan::{HookPlan, Matched};
use super::{Changes, ModulesReload, ReloadError, Trees};
use crate::addon::config::values::Schemas;
use crate::addon::modules::{Layout, Module, Owner};
use crate::addon::release::drift::watcher::Notice;
use crate::addon::run::lifecycle::Input;
use crate::addon::state::{ModuleState, State};
use crate::queue::{Task, TaskKind};
use crate::schedule::Entry;
use crossbeam_channel::bounded;

/// Everything a reload decided, ready to apply.
pub(super) struct Prepared<'a> {
    /// The layout just discovered (the added modules' schemas taken out).
    pub(super) layout: Layout,
    pub(super) matched: Matched,
    pub(super) hooks: HookPlan,
    pub(super) added: Added,
    /// Modules whose static `<key>Enabled` changed (running index).
    pub(super) enabled: Vec<usize>,
    pub(super) trees: &'a Trees,
}

const FILES_CHANGED: &str = "ModuleFilesChanged";

impl ModulesReload {
    pub(super) fn apply(&self, p: Prepared) -> Result<Changes, ReloadError> {
        let entries = schedule_entries(&p.hooks)?;
        let mut changes = Changes::default();
        let mut st = self.shared.lock();
        let running = self.shared.layout();
        let (next, mut schemas) = next_layout(&running, p.layout, &p.matched);
        self.update_modules(
            &mut st,
            &running,
            &next,
            &mut schemas,
            p.trees,
            &mut changes,
        );
        if next.global_static != st.global.static_values {
            st.global.static_values = next.global_static.clone();
            st.global.schemas = std::mem::replace(&mut schemas.global, Schemas::none());
            changes.global = true;
        }
        changes.enabled = p
            .enabled
            .iter()
            .map(|&m| next.modules[m].name.clone())
            .collect();
        let notices = self.add_modules(&mut st, &next, &p.matched, p.added, &mut changes);
        self.shared.modules.store(next);
        // Only now: the drift watcher looks the added modules up in the layout.
        notices
            .into_iter()
            .for_each(|n| self.shared.drift_notice(n));
        let tasks = self.swap_hooks(&mut st, &p.hooks);
        drop(st);
        changes.hooks = hook_names(&p.hooks);
        self.retire(&p.hooks)?;
        let stopped = |_| ReloadError::Stopped("scheduler");
        if !entries.is_empty() {
            (self
                .shared
                .scheduler
                .send(crate::schedule::Control::Add(entries)))
            .map_err(stopped)?;
        }
        for task in tasks {
            (self.wiring.main.send(task)).map_err(|_| ReloadError::Stopped("main queue"))?;
        }
        self.ask(&changes, p.hooks.global);
        Ok(changes)
    }

    /// Removed and returned modules; new static values, schemas and drift
    /// settings of modules whose directory changed.
    fn update_modules(
        &self,
        st: &mut State,
        running: &Layout,
        next: &Layout,
        schemas: &mut NewSchemas,
        trees: &Trees,
        changes: &mut Changes,
    ) {
        for (m, module) in running.modules.iter().enumerate() {
            let name = module.name.clone();
            if schemas.found.get(m).is_none_or(|f| !f) {
                if st.removed.insert(m) {
                    changes.removed.push(name);
                }
                continue;
            }
            if st.removed.remove(&m) {
                changes.returned.push(name.clone());
            }
            let new = &next.modules[m];
            let scope = &mut st.modules[m].scope;
            let moved = trees.modules.get(m) != self.trees.modules.get(m);
            if moved {
                // Its drift.yaml may have changed (or changed back).
                let settings = new.drift.clone();
                self.shared.drift_notice(Notice::Settings {
                    module: m,
                    settings,
                });
            }
            if moved || scope.static_values != new.static_values {
                scope.static_values = new.static_values.clone();
                scope.schemas = std::mem::replace(&mut schemas.modules[m], Schemas::none());
                changes.modules.push(name);
            }
        }
    }

    /// The added modules' values and lifecycle slots, and their ConfigMap keys
    /// moved out of the unknown ones; returns their drift settings for the
    /// drift watcher.
    fn add_modules(
        &self,
        st: &mut State,
        next: &Layout,
        matched: &Matched,
        added: Added,
        changes: &mut Changes,
    ) -> Vec<Notice> {
        if matched.added.is_empty() {
            return Vec::new();
        }
        let first = matched.found.len();
        let new = &next.modules[first..];
        for scope in added.scopes {
            st.modules.push(ModuleState { scope });
        }
        for files in added.crds {
            self.shared.crds.append(files);
        }
        if let Some(fresh) = &added.config {
            merge(&mut st.config, fresh, &added.keys);
            crate::addon::run::config_changes::report_unknown_keys(
                &self.shared.metrics,
                &self.shared.config_map,
                &st.config.unknown,
            );
        }
        let modules = new.iter().map(|m| (m.name.clone(), m.order)).collect();
        self.shared.step_locked(st, Input::ModulesAdded { modules });
        let mut notices = Vec::new();
        for (k, m) in new.iter().enumerate() {
            let settings = m.drift.clone();
            let module = first + k;
            notices.push(Notice::Settings { module, settings });
            changes.added.push(m.name.clone());
        }
        notices
    }

    /// Swaps in the new owners and hook table (the added hooks' snapshot slots
    /// first); returns the tasks to queue: the added global hooks' onStartup and
    /// Enable tasks, and what the lifecycle answers for started modules whose
    /// hooks changed (their added hooks' onStartup and Enable tasks, a run).
    fn swap_hooks(&self, st: &mut State, plan: &HookPlan) -> Vec<Task> {
        if plan.retired.is_empty() && plan.added.is_empty() {
            return Vec::new();
        }
        if let Some(store) = &self.shared.store {
            for &i in &plan.added {
                store.add_hook(i, plan.hooks[i].config.kubernetes.len());
            }
        }
        self.shared.owners.store(plan.owners.clone());
        self.shared
            .hooks
            .store(std::sync::Arc::new(plan.hooks.clone()));
        let layout = self.shared.layout();
        (self.shared.metrics).count_bindings(&plan.hooks, &plan.owners, &layout);
        let module_of = |o: &Owner| match o {
            Owner::Module(m) => layout.modules.get(*m).map(|m| m.name.clone()),
            _ => None,
        };
        let modules = plan.owners.iter().map(|o| module_of(o).unwrap_or_default());
        self.wiring.metrics.set_hook_modules(modules.collect());
        let of = |owner: Owner| -> Vec<usize> {
            (plan.added.iter().copied())
                .filter(|&i| plan.owners[i] == owner)
                .collect()
        };
        let mut tasks = crate::startup::tasks_for(&plan.hooks, &of(Owner::Global));
        for &m in &plan.modules {
            let added = of(Owner::Module(m));
            let input = Input::HooksChanged {
                module: m,
                on_startup: on_startup_tasks(&plan.hooks, &added),
                enable: enable_tasks(&plan.hooks, &added),
                event: FILES_CHANGED.to_string(),
            };
            tasks.extend(self.shared.step_locked(st, input));
        }
        tasks
    }

    /// Stops the retired hooks' watches, snapshots, schedules and admission
    /// entries (their slots are retired in the table already).
    fn retire(&self, plan: &HookPlan) -> Result<(), ReloadError> {
        for &i in &plan.retired {
            if let Some(monitor) = &self.wiring.monitor {
                let (reply, done) = bounded(1);
                let disable = crate::monitor::Control::Disable { hook: i, reply };
                monitor
                    .send(disable)
                    .map_err(|_| ReloadError::Stopped("monitor"))?;
                done.recv().map_err(|_| ReloadError::Stopped("monitor"))?;
            }
            if let Some(store) = &self.shared.store {
                store.remove_hook(i);
            }
            (self
                .shared
                .scheduler
                .send(crate::schedule::Control::Remove(i)))
            .map_err(|_| ReloadError::Stopped("scheduler"))?;
        }
        let admission = &plan.admission;
        if let (Some(r), false) = (&self.shared.webhooks.admission, admission.is_empty())
            && let Err(e) = r.set_active(admission, false)
        {
            crate::log::error(
                "reload: cannot remove webhook entries",
                &[("error", &e.to_string())],
            );
        }
        Ok(())
    }

    /// Asks for the module runs and the converge the changes need (a module
    /// whose `<key>Enabled` changed waits for the converge, which runs or
    /// deletes it).
    fn ask(&self, changes: &Changes, global_hooks: bool) {
        let layout = self.shared.layout();
        for name in changes
            .modules
            .iter()
            .filter(|n| !changes.enabled.contains(n))
        {
            if let Some(module) = layout.modules.iter().position(|m| &m.name == name) {
                let event = FILES_CHANGED.to_string();
                self.shared.send(Input::ValuesChanged { module, event });
            }
        }
        if changes.converge() || global_hooks {
            let event = "ModulesChanged".to_string();
            self.shared.send(Input::ConvergeRequested { event });
        }
    }
}

/// The schemas the new layout brought, by running index (taken once).
struct NewSchemas {
    modules: Vec<Schemas>,
    global: Schemas,
    /// By running index: the module is still there.
    found: Vec<bool>,
}

/// The next running layout: each running module's new entry (a removed
/// module keeps its old one), then the added modules; and their schemas.
fn next_layout(running: &Layout, new: Layout, matched: &Matched) -> (Layout, NewSchemas) {
    let mut slots: Vec<Option<Module>> = new.modules.into_iter().map(Some).collect();
    let mut take = |n: usize| slots[n].take();
    let mut modules: Vec<Module> = (matched.found.iter().enumerate())
        .map(|(m, f)| {
            f.and_then(&mut take)
                .unwrap_or_else(|| running.modules[m].clone())
        })
        .collect();
    modules.extend(matched.added.iter().filter_map(|&n| take(n)));
    let schemas = NewSchemas {
        modules: (modules.iter_mut())
            .map(|m| std::mem::replace(&mut m.schemas, Schemas::none()))
            .collect(),
        global: new.global_schemas,
        found: matched.found.iter().map(Option::is_some).collect(),
    };
    let layout = Layout {
        modules,
        global_static: new.global_static,
        global_schemas: Schemas::none(),
        global_hooks_root: new.global_hooks_root,
    };
    (layout, schemas)
}

/// The schedule entries of the appended hooks.
fn schedule_entries(plan: &HookPlan) -> Result<Vec<Entry>, ReloadError> {
    let all = crate::startup::schedule_entries(&plan.hooks).map_err(ReloadError::Schedule)?;
    Ok(all
        .into_iter()
        .filter(|e| plan.added.contains(&e.hook))
        .collect())
}

/// onStartup runs of a module's appended hooks, by (ORDER, index).
fn on_startup_tasks(hooks: &[crate::hook::Hook], indices: &[usize]) -> Vec<Task> {
    let picked = indices.iter().filter_map(|&i| Some((i, hooks.get(i)?)));
    let order = crate::startup::by_order(picked.map(|(i, h)| (i, h.config.on_startup)));
    (order.into_iter())
        .map(|i| {
            let ctx = crate::hook::context::BindingContext::on_startup();
            Task::hook_run(i, &hooks[i].name, false, false, ctx)
        })
        .collect()
}

/// Enable tasks of a module's appended hooks.
fn enable_tasks(hooks: &[crate::hook::Hook], indices: &[usize]) -> Vec<Task> {
    let mut tasks = Vec::new();
    for &i in indices {
        let h = &hooks[i];
        if h.has_kube_bindings() {
            tasks.push(Task::enable(TaskKind::EnableKubernetesBindings, i, &h.name));
        }
        if !h.config.schedule.is_empty() {
            tasks.push(Task::enable(TaskKind::EnableScheduleBindings, i, &h.name));
        }
    }
    tasks
}

/// The hooks added, removed and changed, for the log line.
fn hook_names(plan: &HookPlan) -> Vec<String> {
    let d = &plan.diff;
    let mark =
        |p: &str, names: &[String]| names.iter().map(|n| format!("{p}{n}")).collect::<Vec<_>>();
    let mut out = mark("+", &d.added);
    out.extend(mark("-", &d.removed));
    out.extend(mark("~", &d.changed));
    out
}
