//! One watched object as a hook sees it: `{object?, filterResult?}` in binding
//! contexts and snapshots, kept as the JSON text it will be written as.
//!
//! The monitor thread builds items (one parse, one serialisation per object) and
//! the snapshot store keeps them; queue threads stream them into context files
//! without parsing them again. Kept small, because a binding may hold tens of
//! thousands: the key and the filter result share one allocation, and the object
//! text is shared with every other binding of the same watch, and what it repeats
//! of other objects is shared with them ([`Packed`]).

use super::packed::Packed;
use serde_json::{Map, Value};

/// One object of a binding's snapshot or event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    /// `namespace NUL name`, then `NUL` and the filter result's JSON text when the
    /// binding has a jqFilter (JSON text never contains a raw NUL, names neither).
    text: Box<str>,
    /// Compact JSON of the object, keys sorted and `apiVersion`/`kind` filled in,
    /// its repeated subtrees shared; `None` with `keepFullObjectsInMemory: false`.
    pub(crate) object: Option<Packed>,
    /// Hash of the filter result (or of the whole object without a filter).
    pub(crate) checksum: u64,
}

impl Item {
    /// An item whose object text (if any) shares nothing (tests).
    #[cfg(test)]
    pub(crate) fn new(
        key: (&str, &str),
        filter_result: Option<&str>,
        object: Option<std::sync::Arc<str>>,
        checksum: u64,
    ) -> Item {
        let object = object.map(Packed::plain);
        Item::packed(key, filter_result, object, checksum)
    }

    /// An item whose object text comes packed (the monitor's interner).
    pub(crate) fn packed(
        key: (&str, &str),
        filter_result: Option<&str>,
        object: Option<Packed>,
        checksum: u64,
    ) -> Item {
        let extra = filter_result.map_or(0, |f| f.len() + 1);
        let mut text = String::with_capacity(key.0.len() + 1 + key.1.len() + extra);
        push_key(&mut text, key.0, key.1);
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
    pub(crate) fn key(&self) -> &str {
        &self.text[..self.name_end()]
    }

    /// `(namespace, name)`.
    pub(crate) fn namespace_and_name(&self) -> (&str, &str) {
        self.key().split_once('\0').unwrap_or(("", self.key()))
    }

    /// JSON text of the filter result; `None` when the binding has no jqFilter.
    pub(crate) fn filter_result(&self) -> Option<&str> {
        self.text.get(self.name_end() + 1..)
    }

    fn name_end(&self) -> usize {
        let ns_end = self.text.find('\0').unwrap_or(0);
        self.text[ns_end + 1..]
            .find('\0')
            .map_or(self.text.len(), |i| ns_end + 1 + i)
    }

    /// Text bytes the item refers to: key, filter result and object JSON (the
    /// whole JSON, shared pieces included).
    pub(crate) fn bytes(&self) -> usize {
        self.text.len() + self.object.as_ref().map_or(0, |o| o.len())
    }

    /// `{object?, filterResult?}` as a value (the debug socket and tests; hook runs
    /// stream the texts instead, see `context::write`).
    pub(crate) fn to_json(&self) -> Value {
        let parse = |t: &str| serde_json::from_str(t).unwrap_or(Value::Null);
        let mut map = Map::new();
        if let Some(o) = &self.object {
            map.insert("object".into(), parse(&o.to_text()));
        }
        if let Some(f) = self.filter_result() {
            map.insert("filterResult".into(), parse(f));
        }
        Value::Object(map)
    }
}

/// A snapshot key: `namespace NUL name`. NUL sorts before every character a name
/// can hold, so keys sort as (namespace, name) pairs, cluster-scoped objects first.
pub(crate) fn item_key(namespace: &str, name: &str) -> String {
    let mut key = String::with_capacity(namespace.len() + 1 + name.len());
    push_key(&mut key, namespace, name);
    key
}

fn push_key(text: &mut String, namespace: &str, name: &str) {
    text.push_str(namespace);
    text.push('\0');
    text.push_str(name);
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(empty.to_json(), serde_json::json!({"filterResult": ""}));
    }
}
