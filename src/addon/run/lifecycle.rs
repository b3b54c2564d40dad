//! The module lifecycle of addon-operator, in one place: which modules are enabled,
//! where each one is (queued, running, failed and when it is retried, deleting),
//! and where converges are. [`Lifecycle::step`] is the whole of it, a step function
//! `(state, input) -> tasks to queue` with private state and no threads, clock or
//! server (the caller passes the time), in the style of `monitor/sync.rs`.
//!
//! A module is **disabled** until a converge enables it, then **queued** (a
//! ModuleRun waits in the main queue), **running**, and **ready** when its run
//! succeeded, or **failed** with a retry due after flant's backoff (5 s … 32 s);
//! what it is doing is one [`Activity`] at a time. A
//! failed run leaves the queue: it holds back no other task (only the later orders
//! of its converge, below), and the retry is a new ModuleRun that reads the values
//! as they are then. A converge that
//! disables it **deletes** it.
//!
//! | input | from | tasks |
//! | --- | --- | --- |
//! | `ConvergeRequested` (ConfigMap global section or `*Enabled`, a global hook's patch, afterAll changed global values) | router | `ConvergeModules(BeforeAll)`, unless one is on (then it runs again after it) or it is stuck on failures (then a new one starts now) |
//! | `ConvergeStarted` | converge, BeforeAll | - |
//! | `Inventory` (modules with a release, at the first converge) | converge, Modules | - (the next `Enabled` deletes them if they are off) |
//! | `Enabled` (the enabled modules) | converge, Modules | `ModuleDelete` × newly disabled or inventoried but off (reverse order), then the runs of the first order (below); none: `ConvergeModules(AfterAll)` |
//! | `EnabledFailed` | converge, Modules | - (`ConvergeModules(Modules)` at the retry) |
//! | `ValuesChanged` (a module's ConfigMap section, its hook's patch) | router | `ModuleRun` now if enabled and none is queued; it replaces a pending retry |
//! | `ReleaseDrift` (resource monitor) | router | `ModuleRun` if the module is idle and no converge is on |
//! | `RunStarted`, `StartupDone` | module run | after startup: the `ModuleRun` proper (a run of a module whose order has not come does nothing: `may_run`) |
//! | `RunFinished` | module run | afterHelm changed values: `ModuleRun` again; the last run of an order: the runs of the next order, or after the last order `ConvergeModules(AfterAll)` |
//! | `RunFailed` | module run | - (`ModuleRun` at the retry) |
//! | `DeleteStarted`, `DeleteFinished` | module delete | - |
//! | `ConvergeDone` | converge, Done | a new `ConvergeModules(BeforeAll)` if afterAll changed global values or one was asked for meanwhile |
//! | `Tick` (a retry is due) | router | the due retries |
//! | `ModulesAdded` (a reload found new module dirs) | reload | - (disabled, after the running modules; the converge the reload asks for enables them) |
//! | `HooksChanged` (a reload changed a module's hooks) | reload | if the module is started: the Enable tasks of its added hooks (their Synchronization), then a `ModuleRun` unless one is queued; otherwise nothing (its startup enables every hook it has then) |
//!
//! A converge runs the enabled modules **one order at a time** (the order is the
//! number prefix of the module directory): the runs of one order are one
//! `ParallelModuleRun` (two or more modules and a parallelism above 1; the engine
//! runs them side by side) or a `ModuleRun` each, and the next order's come only
//! once every run of this order succeeded. A failed run is retried off the queue
//! as above, and its order holds back the next one (whose modules may depend on
//! it) while its siblings finish. Modules of later orders stay queued until their
//! order comes: an input for one of them changes nothing, its run is coming. A
//! converge waits for every module it runs: afterAll hooks (and readiness) come
//! only once each run succeeded. Inputs that arise inside a main-queue task (the
//! converge phases, module runs and deletes) return their tasks to run next, at the
//! head of the queue; every other producer sends its input to the router, which
//! steps it and queues the tasks (`Inputs` in `addon/mod.rs`).

use crate::queue::worker::backoff;
use crate::queue::{ConvergePhase, GroupRun, Step, Task};
use std::time::Instant;

/// What happens to the modules.
#[derive(Debug, Clone)]
pub(crate) enum Input {
    ConvergeRequested {
        event: String,
    },
    ConvergeStarted {
        event: String,
        now: Instant,
    },
    /// Modules that have a release, seen when the first converge computes the
    /// enabled modules.
    Inventory {
        modules: Vec<usize>,
    },
    /// The enabled modules, in module order.
    Enabled {
        modules: Vec<usize>,
    },
    EnabledFailed {
        error: String,
        now: Instant,
    },
    /// afterAll hooks ran; `changed`: they changed global values.
    ConvergeDone {
        changed: bool,
    },
    ValuesChanged {
        module: usize,
        event: String,
    },
    ReleaseDrift {
        module: usize,
        event: String,
    },
    RunStarted {
        module: usize,
        event: String,
    },
    /// onStartup hooks ran and the bindings are being enabled.
    StartupDone {
        module: usize,
    },
    /// `again`: afterHelm hooks changed the module's values.
    RunFinished {
        module: usize,
        again: bool,
    },
    RunFailed {
        module: usize,
        error: String,
        now: Instant,
    },
    DeleteStarted {
        module: usize,
    },
    DeleteFinished {
        module: usize,
    },
    Tick {
        now: Instant,
    },
    /// Modules a reload found added, (name, order) each: they get the module
    /// indices after the last one.
    ModulesAdded {
        modules: Vec<(String, u32)>,
    },
    /// A reload retired some of module `module`'s hooks and appended others;
    /// `enable`: the Enable tasks of the appended ones.
    HooksChanged {
        module: usize,
        enable: Vec<Task>,
        event: String,
    },
}

/// One module's place in the lifecycle.
#[derive(Debug, Clone, Default)]
struct Module {
    name: String,
    /// The number prefix of its directory: modules of one order run side by side.
    order: u32,
    enabled: bool,
    /// onStartup hooks ran since it was (re-)enabled.
    started: bool,
    /// Its kubernetes bindings were enabled (watches keep running until a delete).
    kube_enabled: bool,
    /// What it is doing: one thing at a time.
    activity: Activity,
    /// The last run succeeded.
    ready: bool,
    failures: u32,
    last_error: Option<String>,
    /// The event of its current (or last) run or delete (`activation`).
    activation: String,
}

/// What a module is doing; the one place its queue, run, retry and delete states
/// live, so no two of them can be on at once by mistake.
#[derive(Debug, Clone, Default, PartialEq)]
enum Activity {
    #[default]
    Idle,
    /// A ModuleRun waits in the main queue (or for its order in the converge).
    Queued,
    /// A run is on; `queued_again`: another run was queued meanwhile.
    Running {
        queued_again: bool,
    },
    /// The last run failed and is retried at `at` for `event`, unless an input
    /// queues a run first.
    Retrying {
        at: Instant,
        event: String,
    },
    Deleting,
}

impl Activity {
    /// A run waits in the queue (the one coming after a run on counts).
    fn queued(&self) -> bool {
        matches!(
            self,
            Activity::Queued | Activity::Running { queued_again: true }
        )
    }
}

/// Where converges are.
#[derive(Debug, Clone, Default)]
struct Converge {
    active: bool,
    /// Another one was asked for while one was on.
    again: bool,
    started_once: bool,
    done_once: bool,
    event: String,
    began: Option<Instant>,
    /// The modules of the running order whose runs this converge still waits for.
    waiting: Vec<usize>,
    /// The orders still to run after the running one, each its modules in order.
    pending: Vec<Vec<usize>>,
    /// Between `Enabled` and `ConvergeModules(AfterAll)`.
    in_modules: bool,
    failures: u32,
    /// The Modules phase failed: when it is retried.
    retry: Option<Instant>,
    last_error: Option<String>,
    inventory: Vec<usize>,
    inventory_taken: bool,
}

/// Every module's lifecycle state and the converges'. Fields are private: they
/// change only through [`Lifecycle::step`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Lifecycle {
    modules: Vec<Module>,
    /// Enabled modules, in module order.
    enabled: Vec<usize>,
    converge: Converge,
    /// How many modules of one order may run at once; 1: one `ModuleRun` each.
    parallelism: usize,
}

/// What the debug CLI shows of a module.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ModuleView {
    pub(crate) state: &'static str,
    pub(crate) last_error: Option<String>,
}

impl Lifecycle {
    /// Every module disabled, no converge yet; `modules` (name, order) in module
    /// order; `parallelism`: how many modules of one order may run at once.
    pub(crate) fn new(
        modules: impl IntoIterator<Item = (String, u32)>,
        parallelism: usize,
    ) -> Lifecycle {
        let modules = modules
            .into_iter()
            .map(|(name, order)| Module {
                name,
                order,
                ..Module::default()
            })
            .collect();
        Lifecycle {
            modules,
            parallelism: parallelism.max(1),
            ..Lifecycle::default()
        }
    }

    /// Applies one input; returns the tasks to queue, in order.
    pub(crate) fn step(&mut self, input: Input) -> Vec<Task> {
        match input {
            Input::ConvergeRequested { event } => self.request_converge(event),
            Input::ConvergeStarted { event, now } => {
                let c = &mut self.converge;
                (c.active, c.started_once, c.event, c.began) = (true, true, event, Some(now));
                Vec::new()
            }
            Input::Inventory { modules } if !self.converge.inventory_taken => {
                self.converge.inventory = modules;
                Vec::new()
            }
            Input::Inventory { .. } => Vec::new(),
            Input::Enabled { modules } => self.enabled(modules),
            Input::EnabledFailed { error, now } => {
                let c = &mut self.converge;
                c.retry = Some(now + backoff(c.failures));
                c.failures += 1;
                c.last_error = Some(error);
                Vec::new()
            }
            Input::ConvergeDone { changed } => {
                let c = &mut self.converge;
                (c.done_once, c.active, c.in_modules) = (true, false, false);
                c.waiting.clear();
                c.pending.clear();
                let again = std::mem::take(&mut c.again);
                match (changed, again) {
                    (true, _) => self.request_converge("AfterAll-Hooks-Change-GlobalValues".into()),
                    (false, true) => self.request_converge("ReloadAllModules".into()),
                    _ => Vec::new(),
                }
            }
            Input::ValuesChanged { module, event } => {
                let ok = self.converge.started_once
                    && self
                        .get(module)
                        .is_some_and(|s| s.enabled && !s.activity.queued());
                if !ok {
                    return Vec::new();
                }
                vec![self.queue_run(module, event)]
            }
            Input::ReleaseDrift { module, event } if self.drift_applies(module) => {
                vec![self.queue_run(module, event)]
            }
            Input::ReleaseDrift { .. } => Vec::new(),
            Input::RunStarted { module, .. } if self.is_pending(module) => Vec::new(),
            Input::RunStarted { module, event } => {
                if let Some(s) = self.modules.get_mut(module) {
                    s.activity = Activity::Idle;
                    if s.enabled {
                        s.activity = Activity::Running {
                            queued_again: false,
                        };
                        s.activation = event;
                    }
                }
                Vec::new()
            }
            Input::StartupDone { module } => {
                let Some(s) = self.modules.get_mut(module) else {
                    return Vec::new();
                };
                (s.started, s.kube_enabled, s.activity) = (true, true, Activity::Idle);
                let event = s.activation.clone();
                vec![self.queue_run(module, event)]
            }
            Input::RunFinished { module, again } => self.run_finished(module, again),
            Input::RunFailed { module, error, now } => {
                if let Some(s) = self.modules.get_mut(module) {
                    s.ready = false;
                    s.activity = match s.activity {
                        // A run queued meanwhile comes anyway: it is the retry.
                        Activity::Running { queued_again: true } => Activity::Queued,
                        // The drift watcher retries a failed correction, with its
                        // own backoff (a server that refuses it must not loop it).
                        _ if s.activation == crate::addon::release::drift::EVENT => Activity::Idle,
                        _ => Activity::Retrying {
                            at: now + backoff(s.failures),
                            event: s.activation.clone(),
                        },
                    };
                    s.failures += 1;
                    s.last_error = Some(error);
                }
                Vec::new()
            }
            Input::DeleteStarted { module } => {
                let event = self.converge.event.clone();
                if let Some(s) = self.modules.get_mut(module) {
                    (s.activity, s.kube_enabled, s.activation) = (Activity::Deleting, false, event);
                }
                Vec::new()
            }
            Input::DeleteFinished { module } => {
                if let Some(s) = self.modules.get_mut(module) {
                    (s.activity, s.started, s.ready) = (Activity::Idle, false, false);
                }
                Vec::new()
            }
            Input::Tick { now } => self.tick(now),
            Input::ModulesAdded { modules } => {
                let added = modules.into_iter().map(|(name, order)| Module {
                    name,
                    order,
                    ..Module::default()
                });
                self.modules.extend(added);
                Vec::new()
            }
            Input::HooksChanged {
                module,
                enable,
                event,
            } => self.hooks_changed(module, enable, event),
        }
    }

    fn get(&self, m: usize) -> Option<&Module> {
        self.modules.get(m)
    }

    /// A started module's new hooks are enabled now and the module runs once; a
    /// module not started (or being deleted) enables them at its next startup.
    fn hooks_changed(&mut self, m: usize, enable: Vec<Task>, event: String) -> Vec<Task> {
        let Some(s) = self
            .get(m)
            .filter(|s| s.enabled && s.started && s.kube_enabled)
        else {
            return Vec::new();
        };
        let queued = s.activity.queued();
        let mut tasks = enable;
        if self.converge.started_once && !queued {
            tasks.push(self.queue_run(m, event));
        }
        tasks
    }

    fn run_task(&self, m: usize, event: String) -> Task {
        let s = &self.modules[m];
        Task::addon(Step::ModuleRun {
            module: m,
            name: s.name.clone(),
            do_startup: !s.started,
            event,
        })
    }

    /// Queues a run of module `m` (which exists), replacing a pending retry.
    fn queue_run(&mut self, m: usize, event: String) -> Task {
        let s = &mut self.modules[m];
        s.activity = match s.activity {
            Activity::Running { .. } => Activity::Running { queued_again: true },
            _ => Activity::Queued,
        };
        self.run_task(m, event)
    }

    fn converge_task(&self, phase: ConvergePhase) -> Task {
        Task::addon(Step::Converge {
            phase,
            event: self.converge.event.clone(),
        })
    }

    /// The converge can go no further until a retry succeeds.
    fn stuck(&self) -> bool {
        let c = &self.converge;
        let failed = |m: &usize| matches!(self.modules[*m].activity, Activity::Retrying { .. });
        c.retry.is_some() || (c.in_modules && !c.waiting.is_empty() && c.waiting.iter().all(failed))
    }

    fn request_converge(&mut self, event: String) -> Vec<Task> {
        if !self.converge.started_once {
            return Vec::new();
        }
        if self.converge.active && !self.stuck() {
            self.converge.again = true;
            return Vec::new();
        }
        let c = &mut self.converge;
        (c.active, c.in_modules, c.retry, c.event) = (true, false, None, event);
        c.waiting.clear();
        c.pending.clear();
        vec![self.converge_task(ConvergePhase::BeforeAll)]
    }

    fn enabled(&mut self, enabled: Vec<usize>) -> Vec<Task> {
        let c = &mut self.converge;
        (c.retry, c.failures, c.last_error) = (None, 0, None);
        c.inventory_taken = true;
        let inventory = std::mem::take(&mut c.inventory);
        let mut tasks = Vec::new();
        for (m, s) in self.modules.iter_mut().enumerate().rev() {
            let on = enabled.contains(&m);
            if !on && (s.enabled || (inventory.contains(&m) && !s.started)) {
                tasks.push(Task::addon(Step::ModuleDelete {
                    module: m,
                    name: s.name.clone(),
                }));
            }
            s.enabled = on;
            if !on {
                s.failures = 0;
                if matches!(s.activity, Activity::Queued | Activity::Retrying { .. }) {
                    s.activity = Activity::Idle;
                }
            }
        }
        // Every enabled module is queued; only the first order's runs go now.
        for &m in &enabled {
            self.modules[m].activity = Activity::Queued;
        }
        let mut orders: Vec<Vec<usize>> = Vec::new();
        for &m in &enabled {
            match orders.last_mut() {
                Some(last) if self.modules[last[0]].order == self.modules[m].order => last.push(m),
                _ => orders.push(vec![m]),
            }
        }
        orders.reverse();
        self.converge.pending = orders;
        self.converge.in_modules = true;
        self.enabled = enabled;
        tasks.extend(self.next_order());
        tasks
    }

    /// The runs of the next order, or afterAll when every order ran.
    fn next_order(&mut self) -> Vec<Task> {
        let event = self.converge.event.clone();
        let Some(order) = self.converge.pending.pop() else {
            self.converge.in_modules = false;
            return vec![self.converge_task(ConvergePhase::AfterAll)];
        };
        self.converge.waiting = order.clone();
        if order.len() < 2 || self.parallelism < 2 {
            return order
                .into_iter()
                .map(|m| self.queue_run(m, event.clone()))
                .collect();
        }
        let runs = order
            .iter()
            .map(|&m| GroupRun {
                module: m,
                name: self.modules[m].name.clone(),
                do_startup: !self.modules[m].started,
            })
            .collect();
        vec![Task::addon(Step::ParallelModuleRun { runs, event })]
    }

    /// Module `m` waits for an earlier order of the converge to finish.
    fn is_pending(&self, m: usize) -> bool {
        self.converge.pending.iter().any(|order| order.contains(&m))
    }

    fn run_finished(&mut self, m: usize, again: bool) -> Vec<Task> {
        let Some(s) = self.modules.get_mut(m) else {
            return Vec::new();
        };
        (s.ready, s.failures, s.last_error) = (true, 0, None);
        s.activity = match s.activity {
            Activity::Running { queued_again: true } => Activity::Queued,
            _ => Activity::Idle,
        };
        if again {
            return vec![self.queue_run(m, "AfterHelm-Hooks-Change-Values".into())];
        }
        let c = &mut self.converge;
        c.waiting.retain(|&w| w != m);
        if c.in_modules && c.waiting.is_empty() {
            return self.next_order();
        }
        Vec::new()
    }

    fn tick(&mut self, now: Instant) -> Vec<Task> {
        let mut tasks = Vec::new();
        if self.converge.retry.is_some_and(|at| at <= now) {
            self.converge.retry = None;
            tasks.push(self.converge_task(ConvergePhase::Modules));
        }
        for m in 0..self.modules.len() {
            let s = &self.modules[m];
            match &s.activity {
                Activity::Retrying { at, event } if *at <= now && s.enabled => {
                    let event = event.clone();
                    tasks.push(self.queue_run(m, event));
                }
                _ => {}
            }
        }
        tasks
    }

    fn drift_applies(&self, m: usize) -> bool {
        !self.converge.active
            && self
                .get(m)
                .is_some_and(|s| s.enabled && s.started && s.activity == Activity::Idle)
    }

    /// When the next retry is due, if one is pending.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let modules = self
            .modules
            .iter()
            .filter(|s| s.enabled)
            .filter_map(|s| match s.activity {
                Activity::Retrying { at, .. } => Some(at),
                _ => None,
            });
        modules.chain(self.converge.retry).min()
    }

    /// Enabled modules, in module order.
    pub(crate) fn enabled_modules(&self) -> &[usize] {
        &self.enabled
    }

    pub(crate) fn is_enabled(&self, m: usize) -> bool {
        self.get(m).is_some_and(|s| s.enabled)
    }

    /// Whether module `m` may run now: enabled, and its order's turn in the
    /// converge has come (a run queued before the converge waits for it).
    pub(crate) fn may_run(&self, m: usize) -> bool {
        self.is_enabled(m) && !self.is_pending(m)
    }

    /// How many modules of one order may run at once.
    pub(crate) fn parallelism(&self) -> usize {
        self.parallelism
    }

    pub(crate) fn is_started(&self, m: usize) -> bool {
        self.get(m).is_some_and(|s| s.started)
    }

    pub(crate) fn kube_enabled(&self, m: usize) -> bool {
        self.get(m).is_some_and(|s| s.kube_enabled)
    }

    /// The event of module `m`'s current (or last) run or delete.
    pub(crate) fn activation(&self, m: usize) -> String {
        self.get(m)
            .map(|s| s.activation.clone())
            .unwrap_or_default()
    }

    /// Whether the resource monitor may check module `m` now.
    pub(crate) fn idle(&self, m: usize) -> bool {
        self.drift_applies(m)
    }

    /// `(started once, done once, on now)` of converges.
    pub(crate) fn converge_status(&self) -> (bool, bool, bool) {
        let c = &self.converge;
        (c.started_once, c.done_once, c.active)
    }

    /// The event of the current (or last) converge.
    pub(crate) fn converge_event(&self) -> &str {
        &self.converge.event
    }

    /// When the current converge started.
    pub(crate) fn converge_began(&self) -> Option<Instant> {
        self.converge.began
    }

    /// Whether the next `Enabled` is the first: an `Inventory` is wanted before it.
    pub(crate) fn wants_inventory(&self) -> bool {
        !self.converge.inventory_taken
    }

    /// The state of module `m` and its last error, for `module list`.
    pub(crate) fn view(&self, m: usize) -> Option<ModuleView> {
        let s = self.get(m)?;
        let state = match (&s.activity, s.enabled) {
            (Activity::Deleting, _) => "Deleting",
            (_, false) => "Disabled",
            (Activity::Running { .. }, _) => "Running",
            (Activity::Queued, _) => "Queued",
            (Activity::Retrying { .. }, _) => "Failed",
            (Activity::Idle, _) if s.ready => "Ready",
            (Activity::Idle, _) => "Enabled",
        };
        Some(ModuleView {
            state,
            last_error: s.last_error.clone(),
        })
    }

    /// Why the enabled modules could not be computed, while that is retried.
    pub(crate) fn enabled_error(&self) -> Option<&str> {
        self.converge.last_error.as_deref()
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
