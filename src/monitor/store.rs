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
use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// One object of a binding's snapshot. Kept small, because a binding may hold tens
/// of thousands: the key and the filter result share one allocation, and the object
/// text is shared with every other binding of the same watch.
#[derive(Debug, Clone)]
pub struct Item {
    /// `namespace NUL name`, then `NUL` and the filter result's JSON text when the
    /// binding has a jqFilter (JSON text never contains a raw NUL, names neither).
    text: Box<str>,
    /// Compact JSON of the object; `None` with `keepFullObjectsInMemory: false`.
    pub object: Option<Arc<str>>,
    /// Hash of the filter result (or of the whole object without a filter).
    pub checksum: u64,
}

impl Item {
    pub fn new(
        key: (&str, &str),
        filter_result: Option<&str>,
        object: Option<Arc<str>>,
        checksum: u64,
    ) -> Item {
        let mut text = item_key(key.0, key.1);
        if let Some(f) = filter_result {
            text.push('\0');
            text.push_str(f);
        }
        Item {
            text: text.into_boxed_str(),
            object,
            checksum,
        }
    }

    /// The snapshot key, `namespace NUL name` (see [`item_key`]).
    pub fn key(&self) -> &str {
        let name_end = self.name_end();
        &self.text[..name_end]
    }

    /// `(namespace, name)`.
    pub fn namespace_and_name(&self) -> (&str, &str) {
        self.key().split_once('\0').unwrap_or(("", self.key()))
    }

    /// JSON text of the filter result; `None` when the binding has no jqFilter.
    pub fn filter_result(&self) -> Option<&str> {
        self.text.get(self.name_end() + 1..)
    }

    fn name_end(&self) -> usize {
        let ns_end = self.text.find('\0').unwrap_or(0);
        self.text[ns_end + 1..]
            .find('\0')
            .map_or(self.text.len(), |i| ns_end + 1 + i)
    }

    /// Text bytes the item refers to: key, filter result and object JSON.
    pub fn bytes(&self) -> usize {
        self.text.len() + self.object.as_ref().map_or(0, |o| o.len())
    }

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
        if let Some(f) = self.filter_result() {
            map.insert(
                "filterResult".into(),
                serde_json::from_str(f).unwrap_or(Value::Null),
            );
        }
        Value::Object(map)
    }
}

/// A snapshot key: `namespace NUL name`. NUL sorts before every character a name
/// can hold, so keys sort as (namespace, name) pairs, cluster-scoped objects first.
pub fn item_key(namespace: &str, name: &str) -> String {
    let mut key = String::with_capacity(namespace.len() + 1 + name.len());
    key.push_str(namespace);
    key.push('\0');
    key.push_str(name);
    key
}

/// A binding's items, sorted by key. A B-tree of bare items (no separate key
/// strings); built in bulk from a list so its nodes start full.
#[derive(Debug, Default)]
pub struct Items {
    set: BTreeSet<Slot>,
    /// Running total of [`Item::bytes`] (for the `kube_snapshot_bytes` metric).
    bytes: usize,
}

/// An item ordered and looked up by its key alone.
#[derive(Debug)]
struct Slot(Item);

impl PartialEq for Slot {
    fn eq(&self, other: &Self) -> bool {
        self.0.key() == other.0.key()
    }
}
impl Eq for Slot {}
impl PartialOrd for Slot {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Slot {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.key().cmp(other.0.key())
    }
}
impl Borrow<str> for Slot {
    fn borrow(&self) -> &str {
        self.0.key()
    }
}

impl Items {
    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    pub fn clear(&mut self) {
        self.set.clear();
        self.bytes = 0;
    }

    /// The item under `key` ([`item_key`]).
    pub fn get(&self, key: &str) -> Option<&Item> {
        self.set.get(key).map(|s| &s.0)
    }

    /// Stores `item`, returning the one it replaces.
    pub fn insert(&mut self, item: Item) -> Option<Item> {
        self.bytes += item.bytes();
        let old = self.set.replace(Slot(item)).map(|s| s.0);
        self.bytes -= old.as_ref().map_or(0, Item::bytes);
        old
    }

    pub fn remove(&mut self, key: &str) -> Option<Item> {
        let old = self.set.take(key).map(|s| s.0);
        self.bytes -= old.as_ref().map_or(0, Item::bytes);
        old
    }

    /// Adds many items at once; the tree is rebuilt so its nodes are full. An item
    /// whose key is already present replaces the old one.
    pub fn extend_bulk(&mut self, items: Vec<Item>) {
        let mut all: Vec<Slot> = std::mem::take(&mut self.set).into_iter().collect();
        all.extend(items.into_iter().map(Slot));
        // Stable: of two equal keys the older item comes first, and is dropped.
        all.sort();
        let mut kept: Vec<Slot> = Vec::with_capacity(all.len());
        for slot in all {
            if kept.last() == Some(&slot) {
                kept.pop();
            }
            kept.push(slot);
        }
        self.bytes = kept.iter().map(|s| s.0.bytes()).sum();
        self.set = kept.into_iter().collect();
    }

    /// The items in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Item> {
        self.set.iter().map(|s| &s.0)
    }

    /// The sum of every item's [`Item::bytes`].
    pub fn bytes(&self) -> usize {
        self.bytes
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

/// The state of one binding.
#[derive(Debug, Default)]
pub struct BindingState {
    pub items: Items,
    pub locked: bool,
    pub buffer: Vec<KubeEvent>,
    /// (apiVersion, kind) of the binding's resource, for objects that lack them.
    pub type_meta: Option<(String, String)>,
}

impl BindingState {
    /// The items as context JSON, sorted by namespace then name.
    pub fn items_json(&self) -> Vec<Value> {
        self.items
            .iter()
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
            .map(|s| (s.items.len(), s.items.bytes()))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: (&str, &str), obj: &str, filter: Option<&str>) -> Item {
        Item::new(key, filter, Some(Arc::from(obj)), 0)
    }

    #[test]
    fn an_item_keeps_key_and_filter_result_in_one_string() {
        let i = Item::new(("ns", "a"), Some(r#"{"x":"1"}"#), None, 7);
        assert_eq!(i.key(), "ns\0a");
        assert_eq!(i.namespace_and_name(), ("ns", "a"));
        assert_eq!(i.filter_result(), Some(r#"{"x":"1"}"#));
        let bare = Item::new(("", "node-1"), None, None, 7);
        assert_eq!(bare.namespace_and_name(), ("", "node-1"));
        assert_eq!(bare.filter_result(), None);
        let empty = Item::new(("ns", "b"), Some("\"\""), None, 0);
        assert_eq!(empty.filter_result(), Some("\"\""));
        assert_eq!(empty.to_json(None), serde_json::json!({"filterResult": ""}));
    }

    #[test]
    fn items_insert_replace_remove_and_bulk_merge() {
        let mut items = Items::default();
        assert!(
            items
                .insert(Item::new(("a", "x"), Some("1"), None, 1))
                .is_none()
        );
        let old = items.insert(Item::new(("a", "x"), Some("2"), None, 2));
        assert_eq!(old.map(|o| o.checksum), Some(1));
        assert_eq!(items.get(&item_key("a", "x")).map(|i| i.checksum), Some(2));
        items.extend_bulk(vec![
            Item::new(("b", "y"), Some("3"), None, 3),
            Item::new(("a", "x"), Some("4"), None, 4),
            Item::new(("", "z"), Some("5"), None, 5),
        ]);
        let order: Vec<(u64, (&str, &str))> = items
            .iter()
            .map(|i| (i.checksum, i.namespace_and_name()))
            .collect();
        // The bulk item replaced the older one under the same key.
        assert_eq!(order, [(5, ("", "z")), (4, ("a", "x")), (3, ("b", "y"))]);
        assert_eq!(
            items.remove(&item_key("b", "y")).map(|i| i.checksum),
            Some(3)
        );
        assert!(items.remove(&item_key("b", "y")).is_none());
        assert_eq!(items.len(), 2);
        let sum: usize = items.iter().map(Item::bytes).sum();
        assert_eq!(items.bytes(), sum);
        // Each item's text is its key, a NUL and its one-digit filter result.
        assert_eq!(
            sum,
            item_key("", "z").len() + 2 + item_key("a", "x").len() + 2
        );
    }

    #[test]
    fn snapshots_sort_cluster_scoped_first_then_namespace_and_name() {
        let store = SnapshotStore::new([(0, 1)]);
        {
            let mut s = store.binding(0, 0).expect("binding");
            s.items.insert(item(("b", "x"), r#"{"n":"b/x"}"#, None));
            s.items.insert(item(("a-b", "y"), r#"{"n":"a-b/y"}"#, None));
            s.items
                .insert(item(("a", "y"), r#"{"n":"a/y"}"#, Some("1")));
            s.items.insert(item(("", "z"), r#"{"n":"z"}"#, None));
        }
        let snap = store.snapshot(0, 0);
        let names: Vec<&str> = snap
            .iter()
            .map(|i| i["object"]["n"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(names, ["z", "a/y", "a-b/y", "b/x"]);
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
