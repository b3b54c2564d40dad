//! A `ParallelModuleRun` task: the runs of modules of one order, side by side. The
//! main queue's thread runs it; it lends the work to at most
//! `--module-run-parallelism` scoped threads (`module-run-N`, joined before the
//! task ends) and takes a share itself. Each module's run is what its `ModuleRun`
//! task would be, with the tasks that run asks for next (its startup's Enable and
//! Synchronization tasks, the run proper, a rerun after afterHelm changed values)
//! run by the same thread in its place, as the main queue would run them at its
//! head. Lifecycle inputs go through the step function as from any task.
//!
//! What a module's hooks see is what they see in a run one after the other: a
//! module hook patches only its own module's values (a `global` path is refused,
//! as in flant), so modules of one order cannot change each other's values, and
//! global values change only through global hooks, on their queues, as always.
//!
//! The task never fails. What comes back to the main queue, at its head:
//! - per module in module order, a task of its run that failed (an Enable or a
//!   Synchronization run, which the queue retries with backoff, its first retry
//!   at once) with the tasks behind it; a failed module run itself is retried by
//!   the lifecycle, off the queue, as a `ModuleRun`;
//! - then what the lifecycle answered that is no module's work: the next order's
//!   runs, or `ConvergeModules(AfterAll)`, once every module of this order succeeded.

use crate::addon::engine::AddonHandler;
use crate::addon::modules::Owner;
use crate::log;
use crate::queue::worker::Handler;
use crate::queue::{GroupRun, Outcome, Step, Target, Task};
use crate::startup::MAIN_QUEUE;
use std::collections::VecDeque;

/// What one module's run leaves for the main queue.
#[derive(Default)]
struct Left {
    /// A failed task of the module's run and the tasks behind it.
    chain: Vec<Task>,
    /// The lifecycle's tasks that are no module's work.
    after: Vec<Task>,
}

impl AddonHandler {
    /// Runs `runs` side by side; returns what the main queue runs next.
    pub(in crate::addon) fn parallel_run(&self, runs: &[GroupRun], event: &str) -> Vec<Task> {
        let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        let parallelism = self.shared.lock().lifecycle.parallelism();
        log::info(
            "parallel module run",
            &[
                ("modules", &names.join(",")),
                ("event", event),
                ("parallelism", &parallelism.to_string()),
            ],
        );
        let width = parallelism.min(runs.len());
        let left =
            crate::threads::map_parallel("module-run", runs, width, |run| self.member(run, event));
        let mut tasks: Vec<Task> = Vec::new();
        let mut after: Vec<Task> = Vec::new();
        for l in left {
            tasks.extend(l.chain);
            after.extend(l.after);
        }
        tasks.extend(after);
        tasks
    }

    /// One module's run with the tasks it asks for next, as the main queue would
    /// run them; stops at the first failed task.
    fn member(&self, run: &GroupRun, event: &str) -> Left {
        let mut todo = VecDeque::from([Task::addon(Step::ModuleRun {
            module: run.module,
            name: run.name.clone(),
            do_startup: run.do_startup,
            event: event.to_string(),
        })]);
        let mut left = Left::default();
        while let Some(task) = todo.pop_front() {
            if !self.is_work_of(&task, run.module) {
                left.after.push(task);
                continue;
            }
            let wait = self.rate_limit(&task);
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            match self.handle(&task, MAIN_QUEUE) {
                Outcome::Done(next) => next.into_iter().rev().for_each(|t| todo.push_front(t)),
                // An allowed failure: dropped, as the main queue would.
                Outcome::Fail(_) => {}
                Outcome::Retry(_) | Outcome::Stop(_) => {
                    // Logged by the runner; the main queue retries it (or stops).
                    todo.push_front(task);
                    left.chain = todo.into();
                    return left;
                }
            }
        }
        left
    }

    /// A task of module `m`'s own run: its `ModuleRun`, or an Enable or hook run
    /// of one of its hooks.
    fn is_work_of(&self, task: &Task, m: usize) -> bool {
        match &task.target {
            Target::Addon(Step::ModuleRun { module, .. }) => *module == m,
            Target::Addon(_) => false,
            Target::Hook(hook) => self.shared.owner(*hook) == Some(Owner::Module(m)),
        }
    }
}
