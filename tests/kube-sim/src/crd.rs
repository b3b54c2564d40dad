//! CustomResourceDefinition handling on write: the name rule
//! (`<plural>.<group>`) and the status a real apiextensions controller sets
//! once names are accepted (`NamesAccepted`, `Established`, `acceptedNames`,
//! `storedVersions`). kube-sim sets it in the same write, so a CRD is usable
//! as soon as it is created. Registration itself lives in `registry`.

use crate::registry::crd_resource;
use crate::status::ApiError;
use crate::util::{fmt_time, now_secs};
use serde_json::{Value, json};

/// Checks the CRD's spec and that its name is `<plural>.<group>`.
pub fn validate(crd: &Value) -> Result<(), ApiError> {
    let t = crd_resource(crd).map_err(ApiError::invalid)?;
    let want = format!("{}.{}", t.plural, t.group);
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    if name != want {
        return Err(ApiError::invalid(format!(
            "CustomResourceDefinition.apiextensions.k8s.io {name:?} is invalid: metadata.name: \
             Invalid value: must be spec.names.plural+\".\"+spec.group ({want:?})"
        )));
    }
    Ok(())
}

/// Writes the Established status.
pub fn establish(crd: &mut Value) {
    let now = fmt_time(now_secs());
    let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    crd["status"] = json!({
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": crd["spec"]["names"].clone(),
        "storedVersions": storage,
    });
}
