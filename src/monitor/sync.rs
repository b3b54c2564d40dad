//! The Synchronization protocol of one kubernetes binding, in one place.
//!
//! A binding's snapshot and its hook events follow these rules:
//! - **begin**: enabling the binding installs the initial list as its snapshot. A
//!   binding whose hook runs a Synchronization (v1, `executeHookOnSynchronization`)
//!   is then *held*: events change the snapshot at once but are buffered instead of
//!   sent, so the hook never sees an Event before its Synchronization.
//! - **read for Synchronization**: the Synchronization run reads the snapshot when
//!   it starts; buffered events are dropped then, because that snapshot shows them.
//! - **release**: after the Synchronization run succeeded, the events buffered since
//!   it read the snapshot are sent, in order, and later events go out at once.
//! - an event is delivered only for the kinds in `executeHookOnEvent`, and a
//!   Modified only when the object's checksum (its filter result) changed.
//!
//! `waitForSynchronization: false` changes no rule here, only where the binding's
//! Synchronization task runs (its own queue instead of right behind the Enable
//! task: `runtime.rs`); the binding is held and released the same way.
//!
//! [`BindingSync::step`] is the whole protocol as a step function `(state, input) ->
//! outputs`, with no threads or channels: the monitor thread feeds it watch changes,
//! queue threads feed it reads and releases (through the snapshot store's mutex),
//! and the tests below drive it directly.

use crate::hook::config::WatchEventType;
use crate::hook::context::Item;
use std::borrow::Borrow;
use std::collections::BTreeSet;

/// A hook event for a binding: what happened and the object as the binding saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub(crate) kind: WatchEventType,
    pub(crate) item: Item,
}

/// What happens to a binding.
#[derive(Debug)]
pub(crate) enum Input<'a> {
    /// Enabling: the initial list, whether to hold events for a Synchronization
    /// run, and the kinds that run the hook.
    Begin {
        items: Vec<Item>,
        hold: bool,
        events: Vec<WatchEventType>,
    },
    /// An object was added or changed (Added or Modified follows the snapshot).
    Upsert(Item),
    /// The object under this key is gone (a relist no longer has it): its Deleted
    /// event carries the last state the binding saw.
    Delete(&'a str),
    /// A DELETED watch event: the object under the item's key is gone, and its
    /// Deleted event carries the item made from the event's object (its final
    /// resourceVersion), as client-go and flant pass it.
    Deleted(Item),
    /// A Synchronization run starts: it reads the snapshot.
    ReadForSync,
    /// The Synchronization run succeeded.
    Release,
    /// The binding was disabled (addon-operator's module disable): forget every
    /// object and hold events until the next `Begin`.
    End,
}

/// What the caller must do.
#[derive(Debug, PartialEq)]
pub(crate) enum Output {
    /// Send this event to the hook's queue now.
    Deliver(Change),
    /// The snapshot a Synchronization run reads.
    Objects(Vec<Item>),
}

/// One binding's snapshot and Synchronization state. Fields are private: the
/// rules above are only changed through [`BindingSync::step`].
#[derive(Debug)]
pub(crate) struct BindingSync {
    items: Items,
    held: bool,
    buffer: Vec<Change>,
    events: Vec<WatchEventType>,
}

impl Default for BindingSync {
    /// Not enabled yet: held, so nothing is delivered before `Begin`.
    fn default() -> Self {
        BindingSync {
            items: Items::default(),
            held: true,
            buffer: Vec::new(),
            events: WatchEventType::ALL.to_vec(),
        }
    }
}

impl BindingSync {
    /// Applies one input; returns what to do.
    pub(crate) fn step(&mut self, input: Input) -> Vec<Output> {
        match input {
            Input::Begin {
                items,
                hold,
                events,
            } => {
                self.items.replace_all(items);
                self.held = hold;
                self.buffer.clear();
                self.events = events;
                Vec::new()
            }
            Input::Upsert(item) => self.upsert(item),
            Input::Delete(key) => match self.items.remove(key) {
                Some(old) => self.emit(WatchEventType::Deleted, old),
                None => Vec::new(),
            },
            Input::Deleted(item) => match self.items.remove(item.key()) {
                Some(_) => self.emit(WatchEventType::Deleted, item),
                None => Vec::new(),
            },
            Input::ReadForSync => {
                self.buffer.clear();
                vec![Output::Objects(self.snapshot())]
            }
            Input::End => {
                *self = BindingSync::default();
                Vec::new()
            }
            Input::Release => {
                self.held = false;
                std::mem::take(&mut self.buffer)
                    .into_iter()
                    .map(Output::Deliver)
                    .collect()
            }
        }
    }

    fn upsert(&mut self, item: Item) -> Vec<Output> {
        let kind = match self.items.get(item.key()).map(|old| old.checksum) {
            Some(old) if old == item.checksum => {
                // Same filter result: keep the newer object, run nothing.
                self.items.insert(item);
                return Vec::new();
            }
            Some(_) => WatchEventType::Modified,
            None => WatchEventType::Added,
        };
        let event = self.events.contains(&kind).then(|| item.clone());
        self.items.insert(item);
        event.map_or_else(Vec::new, |item| self.emit(kind, item))
    }

    /// Delivers or buffers an event, if its kind runs the hook.
    fn emit(&mut self, kind: WatchEventType, item: Item) -> Vec<Output> {
        if !self.events.contains(&kind) {
            return Vec::new();
        }
        let change = Change { kind, item };
        if self.held {
            self.buffer.push(change);
            Vec::new()
        } else {
            vec![Output::Deliver(change)]
        }
    }

    /// The current objects, sorted by namespace then name (cheap copies: the
    /// object texts are shared).
    pub(crate) fn snapshot(&self) -> Vec<Item> {
        self.items.iter().cloned().collect()
    }

    /// The keys of the objects `pick` selects (for deletions by namespace or relist).
    pub(crate) fn keys_where(&self, pick: impl Fn(&Item) -> bool) -> Vec<String> {
        self.items
            .iter()
            .filter(|i| pick(i))
            .map(|i| i.key().to_string())
            .collect()
    }

    /// Number of objects and their text bytes (the snapshot size metrics).
    pub(crate) fn size(&self) -> (usize, usize) {
        (self.items.len(), self.items.bytes())
    }
}

/// A binding's items, sorted by key: a B-tree of bare items (no separate key
/// strings), built in bulk from a list so its nodes start full.
#[derive(Debug, Default)]
struct Items {
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
    fn len(&self) -> usize {
        self.set.len()
    }

    fn bytes(&self) -> usize {
        self.bytes
    }

    fn get(&self, key: &str) -> Option<&Item> {
        self.set.get(key).map(|s| &s.0)
    }

    fn insert(&mut self, item: Item) {
        self.bytes += item.bytes();
        if let Some(old) = self.set.replace(Slot(item)) {
            self.bytes -= old.0.bytes();
        }
    }

    fn remove(&mut self, key: &str) -> Option<Item> {
        let old = self.set.take(key).map(|s| s.0);
        self.bytes -= old.as_ref().map_or(0, Item::bytes);
        old
    }

    /// Replaces every item; the tree is built in bulk so its nodes are full. Of
    /// two items under one key the later wins.
    fn replace_all(&mut self, items: Vec<Item>) {
        let mut all: Vec<Slot> = items.into_iter().map(Slot).collect();
        // Stable: of two equal keys the earlier comes first, and is dropped.
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

    fn iter(&self) -> impl Iterator<Item = &Item> {
        self.set.iter().map(|s| &s.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use WatchEventType::{Added, Deleted, Modified};

    fn item(name: &str, checksum: u64) -> Item {
        Item::new(("ns", name), Some(&checksum.to_string()), None, checksum)
    }

    fn begin(hold: bool) -> Input<'static> {
        Input::Begin {
            items: vec![item("a", 1)],
            hold,
            events: WatchEventType::ALL.to_vec(),
        }
    }

    fn delivered(out: Vec<Output>) -> Vec<(WatchEventType, String, u64)> {
        out.into_iter()
            .map(|o| match o {
                Output::Deliver(c) => (
                    c.kind,
                    c.item.namespace_and_name().1.to_string(),
                    c.item.checksum,
                ),
                Output::Objects(_) => panic!("unexpected snapshot read"),
            })
            .collect()
    }

    fn names(out: Vec<Output>) -> Vec<String> {
        match out.as_slice() {
            [Output::Objects(items)] => items
                .iter()
                .map(|i| i.namespace_and_name().1.to_string())
                .collect(),
            other => panic!("expected one snapshot, got {other:?}"),
        }
    }

    #[test]
    fn nothing_is_delivered_before_begin() {
        let mut s = BindingSync::default();
        assert!(s.step(Input::Upsert(item("x", 1))).is_empty());
        assert_eq!(s.size().0, 1, "the snapshot still follows the watch");
    }

    #[test]
    fn a_held_binding_buffers_and_the_sync_read_drops_what_it_shows() {
        let mut s = BindingSync::default();
        s.step(begin(true));
        // Before the Synchronization run reads: changes are in its snapshot.
        assert!(s.step(Input::Upsert(item("b", 2))).is_empty());
        assert_eq!(names(s.step(Input::ReadForSync)), ["a", "b"]);
        // After the read: buffered, released in order after the run succeeded.
        assert!(s.step(Input::Upsert(item("a", 3))).is_empty());
        assert!(s.step(Input::Delete("ns\0b")).is_empty());
        assert_eq!(
            delivered(s.step(Input::Release)),
            [(Modified, "a".into(), 3), (Deleted, "b".into(), 2)]
        );
        // Released: events go out at once.
        assert_eq!(
            delivered(s.step(Input::Upsert(item("c", 4)))),
            [(Added, "c".into(), 4)]
        );
    }

    #[test]
    fn a_failed_sync_run_reads_again_and_still_drops_the_buffer() {
        let mut s = BindingSync::default();
        s.step(begin(true));
        s.step(Input::ReadForSync);
        s.step(Input::Upsert(item("b", 2)));
        // The run failed; its retry reads a snapshot that already has "b".
        assert_eq!(names(s.step(Input::ReadForSync)), ["a", "b"]);
        assert!(delivered(s.step(Input::Release)).is_empty());
    }

    #[test]
    fn unchanged_checksums_and_unwanted_kinds_run_nothing() {
        let mut s = BindingSync::default();
        s.step(Input::Begin {
            items: vec![item("a", 1)],
            hold: false,
            events: vec![Modified],
        });
        assert!(
            s.step(Input::Upsert(item("a", 1))).is_empty(),
            "same checksum"
        );
        assert!(
            s.step(Input::Upsert(item("n", 5))).is_empty(),
            "Added not wanted"
        );
        assert_eq!(s.size().0, 2);
        assert_eq!(
            delivered(s.step(Input::Upsert(item("a", 2)))),
            [(Modified, "a".into(), 2)]
        );
        assert!(
            s.step(Input::Delete("ns\0a")).is_empty(),
            "Deleted not wanted"
        );
        assert!(s.step(Input::Delete("ns\0a")).is_empty(), "already gone");
        assert_eq!(s.size().0, 1);
    }

    #[test]
    fn a_deleted_event_delivers_the_events_object_not_the_stored_one() {
        let mut s = BindingSync::default();
        s.step(begin(false));
        assert_eq!(
            delivered(s.step(Input::Deleted(item("a", 9)))),
            [(Deleted, "a".into(), 9)]
        );
        assert!(
            s.step(Input::Deleted(item("a", 9))).is_empty(),
            "already gone"
        );
        assert_eq!(s.size().0, 0);
    }

    #[test]
    fn begin_replaces_the_snapshot_and_counts_bytes() {
        let mut s = BindingSync::default();
        s.step(Input::Upsert(item("old", 1)));
        s.step(Input::Begin {
            items: vec![item("b", 1), item("a", 2), item("b", 3)],
            hold: false,
            events: WatchEventType::ALL.to_vec(),
        });
        let snap = s.snapshot();
        let got: Vec<(&str, u64)> = snap
            .iter()
            .map(|i| (i.namespace_and_name().1, i.checksum))
            .collect();
        assert_eq!(
            got,
            [("a", 2), ("b", 3)],
            "sorted, the later duplicate wins"
        );
        let bytes: usize = snap.iter().map(Item::bytes).sum();
        assert_eq!(s.size(), (2, bytes));
        assert_eq!(s.keys_where(|i| i.checksum == 3), ["ns\0b"]);
    }

    #[test]
    fn end_forgets_everything_and_holds_until_the_next_begin() {
        let mut s = BindingSync::default();
        s.step(Input::Begin {
            items: vec![item("a", 1)],
            hold: false,
            events: WatchEventType::ALL.to_vec(),
        });
        assert_eq!(s.step(Input::End), vec![]);
        assert!(s.snapshot().is_empty());
        assert_eq!(
            s.step(Input::Upsert(item("b", 2))),
            vec![],
            "held after End"
        );
    }
}
