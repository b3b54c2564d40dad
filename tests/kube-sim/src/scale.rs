//! The `scale` subresource: the autoscaling/v1 Scale view of an object and
//! writing a Scale's replicas back, using the replica paths the registry knows
//! (`.spec.replicas` for built-ins, the CRD's `specReplicasPath` and friends).

use crate::registry::ResourceType;
use crate::status::ApiError;
use serde_json::{Value, json};

fn path_parts(p: &str) -> Vec<&str> {
    p.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .collect()
}

fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path_parts(path).into_iter().fold(v, |cur, k| &cur[k])
}

/// The autoscaling/v1 Scale view of an object.
pub fn to_scale(rt: &ResourceType, obj: &Value) -> Result<Value, ApiError> {
    let paths = rt
        .scale
        .as_ref()
        .ok_or_else(|| ApiError::not_found(&rt.group, &format!("{}/scale", rt.plural), ""))?;
    let m = &obj["metadata"];
    let mut status = json!({"replicas": at(obj, &paths.status).as_i64().unwrap_or(0)});
    if let Some(sel) = &paths.selector {
        status["selector"] = at(obj, sel).clone();
    }
    Ok(json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
                     "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"]},
        "spec": {"replicas": at(obj, &paths.spec).as_i64().unwrap_or(0)},
        "status": status,
    }))
}

/// Writes a Scale's spec.replicas back into the object.
pub fn from_scale(rt: &ResourceType, mut obj: Value, scale: &Value) -> Result<Value, ApiError> {
    let paths = rt
        .scale
        .as_ref()
        .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, ""))?;
    let replicas = scale["spec"]["replicas"]
        .as_i64()
        .ok_or_else(|| ApiError::invalid("spec.replicas: Required value"))?;
    let parts = path_parts(&paths.spec);
    let mut cur = &mut obj;
    for k in &parts {
        if !cur[*k].is_object() && Some(k) != parts.last() {
            cur[*k] = json!({});
        }
        cur = &mut cur[*k];
    }
    *cur = json!(replicas);
    Ok(obj)
}
