//! Dynamic namespaces: a binding with `namespace.labelSelector` watches namespaces;
//! one that starts matching gets a watch whose objects arrive as Added, one that stops
//! matching has its objects removed from the snapshot as Deleted. A watch that fails
//! to start is logged and tried again on the namespace's next event (`follow`). Part
//! of the monitor thread (`monitor/mod.rs`).

use super::{Monitor, NamespaceWatch, Sub, WatchKey};
use crate::hook::context::Item;
use crate::kube;
use crate::log;
use std::collections::BTreeSet;

impl Monitor {
    pub(super) fn watch_namespaces_by_label(
        &mut self,
        template: WatchKey,
        sub: Sub,
        selector: &vendor_k8s_types::LabelSelector,
        context: &str,
    ) -> Result<Vec<Item>, String> {
        let ns_resource = self
            .client
            .resolve("v1", "Namespace", context)
            .map_err(|e| e.to_string())?;
        let label = kube::selector::encode_label_selector(selector)
            .map_err(|e| format!("{context}: namespace.labelSelector: {e}"))?;
        let ns_key = WatchKey {
            resource: ns_resource,
            namespace: None,
            label,
            field: String::new(),
        };
        // Namespaces are few; their watch keeps keys so the reflector diffs relists.
        let (id, handle, namespaces) = self.start_watch(&ns_key, kube::Cache::Keys, context)?;
        let mut active = BTreeSet::new();
        let mut initial = Vec::new();
        for ns in namespaces {
            let name = ns.meta.name;
            initial.extend(self.attach(
                WatchKey {
                    namespace: Some(name.clone()),
                    ..template.clone()
                },
                sub.clone(),
                false,
                context,
            )?);
            active.insert(name);
        }
        self.namespace_watches
            .retain(|w| !(w.sub.hook == sub.hook && w.sub.binding == sub.binding));
        self.namespace_watches.push(NamespaceWatch {
            id,
            template,
            sub,
            handle,
            active,
        });
        Ok(initial)
    }

    pub(super) fn on_namespace_event(&mut self, index: usize, ev: kube::Event) {
        // Modified counts as "matches" too: it is the retry point of a namespace
        // whose watch failed to start (see `follow`).
        let (name, matches) = match &ev {
            kube::Event::Added(ns) | kube::Event::Modified(ns) => (ns.meta.name.clone(), true),
            kube::Event::Deleted(ns) => (ns.meta.name.clone(), false),
            kube::Event::WatchError { kind, message } => return self.watch_error(*kind, message),
            _ => return,
        };
        let nw = &mut self.namespace_watches[index];
        let (sub, key) = (
            nw.sub.clone(),
            WatchKey {
                namespace: Some(name.clone()),
                ..nw.template.clone()
            },
        );
        let mut active = std::mem::take(&mut nw.active);
        let result = follow(&mut active, &name, matches, |start| {
            if start {
                self.attach(key, sub, true, &format!("namespace '{name}'"))
                    .map(drop)
            } else {
                self.detach(&key, &sub);
                Ok(())
            }
        });
        self.namespace_watches[index].active = active;
        if let Err(e) = result {
            log::error(
                "cannot watch a namespace that started matching; retried on its next event",
                &[("namespace", &name), ("error", &e)],
            );
        }
    }

    /// A namespace stopped matching: stop its watch for `sub` and delete its objects
    /// from the binding's snapshot, with Deleted events.
    pub(super) fn detach(&mut self, key: &WatchKey, sub: &Sub) {
        if let Some(i) = self.watches.iter().position(|w| &w.key == key) {
            self.watches[i]
                .subs
                .retain(|s| !(s.hook == sub.hook && s.binding == sub.binding));
            if self.watches[i].subs.is_empty() {
                self.watches.remove(i).handle.stop();
            }
        }
        let ns = key.namespace.as_deref().unwrap_or_default();
        self.delete_where(sub, |item| item.namespace_and_name().0 == ns);
    }
}

/// Applies one namespace event to `active`, the namespaces a binding watches:
/// `matches` says whether the namespace matches the selector now; `change(true)`
/// starts its watch, `change(false)` stops it.
///
/// A namespace becomes active only once its watch has started. One whose start
/// failed stays inactive, so the next event saying it matches (Added, or Modified:
/// any change to the namespace, or a relist of the namespace watch that finds it
/// changed) starts it again. Namespace events are the retry point because they are
/// the only thing that tells the monitor about a namespace; there is no timer.
fn follow(
    active: &mut BTreeSet<String>,
    name: &str,
    matches: bool,
    change: impl FnOnce(bool) -> Result<(), String>,
) -> Result<(), String> {
    if matches && !active.contains(name) {
        change(true)?;
        active.insert(name.to_string());
        Ok(())
    } else if !matches && active.remove(name) {
        change(false)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls `follow` and records which change it asked for.
    fn event(
        active: &mut BTreeSet<String>,
        matches: bool,
        start_ok: bool,
    ) -> (Option<bool>, Result<(), String>) {
        let mut asked = None;
        let result = follow(active, "ns1", matches, |start| {
            asked = Some(start);
            if start_ok {
                Ok(())
            } else {
                Err("no initial list".into())
            }
        });
        (asked, result)
    }

    #[test]
    fn a_namespace_whose_watch_failed_to_start_is_started_again() {
        let mut active = BTreeSet::new();
        let (asked, result) = event(&mut active, true, false);
        assert_eq!((asked, result.is_err()), (Some(true), true));
        assert!(active.is_empty(), "not watched, so not active");
        // The next event that says it matches tries again.
        let (asked, result) = event(&mut active, true, true);
        assert_eq!((asked, result), (Some(true), Ok(())));
        assert!(active.contains("ns1"));
        // Started: later events that it matches change nothing; one that it does not
        // stops the watch.
        assert_eq!(event(&mut active, true, true).0, None);
        assert_eq!(event(&mut active, false, true).0, Some(false));
        assert!(active.is_empty());
    }

    #[test]
    fn a_namespace_never_watched_needs_no_stop() {
        let mut active = BTreeSet::new();
        assert_eq!(event(&mut active, false, true), (None, Ok(())));
        let _ = event(&mut active, true, false);
        assert_eq!(event(&mut active, false, true), (None, Ok(())));
    }
}
