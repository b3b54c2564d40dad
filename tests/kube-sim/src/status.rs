//! API errors and their wire form, the `meta/v1 Status` object. Every failure
//! kube-sim reports over HTTP (and in watch ERROR events) goes through here so
//! codes, reasons and messages match what a real API server sends.

use serde_json::{Value, json};
use std::borrow::Cow;

/// One failed API call: HTTP code, machine-readable reason, human message.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    /// Usually one of the fixed reasons; an admission webhook may name its own.
    pub reason: Cow<'static, str>,
    pub message: String,
    pub details: Option<Value>,
    /// Admission webhook warnings gathered before the failure (`Warning` headers).
    pub warnings: Vec<String>,
}

impl ApiError {
    /// An error with no `details`.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason: Cow::Borrowed(reason),
            message: message.into(),
            details: None,
            warnings: Vec::new(),
        }
    }

    /// Carries webhook warnings to the error response.
    pub fn with_warnings(mut self, warnings: &[String]) -> ApiError {
        self.warnings = warnings.to_vec();
        self
    }

    /// Attaches `details` naming the object (`kind` is the resource plural).
    pub fn about(mut self, group: &str, plural: &str, name: &str) -> ApiError {
        let mut d = json!({ "name": name, "kind": plural });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    /// Adds `details.causes` (`reason`, `message`, `field` each), as a 422 carries them.
    pub fn with_causes(mut self, causes: &[(&str, String, &str)]) -> ApiError {
        let list: Vec<Value> = causes
            .iter()
            .map(|(reason, message, field)| json!({"reason": reason, "message": message, "field": field}))
            .collect();
        let mut d = self.details.take().unwrap_or_else(|| json!({}));
        d["causes"] = Value::Array(list);
        self.details = Some(d);
        self
    }

    /// 404 `NotFound` for an object.
    pub fn not_found(group: &str, plural: &str, name: &str) -> ApiError {
        let what = qualified(group, plural);
        ApiError::new(404, "NotFound", format!("{what} \"{name}\" not found"))
            .about(group, plural, name)
    }

    /// 409 `AlreadyExists` on create.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> ApiError {
        let what = qualified(group, plural);
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{what} \"{name}\" already exists"),
        )
        .about(group, plural, name)
    }

    /// 409 `Conflict` on a stale resourceVersion.
    pub fn conflict(group: &str, plural: &str, name: &str) -> ApiError {
        let what = qualified(group, plural);
        let msg = format!(
            "Operation cannot be fulfilled on {what} \"{name}\": the object has been \
             modified; please apply your changes to the latest version and try again"
        );
        ApiError::new(409, "Conflict", msg).about(group, plural, name)
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 422 `Invalid`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(422, "Invalid", message)
    }

    /// 410 `Expired`: a resourceVersion or continue token older than history.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// An injected or generic failure for `code`, with the usual reason.
    pub fn for_code(code: u16) -> ApiError {
        let reason = reason_for(code);
        ApiError::new(code, reason, format!("kube-sim injected failure: {reason}"))
    }

    /// The `Status` object sent on the wire.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // Go's Status omits an empty reason.
            if let Some(m) = s.as_object_mut() {
                m.remove("reason");
            }
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

/// `configmaps` or `deployments.apps`, as messages name a resource.
fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// The `reason` a real server uses for an HTTP code.
pub fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// A `Status` with `status: Success`, as DELETE returns for immediate deletion.
pub fn success(group: &str, plural: &str, name: &str, uid: &Value) -> Value {
    let mut d = json!({ "name": name, "kind": plural, "uid": uid });
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": d,
    })
}
