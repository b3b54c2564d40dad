//! Hand-written Kubernetes API types.
//!
//! The operator treats almost every object as `serde_json::Value`; the types here are
//! the few it reads field by field: object metadata, list metadata, watch events,
//! Status errors and the discovery documents. Each struct keeps only the fields the
//! operator uses, and unknown fields are ignored when decoding.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `metav1.ObjectMeta`, reduced to the fields hooks and monitors look at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
}
