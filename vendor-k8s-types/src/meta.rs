//! Object metadata and list metadata (`metav1.ObjectMeta`, `metav1.ListMeta`) and a
//! generic list envelope.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `metav1.ObjectMeta`, reduced to the fields hooks and monitors look at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub generate_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
}

/// `metav1.ListMeta`: the collection's resourceVersion and the paging token.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// The resourceVersion of the snapshot this list (and all its pages) came from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Token for the next page; empty on the last page.
    #[serde(default, rename = "continue", skip_serializing_if = "String::is_empty")]
    pub continue_token: String,
    /// Items left after this page, when the server knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_item_count: Option<i64>,
}

/// Any `*List` answer of a collection GET: list metadata plus items (kept as `T`,
/// usually `serde_json::Value`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub struct ObjectList<T> {
    #[serde(default)]
    pub metadata: ListMeta,
    /// `null` from the server decodes as an empty list.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub items: Vec<T>,
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}
