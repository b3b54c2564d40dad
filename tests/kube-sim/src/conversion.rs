//! CRD version conversion. With `spec.conversion.strategy: Webhook`, objects
//! read or written in a version other than the one they are stored in go
//! through the CRD's conversion webhook as an `apiextensions.k8s.io/v1`
//! ConversionReview (one review per object or per list), and writes are stored
//! in the storage version; a failed conversion is the 500 a real server
//! returns (`conversion webhook for <gvk> failed: ...`). With the `None`
//! strategy (and for built-in kinds) only `apiVersion` is rewritten, as before.

use crate::registry::ResourceType;
use crate::server::Shared;
use crate::status::ApiError;
use crate::store::Store;
use crate::watch::present;
use crate::webhook_client::{self as client, CallError};
use serde_json::{Value, json};
use std::time::Duration;

/// kube-apiserver's fixed timeout for conversion webhooks.
const TIMEOUT_SECS: u64 = 30;

/// The CRD object defining `rt`, when it converts through a webhook.
fn webhook_crd(st: &Store, rt: &ResourceType) -> Option<Value> {
    if !rt.crd {
        return None;
    }
    let crd_rt = st
        .registry
        .by_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    let crd = st
        .get(crd_rt, "", &format!("{}.{}", rt.plural, rt.group))
        .ok()?;
    (crd["spec"]["conversion"]["strategy"] == "Webhook").then_some(crd)
}

fn storage_version(crd: &Value) -> Option<String> {
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["storage"] == true)
        .and_then(|v| v["name"].as_str().map(str::to_string))
}

/// Whether objects of `rt` convert through a webhook (patches must then be
/// applied to the client's version, not to the stored one).
pub fn uses_webhook(shared: &Shared, rt: &ResourceType) -> bool {
    rt.crd && webhook_crd(&shared.store(), rt).is_some()
}

/// The object as the client of `version` sees it.
pub fn to_version(
    shared: &Shared,
    rt: &ResourceType,
    version: &str,
    obj: Value,
) -> Result<Value, ApiError> {
    let mut one = list_to_version(shared, rt, version, vec![obj])?;
    Ok(one.pop().unwrap_or(Value::Null))
}

/// The object to store for a write (the storage version under the Webhook strategy).
pub fn for_storage(shared: &Shared, rt: &ResourceType, obj: Value) -> Result<Value, ApiError> {
    if !rt.crd {
        return Ok(obj);
    }
    let storage = {
        let st = shared.store();
        webhook_crd(&st, rt).and_then(|crd| storage_version(&crd))
    };
    match storage {
        Some(v) => to_version(shared, rt, &v, obj),
        None => Ok(obj),
    }
}

/// Objects as the client of `version` sees them; one webhook call for all that need it.
pub fn list_to_version(
    shared: &Shared,
    rt: &ResourceType,
    version: &str,
    objs: Vec<Value>,
) -> Result<Vec<Value>, ApiError> {
    let desired = rt.api_version(version);
    let differ: Vec<usize> = (0..objs.len())
        .filter(|&i| objs[i]["apiVersion"] != desired.as_str())
        .collect();
    let endpoint = if differ.is_empty() {
        None
    } else {
        let st = shared.store();
        webhook_crd(&st, rt).map(|crd| {
            let cc = &crd["spec"]["conversion"]["webhook"]["clientConfig"];
            client::resolve(&st, cc, TIMEOUT_SECS)
        })
    };
    let Some(endpoint) = endpoint else {
        return Ok(objs.into_iter().map(|o| present(rt, version, o)).collect());
    };
    let gvk = format!(
        "{}, Kind={}",
        objs[differ[0]]["apiVersion"].as_str().unwrap_or(""),
        if objs.len() > 1 {
            &rt.list_kind
        } else {
            &rt.kind
        }
    );
    let failed =
        |e: String| ApiError::new(500, "", format!("conversion webhook for {gvk} failed: {e}"));
    let ep = endpoint.map_err(|e| failed(e.to_string()))?;
    let originals: Vec<Value> = differ.iter().map(|&i| objs[i].clone()).collect();
    let converted = convert(&ep, &desired, &originals).map_err(failed)?;
    let mut objs = objs;
    for (&i, c) in differ.iter().zip(converted) {
        objs[i] = c;
    }
    Ok(objs.into_iter().map(|o| present(rt, version, o)).collect())
}

/// One ConversionReview exchange; the converted objects keep the originals'
/// metadata except labels and annotations, as kube-apiserver enforces.
fn convert(ep: &client::Endpoint, desired: &str, objs: &[Value]) -> Result<Vec<Value>, String> {
    let uid = crate::util::new_uid();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objs},
    });
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let raw = client::post_json(ep, &body, Duration::from_secs(TIMEOUT_SECS))
        .map_err(|e: CallError| e.to_string())?;
    let answer: Value =
        serde_json::from_slice(&raw).map_err(|e| format!("invalid response: {e}"))?;
    let resp = &answer["response"];
    if resp["uid"] != uid.as_str() {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            resp["uid"].as_str().unwrap_or("")
        ));
    }
    if resp["result"]["status"] != "Success" {
        return Err(
            match resp["result"]["message"].as_str().filter(|m| !m.is_empty()) {
                Some(m) => m.to_string(),
                None => format!(
                    "response.result.status was '{}', not 'Success'",
                    resp["result"]["status"].as_str().unwrap_or("")
                ),
            },
        );
    }
    let out = resp["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if out.len() != objs.len() {
        return Err(format!(
            "returned {} objects, expected {}",
            out.len(),
            objs.len()
        ));
    }
    out.into_iter()
        .zip(objs)
        .map(|(c, o)| restore_metadata(c, o, desired))
        .collect()
}

fn restore_metadata(mut c: Value, original: &Value, desired: &str) -> Result<Value, String> {
    if c["apiVersion"] != desired {
        return Err(format!(
            "invalid converted object: apiVersion {:?}, expected {desired:?}",
            c["apiVersion"].as_str().unwrap_or("")
        ));
    }
    if c["kind"] != original["kind"] {
        return Err(format!(
            "invalid converted object: kind {} changed",
            c["kind"]
        ));
    }
    let mut meta = original["metadata"].clone();
    for field in ["labels", "annotations"] {
        match c["metadata"].get(field) {
            Some(v) => meta[field] = v.clone(),
            None => {
                if let Some(m) = meta.as_object_mut() {
                    m.remove(field);
                }
            }
        }
    }
    c["metadata"] = meta;
    Ok(c)
}
