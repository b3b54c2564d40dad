//! Dynamic namespaces: a binding with `namespace.labelSelector` watches namespaces;
//! one that starts matching gets a watch whose objects arrive as Added, one that stops
//! matching has its objects removed from the snapshot as Deleted. Part of the monitor
//! thread (`monitor/mod.rs`).

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
        for ns in &namespaces {
            let name = kube::Object::decode(ns, None)
                .map(|o| o.meta.name)
                .unwrap_or_default();
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
        let (name, added) = match &ev {
            kube::Event::Added(ns) => (ns.meta.name.clone(), true),
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
        if added && nw.active.insert(name.clone()) {
            let context = format!("namespace '{name}'");
            if let Err(e) = self.attach(key, sub, true, &context) {
                log::error(
                    "cannot watch a namespace that started matching",
                    &[("namespace", &name), ("error", &e)],
                );
            }
        } else if !added && nw.active.remove(&name) {
            self.detach(&key, &sub);
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
