//! The reflector's cache: every object of one watch, kept as the compact JSON text it
//! arrived in (plus its resourceVersion) under a `namespace/name` key — about the
//! size of the JSON itself, far below a `serde_json::Value` tree. After a relist the
//! new list is diffed against the cache so consumers see exactly the Added, Modified
//! and Deleted that happened while the watch was gone. Owned by one reflector thread;
//! readers elsewhere get it through the reflector handle's mutex.
//!
//! A consumer that keeps its own per-object state (the monitor) turns the cache off
//! ([`Cache::Off`]): then nothing is stored per object here, and relists are handed
//! over whole for the consumer to diff.

use super::reflector::Object;
use std::collections::HashMap;
use std::sync::Arc;

/// What a reflector keeps per object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cache {
    /// The object's JSON, resourceVersion and key: the full cache.
    #[default]
    Objects,
    /// Only what a relist diff needs (key, resourceVersion, uid); a deletion found
    /// by a relist carries a stub with namespace, name and uid.
    Keys,
    /// Nothing: events pass through as the server sent them and every relist is
    /// delivered whole ([`Event::Relisted`](super::Event::Relisted)).
    Off,
}

/// One cached object: its JSON (shared with consumers), or in keys-only mode just
/// its uid, enough to diff a relist.
struct Entry {
    rv: Box<str>,
    body: Body,
}

enum Body {
    Json(Arc<str>),
    Uid(Box<str>),
}

impl Entry {
    fn new(object: &Object, keep_objects: bool) -> Entry {
        let body = if keep_objects {
            Body::Json(Arc::clone(&object.json))
        } else {
            Body::Uid(meta_field(&object.json, "uid").into())
        };
        Entry {
            rv: object.meta.resource_version.as_str().into(),
            body,
        }
    }

    fn uid(&self) -> String {
        match &self.body {
            Body::Json(j) => meta_field(j, "uid"),
            Body::Uid(u) => u.to_string(),
        }
    }

    /// The object's JSON, or a stub with its namespace and name (keys-only mode).
    fn json_or_stub(&self, key: &str) -> Arc<str> {
        match &self.body {
            Body::Json(j) => Arc::clone(j),
            Body::Uid(uid) => {
                let (ns, name) = key.split_once('/').unwrap_or(("", key));
                let meta = serde_json::json!({"metadata": {"namespace": ns, "name": name, "uid": uid, "resourceVersion": self.rv}});
                Arc::from(meta.to_string())
            }
        }
    }
}

/// An object of a fresh list, decoded, ready to be diffed or stored.
#[derive(Debug)]
pub(crate) struct Item {
    /// `namespace/name`.
    pub(crate) key: String,
    pub(crate) object: Object,
}

/// What a relist changed: the listed object, or for deletions the JSON the
/// cache last had.
#[derive(Debug, PartialEq)]
pub(crate) enum Change {
    Added(Object),
    Modified(Object),
    Deleted(Arc<str>),
}

/// Result of storing one watched object.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stored {
    New,
    Changed,
    /// Same key and resourceVersion as already cached: a duplicate delivery.
    Same,
    /// Not tracked ([`Cache::Off`]): deliver as the server said.
    Untracked,
}

/// The cache of one reflector.
pub struct Store {
    map: HashMap<String, Entry>,
    mode: Cache,
}

impl Default for Store {
    fn default() -> Self {
        Store::new(Cache::Objects)
    }
}

impl Store {
    /// An empty cache keeping what `mode` says.
    pub(crate) fn new(mode: Cache) -> Store {
        Store {
            map: HashMap::new(),
            mode,
        }
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    #[cfg(test)]
    /// Total JSON bytes held.
    pub(crate) fn json_bytes(&self) -> usize {
        self.map
            .values()
            .map(|e| {
                if let Body::Json(j) = &e.body {
                    j.len()
                } else {
                    0
                }
            })
            .sum()
    }

    /// Estimated heap use: strings plus the table's slots (its real capacity).
    pub fn heap_bytes(&self) -> usize {
        let body = |e: &Entry| match &e.body {
            Body::Json(j) => j.len(),
            Body::Uid(u) => u.len(),
        };
        let strings: usize = self
            .map
            .iter()
            .map(|(k, e)| k.capacity() + e.rv.len() + body(e))
            .sum();
        let slot = std::mem::size_of::<(String, Entry)>() + 1;
        strings + self.map.capacity() * slot
    }

    /// Every cached object's JSON, shared (empty in keys-only mode).
    pub(crate) fn objects_json(&self) -> Vec<Arc<str>> {
        self.map
            .values()
            .filter_map(|e| match &e.body {
                Body::Json(j) => Some(Arc::clone(j)),
                Body::Uid(_) => None,
            })
            .collect()
    }

    /// Whether objects are tracked at all (not [`Cache::Off`]).
    pub(crate) fn tracks(&self) -> bool {
        self.mode != Cache::Off
    }

    /// Stores a watched object.
    pub(crate) fn put(&mut self, key: String, object: &Object) -> Stored {
        let keep = match self.mode {
            Cache::Objects => true,
            Cache::Keys => false,
            Cache::Off => return Stored::Untracked,
        };
        match self.map.get_mut(&key) {
            Some(e) if *e.rv == object.meta.resource_version => Stored::Same,
            Some(e) => {
                *e = Entry::new(object, keep);
                Stored::Changed
            }
            None => {
                self.map.insert(key, Entry::new(object, keep));
                Stored::New
            }
        }
    }

    /// Removes an object; true if it was cached.
    pub(crate) fn remove(&mut self, key: &str) -> bool {
        self.map.remove(key).is_some()
    }

    /// Fills an empty cache from the first list; returns the list's objects.
    pub(crate) fn fill(&mut self, items: Vec<Item>) -> Vec<Object> {
        let keep = match self.mode {
            Cache::Off => return items.into_iter().map(|i| i.object).collect(),
            mode => mode == Cache::Objects,
        };
        self.map.reserve(items.len());
        let mut objects = Vec::with_capacity(items.len());
        for i in items {
            self.map.insert(i.key, Entry::new(&i.object, keep));
            objects.push(i.object);
        }
        objects
    }

    /// Replaces the cache with a fresh list and returns the changes: list order for
    /// additions and modifications, then deletions. An object whose uid changed (deleted
    /// and recreated under the same name) is reported as Deleted then Added. In
    /// keys-only mode a deletion carries a stub with namespace, name and uid.
    pub(crate) fn replace(&mut self, items: Vec<Item>) -> Vec<Change> {
        let keep = self.mode == Cache::Objects;
        let mut old = std::mem::take(&mut self.map);
        let mut changes = Vec::new();
        let mut deleted = Vec::new();
        self.map.reserve(items.len());
        for i in items {
            let entry = Entry::new(&i.object, keep);
            match old.remove(&i.key) {
                None => changes.push(Change::Added(i.object)),
                Some(e) if e.rv == entry.rv => {}
                Some(e) if e.uid() != meta_field(&i.object.json, "uid") => {
                    deleted.push(Change::Deleted(e.json_or_stub(&i.key)));
                    changes.push(Change::Added(i.object));
                }
                Some(_) => changes.push(Change::Modified(i.object)),
            }
            self.map.insert(i.key, entry);
        }
        let mut gone: Vec<(String, Entry)> = old.into_iter().collect();
        gone.sort_by(|a, b| a.0.cmp(&b.0));
        deleted.extend(
            gone.into_iter()
                .map(|(k, e)| Change::Deleted(e.json_or_stub(&k))),
        );
        // Recreated objects' deletions go first so a consumer never sees two live
        // objects under one name.
        let (re, rest): (Vec<Change>, Vec<Change>) = deleted.into_iter().partition(|c| {
            matches!(c, Change::Deleted(j) if changes.iter().any(|a| matches!(a, Change::Added(n) if key_of(&n.json) == key_of(j))))
        });
        let mut out = re;
        out.extend(changes);
        out.extend(rest);
        out
    }
}

fn key_of(json: &str) -> String {
    format!(
        "{}/{}",
        meta_field(json, "namespace"),
        meta_field(json, "name")
    )
}

fn meta_field(json: &str, field: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Obj {
        #[serde(default)]
        metadata: vendor_k8s_types::ObjectMeta,
    }
    let m = serde_json::from_str::<Obj>(json)
        .map(|o| o.metadata)
        .unwrap_or_default();
    match field {
        "uid" => m.uid,
        "namespace" => m.namespace,
        _ => m.name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, rv: &str, uid: &str) -> Item {
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"{uid}","resourceVersion":"{rv}"}}}}"#
        );
        Item {
            key: format!("ns/{name}"),
            object: Object::decode(&json, None).expect("object"),
        }
    }

    fn names(cs: &[Change]) -> Vec<String> {
        cs.iter()
            .map(|c| match c {
                Change::Added(o) => format!("+{}", o.meta.name),
                Change::Modified(o) => format!("~{}", o.meta.name),
                Change::Deleted(j) => format!("-{}", meta_field(j, "name")),
            })
            .collect()
    }

    #[test]
    fn relist_diff_is_exact() {
        let mut s = Store::default();
        s.fill(vec![
            item("keep", "1", "a"),
            item("change", "2", "b"),
            item("drop", "3", "c"),
            item("recreate", "4", "d"),
        ]);
        let cs = s.replace(vec![
            item("keep", "1", "a"),
            item("change", "7", "b"),
            item("new", "8", "e"),
            item("recreate", "9", "f"),
        ]);
        assert_eq!(
            names(&cs),
            ["-recreate", "~change", "+new", "+recreate", "-drop"]
        );
        // The deleted object is reported with its last known state.
        assert!(matches!(&cs[4], Change::Deleted(j) if j.contains(r#""resourceVersion":"3""#)));
        assert_eq!(s.len(), 4);
        // Relisting the same state again changes nothing.
        let again = vec![
            item("keep", "1", "a"),
            item("change", "7", "b"),
            item("new", "8", "e"),
            item("recreate", "9", "f"),
        ];
        assert!(s.replace(again).is_empty());
    }

    #[test]
    fn put_detects_duplicates() {
        let mut s = Store::default();
        let i = item("x", "1", "u");
        assert_eq!(s.put(i.key.clone(), &i.object), Stored::New);
        assert_eq!(s.put(i.key.clone(), &i.object), Stored::Same);
        let newer = item("x", "2", "u");
        assert_eq!(s.put(i.key.clone(), &newer.object), Stored::Changed);
        assert!(s.remove("ns/x"));
        assert!(!s.remove("ns/x"));
        assert!(s.is_empty());
    }

    #[test]
    fn keys_only_mode_diffs_with_stubs_and_shares_nothing() {
        let mut s = Store::new(Cache::Keys);
        s.fill(vec![item("keep", "1", "a"), item("drop", "2", "b")]);
        assert_eq!(s.json_bytes(), 0, "no object text is kept");
        assert!(s.objects_json().is_empty());
        let cs = s.replace(vec![item("keep", "1", "a")]);
        assert_eq!(names(&cs), ["-drop"]);
        let Change::Deleted(stub) = &cs[0] else {
            panic!("{cs:?}")
        };
        assert_eq!(meta_field(stub, "namespace"), "ns");
        assert_eq!(meta_field(stub, "uid"), "b");
    }

    #[test]
    fn off_mode_tracks_nothing() {
        let mut s = Store::new(Cache::Off);
        let i = item("x", "1", "u");
        assert_eq!(s.put(i.key.clone(), &i.object), Stored::Untracked);
        assert_eq!(s.put(i.key, &i.object), Stored::Untracked);
        s.fill(vec![item("y", "2", "v")]);
        assert!(s.is_empty());
    }

    #[test]
    fn cached_json_is_shared_not_copied() {
        let mut s = Store::new(Cache::Objects);
        let i = item("x", "5", "u");
        let json = i.object.json.clone();
        s.put(i.key, &i.object);
        let shared = s.objects_json();
        assert!(Arc::ptr_eq(&shared[0], &json));
    }
}
