//! Relists: after a watch lost its place (410 Gone), the reflector hands the monitor
//! the complete fresh list, and this file diffs it against each binding's snapshot.
//! Objects the snapshot lacks are Added, ones whose filter result changed are
//! Modified (unchanged ones run nothing, as for any Modified event), and objects the
//! list no longer has are Deleted. So a hook sees each change made while the watch
//! was down exactly once, and the reflector needs no copy of the objects to find them.

use super::Monitor;
use super::filter::JqInput;
use crate::hook::config::WatchEventType;
use crate::hook::context::{Item, item_key};
use crate::kube::Object;
use std::collections::HashSet;

impl Monitor {
    /// Applies a complete list of watch `index` to every binding on it.
    pub(super) fn on_relist(&mut self, index: usize, objects: Vec<Object>, version: Option<u64>) {
        let watch = &self.watches[index];
        let namespace = watch.key.namespace.clone();
        // A binding that joined with a list of its own at or after this one's
        // resourceVersion already holds newer state: this list is not for it.
        let newer = |at: Option<u64>| at.is_none_or(|at| version.is_none_or(|v| v > at));
        let subs: Vec<_> = (watch.subs.iter())
            .filter(|s| newer(s.listed_at))
            .cloned()
            .collect();
        let mut listed = HashSet::with_capacity(objects.len());
        for obj in objects {
            listed.insert(item_key(&obj.meta.namespace, &obj.meta.name));
            let mut input = JqInput::default();
            for sub in &subs {
                self.apply(sub, WatchEventType::Added, &obj, &mut input);
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
}
