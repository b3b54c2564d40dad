//! How one watch event changes one binding: the jq filter and checksum, then one
//! step of the binding's Synchronization protocol (`sync.rs`), whose deliveries go
//! to the router. Part of the monitor thread (`monitor/mod.rs`).

use super::filter::{self, JqInput};
use super::sync::Input;
use super::{Monitor, Sub};
use crate::hook::config::WatchEventType;
use crate::hook::context::item_key;
use crate::kube::Object;
use crate::log;
use std::time::Instant;

impl Monitor {
    /// Applies one event to one binding: snapshot update, checksum comparison, and
    /// the hook event (buffered while the binding is held). Whether an object is
    /// Added or Modified follows the snapshot (so a relist can say either).
    /// `input` is the object's jq input, shared by the bindings that see it.
    pub(super) fn apply(&self, sub: &Sub, kind: WatchEventType, obj: &Object, input: &mut JqInput) {
        let (ns, name) = (obj.meta.namespace.as_str(), obj.meta.name.as_str());
        if !sub.wants(name) {
            return;
        }
        let filter_started = Instant::now();
        let item = sub.filter.item_with(obj, input);
        if sub.filter.jq.is_some() && sub.counted {
            self.metrics
                .kube_jq_filter_duration_seconds
                .with_label_values(&sub.label_values())
                .observe(filter_started.elapsed().as_secs_f64());
        }
        match item {
            Ok(item) if kind == WatchEventType::Deleted => self.step(sub, Input::Deleted(item)),
            Ok(item) => self.step(sub, Input::Upsert(item)),
            // A deleted object leaves the snapshot even if its last state does not filter.
            Err(_) if kind == WatchEventType::Deleted => self.delete(sub, &item_key(ns, name)),
            Err(e) => sub.filter_failed(ns, name, &e),
        }
    }

    /// Removes an object from one binding's snapshot, with a Deleted event carrying
    /// the last state the binding saw.
    pub(super) fn delete(&self, sub: &Sub, key: &str) {
        self.step(sub, Input::Delete(key));
    }

    /// Deletes (with Deleted events, in key order) every object of `sub`'s snapshot
    /// that `gone` picks.
    pub(super) fn delete_where(
        &self,
        sub: &Sub,
        gone: impl Fn(&crate::hook::context::Item) -> bool,
    ) {
        for key in self.store.keys_where(sub.hook, sub.binding, gone) {
            self.delete(sub, &key);
        }
    }

    /// One protocol step for `sub`: counts the snapshot and sends what it delivers.
    pub(super) fn step(&self, sub: &Sub, input: Input) {
        let steps = self.store.step(sub.hook, sub.binding, input);
        self.count_snapshot(sub);
        for event in steps.events {
            crate::latency_trace::mark(crate::latency_trace::Stage::Routed);
            let _ = self.events.send(event);
        }
    }

    /// Sets the binding's snapshot size metrics.
    pub(super) fn count_snapshot(&self, sub: &Sub) {
        if !sub.counted {
            return;
        }
        let labels = sub.label_values();
        let (objects, bytes) = self.store.size(sub.hook, sub.binding);
        let m = &self.metrics;
        m.kube_snapshot_objects
            .with_label_values(&labels)
            .set(objects as f64);
        m.kube_snapshot_bytes
            .with_label_values(&labels)
            .set(bytes as f64);
    }
}

impl Sub {
    /// The label values as the metric families take them.
    pub(super) fn label_values(&self) -> Vec<&str> {
        self.labels.iter().map(String::as_str).collect()
    }

    /// The hook's and the binding's name (the labels' last three are hook, binding, queue).
    fn names(&self) -> (&str, &str) {
        let n = self.labels.len();
        let get = |i: usize| self.labels.get(i).map_or("", String::as_str);
        (get(n.saturating_sub(3)), get(n.saturating_sub(2)))
    }

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
                ("hook", self.names().0),
                ("binding", self.names().1),
                ("object", &object),
                ("jqFilter", &self.jq_source),
                ("error", &e.0),
            ],
        );
    }
}
