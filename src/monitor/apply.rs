//! How one watch event changes one binding: the jq filter and checksum, the snapshot
//! update, and the hook event (sent at once, or buffered while the binding waits for
//! its Synchronization run). Part of the monitor thread (`monitor/mod.rs`).

use super::filter::{self, key_of};
use super::store::{self, item_key};
use super::{Monitor, Sub};
use crate::hook::config::WatchEventType;
use crate::log;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use store::KubeEvent;

impl Monitor {
    /// Applies one event to one binding: snapshot update, checksum comparison, and
    /// the hook event (buffered while the binding is locked). Whether an object is
    /// Added or Modified follows the snapshot (so a relist can say either).
    pub(super) fn apply(&self, sub: &Sub, kind: WatchEventType, obj: &Value, json: &Arc<str>) {
        let (ns, name) = key_of(obj);
        if !sub.wants(name) {
            return;
        }
        if kind == WatchEventType::Deleted {
            return self.delete(sub, &item_key(ns, name));
        }
        let labels = &sub.labels;
        let filter_started = Instant::now();
        let item = sub.filter.item(obj, json);
        if sub.filter.jq.is_some() {
            let l = labels.each_ref().map(String::as_str);
            self.metrics
                .kube_jq_filter_duration_seconds
                .with_label_values(&l)
                .observe(filter_started.elapsed().as_secs_f64());
        }
        let item = match item {
            Ok(item) => item,
            Err(e) => return sub.filter_failed(ns, name, &e),
        };
        let Some(mut guard) = self.store.binding(sub.hook, sub.binding) else {
            return;
        };
        let state = &mut *guard;
        let old = state.items.get(item.key()).map(|old| old.checksum);
        if old == Some(item.checksum) {
            state.items.insert(item);
            self.count_snapshot(sub, state);
            return;
        }
        let kind = match old {
            Some(_) => WatchEventType::Modified,
            None => WatchEventType::Added,
        };
        let context = sub
            .events
            .contains(&kind)
            .then(|| item.to_json(state.type_meta.as_ref()));
        state.items.insert(item);
        self.after_change(sub, guard, kind, context);
    }

    /// Removes an object from one binding's snapshot, with a Deleted event carrying
    /// the last state the binding saw.
    pub(super) fn delete(&self, sub: &Sub, key: &str) {
        let Some(mut guard) = self.store.binding(sub.hook, sub.binding) else {
            return;
        };
        let Some(old) = guard.items.remove(key) else {
            return;
        };
        let context = sub
            .events
            .contains(&WatchEventType::Deleted)
            .then(|| old.to_json(guard.type_meta.as_ref()));
        self.after_change(sub, guard, WatchEventType::Deleted, context);
    }

    /// Sets the binding's snapshot size metrics.
    pub(super) fn count_snapshot(&self, sub: &Sub, state: &store::BindingState) {
        let labels = sub.labels.each_ref().map(String::as_str);
        let m = &self.metrics;
        m.kube_snapshot_objects
            .with_label_values(&labels)
            .set(state.items.len() as f64);
        m.kube_snapshot_bytes
            .with_label_values(&labels)
            .set(state.items.bytes() as f64);
    }

    /// Counts the snapshot and sends (or, while locked, buffers) the hook event.
    fn after_change(
        &self,
        sub: &Sub,
        mut state: std::sync::MutexGuard<'_, store::BindingState>,
        kind: WatchEventType,
        item: Option<Value>,
    ) {
        self.count_snapshot(sub, &state);
        let Some(item) = item else {
            return;
        };
        let event = KubeEvent {
            hook: sub.hook,
            binding: sub.binding,
            watch_event: kind,
            item,
        };
        if state.locked {
            state.buffer.push(event);
        } else {
            drop(state);
            let _ = self.events.send(event);
        }
    }
}

impl Sub {
    /// Logs a jqFilter failure on one object; the object is skipped, nothing else.
    pub(super) fn filter_failed(&self, namespace: &str, name: &str, e: &filter::FilterError) {
        let object = if namespace.is_empty() {
            name.to_string()
        } else {
            format!("{namespace}/{name}")
        };
        log::error(
            "jqFilter failed; object skipped",
            &[
                ("hook", &self.labels[0]),
                ("binding", &self.labels[1]),
                ("object", &object),
                ("jqFilter", &self.jq_source),
                ("error", &e.0),
            ],
        );
    }
}
