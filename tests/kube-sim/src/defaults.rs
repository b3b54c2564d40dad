//! Server-side defaulting the real API server applies on every write and that
//! clients observe: Secret `type: Opaque` and `stringData` folded into `data`,
//! Namespace `status.phase: Active` and its `kubernetes.io/metadata.name` label.

use crate::registry::ResourceType;
use base64::Engine;
use serde_json::{Value, json};

/// Applies the defaults for `rt` to an object about to be stored.
pub fn apply(rt: &ResourceType, obj: &mut Value) {
    if !rt.group.is_empty() {
        return;
    }
    match rt.plural.as_str() {
        "secrets" => secret(obj),
        "namespaces" => namespace(obj),
        _ => {}
    }
}

fn secret(obj: &mut Value) {
    if obj["type"].as_str().unwrap_or("").is_empty() {
        obj["type"] = json!("Opaque");
    }
    let Some(string_data) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else {
        return;
    };
    let Some(map) = string_data.as_object() else {
        return;
    };
    if !obj["data"].is_object() {
        obj["data"] = json!({});
    }
    for (k, v) in map {
        let text = v.as_str().unwrap_or("");
        obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

fn namespace(obj: &mut Value) {
    if obj["status"]["phase"].is_null() {
        obj["status"] = json!({"phase": "Active"});
    }
    let name = obj["metadata"]["name"].clone();
    if !obj["metadata"]["labels"].is_object() {
        obj["metadata"]["labels"] = json!({});
    }
    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
}
