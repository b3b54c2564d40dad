//! The reflector's cache: every object of one watch, kept as the compact JSON text it
//! arrived in (plus its resourceVersion) under a `namespace/name` key — about the
//! size of the JSON itself, far below a `serde_json::Value` tree. After a relist the
//! new list is diffed against the cache so consumers see exactly the Added, Modified
//! and Deleted that happened while the watch was gone. Owned by one reflector thread;
//! readers elsewhere get it through the reflector handle's mutex.

use std::collections::HashMap;

/// One cached object.
struct Entry {
    rv: Box<str>,
    json: Box<str>,
}

/// An object of a fresh list, ready to be diffed or stored.
pub(crate) struct Item {
    pub key: String,
    pub rv: String,
    pub json: Box<str>,
}

/// What a relist changed, with the object's JSON (the old one for deletions).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    Added(Box<str>),
    Modified(Box<str>),
    Deleted(Box<str>),
}

/// Result of storing one watched object.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stored {
    New,
    Changed,
    /// Same key and resourceVersion as already cached: a duplicate delivery.
    Same,
}

/// The cache of one reflector.
#[derive(Default)]
pub struct Store {
    map: HashMap<String, Entry>,
}

impl Store {
    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Total JSON bytes held.
    pub fn json_bytes(&self) -> usize {
        self.map.values().map(|e| e.json.len()).sum()
    }

    /// Estimated heap use: strings plus the table's slots (its real capacity).
    pub fn heap_bytes(&self) -> usize {
        let strings: usize = self
            .map
            .iter()
            .map(|(k, e)| k.capacity() + e.rv.len() + e.json.len())
            .sum();
        let slot = std::mem::size_of::<(String, Entry)>() + 1;
        strings + self.map.capacity() * slot
    }

    /// Every cached object decoded, in no particular order.
    pub fn objects(&self) -> Vec<serde_json::Value> {
        self.map
            .values()
            .filter_map(|e| serde_json::from_str(&e.json).ok())
            .collect()
    }

    /// Stores a watched object.
    pub(crate) fn put(&mut self, key: String, rv: &str, json: Box<str>) -> Stored {
        match self.map.get_mut(&key) {
            Some(e) if &*e.rv == rv => Stored::Same,
            Some(e) => {
                e.rv = rv.into();
                e.json = json;
                Stored::Changed
            }
            None => {
                self.map.insert(
                    key,
                    Entry {
                        rv: rv.into(),
                        json,
                    },
                );
                Stored::New
            }
        }
    }

    /// Removes an object; true if it was cached.
    pub(crate) fn remove(&mut self, key: &str) -> bool {
        self.map.remove(key).is_some()
    }

    /// Fills an empty cache from the first list.
    pub(crate) fn fill(&mut self, items: Vec<Item>) {
        self.map.reserve(items.len());
        for i in items {
            self.map.insert(
                i.key,
                Entry {
                    rv: i.rv.into(),
                    json: i.json,
                },
            );
        }
    }

    /// Replaces the cache with a fresh list and returns the changes: list order for
    /// additions and modifications, then deletions. An object whose uid changed (deleted
    /// and recreated under the same name) is reported as Deleted then Added.
    pub(crate) fn replace(&mut self, items: Vec<Item>) -> Vec<Change> {
        let mut old = std::mem::take(&mut self.map);
        let mut changes = Vec::new();
        let mut deleted = Vec::new();
        self.map.reserve(items.len());
        for i in items {
            match old.remove(&i.key) {
                None => changes.push(Change::Added(i.json.clone())),
                Some(e) if *e.rv == *i.rv => {}
                Some(e) if uid(&e.json) != uid(&i.json) => {
                    deleted.push(Change::Deleted(e.json));
                    changes.push(Change::Added(i.json.clone()));
                }
                Some(_) => changes.push(Change::Modified(i.json.clone())),
            }
            self.map.insert(
                i.key,
                Entry {
                    rv: i.rv.into(),
                    json: i.json,
                },
            );
        }
        let mut gone: Vec<(String, Entry)> = old.into_iter().collect();
        gone.sort_by(|a, b| a.0.cmp(&b.0));
        deleted.extend(gone.into_iter().map(|(_, e)| Change::Deleted(e.json)));
        // Recreated objects' deletions go first so a consumer never sees two live
        // objects under one name.
        let (re, rest): (Vec<Change>, Vec<Change>) = deleted.into_iter().partition(|c| {
            matches!(c, Change::Deleted(j) if changes.iter().any(|a| matches!(a, Change::Added(n) if key_of(n) == key_of(j))))
        });
        let mut out = re;
        out.extend(changes);
        out.extend(rest);
        out
    }
}

/// `metadata.uid` of a JSON object, empty when absent.
fn uid(json: &str) -> String {
    meta_field(json, "uid")
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
            rv: rv.into(),
            json: json.into(),
        }
    }

    fn names(cs: &[Change]) -> Vec<String> {
        cs.iter()
            .map(|c| match c {
                Change::Added(j) => format!("+{}", meta_field(j, "name")),
                Change::Modified(j) => format!("~{}", meta_field(j, "name")),
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
        assert_eq!(s.put(i.key.clone(), "1", i.json.clone()), Stored::New);
        assert_eq!(s.put(i.key.clone(), "1", i.json.clone()), Stored::Same);
        assert_eq!(s.put(i.key.clone(), "2", i.json.clone()), Stored::Changed);
        assert!(s.remove("ns/x"));
        assert!(!s.remove("ns/x"));
        assert!(s.is_empty());
    }
}
