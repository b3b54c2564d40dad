//! Discovery documents: `/api` (APIVersions), `/apis` (APIGroupList) and the
//! per-group-version resource lists (APIResourceList).

use serde::{Deserialize, Serialize};

/// The answer of `GET /api`: the versions of the core group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct APIVersions {
    #[serde(default)]
    pub versions: Vec<String>,
}

/// The answer of `GET /apis`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct APIGroupList {
    #[serde(default)]
    pub groups: Vec<APIGroup>,
}

/// One API group with its served versions and the preferred one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIGroup {
    pub name: String,
    #[serde(default)]
    pub versions: Vec<GroupVersionForDiscovery>,
    #[serde(default)]
    pub preferred_version: Option<GroupVersionForDiscovery>,
}

/// `{"groupVersion": "apps/v1", "version": "v1"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupVersionForDiscovery {
    pub group_version: String,
    pub version: String,
}

/// The answer of `GET /api/v1` or `GET /apis/<group>/<version>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIResourceList {
    #[serde(default)]
    pub group_version: String,
    #[serde(default)]
    pub resources: Vec<APIResource>,
}

/// One resource (or subresource, when `name` holds a `/`) of a group-version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIResource {
    /// The plural resource name, e.g. `deployments` or `deployments/status`.
    pub name: String,
    #[serde(default)]
    pub singular_name: String,
    #[serde(default)]
    pub namespaced: bool,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub short_names: Vec<String>,
}
