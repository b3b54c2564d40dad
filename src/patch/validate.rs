//! Validating one patch document into an [`Operation`]: the operation name
//! (case-sensitive), the fields each family needs and allows, their types, the
//! create object, the merge patch, every JSON-patch op, and the jq filter
//! (compiled here). Unknown keys are errors. Errors name the document (1-based),
//! the operation and the field; JSON-patch ops are indexed from 0 as in JSON.

use super::error::PatchError;
use super::{Operation, OperationKind, Payload};
use crate::jq::JqFilter;
use crate::json_kind::json_kind;
use crate::kube::Patch;
use serde_json::{Map, Value};

/// Every key a document may have.
const FIELDS: [&str; 12] = [
    "operation",
    "apiVersion",
    "kind",
    "namespace",
    "name",
    "subresource",
    "object",
    "jqFilter",
    "mergePatch",
    "jsonPatch",
    "ignoreMissingObject",
    "ignoreHookError",
];

/// Where we are, for error messages.
struct Cx {
    doc: usize,
    op: &'static str,
}

impl Cx {
    fn err(&self, field: &str, message: impl Into<String>) -> PatchError {
        PatchError::invalid(self.doc, Some(self.op), Some(field), message)
    }
}

/// Validates document number `doc` (1-based).
pub(super) fn operation(doc: usize, value: Value) -> Result<Operation, PatchError> {
    let Value::Object(mut map) = value else {
        let hint = match value {
            Value::Array(_) => " (write one document per operation, not a list)",
            _ => "",
        };
        let msg = format!(
            "must be a mapping of operation fields, got {}{hint}",
            json_kind(&value)
        );
        return Err(PatchError::invalid(doc, None, None, msg));
    };
    let kind = operation_kind(doc, &map)?;
    let cx = Cx {
        doc,
        op: kind.as_str(),
    };
    check_keys(&cx, &map, kind)?;
    let mut op = Operation {
        kind,
        api_version: opt_str(&cx, &map, "apiVersion")?,
        object_kind: opt_str(&cx, &map, "kind")?,
        namespace: opt_str(&cx, &map, "namespace")?,
        name: opt_str(&cx, &map, "name")?,
        subresource: Some(opt_str(&cx, &map, "subresource")?).filter(|s| !s.is_empty()),
        ignore_missing_object: opt_bool(&cx, &map, "ignoreMissingObject")?,
        ignore_hook_error: opt_bool(&cx, &map, "ignoreHookError")?,
        payload: Payload::Nothing,
    };
    if kind.is_create() {
        let object = create_object(&cx, map.remove("object"))?;
        take_coordinates(&cx, &mut op, &object)?;
        op.payload = Payload::Object(object);
        return Ok(op);
    }
    require(&cx, "kind", &op.object_kind)?;
    require(&cx, "name", &op.name)?;
    op.payload = match kind {
        OperationKind::JQPatch => jq_payload(&cx, &map)?,
        OperationKind::MergePatch => Payload::Patch(Patch::Merge(merge_patch(&cx, &map)?)),
        OperationKind::JSONPatch => Payload::Patch(Patch::Json(json_patch(&cx, &map)?)),
        _ => Payload::Nothing,
    };
    Ok(op)
}

fn operation_kind(doc: usize, map: &Map<String, Value>) -> Result<OperationKind, PatchError> {
    let names: Vec<&str> = OperationKind::ALL.iter().map(|k| k.as_str()).collect();
    let err = |m: String| PatchError::invalid(doc, None, Some("operation"), m);
    let name = match map.get("operation") {
        None | Some(Value::Null) => {
            return Err(err(format!("is required, one of {}", names.join(", "))));
        }
        Some(Value::String(s)) => s,
        Some(v) => return Err(err(format!("must be a string, got {}", json_kind(v)))),
    };
    if let Some(k) = OperationKind::from_name(name) {
        return Ok(k);
    }
    let hint = names
        .iter()
        .find(|n| n.eq_ignore_ascii_case(name))
        .map(|n| format!(" (names are case-sensitive: did you mean '{n}'?)"))
        .unwrap_or_default();
    Err(err(format!(
        "'{name}' is not an operation{hint}; use one of {}",
        names.join(", ")
    )))
}

/// Unknown keys, and known keys another operation uses, are errors.
fn check_keys(cx: &Cx, map: &Map<String, Value>, kind: OperationKind) -> Result<(), PatchError> {
    for key in map.keys() {
        if !FIELDS.contains(&key.as_str()) {
            let hint = match FIELDS.iter().find(|f| close(f, key)) {
                Some(f) => format!(" (did you mean '{f}'?)"),
                None => format!("; the fields are {}", FIELDS.join(", ")),
            };
            return Err(cx.err(key, format!("unknown field{hint}")));
        }
        let owner = match key.as_str() {
            "object" => kind.is_create(),
            "jqFilter" => kind == OperationKind::JQPatch,
            "mergePatch" => kind == OperationKind::MergePatch,
            "jsonPatch" => kind == OperationKind::JSONPatch,
            _ => true,
        };
        if !owner {
            return Err(cx.err(key, format!("is not used by {} operations", cx.op)));
        }
    }
    Ok(())
}

/// A misspelling: another case, or one or two letters added or missing at the end.
fn close(field: &str, key: &str) -> bool {
    let (f, k) = (field.to_ascii_lowercase(), key.to_ascii_lowercase());
    let (short, long) = if f.len() <= k.len() {
        (&f, &k)
    } else {
        (&k, &f)
    };
    long.starts_with(short.as_str()) && long.len() - short.len() <= 2 && short.len() > 3
}

/// A string field; absent or null is empty.
fn opt_str(cx: &Cx, map: &Map<String, Value>, key: &str) -> Result<String, PatchError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(cx.err(key, format!("must be a string, got {}", json_kind(v)))),
    }
}

/// A boolean field; absent or null is false.
fn opt_bool(cx: &Cx, map: &Map<String, Value>, key: &str) -> Result<bool, PatchError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(cx.err(key, format!("must be true or false, got {}", json_kind(v)))),
    }
}

fn require(cx: &Cx, key: &str, value: &str) -> Result<(), PatchError> {
    if value.is_empty() {
        return Err(cx.err(key, format!("is required for {} operations", cx.op)));
    }
    Ok(())
}

/// An object given as a mapping or as a string holding YAML or JSON.
fn mapping_or_text(cx: &Cx, key: &str, v: Option<Value>) -> Result<Map<String, Value>, PatchError> {
    let v = match v {
        None => return Err(cx.err(key, format!("is required for {} operations", cx.op))),
        Some(Value::String(s)) => serde_yaml::from_str::<Value>(&s)
            .map_err(|e| cx.err(key, format!("the string is not valid YAML or JSON: {e}")))?,
        Some(v) => v,
    };
    match v {
        Value::Object(m) if m.is_empty() => Err(cx.err(key, "must not be empty")),
        Value::Object(m) => Ok(m),
        v => Err(cx.err(
            key,
            format!(
                "must be an object or a string holding one, got {}",
                json_kind(&v)
            ),
        )),
    }
}

/// The full object of a create operation, with apiVersion, kind and a name.
fn create_object(cx: &Cx, v: Option<Value>) -> Result<Value, PatchError> {
    let obj = mapping_or_text(cx, "object", v)?;
    for key in ["apiVersion", "kind"] {
        match obj.get(key) {
            Some(Value::String(s)) if !s.is_empty() => {}
            _ => return Err(cx.err(&format!("object.{key}"), "must be a non-empty string")),
        }
    }
    let Some(Value::Object(meta)) = obj.get("metadata") else {
        return Err(cx.err("object.metadata", "must be an object with a name"));
    };
    let named = |k: &str| matches!(meta.get(k), Some(Value::String(s)) if !s.is_empty());
    let generate = cx.op == "Create" && named("generateName");
    if !named("name") && !generate {
        return Err(cx.err("object.metadata.name", "must be a non-empty string"));
    }
    if !matches!(meta.get("namespace"), None | Some(Value::String(_))) {
        return Err(cx.err("object.metadata.namespace", "must be a string"));
    }
    Ok(Value::Object(obj))
}

/// A create's coordinates come from its object; top-level ones must agree.
fn take_coordinates(cx: &Cx, op: &mut Operation, obj: &Value) -> Result<(), PatchError> {
    let meta = &obj["metadata"];
    let pairs = [
        ("apiVersion", &mut op.api_version, &obj["apiVersion"]),
        ("kind", &mut op.object_kind, &obj["kind"]),
        ("name", &mut op.name, &meta["name"]),
    ];
    for (key, top, inner) in pairs {
        let inner = inner.as_str().unwrap_or("");
        if !top.is_empty() && top != inner {
            let msg = format!("'{top}' differs from the object's '{inner}'");
            return Err(cx.err(key, msg));
        }
        *top = inner.to_string();
    }
    if let Some(ns) = meta["namespace"].as_str().filter(|s| !s.is_empty()) {
        op.namespace = ns.to_string();
    }
    Ok(())
}

/// A JQPatch filter, compiled now; one that imports modules is compiled when
/// applied, with the jq library path.
fn jq_payload(cx: &Cx, map: &Map<String, Value>) -> Result<Payload, PatchError> {
    let code = opt_str(cx, map, "jqFilter")?;
    require(cx, "jqFilter", &code)?;
    match JqFilter::compile(&code, None, &[]) {
        Ok(f) => Ok(Payload::Jq {
            code,
            filter: Some(f),
        }),
        Err(e) if e.to_string().contains("cannot load module") => {
            Ok(Payload::Jq { code, filter: None })
        }
        Err(e) => Err(cx.err("jqFilter", e.to_string())),
    }
}

fn merge_patch(cx: &Cx, map: &Map<String, Value>) -> Result<Value, PatchError> {
    Ok(Value::Object(mapping_or_text(
        cx,
        "mergePatch",
        map.get("mergePatch").cloned(),
    )?))
}

/// A JSON patch (RFC 6902): every op is checked, not only the first.
fn json_patch(cx: &Cx, map: &Map<String, Value>) -> Result<Value, PatchError> {
    let ops = match map.get("jsonPatch") {
        None => return Err(cx.err("jsonPatch", "is required for JSONPatch operations")),
        Some(Value::String(s)) => serde_yaml::from_str::<Value>(s).map_err(|e| {
            cx.err(
                "jsonPatch",
                format!("the string is not valid YAML or JSON: {e}"),
            )
        })?,
        Some(v) => v.clone(),
    };
    let Value::Array(items) = &ops else {
        let msg = format!(
            "must be an array of operations or a string holding one, got {}",
            json_kind(&ops)
        );
        return Err(cx.err("jsonPatch", msg));
    };
    if items.is_empty() {
        return Err(cx.err("jsonPatch", "must not be empty"));
    }
    for (i, item) in items.iter().enumerate() {
        json_patch_op(cx, i, item)?;
    }
    Ok(ops)
}

fn json_patch_op(cx: &Cx, i: usize, item: &Value) -> Result<(), PatchError> {
    let field = |k: &str| format!("jsonPatch[{i}].{k}");
    let Value::Object(m) = item else {
        let msg = format!("must be an object, got {}", json_kind(item));
        return Err(cx.err(&format!("jsonPatch[{i}]"), msg));
    };
    let op = match m.get("op") {
        Some(Value::String(s)) => s.as_str(),
        _ => return Err(cx.err(&field("op"), "must be a string")),
    };
    let (needs_value, needs_from) = match op {
        "add" | "replace" | "test" => (true, false),
        "remove" => (false, false),
        "move" | "copy" => (false, true),
        _ => {
            let msg = format!("'{op}' is not one of add, remove, replace, move, copy, test");
            return Err(cx.err(&field("op"), msg));
        }
    };
    check_pointer(cx, &field("path"), m.get("path"))?;
    if needs_value && !m.contains_key("value") {
        return Err(cx.err(&field("value"), format!("is required for op '{op}'")));
    }
    if needs_from {
        check_pointer(cx, &field("from"), m.get("from"))?;
    }
    Ok(())
}

/// A JSON pointer: empty or starting with `/`.
fn check_pointer(cx: &Cx, field: &str, v: Option<&Value>) -> Result<(), PatchError> {
    match v {
        Some(Value::String(s)) if s.is_empty() || s.starts_with('/') => Ok(()),
        Some(Value::String(s)) => Err(cx.err(
            field,
            format!("'{s}' is not a JSON pointer (must start with '/')"),
        )),
        None => Err(cx.err(field, "is required")),
        _ => Err(cx.err(field, "must be a string (a JSON pointer)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op(v: Value) -> Result<Operation, String> {
        operation(1, v).map_err(|e| e.to_string())
    }

    #[test]
    fn create_coordinates_come_from_the_object() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let o =
            op(json!({"operation": "Create", "namespace": "top", "object": obj})).expect("valid");
        assert_eq!(o.description(), "Create object v1/ConfigMap/top/a");
        let mut inner = obj.clone();
        inner["metadata"]["namespace"] = json!("inner");
        let o = op(json!({"operation": "CreateOrUpdate", "namespace": "top", "object": inner}))
            .expect("valid");
        assert_eq!(o.namespace, "inner");
    }

    #[test]
    fn generate_name_only_for_create() {
        let obj =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "a-"}});
        assert!(op(json!({"operation": "Create", "object": obj})).is_ok());
        let err = op(json!({"operation": "CreateIfNotExists", "object": obj})).unwrap_err();
        assert!(err.contains("'object.metadata.name'"), "{err}");
    }

    #[test]
    fn empty_subresource_and_null_fields_are_absent() {
        let o = op(json!({"operation": "Delete", "kind": "Pod", "name": "p",
                          "subresource": "", "namespace": null, "ignoreHookError": null}))
        .expect("valid");
        assert_eq!(
            (o.subresource, o.namespace.as_str(), o.ignore_hook_error),
            (None, "", false)
        );
    }

    #[test]
    fn misspellings_are_close() {
        assert!(close("apiVersion", "apiversion"));
        assert!(close("ignoreMissingObject", "ignoreMissingObjects"));
        assert!(close("jsonPatch", "jsonPatc"));
        assert!(!close("name", "namespace"));
        assert!(!close("kind", "kin"));
    }
}
