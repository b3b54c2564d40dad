//! Hook configuration: what a hook prints when run with `--config`, parsed and
//! validated into typed bindings (flant's config v0 and v1).
//!
//! The pipeline mirrors flant's: read the text as YAML or JSON (first YAML
//! document only), pick the schema version from `configVersion`, check the
//! raw value against the schema rules (strict keys, types, enums, sizes) while
//! converting it into the structs of `types.rs`, run the cross-field checks
//! (`includeSnapshotsFrom` names, webhook names, rules), then merge groups.
//! Every problem is collected into one [`ConfigError`].
//!
//! Layout: `v1.rs` (top level, schedule, settings), `kubernetes.rs`,
//! `admission.rs`, `conversion.rs`, `v0.rs`, `selectors.rs` (label, name,
//! field and namespace selectors), `group.rs` (snapshot names and group merge),
//! `validate.rs` (the schema-like checker), `k8s_names.rs`, `duration.rs`.
//! jqFilter is kept as text: the hook loader compiles it.
//!
//! Differences from flant (for the README's list):
//! - an explicit `configVersion: v0` is accepted as v0 (flant rejects it);
//! - `settings` fields are each optional (flant effectively requires both), and
//!   a bad `executionBurst` is reported as such (flant names the interval);
//! - mutating webhooks get the same Kubernetes checks as validating ones (name,
//!   timeout 1-30, rules), so a bad one fails at startup, not at registration;
//! - empty `kind`, `crdName`, conversion names and versions are errors;
//! - YAML is read as YAML 1.2 except that bool fields also take the YAML 1.1
//!   words (yes/no/on/off) and the strings "true"/"false", as flant ends up
//!   doing; a string field given `yes` keeps "yes" (flant would get "true").

mod admission;
mod conversion;

mod error;
mod group;
mod k8s_names;
mod kubernetes;
mod selectors;
mod types;
mod v0;
mod v1;
mod validate;

#[cfg(test)]
mod tests_invalid;
#[cfg(test)]
mod tests_valid;

use serde::Deserialize;
use serde_json::Value;

pub(crate) use crate::duration::go_duration;
pub(crate) use error::{ConfigError, Problem};
pub use types::*;

/// Parse and validate a hook's `--config` output (YAML or JSON; only the first
/// YAML document is read). `hook_name` is used in error messages only.
pub fn parse(hook_name: &str, text: &str) -> Result<HookConfig, ConfigError> {
    parse_as(hook_name, text, HookKind::Shell)
}

/// [`parse`] for a hook of `kind`: addon-operator's global and module hooks may also
/// have their lifecycle bindings (`beforeAll: ORDER`, `beforeHelm: ORDER`, ...).
pub(crate) fn parse_as(
    hook_name: &str,
    text: &str,
    kind: HookKind,
) -> Result<HookConfig, ConfigError> {
    let fail = |message: String| {
        let problem = Problem {
            at: String::new(),
            field: String::new(),
            message,
        };
        Err(ConfigError::new(hook_name, vec![problem]))
    };
    let value = match load_document(text) {
        Ok(v) => v,
        Err(e) => return fail(format!("cannot read --config output as YAML or JSON: {e}")),
    };
    let map = match value {
        Value::Object(m) => m,
        Value::Null => {
            return fail("--config output is empty: expected a YAML or JSON object".into());
        }
        other => {
            let kind = validate::type_name(&other);
            return fail(format!("config must be an object, got {kind:?}"));
        }
    };
    let mut problems = Vec::new();
    let config = match detect_version(&map, &mut problems) {
        Some(ConfigVersion::V1) => Some(v1::parse(&map, &mut problems, kind)),
        Some(ConfigVersion::V0) => Some(v0::parse(&map, &mut problems, kind)),
        None => None,
    };
    match config {
        Some(config) if problems.is_empty() => Ok(config),
        _ => Err(ConfigError::new(hook_name, problems)),
    }
}

/// The first document of a YAML stream (JSON is YAML too). Text that looks like
/// a JSON object is read as JSON first, so JSON with tab indentation works.
fn load_document(text: &str) -> Result<Value, String> {
    crate::yaml_depth::check(text)?;
    if text.trim_start().starts_with('{') {
        match serde_json::from_str(text) {
            Ok(v) => return Ok(v),
            // The YAML scanner would take seconds on what JSON refused for depth.
            Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
                return Err(crate::yaml_depth::too_deep());
            }
            Err(_) => {}
        }
    }
    match serde_yaml::Deserializer::from_str(text).next() {
        None => Ok(Value::Null),
        Some(doc) => Value::deserialize(doc).map_err(|e| {
            let text = e.to_string();
            if text.starts_with("recursion limit exceeded") {
                crate::yaml_depth::too_deep()
            } else {
                text
            }
        }),
    }
}

/// `configVersion`: absent means v0, `v1` means v1. Explicit `v0` is accepted
/// as v0: flant rejects it (its v0 schema forbids the key), which we fix.
fn detect_version(
    map: &serde_json::Map<String, Value>,
    probs: &mut Vec<Problem>,
) -> Option<ConfigVersion> {
    let mut c = validate::Checker::new(probs, "");
    match map.get("configVersion") {
        None => Some(ConfigVersion::V0),
        Some(Value::String(s)) if s == "v1" => Some(ConfigVersion::V1),
        Some(Value::String(s)) if s == "v0" => Some(ConfigVersion::V0),
        Some(Value::String(s)) => {
            let msg = format!("'configVersion' value '{s}' is unsupported; accepted: v1 (or v0)");
            c.err("configVersion", msg);
            None
        }
        Some(Value::Null) => {
            c.err(
                "configVersion",
                "missing 'configVersion' value; accepted: v1 (or v0)",
            );
            None
        }
        Some(other) => {
            let kind = validate::type_name(other);
            let msg = format!("string value is expected for key 'configVersion', got {kind:?}");
            c.err("configVersion", msg);
            None
        }
    }
}
