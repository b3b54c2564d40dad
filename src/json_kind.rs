//! What kind of JSON value something is, worded for error messages ("a string",
//! "an object"): one function for every parser that reports a wrong type.

use serde_json::Value;

/// `null`, `a boolean`, `a number`, `a string`, `an array` or `an object`.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
