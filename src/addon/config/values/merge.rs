//! Deep merge of values (spec §3.2): objects are merged key by key, recursively; any
//! other value (scalars, arrays, null) in the overlay replaces the base value.

use serde_json::Value;

/// Deep merge: maps merged recursively, everything else replaced by `over`.
/// `over` is not modified; the parts taken from it are cloned.
pub(crate) fn merge(base: &mut Value, over: &Value) {
    let (Value::Object(base_map), Value::Object(over_map)) = (&mut *base, over) else {
        *base = over.clone();
        return;
    };
    for (key, over_value) in over_map {
        match base_map.get_mut(key) {
            Some(base_value) => merge(base_value, over_value),
            None => {
                base_map.insert(key.clone(), over_value.clone());
            }
        }
    }
}
