//! Schema-like checks over the raw JSON value of a config, in the spirit of
//! flant's OpenAPI schema: strict objects, required keys, JSON types, enums and
//! minimum array sizes. A `Checker` knows which binding it is looking at and
//! records every problem it finds; getters return `None` on a problem so the
//! caller falls back to the default and keeps going.

use serde_json::{Map, Value};

use super::error::Problem;

/// Records problems for one place in the config (a binding, or the top level).
pub(crate) struct Checker<'p> {
    probs: &'p mut Vec<Problem>,
    at: String,
}

/// `prefix.key`, or `key` at the top of a binding.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The JSON type name as flant's schema errors print it.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `schedule[1] "every-min"` when the binding has a string name, else `schedule[1]`.
pub(crate) fn binding_at(kind: &str, index: usize, item: &Value) -> String {
    match item.get("name").and_then(Value::as_str) {
        Some(name) => format!("{kind}[{index}] {name:?}"),
        None => format!("{kind}[{index}]"),
    }
}

impl<'p> Checker<'p> {
    /// A checker for the place `at` (empty for the top level).
    pub(crate) fn new(probs: &'p mut Vec<Problem>, at: impl Into<String>) -> Self {
        Checker {
            probs,
            at: at.into(),
        }
    }

    /// Record one problem about `field`.
    pub(crate) fn err(&mut self, field: &str, message: impl Into<String>) {
        self.probs.push(Problem {
            at: self.at.clone(),
            field: field.to_owned(),
            message: message.into(),
        });
    }

    fn type_err(&mut self, field: &str, want: &str, got: &Value) {
        let msg = format!("must be of type {want}: {:?}", type_name(got));
        self.err(field, msg);
    }

    /// Unknown keys are errors (flant's `additionalProperties: false`).
    pub(crate) fn strict(&mut self, prefix: &str, m: &Map<String, Value>, allowed: &[&str]) {
        for key in m.keys().filter(|k| !allowed.contains(&k.as_str())) {
            let msg = format!(
                "{key} is a forbidden property; accepted properties: {}",
                allowed.join(", ")
            );
            self.err(&join(prefix, key), msg);
        }
    }

    /// The value of a required key, or a problem when it is missing.
    pub(crate) fn required<'v>(
        &mut self,
        m: &'v Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<&'v Value> {
        let v = m.get(key);
        if v.is_none() {
            self.err(&join(prefix, key), "is required");
        }
        v
    }

    /// A string value.
    pub(crate) fn as_str(&mut self, field: &str, v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            other => {
                self.type_err(field, "string", other);
                None
            }
        }
    }

    /// A boolean: JSON booleans, the strings "true"/"false" (flant coerces), and
    /// the YAML 1.1 words flant's YAML reader turns into booleans (yes/no/on/off).
    pub(crate) fn as_bool(&mut self, field: &str, v: &Value) -> Option<bool> {
        let word = match v {
            Value::Bool(b) => return Some(*b),
            Value::String(s) => s.as_str(),
            other => {
                self.type_err(field, "boolean", other);
                return None;
            }
        };
        match word {
            "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
                Some(true)
            }
            "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n"
            | "N" => Some(false),
            _ => {
                let msg = format!(
                    "must be of type boolean: \"string\" ({word:?}); accepted: true or false"
                );
                self.err(field, msg);
                None
            }
        }
    }

    /// An integer (a JSON number without a fractional part).
    pub(crate) fn as_int(&mut self, field: &str, v: &Value) -> Option<i64> {
        let n = match v {
            Value::Number(n) => n,
            other => {
                self.type_err(field, "integer", other);
                return None;
            }
        };
        if let Some(i) = n.as_i64() {
            return Some(i);
        }
        match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(f as i64),
            _ => {
                self.err(field, format!("must be of type integer: \"number\" ({n})"));
                None
            }
        }
    }

    /// A JSON object.
    pub(crate) fn as_object<'v>(
        &mut self,
        field: &str,
        v: &'v Value,
    ) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.type_err(field, "object", other);
                None
            }
        }
    }

    /// A JSON array with at least `min` items.
    pub(crate) fn as_array<'v>(
        &mut self,
        field: &str,
        v: &'v Value,
        min: usize,
    ) -> Option<&'v [Value]> {
        let items = match v {
            Value::Array(items) => items,
            other => {
                self.type_err(field, "array", other);
                return None;
            }
        };
        if items.len() < min {
            let msg = format!("must have at least {min} item(s), got {}", items.len());
            self.err(field, msg);
            return None;
        }
        Some(items)
    }

    /// An array of strings with at least `min` items.
    pub(crate) fn as_str_list(
        &mut self,
        field: &str,
        v: &Value,
        min: usize,
    ) -> Option<Vec<String>> {
        let items = self.as_array(field, v, min)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.as_str(&format!("{field}[{i}]"), item) {
                Some(s) => out.push(s),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A string that must be one of `allowed`.
    pub(crate) fn as_enum(&mut self, field: &str, v: &Value, allowed: &[&str]) -> Option<String> {
        let s = self.as_str(field, v)?;
        if allowed.contains(&s.as_str()) {
            return Some(s);
        }
        let msg = format!("{s:?} should be one of [{}]", allowed.join(", "));
        self.err(field, msg);
        None
    }

    /// An optional string field of `m`.
    pub(crate) fn opt_str(
        &mut self,
        m: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<String> {
        let v = m.get(key)?;
        self.as_str(&join(prefix, key), v)
    }

    /// An optional boolean field of `m`.
    pub(crate) fn opt_bool(
        &mut self,
        m: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<bool> {
        let v = m.get(key)?;
        self.as_bool(&join(prefix, key), v)
    }

    /// An optional integer field of `m`.
    pub(crate) fn opt_int(
        &mut self,
        m: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<i64> {
        let v = m.get(key)?;
        self.as_int(&join(prefix, key), v)
    }

    /// An optional string-array field of `m` with at least `min` items.
    pub(crate) fn opt_str_list(
        &mut self,
        m: &Map<String, Value>,
        prefix: &str,
        key: &str,
        min: usize,
    ) -> Option<Vec<String>> {
        let v = m.get(key)?;
        self.as_str_list(&join(prefix, key), v, min)
    }

    /// A required string field of `m`.
    pub(crate) fn req_str(
        &mut self,
        m: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<String> {
        let v = self.required(m, prefix, key)?;
        self.as_str(&join(prefix, key), v)
    }
}

impl Checker<'_> {
    /// A required string field of `m` that must not be empty.
    pub(crate) fn req_non_empty(
        &mut self,
        m: &Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Option<String> {
        let s = self.req_str(m, prefix, key)?;
        if s.is_empty() {
            self.err(&join(prefix, key), "must not be empty");
        }
        Some(s)
    }
}
