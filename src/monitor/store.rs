//! Snapshots: every kubernetes binding's [`BindingSync`] (its objects, as hooks see
//! them in `objects` and `snapshots`, and its Synchronization state), each behind
//! its own mutex.
//!
//! The monitor thread feeds watch changes in; queue threads read snapshots when a
//! hook starts (so contexts are current at execution time) and release bindings
//! after their Synchronization ran. A mutex is held only for one step of the
//! protocol: a map update or a copy of the item handles (the object texts are
//! shared, not copied).

use super::sync::{BindingSync, Input, Output};
use crate::hook::config::WatchEventType;
use crate::hook::context::Item;
use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

/// A kubernetes event for a hook, on its way to a queue.
#[derive(Debug, Clone)]
pub struct KubeEvent {
    pub(crate) hook: usize,
    pub(crate) binding: usize,
    pub(crate) watch_event: WatchEventType,
    /// The object at the time of the event.
    pub(crate) item: Item,
}

/// Every kubernetes binding's state, keyed by (hook index, binding index). The
/// map changes only on a reload (hooks added or removed), so it sits behind a
/// read-write lock that every step takes for reading.
#[derive(Debug, Default)]
pub struct SnapshotStore {
    bindings: RwLock<HashMap<(usize, usize), Mutex<BindingSync>>>,
}

impl SnapshotStore {
    /// One (empty, not yet enabled) entry per kubernetes binding: `bindings` lists
    /// (hook, binding count) pairs.
    pub fn new(bindings: impl IntoIterator<Item = (usize, usize)>) -> SnapshotStore {
        let mut map = HashMap::new();
        for (hook, count) in bindings {
            for b in 0..count {
                map.insert((hook, b), Mutex::new(BindingSync::default()));
            }
        }
        SnapshotStore {
            bindings: RwLock::new(map),
        }
    }

    /// Adds a hook's (empty, not yet enabled) bindings: a hook a reload added.
    pub(crate) fn add_hook(&self, hook: usize, count: usize) {
        let mut map = self.bindings.write().unwrap_or_else(|p| p.into_inner());
        for b in 0..count {
            map.insert((hook, b), Mutex::new(BindingSync::default()));
        }
    }

    /// Forgets a hook's bindings and their objects: a hook a reload removed.
    pub(crate) fn remove_hook(&self, hook: usize) {
        let mut map = self.bindings.write().unwrap_or_else(|p| p.into_inner());
        map.retain(|(h, _), _| *h != hook);
    }

    /// How many kubernetes bindings the hook has here.
    pub(crate) fn binding_count(&self, hook: usize) -> usize {
        let map = self.bindings.read().unwrap_or_else(|p| p.into_inner());
        map.keys().filter(|(h, _)| *h == hook).count()
    }

    fn with<T>(
        &self,
        hook: usize,
        binding: usize,
        f: impl FnOnce(&mut BindingSync) -> T,
    ) -> Option<T> {
        let map = self.bindings.read().unwrap_or_else(|p| p.into_inner());
        let cell = map.get(&(hook, binding))?;
        let mut state = cell.lock().unwrap_or_else(|p| p.into_inner());
        Some(f(&mut state))
    }

    /// One step of a binding's protocol; deliveries come back as events for the
    /// router, a snapshot read as items. An unknown binding does nothing.
    pub(crate) fn step(&self, hook: usize, binding: usize, input: Input) -> Steps {
        let outputs = self
            .with(hook, binding, |s| s.step(input))
            .unwrap_or_default();
        let mut steps = Steps::default();
        for out in outputs {
            match out {
                Output::Deliver(c) => steps.events.push(KubeEvent {
                    hook,
                    binding,
                    watch_event: c.kind,
                    item: c.item,
                }),
                Output::Objects(items) => steps.objects = items,
            }
        }
        steps
    }

    /// The binding's items, sorted by namespace then name.
    pub(crate) fn snapshot(&self, hook: usize, binding: usize) -> Vec<Item> {
        self.with(hook, binding, |s| s.snapshot())
            .unwrap_or_default()
    }

    /// Keys of the binding's objects that `pick` selects.
    pub(crate) fn keys_where(
        &self,
        hook: usize,
        binding: usize,
        pick: impl Fn(&Item) -> bool,
    ) -> Vec<String> {
        self.with(hook, binding, |s| s.keys_where(pick))
            .unwrap_or_default()
    }

    /// Number of objects and bytes held by a binding (for metrics and benchmarks).
    pub fn size(&self, hook: usize, binding: usize) -> (usize, usize) {
        self.with(hook, binding, |s| s.size()).unwrap_or_default()
    }
}

/// What one protocol step produced.
#[derive(Debug, Default)]
pub(crate) struct Steps {
    /// Events to send to the router now.
    pub(crate) events: Vec<KubeEvent>,
    /// The snapshot a Synchronization run reads.
    pub(crate) objects: Vec<Item>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn snapshots_sort_cluster_scoped_first_then_namespace_and_name() {
        let store = SnapshotStore::new([(0, 1)]);
        for (ns, name) in [("b", "x"), ("a-b", "y"), ("a", "y"), ("", "z")] {
            let text: Arc<str> = Arc::from(format!("{{\"n\":\"{ns}/{name}\"}}"));
            let item = Item::new((ns, name), None, Some(text), 0);
            store.step(0, 0, Input::Upsert(item));
        }
        let names: Vec<(String, String)> = store
            .snapshot(0, 0)
            .iter()
            .map(|i| {
                let (ns, n) = i.namespace_and_name();
                (ns.to_string(), n.to_string())
            })
            .collect();
        let want = [("", "z"), ("a", "y"), ("a-b", "y"), ("b", "x")];
        assert_eq!(names, want.map(|(a, b)| (a.to_string(), b.to_string())));
        assert_eq!(store.size(0, 0).0, 4);
        assert!(store.snapshot(9, 9).is_empty(), "unknown binding");
    }

    #[test]
    fn steps_turn_deliveries_into_events_for_the_binding() {
        let store = SnapshotStore::new([(2, 2)]);
        store.step(
            2,
            1,
            Input::Begin {
                items: Vec::new(),
                hold: false,
                events: WatchEventType::ALL.to_vec(),
            },
        );
        let steps = store.step(
            2,
            1,
            Input::Upsert(Item::new(("ns", "a"), Some("1"), None, 1)),
        );
        assert_eq!(steps.events.len(), 1);
        let e = &steps.events[0];
        assert_eq!(
            (e.hook, e.binding, e.watch_event),
            (2, 1, WatchEventType::Added)
        );
        assert_eq!(e.item.filter_result(), Some("1"));
        // The other binding of the hook was never enabled: it delivers nothing.
        let held = store.step(2, 0, Input::Upsert(Item::new(("ns", "a"), None, None, 1)));
        assert!(held.events.is_empty());
    }
}
