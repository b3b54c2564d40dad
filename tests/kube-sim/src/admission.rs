//! Admission webhooks as kube-apiserver calls them on create, update (PUT,
//! PATCH, apply) and delete: first every matching MutatingWebhookConfiguration
//! webhook (their JSONPatch answers applied in turn), then every matching
//! ValidatingWebhookConfiguration webhook on the final object. Each call is an
//! `admission.k8s.io/v1` AdmissionReview over HTTPS (`webhook_client`); a
//! failed call follows the webhook's `failurePolicy` (Fail by default); a
//! denial becomes the Status a real server returns; `warnings` are collected
//! for `Warning:` response headers. Matching lives in `admission_match`.

use crate::admission_match::{self as matching, select};
use crate::registry::ResourceType;
use crate::server::Shared;
use crate::status::ApiError;
use crate::webhook_client::{self as client, CallError};
use base64::Engine;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::time::Duration;

/// What is being admitted (everything but the objects).
#[derive(Debug, Clone)]
pub struct Attrs {
    /// CREATE, UPDATE or DELETE.
    pub operation: &'static str,
    pub rt: ResourceType,
    /// The version the client used.
    pub version: String,
    pub sub: Option<String>,
    pub ns: String,
    pub name: String,
    pub dry_run: bool,
    /// CreateOptions / UpdateOptions / PatchOptions / DeleteOptions.
    pub options: Value,
}

/// Warnings gathered from webhooks, in call order.
pub type Warnings = Vec<String>;

/// The user every kube-sim request is attributed to (kube-sim does not authenticate users).
fn user_info() -> Value {
    json!({"username": "kube-sim-user", "groups": ["system:masters", "system:authenticated"]})
}

/// Whether any webhook configuration could apply: the cheap check that keeps
/// the write path unchanged when none is stored.
pub fn any_configured(shared: &Shared, rt: &ResourceType) -> bool {
    if matching::exempt(rt) {
        return false;
    }
    let st = shared.store();
    [
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    ]
    .iter()
    .any(|p| {
        st.registry
            .by_path("admissionregistration.k8s.io", "v1", p)
            .is_some_and(|rt| !st.list(rt).is_empty())
    })
}

/// One webhook chosen for this request, with its resolved endpoint.
struct Planned {
    hook: Value,
    version: String,
    endpoint: Result<client::Endpoint, CallError>,
}

impl Planned {
    fn name(&self) -> &str {
        self.hook["name"].as_str().unwrap_or("")
    }
    fn timeout_secs(&self) -> u64 {
        self.hook["timeoutSeconds"]
            .as_u64()
            .unwrap_or(10)
            .clamp(1, 30)
    }
    fn ignores_failures(&self) -> bool {
        self.hook["failurePolicy"].as_str() == Some("Ignore")
    }
}

fn plan(
    shared: &Shared,
    plural: &str,
    a: &Attrs,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Vec<Planned> {
    let st = shared.store();
    let req = matching::Request {
        operation: a.operation,
        rt: &a.rt,
        version: &a.version,
        sub: a.sub.as_deref(),
        ns: &a.ns,
        object: obj,
        old,
    };
    select(&st, plural, &req)
        .into_iter()
        .map(|(hook, version)| {
            let timeout = hook["timeoutSeconds"].as_u64().unwrap_or(10);
            let endpoint = client::resolve(&st, &hook["clientConfig"], timeout);
            Planned {
                hook,
                version,
                endpoint,
            }
        })
        .collect()
}

/// Runs the mutating webhooks on `obj` (in the client's version); returns the mutated object.
pub fn mutate(
    shared: &Shared,
    a: &Attrs,
    mut obj: Value,
    old: Option<&Value>,
    warnings: &mut Warnings,
) -> Result<Value, ApiError> {
    for p in plan(shared, "mutatingwebhookconfigurations", a, Some(&obj), old) {
        let answer = call(shared, a, &p, Some(&obj), old, warnings);
        if let Some(patched) = answer.map_err(|e| e.with_warnings(warnings))? {
            obj = patched;
        }
    }
    Ok(obj)
}

/// Runs the validating webhooks on the final object (None for DELETE).
pub fn validate(
    shared: &Shared,
    a: &Attrs,
    obj: Option<&Value>,
    old: Option<&Value>,
    warnings: &mut Warnings,
) -> Result<(), ApiError> {
    for p in plan(shared, "validatingwebhookconfigurations", a, obj, old) {
        call(shared, a, &p, obj, old, warnings).map_err(|e| e.with_warnings(warnings))?;
    }
    Ok(())
}

/// DELETE: mutating then validating webhooks with `oldObject` only (patches do not apply).
pub fn on_delete(
    shared: &Shared,
    a: &Attrs,
    old: &Value,
    warnings: &mut Warnings,
) -> Result<(), ApiError> {
    for plural in [
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    ] {
        for p in plan(shared, plural, a, None, Some(old)) {
            call(shared, a, &p, None, Some(old), warnings)
                .map_err(|e| e.with_warnings(warnings))?;
        }
    }
    Ok(())
}

/// One webhook call with its failure policy applied. Ok(Some) carries a patched object.
fn call(
    shared: &Shared,
    a: &Attrs,
    p: &Planned,
    obj: Option<&Value>,
    old: Option<&Value>,
    warnings: &mut Warnings,
) -> Result<Option<Value>, ApiError> {
    let side_effects = p.hook["sideEffects"].as_str().unwrap_or("Unknown");
    if a.dry_run && !matches!(side_effects, "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            p.name()
        )));
    }
    match exchange(shared, a, p, obj, old) {
        Ok(resp) => answer(shared, a, p, obj, resp, warnings),
        Err(_) if p.ignores_failures() => Ok(None),
        Err(e) => Err(ApiError::new(
            500,
            "InternalError",
            format!(
                "Internal error occurred: failed calling webhook {:?}: failed to call webhook: {e}",
                p.name()
            ),
        )),
    }
}

/// The objects at the webhook's version.
fn at_version(
    shared: &Shared,
    a: &Attrs,
    version: &str,
    obj: Option<&Value>,
) -> Result<Value, CallError> {
    match obj {
        None => Ok(Value::Null),
        Some(o) => {
            convert(shared, a, version, o.clone()).map_err(|e| CallError::Transport(e.message))
        }
    }
}

/// The object at `version`; a `scale` subresource's Scale object is never converted.
fn convert(shared: &Shared, a: &Attrs, version: &str, obj: Value) -> Result<Value, ApiError> {
    if a.sub.as_deref() == Some("scale") {
        return Ok(obj);
    }
    crate::conversion::to_version(shared, &a.rt, version, obj)
}

fn review(
    shared: &Shared,
    a: &Attrs,
    p: &Planned,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Result<Value, CallError> {
    let rt = &a.rt;
    let gvk = |v: &str| match a.sub.as_deref() {
        Some("scale") => json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        _ => json!({"group": rt.group, "version": v, "kind": rt.kind}),
    };
    let gvr = |v: &str| json!({"group": rt.group, "version": v, "resource": rt.plural});
    let mut req = json!({
        "uid": crate::util::new_uid(),
        "kind": gvk(&p.version),
        "resource": gvr(&p.version),
        "requestKind": gvk(&a.version),
        "requestResource": gvr(&a.version),
        "operation": a.operation,
        "userInfo": user_info(),
        "object": at_version(shared, a, &p.version, obj)?,
        "oldObject": at_version(shared, a, &p.version, old)?,
        "dryRun": a.dry_run,
        "options": a.options,
    });
    if let Some(sub) = &a.sub {
        req["subResource"] = json!(sub);
        req["requestSubResource"] = json!(sub);
    }
    if !a.name.is_empty() {
        req["name"] = json!(a.name);
    }
    if !a.ns.is_empty() && rt.namespaced {
        req["namespace"] = json!(a.ns);
    }
    Ok(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}))
}

/// Sends the review and returns the checked `response` part.
fn exchange(
    shared: &Shared,
    a: &Attrs,
    p: &Planned,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Result<Value, CallError> {
    let ep = p.endpoint.clone()?;
    let body = review(shared, a, p, obj, old)?;
    let uid = body["request"]["uid"].clone();
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let raw = client::post_json(&ep, &bytes, Duration::from_secs(p.timeout_secs()))?;
    let answer: Value = serde_json::from_slice(&raw)
        .map_err(|e| CallError::Transport(format!("received invalid webhook response: {e}")))?;
    if answer["apiVersion"] != "admission.k8s.io/v1" || answer["kind"] != "AdmissionReview" {
        return Err(CallError::Transport(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            answer["apiVersion"].as_str().unwrap_or(""),
            answer["kind"].as_str().unwrap_or("")
        )));
    }
    let resp = answer["response"].clone();
    if resp["uid"] != uid {
        return Err(CallError::Transport(format!(
            "expected response.uid={}, got {}",
            uid.as_str().unwrap_or(""),
            resp["uid"].as_str().unwrap_or("")
        )));
    }
    Ok(resp)
}

/// Applies an answer: warnings, denial, patch.
fn answer(
    shared: &Shared,
    a: &Attrs,
    p: &Planned,
    obj: Option<&Value>,
    resp: Value,
    warnings: &mut Warnings,
) -> Result<Option<Value>, ApiError> {
    warnings.extend(
        resp["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_string)),
    );
    if resp["allowed"] != true {
        return Err(denial(p.name(), &resp["status"]));
    }
    let (Some(patch), Some(obj)) = (resp["patch"].as_str(), obj) else {
        return Ok(None);
    };
    let internal = |m: String| {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {m}"),
        )
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| {
            internal(format!(
                "admission webhook {:?}: patch is not base64: {e}",
                p.name()
            ))
        })?;
    let ops: json_patch::Patch = serde_json::from_slice(&raw).map_err(|e| {
        internal(format!(
            "admission webhook {:?}: patch is not a JSONPatch: {e}",
            p.name()
        ))
    })?;
    let mut at =
        at_version(shared, a, &p.version, Some(obj)).map_err(|e| internal(e.to_string()))?;
    json_patch::patch(&mut at, &ops).map_err(|e| internal(e.to_string()))?;
    convert(shared, a, &a.version, at).map(Some)
}

/// The Status a denial turns into (`webhookerrors.ToStatusErr` in kube-apiserver).
fn denial(name: &str, status: &Value) -> ApiError {
    let by = format!("admission webhook {name:?} denied the request");
    let code = status["code"].as_u64().filter(|c| *c >= 400).unwrap_or(403) as u16;
    let reason = status["reason"].as_str().unwrap_or("").to_string();
    let message = match status["message"].as_str().filter(|m| !m.is_empty()) {
        Some(m) => format!("{by}: {m}"),
        None if !reason.is_empty() => format!("{by}: {reason}"),
        None => format!("{by} without explanation"),
    };
    let mut e = ApiError::new(code, "", message);
    e.reason = Cow::Owned(reason);
    e.details = status.get("details").cloned();
    e
}

/// `Warning: 299 - "text"` header values.
pub fn warning_headers(warnings: &[String]) -> Vec<(String, String)> {
    warnings
        .iter()
        .map(|w| {
            let text: String = w.chars().filter(|c| !c.is_control()).collect();
            let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
            ("Warning".to_string(), format!("299 - \"{escaped}\""))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_messages_as_kube_apiserver_words_them() {
        let e = denial("a.example.com", &json!({"code": 403, "message": "no"}));
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                403,
                "admission webhook \"a.example.com\" denied the request: no"
            )
        );
        let e = denial("b", &json!(null));
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                403,
                "admission webhook \"b\" denied the request without explanation"
            )
        );
        let e = denial("c", &json!({"code": 200, "reason": "Invalid"}));
        assert_eq!((e.code, &*e.reason), (403, "Invalid"));
        assert_eq!(
            e.message,
            "admission webhook \"c\" denied the request: Invalid"
        );
    }

    #[test]
    fn warnings_are_quoted() {
        assert_eq!(
            warning_headers(&["say \"hi\"".into()])[0].1,
            "299 - \"say \\\"hi\\\"\""
        );
    }
}
