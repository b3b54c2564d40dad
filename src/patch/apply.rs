//! Applying validated operations through the Kubernetes client, in order; the
//! first failure stops the rest. Runs on the queue thread that ran the hook.
//!
//! - Create: POST; AlreadyExists is an error (CreateIfNotExists: success;
//!   CreateOrUpdate: GET, copy resourceVersion (and the current `.status`
//!   when the object has none), PUT, retried on conflict). The metadata the
//!   server owns (`resourceVersion`, `uid`, `creationTimestamp`, `managedFields`,
//!   …) is dropped from the object first, so an object taken from a snapshot can
//!   be created again (shell-operator#346); the PUT carries the current object's
//!   `resourceVersion`.
//! - Delete*: DELETE with Foreground / Background / Orphan propagation; NotFound
//!   is success; a foreground delete then waits (≤ 20 s) until the object is gone.
//! - JQPatch: GET, jq, nothing if unchanged, else PUT (to the subresource),
//!   retried on conflict. MergePatch / JSONPatch: PATCH (to the subresource).
//!   NotFound with `ignoreMissingObject` is success.

use super::error::{ApplyError, PatchError};
use super::{Operation, OperationKind, Payload};
use crate::jq::JqFilter;
use crate::kube::{Api, Client, KubeError, PatchParams, Propagation};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Attempts of a read-modify-write before a conflict is reported.
const CONFLICT_ATTEMPTS: usize = 5;
/// How long a foreground Delete waits for the object to disappear.
const DELETE_WAIT: Duration = Duration::from_secs(20);

/// Applies `ops` in order and returns how many ran. With `hook_failed`, only
/// operations with `ignoreHookError: true` run. `jq_library` is the
/// `JQ_LIBRARY_PATH` for JQPatch filters that import modules.
pub fn apply(
    client: &Client,
    ops: &[Operation],
    hook_failed: bool,
    jq_library: Option<&Path>,
) -> Result<usize, PatchError> {
    let mut ran = 0;
    for op in ops.iter().filter(|op| !hook_failed || op.ignore_hook_error) {
        run(client, op, jq_library).map_err(|cause| PatchError::Apply {
            operation: op.description(),
            cause: Box::new(cause),
        })?;
        ran += 1;
    }
    Ok(ran)
}

/// One operation.
fn run(client: &Client, op: &Operation, jq_library: Option<&Path>) -> Result<(), ApplyError> {
    let resource = client
        .resolve(&op.api_version, &op.object_kind, "object patcher")
        .map_err(kube)?;
    let api = client.api(&resource, Some(&op.namespace));
    let res = match (&op.payload, op.kind) {
        (Payload::Object(obj), kind) => {
            let mut obj = with_namespace(obj, &op.namespace, resource.namespaced);
            without_server_metadata(&mut obj);
            create(&api, &obj, kind)
        }
        (Payload::Jq { code, filter }, _) => jq_patch(&api, op, code, filter.as_ref(), jq_library),
        (Payload::Patch(patch), _) => {
            let p = PatchParams::default();
            let res = match &op.subresource {
                Some(sub) => api.patch_subresource(sub, &op.name, patch, &p),
                None => api.patch(&op.name, patch, &p),
            };
            res.map(drop).map_err(kube)
        }
        (Payload::Nothing, kind) => delete(&api, &op.name, kind),
    };
    match res {
        Err(ApplyError::Kube { error, .. }) if error.is_not_found() && ignores_missing(op) => {
            Ok(())
        }
        other => other,
    }
}

/// `ignoreMissingObject` applies to the patch operations only.
fn ignores_missing(op: &Operation) -> bool {
    op.ignore_missing_object && !op.kind.is_create()
}

/// An API error of anything but a create's POST.
fn kube(error: KubeError) -> ApplyError {
    ApplyError::Kube {
        error,
        create: false,
    }
}

/// The object with the namespace it will be created in (the top-level
/// `namespace` fills a missing `metadata.namespace`).
fn with_namespace(obj: &Value, ns: &str, namespaced: bool) -> Value {
    let mut obj = obj.clone();
    if namespaced && !ns.is_empty() && obj["metadata"]["namespace"].is_null() {
        obj["metadata"]["namespace"] = Value::from(ns);
    }
    obj
}

/// Metadata the API server sets and a create must not carry.
const SERVER_METADATA: [&str; 8] = [
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Drops [`SERVER_METADATA`] from `obj`'s metadata.
fn without_server_metadata(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_METADATA {
            meta.remove(field);
        }
    }
}

fn create(api: &Api, obj: &Value, kind: OperationKind) -> Result<(), ApplyError> {
    match api.create(obj) {
        Ok(_) => Ok(()),
        Err(e) if e.is_conflict() && kind == OperationKind::CreateIfNotExists => Ok(()),
        Err(e) if e.is_conflict() && kind == OperationKind::CreateOrUpdate => update(api, obj),
        Err(error) => Err(ApplyError::Kube {
            error,
            create: true,
        }),
    }
}

/// CreateOrUpdate's update: PUT the given object over the current one.
fn update(api: &Api, obj: &Value) -> Result<(), ApplyError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let mut last = None;
    for _ in 0..CONFLICT_ATTEMPTS {
        let current = match api.get(name) {
            Ok(c) => c,
            // Deleted meanwhile: create it after all.
            Err(e) if e.is_not_found() => match api.create(obj) {
                Ok(_) => return Ok(()),
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(kube(e)),
            },
            Err(e) => return Err(kube(e)),
        };
        match api.replace(name, &over(obj, &current)) {
            Ok(_) => return Ok(()),
            Err(e) if e.is_conflict() => last = Some(e),
            Err(e) => return Err(kube(e)),
        }
    }
    Err(gave_up(last))
}

/// `obj` carrying `current`'s resourceVersion, and its status unless `obj` has one.
fn over(obj: &Value, current: &Value) -> Value {
    let mut new = obj.clone();
    new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    if new.get("status").is_none() {
        if let Some(status) = current.get("status") {
            new["status"] = status.clone();
        }
    }
    new
}

fn gave_up(last: Option<KubeError>) -> ApplyError {
    ApplyError::Conflict {
        attempts: CONFLICT_ATTEMPTS,
        last,
    }
}

fn delete(api: &Api, name: &str, kind: OperationKind) -> Result<(), ApplyError> {
    let propagation = match kind {
        OperationKind::DeleteInBackground => Propagation::Background,
        OperationKind::DeleteNonCascading => Propagation::Orphan,
        _ => Propagation::Foreground,
    };
    match api.delete(name, Some(propagation)) {
        Ok(()) => {}
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(kube(e)),
    }
    if propagation == Propagation::Foreground {
        wait_gone(api, name, DELETE_WAIT)?;
    }
    Ok(())
}

/// Polls until GET answers NotFound: first at once, then every 50 ms growing to 1 s.
fn wait_gone(api: &Api, name: &str, limit: Duration) -> Result<(), ApplyError> {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(50);
    loop {
        match api.get(name) {
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(kube(e)),
            Ok(_) if Instant::now() >= deadline => {
                return Err(ApplyError::StillPresent { waited: limit });
            }
            Ok(_) => std::thread::sleep(pause),
        }
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

fn jq_patch(
    api: &Api,
    op: &Operation,
    code: &str,
    compiled: Option<&JqFilter>,
    jq_library: Option<&Path>,
) -> Result<(), ApplyError> {
    let late;
    let filter = match compiled {
        Some(f) => f,
        None => {
            late = JqFilter::compile(code, jq_library, &[])
                .map_err(|e| ApplyError::Jq(e.to_string()))?;
            &late
        }
    };
    let mut last = None;
    for _ in 0..CONFLICT_ATTEMPTS {
        let current = api.get(&op.name).map_err(kube)?;
        let new = filtered(filter, &current)?;
        if new == current {
            return Ok(());
        }
        let res = match &op.subresource {
            Some(sub) => api.replace_subresource(sub, &op.name, &new),
            None => api.replace(&op.name, &new),
        };
        match res {
            Ok(_) => return Ok(()),
            Err(e) if e.is_conflict() => last = Some(e),
            Err(e) => return Err(kube(e)),
        }
    }
    Err(gave_up(last))
}

/// The filter's result, which must be one object.
fn filtered(filter: &JqFilter, current: &Value) -> Result<Value, ApplyError> {
    let new = filter
        .apply(current)
        .map_err(|e| ApplyError::Jq(format!("jqFilter failed: {e}")))?;
    if !new.is_object() {
        let what = match &new {
            Value::Array(_) => "an array (several outputs?)",
            Value::Null => "null (no output?)",
            _ => "not an object",
        };
        return Err(ApplyError::NotAnObject {
            what,
            result: new.to_string(),
        });
    }
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_metadata_is_dropped_and_the_rest_kept() {
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "a", "namespace": "n", "labels": {"x": "y"}, "annotations": {"k": "v"},
            "resourceVersion": "7", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl"}], "generation": 2},
            "data": {"k": "v"}});
        without_server_metadata(&mut obj);
        assert_eq!(
            obj["metadata"],
            json!({"name": "a", "namespace": "n", "labels": {"x": "y"}, "annotations": {"k": "v"}})
        );
        assert_eq!(obj["data"], json!({"k": "v"}));
    }
}
