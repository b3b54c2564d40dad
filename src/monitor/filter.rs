//! Turning one watched object into a binding's snapshot item: the jq filter result,
//! the checksum that decides whether a Modified event matters, and the object text
//! kept only when the binding wants full objects.

use super::store::Item;
use crate::jq::JqFilter;
use serde_json::Value;
use std::hash::{Hash, Hasher};
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
                let result = jq.apply(object).map_err(FilterError)?;
                let text = result.to_string();
                (Some(text.clone().into_boxed_str()), checksum(&text))
            }
            None => (None, checksum(object_json)),
        };
        let object = self.keep_full_object.then(|| Arc::clone(object_json));
        Ok(Item {
            object,
            filter_result,
            checksum,
        })
    }
}

fn checksum(text: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// `(namespace, name)` of an object.
pub fn key_of(object: &Value) -> (String, String) {
    let meta = &object["metadata"];
    let s = |k: &str| meta[k].as_str().unwrap_or_default().to_string();
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
        assert_eq!(ia.filter_result.as_deref(), Some(r#"{"a":"1"}"#));
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
    }
}
