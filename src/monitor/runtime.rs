//! The queue side of kubernetes bindings, used by the runner on queue threads:
//! enabling a hook's bindings (asking the monitor thread, then queueing one
//! Synchronization task per binding right behind the Enable task, or, for a binding
//! on its own queue with `waitForSynchronization: false`, on that queue through the
//! router, so it holds nothing back), filling contexts
//! with snapshots when a hook starts, and unlocking bindings once their
//! Synchronization ran (replaying the events buffered meanwhile to the router).

use super::Control;
use super::store::{KubeEvent, SnapshotStore};
use super::sync::Input;
use crate::hook::context::{BindingContext, BindingType, Payload, Snapshots};
use crate::hook::table::HookTable;
use crate::queue::Task;
use crossbeam_channel::{Sender, bounded};
use std::sync::Arc;

/// Shared handles for kubernetes bindings.
pub(crate) struct KubeRuntime {
    pub(crate) hooks: HookTable,
    pub(crate) store: Arc<SnapshotStore>,
    pub(crate) monitor: Sender<Control>,
    /// The router's channel (replayed events go there too).
    pub(crate) events: Sender<KubeEvent>,
    /// The router's channel for tasks bound to a named queue.
    pub(crate) forward: Sender<(String, Task)>,
}

impl KubeRuntime {
    /// Runs an `EnableKubernetesBindings` task: starts the hook's watches and returns
    /// its Synchronization tasks, in binding order, to run next; those of bindings on
    /// another queue that do not wait for Synchronization go to their queue instead.
    pub(crate) fn enable(&self, task: &Task) -> Result<Vec<Task>, String> {
        let index = task.hook().ok_or("not a hook's task")?;
        let (reply_tx, reply_rx) = bounded(1);
        self.monitor
            .send(Control::Enable {
                hook: index,
                reply: reply_tx,
            })
            .map_err(|_| "monitor is not running".to_string())?;
        reply_rx
            .recv()
            .map_err(|_| "monitor stopped".to_string())??;
        let hooks = self.hooks.load();
        let hook = hooks.get(index).ok_or("unknown hook")?;
        let mut tasks = Vec::new();
        for (bi, b) in hook.config.kubernetes.iter().enumerate() {
            if hook.is_v0() || !b.execute_hook_on_synchronization {
                // Not held (see `Begin`): nothing is buffered, nothing to release.
                continue;
            }
            let ctx = BindingContext {
                binding: b.name.clone(),
                binding_type: BindingType::Kubernetes,
                group: b.group.clone(),
                snapshot_names: b.include_snapshots_from.clone(),
                kube_binding: Some(bi),
                payload: Payload::Synchronization,
            };
            let mut t = Task::hook_run(index, &hook.name, true, b.allow_failure, ctx);
            t.sync_bindings.push(bi);
            if !b.wait_for_synchronization && b.queue != crate::startup::MAIN_QUEUE {
                self.forward
                    .send((b.queue.clone(), t))
                    .map_err(|_| "router is not running".to_string())?;
                continue;
            }
            tasks.push(t);
        }
        Ok(tasks)
    }

    /// Stops the hook's kubernetes bindings and empties their snapshots; a later
    /// Enable starts them over with a fresh Synchronization.
    pub(crate) fn disable(&self, hook: usize) -> Result<(), String> {
        let (reply_tx, reply_rx) = bounded(1);
        self.monitor
            .send(Control::Disable {
                hook,
                reply: reply_tx,
            })
            .map_err(|_| "monitor is not running".to_string())?;
        reply_rx.recv().map_err(|_| "monitor stopped".to_string())
    }

    /// What the hook's contexts read when it starts: Synchronization objects and
    /// every included snapshot, read at this moment (each binding once per run).
    pub(crate) fn prepare(&self, hook_index: usize, contexts: &[BindingContext]) -> Snapshots {
        let mut snapshots = Snapshots::default();
        for ctx in contexts {
            if let (Payload::Synchronization, Some(bi)) = (&ctx.payload, ctx.kube_binding) {
                let read = self.store.step(hook_index, bi, Input::ReadForSync);
                snapshots.sync.insert(bi, read.objects);
            }
            for name in &ctx.snapshot_names {
                if snapshots.named.contains_key(name) {
                    continue;
                }
                let items = self
                    .binding_index(hook_index, name)
                    .map(|bi| self.store.snapshot(hook_index, bi))
                    .unwrap_or_default();
                snapshots.named.insert(name.clone(), items);
            }
        }
        snapshots
    }

    /// After a successful run: releases the bindings whose Synchronization it
    /// carried and sends their buffered events on.
    pub(crate) fn unlock(&self, task: &Task) {
        let Some(hook) = task.hook() else { return };
        for &bi in &task.sync_bindings {
            for e in self.store.step(hook, bi, Input::Release).events {
                let _ = self.events.send(e);
            }
        }
    }

    /// The first kubernetes binding of the hook named `name` (flant's lookup).
    fn binding_index(&self, hook_index: usize, name: &str) -> Option<usize> {
        self.hooks
            .load()
            .get(hook_index)?
            .config
            .kubernetes
            .iter()
            .position(|b| b.name == name)
    }
}
