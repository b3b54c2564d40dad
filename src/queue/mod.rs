//! Named task queues. Each queue is one thread ([`worker`]) that owns its tasks and
//! runs them strictly one at a time; producers (the router, the startup sequence)
//! send tasks to it over a crossbeam channel. This module holds the task type and
//! the pure combining rules (spec §4) the worker applies before each run.
//!
//! A task says whose work it is ([`Target`]): a hook's, by index, or addon-operator's
//! own [`Step`]. The steps are described here, not in `addon/`, because addon-operator
//! builds on the queue and the queue imports nothing above it; what a step does is
//! the addon engine's (`addon/engine.rs`).

pub mod cause;
pub(crate) mod outcome;
pub(crate) mod pace;
pub mod worker;

pub use cause::Cause;
pub use outcome::{Outcome, TaskError};

use crate::hook::context::{BindingContext, BindingType, Payload};
use std::collections::VecDeque;
use std::time::Instant;

/// What a task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskKind {
    HookRun,
    EnableScheduleBindings,
    EnableKubernetesBindings,
    /// addon-operator's tasks; what they do is in [`Target::Addon`].
    ConvergeModules,
    ModuleRun,
    /// Modules of one order run side by side (flant's name).
    ParallelModuleRun,
    ModuleDelete,
    ModulePurge,
}

impl TaskKind {
    /// flant's name of the kind (`HookRun`, `ModuleRun`, ...).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TaskKind::HookRun => "HookRun",
            TaskKind::EnableScheduleBindings => "EnableScheduleBindings",
            TaskKind::EnableKubernetesBindings => "EnableKubernetesBindings",
            TaskKind::ConvergeModules => "ConvergeModules",
            TaskKind::ModuleRun => "ModuleRun",
            TaskKind::ParallelModuleRun => "ParallelModuleRun",
            TaskKind::ModuleDelete => "ModuleDelete",
            TaskKind::ModulePurge => "ModulePurge",
        }
    }
}

/// addon-operator's work that is not one hook run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// "Reload all modules", one phase per task.
    Converge { phase: ConvergePhase, event: String },
    /// A module's run: onStartup and Synchronization when `do_startup`, then
    /// beforeHelm, helm and afterHelm.
    ModuleRun {
        module: usize,
        name: String,
        do_startup: bool,
        event: String,
    },
    /// The runs of modules of one order, side by side (at most
    /// `--module-run-parallelism` at once), each as a `ModuleRun` would.
    ParallelModuleRun { runs: Vec<GroupRun>, event: String },
    /// helm uninstall, then afterDeleteHelm hooks.
    ModuleDelete { module: usize, name: String },
    /// helm uninstall of a release no module owns.
    ModulePurge { release: String },
}

/// One member of a `ParallelModuleRun`: what its `ModuleRun` would carry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupRun {
    pub(crate) module: usize,
    pub(crate) name: String,
    pub(crate) do_startup: bool,
}

/// The phases of a converge: global beforeAll hooks, then the enabled state and the
/// module runs and deletes, then global afterAll hooks, then the checks after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConvergePhase {
    BeforeAll,
    Modules,
    AfterAll,
    /// Carries the checksum of global values taken before the afterAll hooks.
    Done(u64),
}

/// Whose work a task is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    /// A hook's (HookRun and Enable tasks), by its index in the operator's hook list.
    Hook(usize),
    /// addon-operator's own work: a converge phase, a module's run or delete, a purge.
    Addon(Step),
}

/// One unit of work in a queue.
#[derive(Debug, Clone)]
pub struct Task {
    pub(crate) kind: TaskKind,
    pub(crate) target: Target,
    pub(crate) hook_name: String,
    /// v1 hooks' HookRun tasks may be combined; v0 hooks' never are.
    pub(crate) combinable: bool,
    pub(crate) binding: String,
    pub(crate) binding_type: BindingType,
    pub(crate) group: Option<String>,
    pub(crate) allow_failure: bool,
    pub(crate) contexts: Vec<BindingContext>,
    pub(crate) queued_at: Instant,
    pub(crate) failures: u32,
    pub(crate) last_error: Option<String>,
    /// Kubernetes bindings whose Synchronization this task carries, also those of
    /// absorbed tasks whose context collapsed away; unlocked when it succeeds.
    pub(crate) sync_bindings: Vec<usize>,
}

impl Task {
    /// A HookRun task with one binding context.
    pub fn hook_run(
        hook: usize,
        hook_name: &str,
        combinable: bool,
        allow_failure: bool,
        ctx: BindingContext,
    ) -> Task {
        Task {
            kind: TaskKind::HookRun,
            target: Target::Hook(hook),
            hook_name: hook_name.to_string(),
            combinable,
            binding: ctx.binding.clone(),
            binding_type: ctx.binding_type,
            group: ctx.group.clone(),
            allow_failure,
            contexts: vec![ctx],
            queued_at: Instant::now(),
            failures: 0,
            last_error: None,
            sync_bindings: Vec::new(),
        }
    }

    /// An addon-operator task (converge, module run, delete or purge).
    pub(crate) fn addon(step: Step) -> Task {
        let (kind, name) = match &step {
            Step::Converge { .. } => (TaskKind::ConvergeModules, String::new()),
            Step::ModuleRun { name, .. } => (TaskKind::ModuleRun, name.clone()),
            Step::ParallelModuleRun { runs, .. } => {
                let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
                (TaskKind::ParallelModuleRun, names.join(","))
            }
            Step::ModuleDelete { name, .. } => (TaskKind::ModuleDelete, name.clone()),
            Step::ModulePurge { release } => (TaskKind::ModulePurge, release.clone()),
        };
        let mut t = Task::enable(kind, 0, &name);
        t.binding = kind.as_str().to_string();
        t.target = Target::Addon(step);
        t
    }

    /// The hook whose work this is; `None` for addon-operator's own tasks.
    pub(crate) fn hook(&self) -> Option<usize> {
        match self.target {
            Target::Hook(hook) => Some(hook),
            Target::Addon(_) => None,
        }
    }

    #[cfg(test)]
    /// addon-operator's step; `None` for a hook's task.
    pub(crate) fn step(&self) -> Option<&Step> {
        match &self.target {
            Target::Addon(step) => Some(step),
            Target::Hook(_) => None,
        }
    }

    /// A task that enables a hook's schedule or kubernetes bindings.
    pub(crate) fn enable(kind: TaskKind, hook: usize, hook_name: &str) -> Task {
        let mut t = Task::hook_run(hook, hook_name, false, false, BindingContext::on_startup());
        t.kind = kind;
        t.binding_type = if kind == TaskKind::EnableScheduleBindings {
            BindingType::Schedule
        } else {
            BindingType::Kubernetes
        };
        t.binding = kind.as_str().to_string();
        t.contexts.clear();
        t
    }

    /// flant's task description: `Type:queue:bindingType:hook[:group=g][:binding][:failures N[:msg]]`;
    /// addon-operator's tasks: `ModuleRun:main:<module>[:doStartup]:<event>` and the like.
    pub(crate) fn describe(&self, queue: &str) -> String {
        if let Target::Addon(step) = &self.target {
            return self.describe_step(queue, step);
        }
        let on_startup =
            self.kind == TaskKind::HookRun && self.binding_type == BindingType::OnStartup;
        let queue = if on_startup { "" } else { queue };
        let kind = if self.kind == TaskKind::HookRun {
            self.binding_type.as_str()
        } else {
            ""
        };
        let mut s = format!("{}:{queue}:{kind}:{}", self.kind.as_str(), self.hook_name);
        if let Some(g) = &self.group {
            s.push_str(&format!(":group={g}"));
        }
        if !on_startup {
            s.push_str(&format!(":{}", self.binding));
        }
        if self.failures > 0 {
            s.push_str(&format!(":failures {}", self.failures));
            if let Some(e) = &self.last_error {
                s.push_str(&format!(":{e}"));
            }
        }
        s
    }

    fn describe_step(&self, queue: &str, step: &Step) -> String {
        let kind = self.kind.as_str();
        let mut s = match step {
            Step::Converge { phase, event } => format!("{kind}:{queue}:{phase:?}:{event}"),
            Step::ModuleRun {
                name,
                do_startup,
                event,
                ..
            } => {
                let startup = if *do_startup { ":doStartup" } else { "" };
                format!("{kind}:{queue}:{name}{startup}:{event}")
            }
            Step::ParallelModuleRun { event, .. } => {
                format!("{kind}:{queue}:{}:{event}", self.hook_name)
            }
            Step::ModuleDelete { name, .. } => format!("{kind}:{queue}:{name}"),
            Step::ModulePurge { release } => format!("{kind}:{queue}:{release}"),
        };
        if self.failures > 0 {
            s.push_str(&format!(":failures {}", self.failures));
            if let Some(e) = &self.last_error {
                s.push_str(&format!(":{e}"));
            }
        }
        s
    }

    /// Whether the head task may absorb the tasks behind it: v1 HookRun, and not an
    /// ungrouped kubernetes Synchronization.
    pub(crate) fn can_combine(&self) -> bool {
        let ungrouped_sync = self.binding_type == BindingType::Kubernetes
            && self.group.is_none()
            && matches!(
                self.contexts.first().map(|c| &c.payload),
                Some(Payload::Synchronization)
            );
        self.kind == TaskKind::HookRun && self.combinable && !ungrouped_sync
    }

    fn same_hook_run(&self, other: &Task) -> bool {
        other.kind == TaskKind::HookRun && other.target == self.target && other.combinable
    }
}

/// Run-time combining (spec §4): folds the contiguous run of the same hook's
/// HookRun tasks behind the head into the head, then collapses adjacent contexts of
/// the same group to the last one. Returns how many tasks were absorbed.
pub(crate) fn combine_head(queue: &mut VecDeque<Task>) -> usize {
    let Some(head) = queue.front() else { return 0 };
    if !head.can_combine() {
        return 0;
    }
    let run = queue
        .iter()
        .skip(1)
        .take_while(|t| head.same_hook_run(t))
        .count();
    if run == 0 {
        return 0;
    }
    let absorbed: Vec<Task> = queue.drain(1..=run).collect();
    let Some(head) = queue.front_mut() else {
        return 0;
    };
    for t in absorbed {
        head.contexts.extend(t.contexts);
        head.sync_bindings.extend(t.sync_bindings);
    }
    head.contexts = collapse_adjacent_groups(std::mem::take(&mut head.contexts));
    run
}

/// Drops a context when the next one has the same (non-empty) group.
pub(crate) fn collapse_adjacent_groups(contexts: Vec<BindingContext>) -> Vec<BindingContext> {
    let mut out: Vec<BindingContext> = Vec::with_capacity(contexts.len());
    for ctx in contexts {
        if let Some(prev) = out.last()
            && prev.group.is_some()
            && prev.group == ctx.group
        {
            out.pop();
        }
        out.push(ctx);
    }
    out
}

/// Queued HookRun tasks of one hook that trigger queue-level compaction.
pub(crate) const COMPACTION_THRESHOLD: usize = 100;

/// The hook of a HookRun task that may be combined with others of its hook.
fn combinable_run_of(task: &Task) -> Option<usize> {
    match task.target {
        Target::Hook(hook) if task.kind == TaskKind::HookRun && task.combinable => Some(hook),
        _ => None,
    }
}

/// Queue-level compaction: when a hook has `COMPACTION_THRESHOLD` or more tasks
/// queued anywhere in the queue, all of them are merged into the first. Contexts are
/// ungrouped ones in queue order, then the last context of each group, groups in
/// order of first appearance (flant's group order is random). Returns the hooks
/// that were compacted, for the metric.
pub(crate) fn compact(queue: &mut VecDeque<Task>) -> Vec<String> {
    let mut counts: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for hook in queue.iter().filter_map(combinable_run_of) {
        *counts.entry(hook).or_default() += 1;
    }
    let mut hooks: Vec<usize> = counts
        .into_iter()
        .filter(|(_, n)| *n >= COMPACTION_THRESHOLD)
        .map(|(h, _)| h)
        .collect();
    hooks.sort_unstable();
    let mut compacted = Vec::new();
    for hook in hooks {
        let Some(first) = queue
            .iter()
            .position(|t| combinable_run_of(t) == Some(hook))
        else {
            continue;
        };
        let mut contexts = Vec::new();
        let mut sync_bindings = Vec::new();
        let mut index = 0;
        queue.retain(|t| {
            let keep = index <= first || combinable_run_of(t) != Some(hook);
            if !keep {
                contexts.extend(t.contexts.iter().cloned());
                sync_bindings.extend(t.sync_bindings.iter().copied());
            }
            index += 1;
            keep
        });
        if let Some(target) = queue.get_mut(first) {
            let mut all = std::mem::take(&mut target.contexts);
            all.extend(contexts);
            target.contexts = order_for_compaction(all);
            target.sync_bindings.extend(sync_bindings);
            compacted.push(target.hook_name.clone());
        }
    }
    compacted
}

fn order_for_compaction(contexts: Vec<BindingContext>) -> Vec<BindingContext> {
    let mut ungrouped = Vec::new();
    let mut groups: Vec<(String, BindingContext)> = Vec::new();
    for ctx in contexts {
        match ctx.group.clone() {
            None => ungrouped.push(ctx),
            Some(g) => match groups.iter_mut().find(|(name, _)| *name == g) {
                Some(slot) => slot.1 = ctx,
                None => groups.push((g, ctx)),
            },
        }
    }
    ungrouped.extend(groups.into_iter().map(|(_, c)| c));
    ungrouped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::config::WatchEventType;

    #[test]
    fn addon_tasks_are_described_by_name() {
        let run = Task::addon(Step::ModuleRun {
            module: 0,
            name: "echo".into(),
            do_startup: true,
            event: "OperatorStartup".into(),
        });
        assert_eq!(
            run.describe("main"),
            "ModuleRun:main:echo:doStartup:OperatorStartup"
        );
        let mut converge = Task::addon(Step::Converge {
            phase: ConvergePhase::Modules,
            event: "KubeConfigChanged".into(),
        });
        converge.failures = 2;
        converge.last_error = Some("enabled script failed".into());
        assert_eq!(
            converge.describe("main"),
            "ConvergeModules:main:Modules:KubeConfigChanged:failures 2:enabled script failed"
        );
        let delete = Task::addon(Step::ModuleDelete {
            module: 1,
            name: "old".into(),
        });
        assert_eq!(delete.describe("main"), "ModuleDelete:main:old");
        let run = |module: usize, name: &str| GroupRun {
            module,
            name: name.into(),
            do_startup: module == 0,
        };
        let group = Task::addon(Step::ParallelModuleRun {
            runs: vec![run(0, "a"), run(1, "b")],
            event: "OperatorStartup".into(),
        });
        assert_eq!(
            group.describe("main"),
            "ParallelModuleRun:main:a,b:OperatorStartup"
        );
        assert_eq!(delete.kind, TaskKind::ModuleDelete);
    }

    fn ctx(binding: &str, group: Option<&str>, sched: bool) -> BindingContext {
        let payload = if sched {
            Payload::Schedule
        } else {
            Payload::Event {
                watch_event: WatchEventType::Added,
                item: None,
            }
        };
        BindingContext {
            binding: binding.into(),
            binding_type: if sched {
                BindingType::Schedule
            } else {
                BindingType::Kubernetes
            },
            group: group.map(String::from),
            snapshot_names: vec![],
            kube_binding: None,
            payload,
        }
    }

    fn task(hook: usize, c: BindingContext) -> Task {
        Task::hook_run(hook, &format!("h{hook}"), true, false, c)
    }

    fn bindings(t: &Task) -> Vec<&str> {
        t.contexts.iter().map(|c| c.binding.as_str()).collect()
    }

    #[test]
    fn contiguous_same_hook_tasks_are_folded() {
        // Oracle: [h1 E, h1 E, h1 Sched, h1 E, h2 E, h1 E] → 4 contexts, queue shrinks by 3.
        let mut q: VecDeque<Task> = [
            (1, "e1", false),
            (1, "e2", false),
            (1, "s", true),
            (1, "e3", false),
            (2, "x", false),
            (1, "e4", false),
        ]
        .into_iter()
        .map(|(h, b, s)| task(h, ctx(b, None, s)))
        .collect();
        assert_eq!(combine_head(&mut q), 3);
        assert_eq!(q.len(), 3);
        assert_eq!(bindings(&q[0]), ["e1", "e2", "s", "e3"]);
    }

    #[test]
    fn different_hooks_do_not_combine() {
        let mut q: VecDeque<Task> = (1..=3).map(|h| task(h, ctx("e", None, false))).collect();
        assert_eq!(combine_head(&mut q), 0);
        assert_eq!(q.len(), 3);
    }

    #[test]
    fn adjacent_group_contexts_collapse_to_the_last() {
        // Oracle: [h1{pods,E}, h1{pods,E}, h1{pods,sched}, h1{E}, h2, h1] → 2 contexts; 6 → 3 tasks.
        let mut q: VecDeque<Task> = VecDeque::from(vec![
            task(1, ctx("a", Some("pods"), false)),
            task(1, ctx("b", Some("pods"), false)),
            task(1, ctx("c", Some("pods"), true)),
            task(1, ctx("d", None, false)),
            task(2, ctx("x", None, false)),
            task(1, ctx("y", None, false)),
        ]);
        combine_head(&mut q);
        assert_eq!(q.len(), 3);
        assert_eq!(bindings(&q[0]), ["c", "d"]);
    }

    #[test]
    fn v0_and_enable_tasks_are_never_combined() {
        let mut q = VecDeque::from(vec![
            task(1, ctx("a", None, true)),
            Task::enable(TaskKind::EnableScheduleBindings, 1, "h1"),
            task(1, ctx("b", None, true)),
        ]);
        assert_eq!(combine_head(&mut q), 0);
        let mut v0 = VecDeque::from(vec![
            Task::hook_run(1, "h1", false, false, ctx("a", None, true)),
            task(1, ctx("b", None, true)),
        ]);
        assert_eq!(combine_head(&mut v0), 0);
    }

    #[test]
    fn compaction_merges_across_other_tasks_with_deterministic_groups() {
        let mut q = VecDeque::new();
        q.push_back(task(2, ctx("other", None, false)));
        for i in 0..COMPACTION_THRESHOLD {
            let group = match i % 3 {
                0 => Some("b"),
                1 => Some("a"),
                _ => None,
            };
            q.push_back(task(1, ctx(&format!("c{i}"), group, false)));
            if i % 2 == 0 {
                q.push_back(task(2, ctx("other", None, false)));
            }
        }
        assert_eq!(compact(&mut q), vec!["h1".to_string()]);
        assert_eq!(q.len(), 1 + 1 + COMPACTION_THRESHOLD / 2);
        let merged = &q[1];
        assert_eq!(merged.hook(), Some(1));
        // 33 ungrouped contexts in order, then the last "b" (c99) and the last "a" (c97).
        assert_eq!(merged.contexts.len(), 33 + 2);
        assert_eq!(bindings(merged)[..2], ["c2", "c5"]);
        assert_eq!(bindings(merged)[33..], ["c99", "c97"]);
    }

    #[test]
    fn descriptions_follow_flant() {
        let mut t = task(1, ctx("every-min", Some("pods"), true));
        assert_eq!(
            t.describe("main"),
            "HookRun:main:schedule:h1:group=pods:every-min"
        );
        t.failures = 2;
        t.last_error = Some("boom".into());
        assert_eq!(
            t.describe("main"),
            "HookRun:main:schedule:h1:group=pods:every-min:failures 2:boom"
        );
        let s = Task::hook_run(0, "hook.sh", true, false, BindingContext::on_startup());
        assert_eq!(s.describe("main"), "HookRun::onStartup:hook.sh");
        assert_eq!(
            Task::enable(TaskKind::EnableScheduleBindings, 0, "hook.sh").describe("main"),
            "EnableScheduleBindings:main::hook.sh:EnableScheduleBindings"
        );
    }
}
