//! The wiring's seam for what differs between shell-operator and addon-operator,
//! as `webhook::bind` / `serve` / `register` is the webhooks' seam: `operator.rs`
//! calls the flavor once in its bind step and once in its spawn step, and never
//! asks which program it runs anywhere else.
//!
//! addon-operator adds, on the same engine: its own hook list (global hooks, the
//! ConfigMap watch, module hooks) and metrics, routes on the metrics port and the
//! debug socket, the main queue's first tasks (ending in the startup converge), the
//! values hook around each hook run, the queue handler, the router's lifecycle
//! inputs, readiness after the first converge, and the resource monitor's thread
//! body (spawned, like every thread, by `operator.rs`).

use super::start_error::StartError;
use crate::addon;
use crate::flags::{Config, Program};
use crate::hook::Hook;
use crate::metrics::Metrics;
use crate::monitor::store::SnapshotStore;
use crate::queue::Task;
use crate::queue::worker::{Handler, SharedView};
use crate::runner::{HookValues, Runner};
use crate::schedule::Control;
use crossbeam_channel::{Receiver, Sender};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The program's part of the bind step.
pub(super) enum Flavor {
    Shell,
    /// Boxed: addon-operator's bound state is large, shell-operator's nothing.
    Addon(Box<addon::Bound>),
}

/// The metrics registry of the program (addon-operator adds its own series).
/// `QUEUE_ACTIONS_METRICS=no` switches the queue action histogram off (as in flant).
pub(super) fn metrics(config: &Config) -> Result<Arc<Metrics>, StartError> {
    let queue_actions = std::env::var("QUEUE_ACTIONS_METRICS").map_or(true, |v| v != "no");
    let metrics = match config.program {
        Program::Addon => Metrics::for_addon(&config.metrics_prefix, queue_actions),
        Program::Shell => Metrics::with_options(&config.metrics_prefix, queue_actions),
    };
    metrics
        .map(Arc::new)
        .map_err(|e| StartError::Part(e.to_string()))
}

impl Flavor {
    /// Loads the hooks the engine runs: shell-operator's hooks dir, or
    /// addon-operator's modules, global hooks and ConfigMap (`addon::bind`).
    pub(super) fn bind(
        config: &Config,
        metrics: &Metrics,
    ) -> Result<(Flavor, Vec<Hook>), StartError> {
        match config.program {
            Program::Addon => {
                let (bound, hooks) = addon::bind(config, metrics).map_err(|e| e.to_string())?;
                Ok((Flavor::Addon(Box::new(bound)), hooks))
            }
            Program::Shell => Ok((Flavor::Shell, super::bind::load_hooks(config)?)),
        }
    }

    /// Which hooks' admission entries are registered at startup: all in
    /// shell-operator (`None`), the global hooks' in addon-operator (a module's
    /// come with its run).
    pub(super) fn webhooks_at_start(&self) -> Option<Vec<bool>> {
        match self {
            Flavor::Shell => None,
            Flavor::Addon(a) => Some(a.webhooks_at_start()),
        }
    }

    /// Admission bindings the operator answers itself: addon-operator's
    /// validation of its ModuleSettings objects when that feature is on.
    pub(super) fn admission_builtins(&self) -> crate::webhook::admission::Builtins {
        match self {
            Flavor::Shell => Default::default(),
            Flavor::Addon(a) => a.admission_builtins(),
        }
    }

    /// Extra routes on the metrics port (`main` is the main queue's view).
    pub(super) fn http_routes(&self, main: SharedView) -> Option<crate::http::ExtraRoutes> {
        match self {
            Flavor::Addon(a) => Some(a.http_routes(main)),
            Flavor::Shell => None,
        }
    }

    /// Extra routes on the debug socket.
    pub(super) fn debug_routes(&self) -> Option<crate::debug::ExtraRoutes> {
        match self {
            Flavor::Addon(a) => Some(a.debug_routes()),
            Flavor::Shell => None,
        }
    }

    /// The main queue's first tasks.
    pub(super) fn startup_tasks(&self, hooks: &[Hook]) -> Vec<Task> {
        match self {
            Flavor::Addon(a) => a.startup_tasks(hooks),
            Flavor::Shell => crate::startup::startup_tasks(hooks),
        }
    }

    /// The program's part of the spawn step. `ready` is the operator's readiness:
    /// shell-operator is ready when its startup tasks are done, addon-operator after
    /// its first converge.
    pub(super) fn start(self, setup: Setup) -> Started {
        match self {
            Flavor::Shell => Started {
                startup_ready: setup.ready,
                addon: None,
            },
            Flavor::Addon(a) => {
                let started = a.start(
                    setup.hooks,
                    setup.scheduler,
                    setup.ready,
                    setup.store,
                    setup.webhooks,
                    addon::reload::Wiring {
                        main: setup.main,
                        queues: setup.queues,
                        monitor: setup.monitor,
                        metrics: setup.metrics,
                    },
                );
                Started {
                    startup_ready: Arc::new(AtomicBool::new(false)),
                    addon: Some(started),
                }
            }
        }
    }
}

/// What [`Flavor::start`] needs from the engine.
pub(super) struct Setup {
    /// The hook table the runner and the monitor read (a reload appends to it).
    pub(super) hooks: crate::hook::table::HookTable,
    pub(super) scheduler: Sender<Control>,
    pub(super) ready: Arc<AtomicBool>,
    pub(super) store: Option<Arc<SnapshotStore>>,
    /// The registrations addon-operator's module runs follow.
    pub(super) webhooks: crate::webhook::ModuleWebhooks,
    /// The main queue, the queues' names and the monitor's control channel
    /// (addon-operator's reload adds and retires hooks through them).
    pub(super) main: Sender<Task>,
    pub(super) queues: std::collections::BTreeSet<String>,
    pub(super) monitor: Option<Sender<crate::monitor::Control>>,
    /// The operator's metrics (the `module` label of added hooks' kube_* series).
    pub(super) metrics: Arc<Metrics>,
}

/// The program's part of the spawn step, started.
pub(super) struct Started {
    /// Set by the runner when the startup tasks are done: the operator's readiness
    /// for shell-operator, nothing for addon-operator (ready after a converge).
    pub(super) startup_ready: Arc<AtomicBool>,
    addon: Option<addon::Started>,
}

impl Started {
    /// The values hook the runner calls around each hook run (addon-operator).
    pub(super) fn values(&self) -> Option<Arc<dyn HookValues>> {
        self.addon.as_ref().map(|a| Arc::clone(&a.values))
    }

    /// The handler every queue thread runs tasks with.
    pub(super) fn handler(&self, runner: Arc<Runner>) -> Arc<dyn Handler> {
        match &self.addon {
            Some(a) => a.handler(runner),
            None => runner,
        }
    }

    /// The reload of modules and global hooks (addon-operator; once).
    pub(super) fn modules_reload(&mut self) -> Option<addon::reload::ModulesReload> {
        self.addon.as_mut().and_then(addon::Started::modules_reload)
    }

    /// The router's side of the module lifecycle (addon-operator; once).
    pub(super) fn router_inputs(&mut self) -> Option<addon::Inputs> {
        self.addon.as_mut().and_then(addon::Started::inputs)
    }

    /// The resource monitor's thread body (addon-operator; once).
    pub(super) fn resource_monitor(
        &mut self,
        stop: Receiver<()>,
    ) -> Option<impl FnOnce() + Send + 'static> {
        self.addon.as_mut().and_then(|a| a.resource_monitor(stop))
    }

    /// The drift watcher's thread body (addon-operator; once).
    pub(super) fn drift_watcher(
        &mut self,
        stop: Receiver<()>,
    ) -> Option<impl FnOnce() + Send + 'static> {
        self.addon.as_mut().and_then(|a| a.drift_watcher(stop))
    }
}
