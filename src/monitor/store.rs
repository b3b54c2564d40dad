//! Snapshots: the current objects of every kubernetes binding, as hooks see them in
//! `objects` and `snapshots`.
//!
//! The monitor thread writes them (one entry per object: the compact object JSON
//! unless `keepFullObjectsInMemory: false`, the jq filter result as JSON text, and a
//! checksum); queue threads read them when a hook starts, so contexts are current at
//! execution time. Each binding has its own mutex, held only for a map update or a
//! copy. A binding is "locked" from its enabling until its Synchronization task has
//! run: events meanwhile are buffered here and replayed in order on unlock, except
//! those already visible in a snapshot the Synchronization run read.

use crate::hook::config::WatchEventType;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// One object of a binding's snapshot.
#[derive(Debug, Clone)]
pub struct Item {
    /// Compact JSON of the object; `None` with `keepFullObjectsInMemory: false`.
    pub object: Option<Arc<str>>,
    /// JSON text of the filter result; `None` when the binding has no jqFilter.
    pub filter_result: Option<Box<str>>,
    /// Hash of the filter result (or of the whole object without a filter).
    pub checksum: u64,
}

impl Item {
    /// `{object?, filterResult?}` as in binding contexts. `type_meta` (apiVersion,
    /// kind) fills in what list items come without.
    pub fn to_json(&self, type_meta: Option<&(String, String)>) -> Value {
        let mut map = Map::new();
        if let Some(o) = &self.object {
            let mut obj: Value = serde_json::from_str(o).unwrap_or(Value::Null);
            if let (Some((api_version, kind)), Some(fields)) = (type_meta, obj.as_object_mut()) {
                fields
                    .entry("apiVersion")
                    .or_insert_with(|| Value::from(api_version.as_str()));
                fields
                    .entry("kind")
                    .or_insert_with(|| Value::from(kind.as_str()));
            }
            map.insert("object".into(), obj);
        }
        if let Some(f) = &self.filter_result {
            map.insert(
                "filterResult".into(),
                serde_json::from_str(f).unwrap_or(Value::Null),
            );
        }
        Value::Object(map)
    }
}

/// A kubernetes event for a hook, on its way to a queue.
#[derive(Debug, Clone)]
pub struct KubeEvent {
    pub hook: usize,
    pub binding: usize,
    pub watch_event: WatchEventType,
    /// `{object?, filterResult?}` at the time of the event.
    pub item: Value,
}

/// Object key: (namespace, name); cluster-scoped objects have namespace "" and sort first.
pub type Key = (String, String);

/// The state of one binding.
#[derive(Debug, Default)]
pub struct BindingState {
    pub items: BTreeMap<Key, Item>,
    pub locked: bool,
    pub buffer: Vec<KubeEvent>,
    /// (apiVersion, kind) of the binding's resource, for objects that lack them.
    pub type_meta: Option<(String, String)>,
}

impl BindingState {
    /// The items as context JSON, sorted by namespace then name.
    pub fn items_json(&self) -> Vec<Value> {
        self.items
            .values()
            .map(|i| i.to_json(self.type_meta.as_ref()))
            .collect()
    }
}

/// Every kubernetes binding's snapshot, keyed by (hook index, binding index).
#[derive(Debug, Default)]
pub struct SnapshotStore {
    bindings: HashMap<(usize, usize), Mutex<BindingState>>,
}

impl SnapshotStore {
    /// One (empty, locked) entry per kubernetes binding: `bindings` lists
    /// (hook, binding count) pairs.
    pub fn new(bindings: impl IntoIterator<Item = (usize, usize)>) -> SnapshotStore {
        let mut map = HashMap::new();
        for (hook, count) in bindings {
            for b in 0..count {
                map.insert(
                    (hook, b),
                    Mutex::new(BindingState {
                        locked: true,
                        ..BindingState::default()
                    }),
                );
            }
        }
        SnapshotStore { bindings: map }
    }

    /// Locks one binding's state; `None` for an unknown binding.
    pub fn binding(&self, hook: usize, binding: usize) -> Option<MutexGuard<'_, BindingState>> {
        self.bindings
            .get(&(hook, binding))
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The binding's items, sorted by namespace then name.
    pub fn snapshot(&self, hook: usize, binding: usize) -> Vec<Value> {
        self.binding(hook, binding)
            .map(|s| s.items_json())
            .unwrap_or_default()
    }

    /// The snapshot a Synchronization run reads: it also drops buffered events,
    /// because the snapshot already shows them.
    pub fn sync_snapshot(&self, hook: usize, binding: usize) -> Vec<Value> {
        let Some(mut state) = self.binding(hook, binding) else {
            return Vec::new();
        };
        state.buffer.clear();
        state.items_json()
    }

    /// Unlocks a binding; returns the events buffered since its snapshot was read.
    pub fn unlock(&self, hook: usize, binding: usize) -> Vec<KubeEvent> {
        let Some(mut state) = self.binding(hook, binding) else {
            return Vec::new();
        };
        state.locked = false;
        std::mem::take(&mut state.buffer)
    }

    /// Number of objects and bytes held by a binding (for metrics and benchmarks).
    pub fn size(&self, hook: usize, binding: usize) -> (usize, usize) {
        self.binding(hook, binding)
            .map(|s| {
                let bytes = s.items.iter().map(|((ns, n), i)| {
                    ns.len()
                        + n.len()
                        + i.object.as_ref().map_or(0, |o| o.len())
                        + i.filter_result.as_ref().map_or(0, |f| f.len())
                });
                (s.items.len(), bytes.sum())
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(obj: &str, filter: Option<&str>) -> Item {
        Item {
            object: Some(Arc::from(obj)),
            filter_result: filter.map(Box::from),
            checksum: 0,
        }
    }

    #[test]
    fn snapshots_sort_cluster_scoped_first_then_namespace_and_name() {
        let store = SnapshotStore::new([(0, 1)]);
        {
            let mut s = store.binding(0, 0).expect("binding");
            s.items
                .insert(("b".into(), "x".into()), item(r#"{"n":"b/x"}"#, None));
            s.items
                .insert(("a".into(), "y".into()), item(r#"{"n":"a/y"}"#, Some("1")));
            s.items
                .insert(("".into(), "z".into()), item(r#"{"n":"z"}"#, None));
        }
        let snap = store.snapshot(0, 0);
        let names: Vec<&str> = snap
            .iter()
            .map(|i| i["object"]["n"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(names, ["z", "a/y", "b/x"]);
        assert_eq!(snap[1]["filterResult"], 1);
        assert!(snap[0].get("filterResult").is_none());
    }

    #[test]
    fn sync_read_drops_the_buffer_and_unlock_returns_later_events() {
        let store = SnapshotStore::new([(0, 1)]);
        let ev = |n: &str| KubeEvent {
            hook: 0,
            binding: 0,
            watch_event: WatchEventType::Added,
            item: serde_json::json!({"n": n}),
        };
        store.binding(0, 0).expect("b").buffer.push(ev("before"));
        store.sync_snapshot(0, 0);
        store.binding(0, 0).expect("b").buffer.push(ev("after"));
        let replay = store.unlock(0, 0);
        assert_eq!(replay.len(), 1);
        assert_eq!(replay[0].item["n"], "after");
        assert!(!store.binding(0, 0).expect("b").locked);
    }
}
