//! Patch application for PATCH requests, by content type: JSON merge patch
//! (RFC 7386), JSON patch (RFC 6902), strategic merge patch (approximated as a
//! merge patch after honouring `$patch: delete` and dropping the other `$`
//! directives; lists are replaced, not merged by key) and server-side apply
//! (approximated as a merge of the applied configuration).

use crate::status::ApiError;
use serde_json::Value;

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Applies a patch body of content type `ct` to `current`.
pub fn apply(ct: &str, current: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let mut out = current.clone();
    let ct = ct.split(';').next().unwrap_or("").trim();
    match ct {
        "application/merge-patch+json" => json_patch::merge(&mut out, &parse_json(body)?),
        "application/strategic-merge-patch+json" => {
            json_patch::merge(&mut out, &strip_directives(parse_json(body)?))
        }
        "application/json-patch+json" => {
            let p: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding JSON patch: {e}")))?;
            json_patch::patch(&mut out, &p).map_err(|e| ApiError::invalid(e.to_string()))?;
        }
        "application/apply-patch+yaml" => {
            let v: Value = serde_yaml::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            json_patch::merge(&mut out, &v);
        }
        other => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
                ),
            ));
        }
    }
    Ok(out)
}

/// Turns a strategic merge patch into a merge patch (see module doc).
fn strip_directives(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            if m.get("$patch").and_then(Value::as_str) == Some("delete") {
                return Value::Null;
            }
            Value::Object(
                m.into_iter()
                    .filter(|(k, _)| !k.starts_with('$'))
                    .map(|(k, v)| (k, strip_directives(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(
            a.into_iter()
                .filter(|x| x.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        ),
        other => other,
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
        let s = apply("application/strategic-merge-patch+json", &cur,
            br#"{"$setElementOrder/x":[],"data":{"$retainKeys":["x"],"x":"w"},"metadata":{"labels":{"$patch":"delete"}}}"#).unwrap();
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
}
