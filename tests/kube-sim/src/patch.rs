//! Patch application for PATCH requests, by content type: JSON merge patch
//! (RFC 7386), JSON patch (RFC 6902), strategic merge patch (see
//! `strategic`) and server-side apply. Apply is approximated: the applied
//! configuration is merged into the object, and fields the same field manager
//! applied last time but no longer applies are removed (no managedFields, no
//! conflicts between managers).

use crate::status::ApiError;
use serde_json::Value;

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Parses an apply body (YAML or JSON) into an object with object metadata.
pub fn parse_apply(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !v.is_object() || v.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(ApiError::bad_request(
            "apply patch must be an object with object metadata",
        ));
    }
    Ok(v)
}

/// Applies a patch body of content type `ct` to `current` (apply without history).
pub fn apply(ct: &str, current: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let mut out = current.clone();
    let ct = ct.split(';').next().unwrap_or("").trim();
    match ct {
        "application/merge-patch+json" => json_patch::merge(&mut out, &parse_json(body)?),
        "application/strategic-merge-patch+json" => {
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request(
                    "strategic merge patch must be a JSON object",
                ));
            }
            crate::strategic::merge(&mut out, &p);
        }
        "application/json-patch+json" => {
            let p: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding JSON patch: {e}")))?;
            json_patch::patch(&mut out, &p).map_err(|e| ApiError::invalid(e.to_string()))?;
        }
        "application/apply-patch+yaml" => out = apply_config(current, None, &parse_apply(body)?),
        other => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types \
                     include: application/json-patch+json, application/merge-patch+json, \
                     application/apply-patch+yaml, application/strategic-merge-patch+json \
                     (got {other:?})"
                ),
            ));
        }
    }
    Ok(out)
}

/// Server-side apply: merges `applied` into `current`, then removes what the
/// manager's `previous` applied configuration had and `applied` no longer has.
pub fn apply_config(current: &Value, previous: Option<&Value>, applied: &Value) -> Value {
    let mut out = current.clone();
    json_patch::merge(&mut out, applied);
    if let Some(prev) = previous {
        remove_dropped(&mut out, prev, applied);
    }
    out
}

/// Deletes from `target` the map keys present in `prev` but absent from `now`.
fn remove_dropped(target: &mut Value, prev: &Value, now: &Value) {
    let (Value::Object(p), Some(t)) = (prev, target.as_object_mut()) else {
        return;
    };
    let empty = Value::Object(serde_json::Map::new());
    for (k, pv) in p {
        let nv = now.get(k);
        let both_maps = pv.is_object() && t.get(k).is_some_and(Value::is_object);
        match nv {
            // A map the manager no longer mentions: drop only its own keys.
            None if both_maps => {
                if let Some(tv) = t.get_mut(k) {
                    remove_dropped(tv, pv, &empty);
                }
                if t.get(k)
                    .and_then(Value::as_object)
                    .is_some_and(|m| m.is_empty())
                {
                    t.remove(k);
                }
            }
            None => {
                t.remove(k);
            }
            Some(nv) if both_maps && nv.is_object() => {
                if let Some(tv) = t.get_mut(k) {
                    remove_dropped(tv, pv, nv);
                }
            }
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patch_kinds() {
        let cur = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "y"}});
        let m = apply(
            "application/merge-patch+json",
            &cur,
            br#"{"metadata":{"labels":{"a":null,"c":"3"}}}"#,
        )
        .unwrap();
        assert_eq!(m["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        let j = apply(
            "application/json-patch+json",
            &cur,
            br#"[{"op":"replace","path":"/data/x","value":"z"}]"#,
        )
        .unwrap();
        assert_eq!(j["data"]["x"], "z");
        let s = apply(
            "application/strategic-merge-patch+json",
            &cur,
            br#"{"data":{"x":"w"},"metadata":{"labels":{"$patch":"delete"}}}"#,
        )
        .unwrap();
        assert_eq!(s["data"], json!({"x": "w"}));
        assert!(s["metadata"].get("labels").is_none());
        let bad = apply(
            "application/json-patch+json",
            &cur,
            br#"[{"op":"test","path":"/data/x","value":"no"}]"#,
        );
        assert_eq!(bad.unwrap_err().code, 422);
        assert_eq!(apply("text/plain", &cur, b"{}").unwrap_err().code, 415);
    }

    #[test]
    fn apply_removes_what_the_manager_dropped() {
        let cur = json!({"metadata": {"name": "c", "labels": {"mine": "1", "theirs": "2"}},
                         "data": {"a": "1", "b": "2", "other": "x"}});
        let prev = json!({"metadata": {"name": "c", "labels": {"mine": "1"}}, "data": {"a": "1", "b": "2"}});
        let now = json!({"metadata": {"name": "c"}, "data": {"a": "9"}});
        let out = apply_config(&cur, Some(&prev), &now);
        assert_eq!(out["data"], json!({"a": "9", "other": "x"}));
        assert_eq!(out["metadata"]["labels"], json!({"theirs": "2"}));
    }
}
