//! Turning one watched object into a binding's snapshot item: the jq filter result,
//! the checksum that decides whether a Modified event matters, and the object text
//! kept only when the binding wants full objects.

use super::store::Item;
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
    /// Builds the item for `object`, whose compact JSON is `object_json` (shared
    /// between the bindings of one watch).
    pub fn item(&self, object: &Value, object_json: &Arc<str>) -> Result<Item, FilterError> {
        let (filter_result, checksum) = match &self.jq {
            Some(jq) => {
                let text = jq.apply(object).map_err(FilterError)?.to_string();
                let sum = checksum_str(&text);
                (Some(text), sum)
            }
            None => (None, checksum_value(object)),
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

/// Hash of a whole object, independent of the text it came in: values keep their
/// map keys sorted, so a list item and a watch event of the same object agree.
fn checksum_value(object: &Value) -> u64 {
    struct HashWriter(DefaultHasher);
    impl std::io::Write for HashWriter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.write(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = HashWriter(DefaultHasher::new());
    let _ = serde_json::to_writer(&mut w, object);
    w.0.finish()
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
        let ia = f.item(&a, &Arc::from(a.to_string())).expect("item");
        let ib = f.item(&b, &Arc::from(b.to_string())).expect("item");
        assert_eq!(ia.checksum, ib.checksum);
        assert!(ia.object.is_none());
        assert_eq!(ia.filter_result(), Some(r#"{"a":"1"}"#));
        assert_eq!(ia.namespace_and_name(), ("", "x"));
        let full = ItemFilter {
            jq: None,
            keep_full_object: true,
        };
        let fa = full.item(&a, &Arc::from(a.to_string())).expect("item");
        let fb = full.item(&b, &Arc::from(b.to_string())).expect("item");
        assert_ne!(
            fa.checksum, fb.checksum,
            "without a filter every change counts"
        );
        // ...but not the order of fields in the text the object arrived as.
        let text = r#"{"metadata":{"resourceVersion":"1","labels":{"a":"1"},"name":"x"}}"#;
        let reordered: Value = serde_json::from_str(text).expect("json");
        let fr = full.item(&reordered, &Arc::from(text)).expect("item");
        assert_eq!(fa.checksum, fr.checksum);
    }
}
