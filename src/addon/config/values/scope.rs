//! One values scope ("global" or one module), spec §3.2 [HEAD order]:
//! `static ← defaults(config schema) ← config ← defaults(values schema) ← stored patches`.
//!
//! A [`Scope`] holds the inputs; every view is computed on demand and nothing is mutated
//! by a failed hook patch: `try_*` return the new state and the caller stores it.

use super::error::{PatchTarget, ValuesError};
use super::merge::merge;
use super::patch::{PatchOp, apply_lenient, apply_strict, compact, root_of};
use super::schema::{SchemaKind, Schemas};
use serde_json::{Map, Value};

/// One values scope and everything needed to compute its views.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// "global" or the module's values key.
    pub(crate) key: String,
    /// Merged static section (the caller merges the values.yaml files).
    pub(crate) static_values: Value,
    /// Config values (ConfigMap section), an object.
    pub(crate) config: Value,
    /// Compacted stored values patches (paths include "/<key>/...").
    pub(crate) patches: Vec<PatchOp>,
    /// The scope's OpenAPI schemas.
    pub(crate) schemas: Schemas,
}

impl Scope {
    /// A scope with empty config and no stored patches.
    pub(crate) fn new(key: &str, static_values: Value, schemas: Schemas) -> Scope {
        Scope {
            key: key.to_string(),
            static_values,
            config: Value::Object(Map::new()),
            patches: Vec::new(),
            schemas,
        }
    }

    /// Config values view: exactly the config section as stored (what the user set).
    pub(crate) fn config_values(&self) -> Value {
        self.config.clone()
    }

    /// Effective section: static ← defaults(config schema) ← config ← defaults(values
    /// schema) ← stored patches (lenient). Returns the section (not wrapped).
    pub(crate) fn values(&self) -> Result<Value, ValuesError> {
        let mut section = as_object(&self.static_values);
        self.schemas
            .apply_defaults(SchemaKind::Config, &mut section);
        merge(&mut section, &self.config);
        self.schemas
            .apply_defaults(SchemaKind::Values, &mut section);
        let mut doc = self.wrap(section);
        apply_lenient(&mut doc, &self.patches)
            .map_err(|op| self.failed(PatchTarget::Stored, op))?;
        self.unwrap_section(doc)
    }

    /// A hook's CONFIG_VALUES_JSON_PATCH ops (paths "/<key>/..."): applied strictly to
    /// `{"<key>": config}`, the result (plus config-schema defaults) validated with the
    /// config schema. Ok(new config section); on Err nothing changed.
    pub(crate) fn try_config_patch(&self, ops: &[PatchOp]) -> Result<Value, ValuesError> {
        self.check_roots(ops)?;
        let mut doc = self.wrap(self.config.clone());
        apply_strict(&mut doc, ops).map_err(|op| self.failed(PatchTarget::Config, op))?;
        let section = self.unwrap_section(doc)?;
        self.check_config(&section)?;
        Ok(section)
    }

    /// A hook's VALUES_JSON_PATCH ops: applied strictly to `{"<key>": values()}`, the
    /// result validated with the values schema; Ok(new compacted stored patches).
    pub(crate) fn try_values_patch(&self, ops: &[PatchOp]) -> Result<Vec<PatchOp>, ValuesError> {
        self.check_roots(ops)?;
        let mut doc = self.wrap(self.values()?);
        apply_strict(&mut doc, ops).map_err(|op| self.failed(PatchTarget::Values, op))?;
        let section = self.unwrap_section(doc)?;
        self.schemas
            .validate(SchemaKind::Values, &section)
            .map_err(|e| self.named(e))?;
        Ok(compact(&self.patches, ops))
    }

    /// Checks a new config section (from the ConfigMap) against the config schema, with
    /// the config schema's defaults filled in first.
    pub(crate) fn check_config(&self, config: &Value) -> Result<(), ValuesError> {
        let mut section = config.clone();
        self.schemas
            .apply_defaults(SchemaKind::Config, &mut section);
        self.schemas
            .validate(SchemaKind::Config, &section)
            .map_err(|e| self.named(e))
    }

    /// Helm check: `values` (normally `values()`) validated with the helm schema.
    pub(crate) fn check_helm(&self, values: &Value) -> Result<(), ValuesError> {
        self.schemas
            .validate(SchemaKind::Helm, values)
            .map_err(|e| self.named(e))
    }

    /// Validation errors carry the schemas' scope; `Schemas::none()` has an empty one.
    fn named(&self, mut error: ValuesError) -> ValuesError {
        if let ValuesError::Invalid { scope, .. } = &mut error
            && scope.is_empty()
        {
            scope.clone_from(&self.key);
        }
        error
    }

    fn failed(&self, target: PatchTarget, op: super::error::OpError) -> ValuesError {
        ValuesError::Apply {
            scope: self.key.clone(),
            target,
            op,
        }
    }

    fn wrap(&self, section: Value) -> Value {
        let mut map = Map::new();
        map.insert(self.key.clone(), section);
        Value::Object(map)
    }

    /// The scope's section out of a patched `{"<key>": ..}` document; a removed section is
    /// an empty object, a non-object is an error.
    fn unwrap_section(&self, doc: Value) -> Result<Value, ValuesError> {
        let section = match doc {
            Value::Object(mut map) => map.remove(&self.key).unwrap_or(Value::Null),
            other => other,
        };
        match section {
            Value::Null => Ok(Value::Object(Map::new())),
            v @ Value::Object(_) => Ok(v),
            _ => Err(ValuesError::NotAnObject {
                scope: self.key.clone(),
            }),
        }
    }

    /// Every op must address this scope: `/<key>` or `/<key>/...`.
    fn check_roots(&self, ops: &[PatchOp]) -> Result<(), ValuesError> {
        match ops
            .iter()
            .find(|op| root_of(op) != self.key || !op.path().starts_with('/'))
        {
            Some(op) => Err(ValuesError::ForeignPath {
                scope: self.key.clone(),
                path: op.path().to_string(),
            }),
            None => Ok(()),
        }
    }
}

/// The value if it is an object, else an empty object (static sections are maps).
fn as_object(v: &Value) -> Value {
    match v {
        Value::Object(_) => v.clone(),
        _ => Value::Object(Map::new()),
    }
}

/// Stable checksum (32 hex digits, 128-bit FNV-1a) of the compact JSON text of `v`;
/// object keys are sorted (serde_json without `preserve_order`), so equal values match.
pub(crate) fn checksum(v: &Value) -> String {
    let mut h = crate::fnv::Fnv128::new();
    h.bytes(v.to_string().as_bytes());
    h.hex()
}
