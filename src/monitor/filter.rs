//! Turning one watched object into a binding's snapshot item: the jq filter result,
//! the checksum that decides whether a Modified event matters, and the object text
//! kept only when the binding wants full objects.

use crate::hook::context::Item;
use crate::jq::JqFilter;
use crate::kube::Object;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// What a binding does with each object.
#[derive(Debug, Clone)]
pub(crate) struct ItemFilter {
    pub(crate) jq: Option<Arc<JqFilter>>,
    pub(crate) keep_full_object: bool,
}

/// A filter failure: logged with hook, binding and object; the object is skipped.
#[derive(Debug)]
pub(crate) struct FilterError(pub String);

impl ItemFilter {
    /// Builds the item for `object`: the jq filter runs on its text, the checksum
    /// hashes the filter result (or the whole canonical text without a filter),
    /// and the text itself is shared, not copied, when the binding keeps it.
    pub(crate) fn item(&self, object: &Object) -> Result<Item, FilterError> {
        self.item_with(object, &mut JqInput::default())
    }

    /// [`item`](Self::item) with the object's jq input shared: read the first time
    /// a binding's filter needs it, reused by the other bindings on the same object.
    pub(crate) fn item_with(
        &self,
        object: &Object,
        input: &mut JqInput,
    ) -> Result<Item, FilterError> {
        let (filter_result, checksum) = match &self.jq {
            Some(jq) => {
                let input = input.get(&object.json).map_err(FilterError)?;
                let text = (jq.apply_input(input)).map_err(|e| FilterError(e.to_string()))?;
                let sum = checksum_str(&text);
                (Some(text), sum)
            }
            None => (None, checksum_str(&object.json)),
        };
        let object_text = self
            .keep_full_object
            .then(|| super::intern::pack(&object.json));
        let key = (object.meta.namespace.as_str(), object.meta.name.as_str());
        Ok(Item::packed(
            key,
            filter_result.as_deref(),
            object_text,
            checksum,
        ))
    }
}

/// One object's jq input, read at most once whatever the number of bindings with a
/// jqFilter that see the object (jaq's own tree: the second parse of a filtered
/// object, after the decode).
#[derive(Default)]
pub(crate) struct JqInput(Option<Result<crate::jq::JqInput, String>>);

impl JqInput {
    fn get(&mut self, text: &str) -> Result<crate::jq::JqInput, String> {
        self.0
            .get_or_insert_with(|| crate::jq::read_input(text).map_err(|e| e.to_string()))
            .clone()
    }
}

/// Hash of a canonical text: the same object always has the same text, whatever
/// order its fields came in, so a list item and a watch event of it agree.
fn checksum_str(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(text: &str) -> Object {
        Object::decode(text, None).expect("object")
    }

    #[test]
    fn checksum_follows_the_filter_result_only() {
        let f = ItemFilter {
            jq: Some(Arc::new(
                JqFilter::compile(".metadata.labels", None, &[]).expect("jq"),
            )),
            keep_full_object: false,
        };
        let a =
            object(r#"{"metadata": {"name": "x", "labels": {"a": "1"}, "resourceVersion": "1"}}"#);
        let b =
            object(r#"{"metadata": {"name": "x", "labels": {"a": "1"}, "resourceVersion": "2"}}"#);
        let ia = f.item(&a).expect("item");
        let ib = f.item(&b).expect("item");
        assert_eq!(ia.checksum, ib.checksum);
        assert!(ia.object.is_none());
        assert_eq!(ia.filter_result(), Some(r#"{"a":"1"}"#));
        assert_eq!(ia.namespace_and_name(), ("", "x"));
        let full = ItemFilter {
            jq: None,
            keep_full_object: true,
        };
        let fa = full.item(&a).expect("item");
        let fb = full.item(&b).expect("item");
        assert_ne!(
            fa.checksum, fb.checksum,
            "without a filter every change counts"
        );
        // ...but not the order of fields in the text the object arrived as.
        let reordered =
            object(r#"{"metadata":{"resourceVersion":"1","labels":{"a":"1"},"name":"x"}}"#);
        let fr = full.item(&reordered).expect("item");
        assert_eq!(fa.checksum, fr.checksum);
        assert_eq!(
            fr.object.as_ref().map(|o| o.to_text()).as_deref(),
            Some(&*a.json)
        );
    }

    #[test]
    fn a_failing_filter_is_an_error_for_that_object() {
        let f = ItemFilter {
            jq: Some(Arc::new(
                JqFilter::compile(".spec | keys", None, &[]).expect("jq"),
            )),
            keep_full_object: true,
        };
        let e = f
            .item(&object(r#"{"spec":"text"}"#))
            .expect_err("keys of a string");
        assert!(e.0.contains("jq"), "{}", e.0);
    }
}
