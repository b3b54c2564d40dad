//! Relists: after a watch lost its place (410 Gone), the reflector hands the monitor
//! the complete fresh list, and this file diffs it against each binding's snapshot.
//! Objects the snapshot lacks are Added, ones whose filter result changed are
//! Modified (unchanged ones run nothing, as for any Modified event), and objects the
//! list no longer has are Deleted. So a hook sees each change made while the watch
//! was down exactly once, and the reflector needs no copy of the objects to find them.

use super::filter::key_of;
use super::selectors::with_type_meta;
use super::store::{Item, item_key};
use super::{Monitor, Sub};
use crate::hook::config::WatchEventType;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

impl Monitor {
    /// Applies a complete list of watch `index` to every binding on it.
    pub(super) fn on_relist(&mut self, index: usize, objects: Vec<Arc<str>>) {
        let watch = &self.watches[index];
        let resource = watch.key.resource.clone();
        let namespace = watch.key.namespace.clone();
        let subs = watch.subs.clone();
        let mut listed = HashSet::with_capacity(objects.len());
        for json in objects {
            let Ok(obj) = serde_json::from_str::<Value>(&json) else {
                continue;
            };
            let obj = with_type_meta(obj, &resource);
            let (ns, name) = key_of(&obj);
            listed.insert(item_key(ns, name));
            for sub in &subs {
                self.apply(sub, WatchEventType::Added, &obj, &json);
            }
        }
        // A binding watching several namespaces has one watch per namespace: this
        // list speaks only for its own.
        let in_watch = |item: &Item| {
            namespace
                .as_deref()
                .is_none_or(|ns| item.namespace_and_name().0 == ns)
        };
        for sub in &subs {
            self.delete_where(sub, |item| in_watch(item) && !listed.contains(item.key()));
        }
    }

    /// Deletes (with Deleted events, in key order) every object of `sub`'s snapshot
    /// that `gone` picks.
    pub(super) fn delete_where(&self, sub: &Sub, gone: impl Fn(&Item) -> bool) {
        let keys: Vec<String> = match self.store.binding(sub.hook, sub.binding) {
            Some(state) => state
                .items
                .iter()
                .filter(|i| gone(i))
                .map(|i| i.key().to_string())
                .collect(),
            None => Vec::new(),
        };
        for key in keys {
            self.delete(sub, &key);
        }
    }
}
