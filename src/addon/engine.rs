//! The queue handler of addon-operator: hook runs and binding enables go to the
//! shared shell-operator [`Runner`]; converges, module runs, deletes and purges are
//! handled here. Each is one task whose phases queue the next steps at the head
//! of the queue (the worker runs a handler's returned tasks first), so flant's
//! order falls out of the queue:
//!
//! ```text
//! ConvergeModules(BeforeAll) → beforeAll hooks, ConvergeModules(Modules)
//! ConvergeModules(Modules)   → enabled state; ModuleDelete × disabled (reverse order),
//!                              the runs of the first order: a ModuleRun each, or one
//!                              ParallelModuleRun (ModuleRun × its modules side by side);
//!                              the last run of each order queues the next order's,
//!                              the last order's ConvergeModules(AfterAll)
//! ConvergeModules(AfterAll)  → afterAll hooks, ConvergeModules(Done)
//! ConvergeModules(Done)      → first time: ready, ModulePurge × foreign releases;
//!                              global values changed by afterAll: a new converge
//! ModuleRun (not started)    → onStartup hooks; Enable kubernetes (Synchronization)
//!                              and schedule bindings; ModuleRun (started)
//! ModuleRun (started)        → beforeHelm hooks, helm, afterHelm hooks; values
//!                              changed by afterHelm: ModuleRun again
//! ModuleDelete               → schedules off, beforeDeleteHelm hooks, helm uninstall, afterDeleteHelm hooks
//! ```
//!
//! A failing step fails its task; the queue retries it with backoff and the phase
//! starts over (a module run that failed in afterHelm runs beforeHelm, helm and
//! afterHelm again, as flant documents).
//!
//! This file dispatches and runs lifecycle hooks; the steps live in `converge.rs`,
//! `module_run.rs` (run, helm phase, delete) and `config_changes.rs`.

use super::state::Shared;
use crate::addon::modules::Owner;
use crate::hook::context::{BindingContext, BindingType};
use crate::log;
use crate::queue::worker::Handler;
use crate::queue::{Outcome, Step, Target, Task, TaskKind};
use crate::runner::Runner;
use std::sync::Arc;
use std::time::Duration;

/// The handler every queue thread of addon-operator uses.
pub(crate) struct AddonHandler {
    pub(crate) shared: Arc<Shared>,
    pub(crate) runner: Arc<Runner>,
}

impl Handler for AddonHandler {
    fn rate_limit(&self, task: &Task) -> Duration {
        self.runner.rate_limit(task)
    }

    /// A failed converge, module run or delete is retried (`Outcome::from_result`).
    fn handle(&self, task: &Task, queue: &str) -> Outcome {
        let step = match &task.target {
            Target::Hook(_) if task.kind == TaskKind::HookRun => return self.hook_run(task, queue),
            Target::Hook(_) => return self.runner.handle(task, queue),
            Target::Addon(step) => step,
        };
        let result = match step {
            Step::Converge { phase, event } => self.converge(*phase, event),
            Step::ModuleRun {
                module,
                do_startup,
                event,
                ..
            } => self.counted_run(*module, *do_startup, event),
            Step::ParallelModuleRun { runs, event } => Ok(self.parallel_run(runs, event)),
            Step::ModuleDelete { module, .. } => self.counted_delete(*module),
            Step::ModulePurge { release } => {
                self.purge(release);
                Ok(Vec::new())
            }
        };
        Outcome::from_result(result)
    }

    fn compacted(&self, queue: &str, hook: &str) {
        self.runner.compacted(queue, hook);
    }

    fn failed(&self, queue: &str, task: &Task, error: &crate::queue::TaskError) {
        self.runner.failed(queue, task, error);
    }

    fn queue_action(&self, queue: &str, action: &str, took: Duration) {
        self.runner.queue_action(queue, action, took);
    }

    fn queue_length(&self, queue: &str, len: usize) {
        self.runner.queue_length(queue, len);
    }
}

impl AddonHandler {
    /// A queued hook run: the ConfigMap watch (and the ModuleSettings one) is handled here; runs of a disabled
    /// module's hooks are dropped (its watches keep running, see the README).
    pub(super) fn hook_run(&self, task: &Task, queue: &str) -> Outcome {
        match task.hook().and_then(|h| self.shared.owner(h)) {
            Some(Owner::ConfigMap) => {
                let tasks = self.configmap_changed();
                self.unlock(task);
                Outcome::Done(tasks)
            }
            Some(Owner::Module(m)) if !self.shared.lock().lifecycle.is_enabled(m) => {
                self.unlock(task);
                Outcome::done()
            }
            _ => self.runner.handle(task, queue),
        }
    }

    pub(super) fn unlock(&self, task: &Task) {
        if let Some(kube) = &self.runner.kube {
            kube.unlock(task);
        }
    }

    /// Hooks of `owner` with the lifecycle binding, by (ORDER, name).
    pub(super) fn lifecycle_hooks(&self, owner: Owner, binding: BindingType) -> Vec<usize> {
        let gone = self.removed_module_hooks_gone(owner);
        let hooks = (self.shared.hooks_of(owner)).filter(|(_, h)| !gone || h.path.exists());
        crate::startup::by_order(
            hooks.map(|(i, h)| (i, h.config.lifecycle.order(binding.as_str()))),
        )
    }

    /// True for a module a reload found removed: its hooks whose files went with
    /// it are skipped (logged), so its purge can finish.
    fn removed_module_hooks_gone(&self, owner: Owner) -> bool {
        let Owner::Module(m) = owner else {
            return false;
        };
        if !self.shared.lock().removed.contains(&m) {
            return false;
        }
        for (_, h) in self
            .shared
            .hooks_of(owner)
            .filter(|(_, h)| !h.path.exists())
        {
            log::warn(
                "hook of a removed module skipped: its file is gone",
                &[("hook", &h.name)],
            );
        }
        true
    }

    pub(super) fn lifecycle_task(&self, hook: usize, binding: BindingType) -> Task {
        let hooks = self.shared.hook_list();
        let h = &hooks[hook];
        let mut names: Vec<String> = h.config.kubernetes.iter().map(|b| b.name.clone()).collect();
        names.dedup();
        Task::hook_run(
            hook,
            &h.name,
            false,
            false,
            BindingContext::lifecycle(binding, names),
        )
    }

    /// Global beforeAll/afterAll hooks as queued tasks (each retried on its own).
    pub(super) fn lifecycle_tasks(&self, owner: Owner, binding: BindingType) -> Vec<Task> {
        self.lifecycle_hooks(owner, binding)
            .into_iter()
            .map(|i| self.lifecycle_task(i, binding))
            .collect()
    }

    /// Runs a module's lifecycle hooks in this task; the first failure fails it.
    pub(super) fn run_lifecycle(
        &self,
        owner: Owner,
        binding: BindingType,
    ) -> Result<(), crate::addon::Error> {
        for i in self.lifecycle_hooks(owner, binding) {
            self.runner
                .run_hook(&self.lifecycle_task(i, binding), "main")?;
        }
        Ok(())
    }
}
