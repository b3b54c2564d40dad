//! The router thread: turns schedule fires and kubernetes events into `HookRun`
//! tasks on their binding's queue. It owns no state but the queues' senders, so
//! whatever produces work (the scheduler, the monitor, Synchronization releases)
//! reaches the queues through this one place.

use crate::hook::Hook;
use crate::hook::context::{BindingContext, BindingType, Payload};
use crate::log;
use crate::monitor::store::KubeEvent;
use crate::queue::Task;
use crate::schedule::Fire;
use crossbeam_channel::{Receiver, Sender, select};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The router's inputs and outputs.
pub struct Router {
    pub hooks: Arc<Vec<Hook>>,
    pub fires: Receiver<Fire>,
    pub kube_events: Receiver<KubeEvent>,
    pub stop: Receiver<()>,
    /// Every queue's sender, by queue name.
    pub queues: BTreeMap<String, Sender<Task>>,
}

impl Router {
    /// The thread body: routes until `stop` closes or an input disconnects.
    pub fn run(self) {
        loop {
            let task = select! {
                recv(self.fires) -> f => match f {
                    Ok(f) => schedule_task(&self.hooks, f),
                    Err(_) => return,
                },
                recv(self.kube_events) -> e => match e {
                    Ok(e) => kube_task(&self.hooks, e),
                    Err(_) => return,
                },
                recv(self.stop) -> _ => return,
            };
            let Some((queue, task)) = task else { continue };
            match self.queues.get(&queue) {
                Some(q) => drop(q.send(task)),
                None => log::error(
                    "no such queue",
                    &[("queue", &queue), ("hook", &task.hook_name)],
                ),
            }
        }
    }
}

fn schedule_task(hooks: &[Hook], fire: Fire) -> Option<(String, Task)> {
    let hook = hooks.get(fire.hook)?;
    let b = hook.config.schedule.get(fire.binding)?;
    let ctx = BindingContext::schedule(&b.name, b.group.clone(), b.include_snapshots_from.clone());
    Some((
        b.queue.clone(),
        Task::hook_run(fire.hook, &hook.name, !hook.is_v0(), b.allow_failure, ctx),
    ))
}

fn kube_task(hooks: &[Hook], event: KubeEvent) -> Option<(String, Task)> {
    let hook = hooks.get(event.hook)?;
    let b = hook.config.kubernetes.get(event.binding)?;
    let ctx = BindingContext {
        binding: b.name.clone(),
        binding_type: BindingType::Kubernetes,
        group: b.group.clone(),
        snapshot_names: b.include_snapshots_from.clone(),
        kube_binding: Some(event.binding),
        payload: Payload::Event {
            watch_event: event.watch_event,
            item: Some(event.item),
        },
    };
    Some((
        b.queue.clone(),
        Task::hook_run(event.hook, &hook.name, !hook.is_v0(), b.allow_failure, ctx),
    ))
}
