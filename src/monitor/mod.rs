//! Kubernetes monitors: the thread that turns watch streams into binding snapshots
//! and hook events.
//!
//! Every distinct watch (resource, namespace, label selector, field selector) is one
//! reflector thread from our client (`kube::reflector`); bindings with identical
//! selectors share it, each applying its own name filter, jq filter and settings to
//! the objects it delivers. This module's single thread (the monitor) receives every
//! reflector's events, updates the [`SnapshotStore`], and sends [`KubeEvent`]s to the
//! router. Bindings with `namespace.labelSelector` also get a namespace reflector:
//! a namespace that starts matching gets a watch (its objects arrive as Added), one
//! that stops matching has its objects removed as Deleted.
//!
//! The snapshots are the only copy of the objects: reflectors run with their cache
//! off, so a relist arrives whole and is diffed against each binding's snapshot
//! (`relist.rs`); `apply.rs` is how one event changes one binding.
//!
//! The main queue's `EnableKubernetesBindings` task asks this thread (over
//! [`Control`]) to start a hook's watches and waits for their initial lists, so the
//! snapshots are full before the hook's Synchronization tasks run.

mod apply;
pub(crate) mod filter;
mod intern;
#[cfg(test)]
mod joined_watch;
#[cfg(test)]
mod life;
mod namespaces;
#[cfg(test)]
mod parse_once;
mod relist;
pub(crate) mod runtime;
pub(crate) mod selectors;
#[cfg(test)]
mod shared_watch;
pub mod store;
pub(crate) mod sync;

use crate::hook::Hook;
use crate::hook::config::{KubernetesBinding, WatchEventType};
use crate::hook::context::Item;
use crate::hook::table::HookTable;
use crate::kube::{self, Client, Object, Resource, WatchParams};
use crate::log;
use crate::metrics::Metrics;
use crossbeam_channel::{Receiver, Sender, select};
use filter::{ItemFilter, JqInput};
use selectors::selectors;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{KubeEvent, SnapshotStore};
use sync::Input;

/// Requests to the monitor thread.
pub enum Control {
    /// Start every kubernetes binding of a hook; the reply comes once the snapshots
    /// hold the initial lists.
    Enable {
        hook: usize,
        reply: Sender<Result<(), String>>,
    },
    /// Stop every kubernetes binding of a hook (addon-operator, when its module is
    /// disabled): its watches end unless other bindings share them, its snapshots are
    /// emptied. The reply comes once it is done.
    Disable { hook: usize, reply: Sender<()> },
}

/// How long an initial list may take before enabling fails (and is retried).
const INITIAL_LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// One binding's view of a watch.
#[derive(Clone)]
struct Sub {
    hook: usize,
    binding: usize,
    /// Client-side name filter when several names can't be one field selector.
    names: Option<Vec<String>>,
    filter: ItemFilter,
    events: Vec<WatchEventType>,
    /// Metric label values (`[module,] hook, binding, queue`), made once when the
    /// binding is enabled.
    labels: Arc<[String]>,
    /// Whether its kube_* series are exported: not for addon-operator's own
    /// ConfigMap watch, which is no hook of the user's.
    counted: bool,
    /// The jqFilter's text, for error messages ("" without one).
    jq_source: Arc<str>,
    /// For a binding that joined a running watch with a list of its own: that
    /// list's resourceVersion. Watch events at or below it were already in the list
    /// (they were only waiting for the monitor) and are skipped for this binding, as
    /// is a relist of the watch no newer than it (`relist.rs`), so its snapshot
    /// never goes back to an older state.
    listed_at: Option<u64>,
}

/// Where a binding watches: the parts of a watch's identity.
#[derive(Clone, PartialEq)]
struct WatchKey {
    resource: Resource,
    namespace: Option<String>,
    label: String,
    field: String,
}

/// Which watch an event comes from.
pub(crate) type WatchId = u64;

/// An event of one watch, on the channel every reflector shares.
pub(crate) type WatchEvent = (WatchId, kube::Event);

/// What waiting for a new watch's initial list brought.
enum Waited {
    Event(kube::Event),
    /// The operator is shutting down.
    Stopping,
    /// No initial list within [`INITIAL_LIST_TIMEOUT`].
    TimedOut,
}

/// A watch just started: its id, its reflector, and its initial list.
type StartedWatch = (WatchId, kube::ReflectorHandle, Vec<Object>);

struct Watch {
    id: WatchId,
    key: WatchKey,
    handle: kube::ReflectorHandle,
    subs: Vec<Sub>,
}

/// A `namespace.labelSelector` binding's namespace watch.
struct NamespaceWatch {
    id: WatchId,
    template: WatchKey,
    sub: Sub,
    handle: kube::ReflectorHandle,
    active: BTreeSet<String>,
}

/// The monitor thread's state.
pub struct Monitor {
    client: Client,
    hooks: HookTable,
    store: Arc<SnapshotStore>,
    events: Sender<KubeEvent>,
    metrics: Arc<Metrics>,
    watch_tx: Sender<WatchEvent>,
    watch_rx: Receiver<WatchEvent>,
    /// Events of other watches that arrived while waiting for an initial list.
    pending: VecDeque<WatchEvent>,
    next_id: WatchId,
    watches: Vec<Watch>,
    namespace_watches: Vec<NamespaceWatch>,
    /// The operator's stop signal (set by `run`), so waiting for an initial list
    /// never holds up a shutdown.
    stop: Receiver<()>,
}

impl Monitor {
    /// The monitor for `hooks`; `run` is its thread body.
    pub fn new(
        client: Client,
        hooks: HookTable,
        store: Arc<SnapshotStore>,
        metrics: Arc<Metrics>,
        watch_tx: Sender<WatchEvent>,
        watch_rx: Receiver<WatchEvent>,
        events: Sender<KubeEvent>,
    ) -> Monitor {
        Monitor {
            client,
            hooks,
            store,
            events,
            metrics,
            watch_tx,
            watch_rx,
            pending: VecDeque::new(),
            next_id: 0,
            watches: Vec::new(),
            namespace_watches: Vec::new(),
            stop: crossbeam_channel::never(),
        }
    }

    /// The thread body: serves control requests and watch events until stopped or
    /// until its control channel closes (events after that are dropped).
    pub fn run(mut self, control: Receiver<Control>, stop: Receiver<()>) {
        self.stop = stop.clone();
        loop {
            while let Some((id, ev)) = self.pending.pop_front() {
                self.dispatch(id, ev);
            }
            select! {
                recv(control) -> c => match c {
                    Ok(Control::Enable { hook, reply }) => {
                        let _ = reply.send(self.enable(hook));
                    }
                    Ok(Control::Disable { hook, reply }) => {
                        self.disable(hook);
                        let _ = reply.send(());
                    }
                    Err(_) => break,
                },
                recv(stop) -> _ => break,
                recv(self.watch_rx) -> e => {
                    if let Ok((id, ev)) = e {
                        crate::latency_trace::mark(crate::latency_trace::Stage::MonitorGot);
                        self.dispatch(id, ev);
                    }
                }
            }
        }
        self.watches.iter().for_each(|w| w.handle.stop());
        self.namespace_watches.iter().for_each(|w| w.handle.stop());
    }

    /// Removes the hook's subscriptions; watches left without one stop.
    fn disable(&mut self, hook_index: usize) {
        self.drain();
        for w in &mut self.watches {
            w.subs.retain(|s| s.hook != hook_index);
        }
        self.watches.retain(|w| {
            let keep = !w.subs.is_empty();
            if !keep {
                w.handle.stop();
            }
            keep
        });
        self.namespace_watches.retain(|w| {
            let keep = w.sub.hook != hook_index;
            if !keep {
                w.handle.stop();
            }
            keep
        });
        for bi in 0..self.store.binding_count(hook_index) {
            self.store.step(hook_index, bi, sync::Input::End);
        }
    }

    /// Hands an event to its watch; events of a watch stopped meanwhile are dropped.
    fn dispatch(&mut self, id: WatchId, ev: kube::Event) {
        if let Some(i) = self.watches.iter().position(|w| w.id == id) {
            self.on_watch_event(i, ev);
        } else if let Some(n) = self.namespace_watches.iter().position(|w| w.id == id) {
            self.on_namespace_event(n, ev);
        }
    }

    /// Processes every event already waiting, so snapshots are as current as the
    /// watches.
    fn drain(&mut self) {
        while let Some((id, ev)) = self.pending.pop_front() {
            self.dispatch(id, ev);
        }
        while let Ok((id, ev)) = self.watch_rx.try_recv() {
            self.dispatch(id, ev);
        }
    }

    fn enable(&mut self, hook_index: usize) -> Result<(), String> {
        let started = Instant::now();
        let hooks = self.hooks.load();
        let hook = hooks.get(hook_index).ok_or("unknown hook")?;
        self.drain();
        let result = hook
            .config
            .kubernetes
            .iter()
            .enumerate()
            .try_for_each(|(bi, b)| self.enable_binding(hook, hook_index, bi, b));
        if hook.is_internal() {
            return result;
        }
        let m = &self.metrics;
        m.hook_enable_kubernetes_bindings_seconds
            .with_label_values(&[hook.name.as_str()])
            .set(started.elapsed().as_secs_f64());
        match &result {
            Ok(()) => m
                .hook_enable_kubernetes_bindings_success
                .with_label_values(&[hook.name.as_str()])
                .set(1.0),
            Err(_) => m
                .hook_enable_kubernetes_bindings_errors_total
                .with_label_values(&[hook.name.as_str()])
                .inc(),
        }
        result
    }

    fn enable_binding(
        &mut self,
        hook: &Hook,
        hi: usize,
        bi: usize,
        b: &KubernetesBinding,
    ) -> Result<(), String> {
        let context = format!("hook '{}', binding '{}'", hook.name, b.name);
        let resource = self
            .client
            .resolve(b.api_version.as_deref().unwrap_or(""), &b.kind, &context)
            .map_err(|e| e.to_string())?;
        let (label, field, names) = selectors(b).map_err(|e| format!("{context}: {e}"))?;
        let filter = ItemFilter {
            jq: hook.jq_filters.get(bi).cloned().flatten(),
            keep_full_object: b.keep_full_objects_in_memory,
        };
        let sub = Sub {
            hook: hi,
            binding: bi,
            names,
            filter,
            events: b.execute_hook_on_event.clone(),
            labels: self
                .metrics
                .kube_labels(hi, &hook.name, &b.name, &b.queue, &b.kind)
                .into(),
            counted: !hook.is_internal(),
            jq_source: Arc::from(b.jq_filter.as_deref().unwrap_or_default()),
            listed_at: None,
        };
        let events = sub.events.clone();
        let template = WatchKey {
            resource: resource.clone(),
            namespace: None,
            label,
            field,
        };
        let namespaced = resource.namespaced;
        let ns = b.namespace.as_ref().filter(|_| namespaced);
        let items = match (
            ns.and_then(|n| n.label_selector.as_ref()),
            ns.and_then(|n| n.name_selector.as_ref())
                .filter(|n| !n.is_empty()),
        ) {
            (Some(selector), _) => {
                self.watch_namespaces_by_label(template, sub.clone(), selector, &context)?
            }
            (None, Some(names)) => {
                let mut items = Vec::new();
                for name in names {
                    let key = WatchKey {
                        namespace: Some(name.clone()),
                        ..template.clone()
                    };
                    items.extend(self.attach(key, sub.clone(), false, &context)?);
                }
                items
            }
            (None, None) => self.attach(template, sub.clone(), false, &context)?,
        };
        let hold = !hook.is_v0() && b.execute_hook_on_synchronization;
        self.step(
            &sub,
            Input::Begin {
                items,
                hold,
                events,
            },
        );
        Ok(())
    }

    /// Adds `sub` to the watch for `key`, starting it if needed, and returns the
    /// watch's current objects as the binding's items; with `announce` they go
    /// through the binding as Added events instead (a namespace that started
    /// matching) and none are returned.
    ///
    /// Watches keep no objects of their own (the snapshots do), so a binding that
    /// joins a running watch gets a fresh list. Events the monitor has not yet taken
    /// from that watch then arrive after the list: the ones the list already holds
    /// (resourceVersion at or below the list's, [`Sub::listed_at`]) are skipped for
    /// the joining binding, so its snapshot never steps back to an older state.
    fn attach(
        &mut self,
        key: WatchKey,
        mut sub: Sub,
        announce: bool,
        context: &str,
    ) -> Result<Vec<Item>, String> {
        let (index, objects) = match self.watches.iter().position(|w| w.key == key) {
            Some(i) => {
                let (objects, version) = self.list(&key)?;
                sub.listed_at = version.parse().ok();
                (i, objects)
            }
            None => {
                let (id, handle, objects) = self.start_watch(&key, kube::Cache::Off, context)?;
                self.watches.push(Watch {
                    id,
                    key,
                    handle,
                    subs: Vec::new(),
                });
                (self.watches.len() - 1, objects)
            }
        };
        let w = &mut self.watches[index];
        w.subs
            .retain(|s| !(s.hook == sub.hook && s.binding == sub.binding));
        w.subs.push(sub.clone());
        let mut initial = Vec::new();
        // Each object is dropped once filtered: only the snapshot keeps it.
        for obj in objects {
            if announce {
                self.apply(&sub, WatchEventType::Added, &obj, &mut JqInput::default());
            } else if let Some(item) = initial_item(&sub, &obj) {
                initial.push(item);
            }
        }
        Ok(initial)
    }

    /// Lists a watch's objects for a binding that joins it late, decoded as the
    /// reflector decodes its list, with the list's resourceVersion.
    fn list(&self, key: &WatchKey) -> Result<(Vec<Object>, String), String> {
        let params = kube::ListParams {
            label_selector: key.label.clone(),
            field_selector: key.field.clone(),
            ..Default::default()
        };
        self.client
            .api(&key.resource, key.namespace.as_deref())
            .list_objects(&params)
            .map_err(|e| e.to_string())
    }

    /// Starts a reflector sending on the shared watch channel and waits for its
    /// initial list; other watches' events meanwhile wait in `pending`, in order.
    /// Failures are retried until [`INITIAL_LIST_TIMEOUT`], except a request the
    /// server refuses (400), which fails at once with the server's reason.
    fn start_watch(
        &mut self,
        key: &WatchKey,
        cache: kube::Cache,
        context: &str,
    ) -> Result<StartedWatch, String> {
        let params = WatchParams {
            namespace: key.namespace.clone(),
            label_selector: key.label.clone(),
            field_selector: key.field.clone(),
            cache,
            ..WatchParams::default()
        };
        let id = self.next_id;
        self.next_id += 1;
        let tx = self.watch_tx.clone();
        let handle = self
            .client
            .watch_with_sink(&key.resource, params, move |e| tx.send((id, e)).is_ok());
        let deadline = Instant::now() + INITIAL_LIST_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = select! {
                recv(self.watch_rx) -> m => match m {
                    Ok((from, event)) if from == id => Waited::Event(event),
                    Ok(other) => {
                        self.pending.push_back(other);
                        continue;
                    }
                    Err(_) => Waited::TimedOut,
                },
                recv(self.stop) -> _ => Waited::Stopping,
                default(left) => Waited::TimedOut,
            };
            match event {
                Waited::Event(kube::Event::Synced(objects)) => return Ok((id, handle, objects)),
                Waited::Event(kube::Event::WatchError { kind, message }) => {
                    self.metrics
                        .kubernetes_client_watch_errors_total
                        .with_label_values(&[kind.as_str()])
                        .inc();
                    // Retrying a request the server refuses cannot help: fail
                    // enabling now, with the server's reason (the task is retried).
                    if kind == kube::WatchErrorKind::Refused {
                        handle.stop();
                        return Err(format!("{context}: {message}"));
                    }
                    log::warn(
                        "initial list failed, retrying",
                        &[("binding", context), ("error", &message)],
                    );
                }
                Waited::Event(_) => {}
                Waited::Stopping => {
                    handle.stop();
                    return Err(format!("{context}: the operator is stopping"));
                }
                Waited::TimedOut => {
                    handle.stop();
                    return Err(format!(
                        "{context}: no initial list of {} within {}s",
                        key.resource.resource,
                        INITIAL_LIST_TIMEOUT.as_secs()
                    ));
                }
            }
        }
    }

    fn on_watch_event(&mut self, index: usize, ev: kube::Event) {
        let started = Instant::now();
        let (kind, obj) = match ev {
            kube::Event::Added(o) => (WatchEventType::Added, o),
            kube::Event::Modified(o) => (WatchEventType::Modified, o),
            kube::Event::Deleted(o) => (WatchEventType::Deleted, o),
            // The reflector keeps no cache for us: a relist comes whole.
            kube::Event::Synced(objects) => return self.on_relist(index, objects, None),
            kube::Event::Relisted(objects, version) => {
                return self.on_relist(index, objects, version.parse().ok());
            }
            kube::Event::WatchError { kind, message } => return self.watch_error(kind, &message),
        };
        let watch = &self.watches[index];
        let subs = watch.subs.clone();
        // Watch events carry apiVersion and kind; a server that leaves them out
        // costs one more decode here.
        let obj = match obj.meta.has_type_meta {
            true => obj,
            false => with_type_meta(&obj, &watch.key.resource).unwrap_or(obj),
        };
        let mut input = JqInput::default();
        let version: Option<u64> = obj.meta.resource_version.parse().ok();
        for sub in &subs {
            if sub
                .listed_at
                .is_some_and(|at| version.is_some_and(|v| v <= at))
            {
                continue; // already in the list this binding joined with
            }
            self.apply(sub, kind, &obj, &mut input);
        }
        let elapsed = started.elapsed().as_secs_f64();
        for sub in subs.iter().filter(|s| s.counted) {
            self.metrics
                .kube_event_duration_seconds
                .with_label_values(&sub.label_values())
                .observe(elapsed);
        }
    }

    fn watch_error(&self, kind: kube::WatchErrorKind, message: &str) {
        self.metrics
            .kubernetes_client_watch_errors_total
            .with_label_values(&[kind.as_str()])
            .inc();
        if kind != kube::WatchErrorKind::Eof {
            log::warn(
                "watch error, the client recovers by itself",
                &[("error_type", kind.as_str()), ("error", message)],
            );
        }
    }
}

/// An object's item for a binding's initial snapshot; `None` when the binding's
/// name filter skips it, or its jqFilter fails on it (logged; the object is left out).
fn initial_item(sub: &Sub, obj: &Object) -> Option<Item> {
    let (ns, name) = (&obj.meta.namespace, &obj.meta.name);
    if !sub.wants(name) {
        return None;
    }
    sub.filter
        .item(obj)
        .map_err(|e| sub.filter_failed(ns, name, &e))
        .ok()
}

/// A watched object that came without `apiVersion` and `kind`, decoded again with
/// them filled in; `None` (logged) if that fails.
fn with_type_meta(obj: &Object, resource: &Resource) -> Option<Object> {
    let api_version = resource.api_version();
    Object::decode(&obj.json, Some((&api_version, &resource.kind)))
        .map_err(|e| log::error("skipping a watched object", &[("error", &e.to_string())]))
        .ok()
}

impl Sub {
    fn wants(&self, name: &str) -> bool {
        self.names
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name))
    }
}
