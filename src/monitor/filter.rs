//! Turning one watched object into a binding's snapshot item: the jq filter result,
//! the checksum that decides whether a Modified event matters, and the object text
//! kept only when the binding wants full objects.

use crate::hook::context::Item;
use crate::jq::JqFilter;
use serde_json::Value;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// What a binding does with each object.
#[derive(Debug, Clone)]
pub struct ItemFilter {
    pub jq: Option<Arc<JqFilter>>,
    pub keep_full_object: bool,
}

/// A filter failure: logged with hook, binding and object; the object is skipped.
#[derive(Debug)]
pub struct FilterError(pub String);

impl ItemFilter {
    /// Whether the binding needs the object's compact text: to keep it, or to
    /// checksum it when there is no filter.
    pub fn needs_text(&self) -> bool {
        self.keep_full_object || self.jq.is_none()
    }

    /// Builds the item for `object`, whose compact JSON is `object_json` (made once
    /// and shared between the bindings of one watch; see [`object_text`]).
    pub fn item(&self, object: &Value, object_json: &Arc<str>) -> Result<Item, FilterError> {
        let (filter_result, checksum) = match &self.jq {
            Some(jq) => {
                let text = jq.apply(object).map_err(FilterError)?.to_string();
                let sum = checksum_str(&text);
                (Some(text), sum)
            }
            None => (None, checksum_str(object_json)),
        };
        let object_text = self.keep_full_object.then(|| Arc::clone(object_json));
        Ok(Item::new(
            key_of(object),
            filter_result.as_deref(),
            object_text,
            checksum,
        ))
    }
}

fn checksum_str(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The object's compact JSON, keys sorted (what every binding keeps and hooks
/// get), when some binding of `filters` needs it; empty otherwise. Made once per
/// object: hashing it gives every binding without a jqFilter the same checksum for
/// a list item and a watch event of the same object, whatever text they came in.
pub fn object_text<'a>(mut filters: impl Iterator<Item = &'a ItemFilter>, object: &Value) -> Arc<str> {
    if filters.any(ItemFilter::needs_text) {
        Arc::from(object.to_string())
    } else {
        Arc::from("")
    }
}

/// `(namespace, name)` of an object, borrowed from it.
pub fn key_of(object: &Value) -> (&str, &str) {
    let meta = &object["metadata"];
    let s = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or_default();
    (s("namespace"), s("name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checksum_follows_the_filter_result_only() {
        let f = ItemFilter {
            jq: Some(Arc::new(
                JqFilter::compile(".metadata.labels", None, &[]).expect("jq"),
            )),
            keep_full_object: false,
        };
        let a = json!({"metadata": {"name": "x", "labels": {"a": "1"}, "resourceVersion": "1"}});
        let b = json!({"metadata": {"name": "x", "labels": {"a": "1"}, "resourceVersion": "2"}});
        let ia = f.item(&a, &Arc::from("")).expect("item");
        let ib = f.item(&b, &Arc::from("")).expect("item");
        assert_eq!(ia.checksum, ib.checksum);
        assert!(ia.object.is_none());
        assert_eq!(ia.filter_result(), Some(r#"{"a":"1"}"#));
        assert_eq!(ia.namespace_and_name(), ("", "x"));
        let full = ItemFilter {
            jq: None,
            keep_full_object: true,
        };
        let text_of = |v: &Value| object_text([&full].into_iter(), v);
        let fa = full.item(&a, &text_of(&a)).expect("item");
        let fb = full.item(&b, &text_of(&b)).expect("item");
        assert_ne!(
            fa.checksum, fb.checksum,
            "without a filter every change counts"
        );
        // ...but not the order of fields in the text the object arrived as.
        let text = r#"{"metadata":{"resourceVersion":"1","labels":{"a":"1"},"name":"x"}}"#;
        let reordered: Value = serde_json::from_str(text).expect("json");
        let fr = full.item(&reordered, &text_of(&reordered)).expect("item");
        assert_eq!(fa.checksum, fr.checksum);
        assert_eq!(fr.object.as_deref(), Some(a.to_string().as_str()));
    }
}
