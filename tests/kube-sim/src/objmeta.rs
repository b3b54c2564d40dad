//! Object metadata rules applied by the store on writes: identity on create
//! (kind/apiVersion, namespace from URL or body, generateName), the status
//! subresource split, server-owned fields carried across updates, generation
//! bumps on spec changes and finalizer checks. Field validation is `validation`.

use crate::registry::ResourceType;
use crate::status::ApiError;
use crate::store::WriteMode;
use crate::util::name_suffix;
use serde_json::{Map, Value, json};

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or("")
}

/// Fills kind/apiVersion, resolves namespace and generateName on a new object.
pub fn prepare_identity(rt: &ResourceType, ns: &str, obj: &mut Value) -> Result<(), ApiError> {
    if obj
        .get("apiVersion")
        .is_none_or(|v| v.as_str().unwrap_or("").is_empty())
    {
        obj["apiVersion"] = json!(rt.api_version(rt.preferred()));
    }
    if obj
        .get("kind")
        .is_none_or(|v| v.as_str().unwrap_or("").is_empty())
    {
        obj["kind"] = json!(rt.kind);
    }
    if !obj["metadata"].is_object() {
        obj["metadata"] = Value::Object(Map::new());
    }
    let body_ns = meta_str(obj, "namespace").to_string();
    if rt.namespaced {
        if !ns.is_empty() && !body_ns.is_empty() && ns != body_ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let chosen = if !ns.is_empty() {
            ns.to_string()
        } else if !body_ns.is_empty() {
            body_ns
        } else {
            "default".into()
        };
        obj["metadata"]["namespace"] = json!(chosen);
    } else if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    // A missing name (and generateName) is left for validation to report.
    let prefix = meta_str(obj, "generateName").to_string();
    if meta_str(obj, "name").is_empty() && !prefix.is_empty() {
        obj["metadata"]["name"] = json!(format!("{prefix}{}", name_suffix()));
    }
    Ok(())
}

/// Applies the status-subresource rule for a write mode.
pub fn merge_for_mode(rt: &ResourceType, old: &Value, obj: Value, mode: WriteMode) -> Value {
    match mode {
        WriteMode::Whole => obj,
        WriteMode::Status => {
            let mut out = old.clone();
            out["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
            if out["status"].is_null() {
                if let Some(m) = out.as_object_mut() {
                    m.remove("status");
                }
            }
            out
        }
        WriteMode::Main if rt.status => {
            let mut out = obj;
            match old.get("status") {
                Some(s) => out["status"] = s.clone(),
                None => {
                    if let Some(m) = out.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            out
        }
        WriteMode::Main => obj,
    }
}

/// Keeps server-owned metadata from the stored object; bumps generation on spec changes.
pub fn carry_identity(rt: &ResourceType, old: &Value, obj: &mut Value) {
    if obj.get("apiVersion").is_none_or(Value::is_null) {
        obj["apiVersion"] = old["apiVersion"].clone();
    }
    if obj.get("kind").is_none_or(Value::is_null) {
        obj["kind"] = json!(rt.kind);
    }
    if !obj["metadata"].is_object() {
        obj["metadata"] = Value::Object(Map::new());
    }
    for f in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
    ] {
        match old["metadata"].get(f) {
            Some(v) => obj["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    let Some(generation) = old["metadata"]["generation"].as_i64() else {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("generation");
        }
        return;
    };
    let spec_changed =
        without(old, &["metadata", "status"]) != without(obj, &["metadata", "status"]);
    obj["metadata"]["generation"] = json!(if spec_changed {
        generation + 1
    } else {
        generation
    });
}

pub fn without(v: &Value, fields: &[&str]) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        for f in fields {
            m.remove(*f);
        }
    }
    v
}

pub fn same_ignoring_rv(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            m.remove("resourceVersion");
        }
        v
    };
    strip(a) == strip(b)
}

pub fn no_finalizers(obj: &Value) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_none_or(|a| a.is_empty())
}
