//! The router thread: turns schedule fires and kubernetes events into `HookRun`
//! tasks on their binding's queue. It owns no state but the queues' senders, so
//! whatever produces work (the scheduler, the monitor, Synchronization releases,
//! Synchronization tasks that run on their own queue) reaches the queues through
//! this one place. In addon-operator it also steps the module lifecycle with the
//! inputs that arise outside the main queue (values patched by hooks on other
//! queues, release drift, retries coming due) and queues the tasks that result.

use crate::hook::Hook;
use crate::hook::context::{BindingContext, BindingType, Payload};
use crate::hook::table::HookTable;
use crate::log;
use crate::monitor::store::KubeEvent;
use crate::queue::Task;
use crate::schedule::Fire;
use crossbeam_channel::{Receiver, Sender, select};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The router's inputs and outputs.
pub(crate) struct Router {
    pub(crate) hooks: HookTable,
    pub(crate) fires: Receiver<Fire>,
    pub(crate) kube_events: Receiver<KubeEvent>,
    pub(crate) stop: Receiver<()>,
    /// Every queue's sender, by queue name.
    pub(crate) queues: BTreeMap<String, Sender<Task>>,
    /// Tasks for a named queue (Synchronization of bindings that do not wait).
    pub(crate) forward: Receiver<(String, Task)>,
    /// addon-operator's lifecycle inputs; `None` for shell-operator.
    pub(crate) addon: Option<crate::addon::Inputs>,
}

/// The longest the router sleeps with no input and no retry due.
const IDLE: Duration = Duration::from_secs(3600);

impl Router {
    /// The thread body: routes until `stop` closes or an input disconnects.
    pub(crate) fn run(self) {
        let never = crossbeam_channel::never();
        let inputs = self.addon.as_ref().map_or(&never, |a| a.receiver());
        // When the lifecycle's next retry is due, as its last step said.
        let due: std::cell::Cell<Option<Instant>> = Default::default();
        let stepped = |(tasks, next): (Vec<(String, Task)>, Option<Instant>)| {
            due.set(next);
            tasks
        };
        loop {
            let wait = (due.get()).map_or(IDLE, |d| d.saturating_duration_since(Instant::now()));
            let tasks = select! {
                recv(self.fires) -> f => match f {
                    Ok(f) => schedule_task(&self.hooks.load(), f).into_iter().collect(),
                    Err(_) => return,
                },
                recv(self.kube_events) -> e => match e {
                    Ok(e) => kube_task(&self.hooks.load(), e).into_iter().collect(),
                    Err(_) => return,
                },
                recv(self.forward) -> t => match t {
                    Ok(t) => vec![t],
                    Err(_) => return,
                },
                recv(inputs) -> i => match (i, &self.addon) {
                    (Ok(i), Some(addon)) => stepped(addon.step(i)),
                    _ => return,
                },
                recv(self.stop) -> _ => return,
                default(wait) => match &self.addon {
                    Some(addon) => stepped(addon.tick()),
                    None => Vec::new(),
                },
            };
            for (queue, task) in tasks {
                self.send(queue, task);
            }
        }
    }

    fn send(&self, queue: String, task: Task) {
        match self.queues.get(&queue) {
            Some(q) => drop(q.send(task)),
            None => log::error(
                "no such queue",
                &[("queue", &queue), ("hook", &task.hook_name)],
            ),
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

pub(crate) fn kube_task(hooks: &[Hook], event: KubeEvent) -> Option<(String, Task)> {
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
