//! The resource registry: which kinds exist, under which group/versions, with
//! which plural/singular/short names, scope and verbs. Built-in kinds come from
//! the static table in `builtins`; creating a CustomResourceDefinition adds its resource for every
//! served version. Discovery, routing and the store all consult this.

use crate::builtins::{self, FULL};
use crate::util::version_rank;
use serde_json::Value;

/// Where a custom resource keeps its replica counts for the `scale` subresource.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalePaths {
    pub spec: String,
    pub status: String,
    pub selector: Option<String>,
}

/// One resource (a plural under an API group) and everything discovery says about it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    pub group: String,
    /// Served versions, preferred first.
    pub versions: Vec<String>,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub verbs: Vec<String>,
    /// Has a `status` subresource (status is ignored on main-resource writes).
    pub status: bool,
    /// Has a `scale` subresource.
    pub scale: Option<ScalePaths>,
    /// Defined by a CRD (removed again when the CRD is deleted).
    pub crd: bool,
}

impl ResourceType {
    /// Store key: `group/plural` (`/configmaps` for the core group).
    pub fn key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// `v1` or `apps/v1` for a version.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// The preferred version.
    pub fn preferred(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }
}

/// Splits `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// The set of known resources.
#[derive(Clone, Debug)]
pub struct Registry {
    types: Vec<ResourceType>,
}

impl Registry {
    /// The built-in kinds only.
    pub fn builtin() -> Registry {
        Registry {
            types: builtins::all(),
        }
    }

    /// Lookup by URL parts: group, version and plural.
    pub fn by_path(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types.iter().find(|t| {
            t.group == group && t.plural == plural && t.versions.iter().any(|v| v == version)
        })
    }

    /// Lookup by an object's `apiVersion` and `kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceType> {
        let (group, version) = split_api_version(api_version);
        self.types
            .iter()
            .find(|t| t.group == group && t.kind == kind && t.versions.iter().any(|v| v == version))
    }

    /// Lookup by store key (`group/plural`).
    pub fn by_key(&self, key: &str) -> Option<&ResourceType> {
        self.types.iter().find(|t| t.key() == key)
    }

    /// Groups with their versions, preferred first: (group, versions).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            let idx = match out.iter().position(|(g, _)| *g == t.group) {
                Some(i) => i,
                None => {
                    out.push((t.group.clone(), vec![]));
                    out.len() - 1
                }
            };
            for v in &t.versions {
                if !out[idx].1.contains(v) {
                    out[idx].1.push(v.clone());
                }
            }
        }
        for (_, vs) in &mut out {
            vs.sort_by_key(|v| version_rank(v));
        }
        out
    }

    /// Resources served under one group/version.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<&ResourceType> {
        self.types
            .iter()
            .filter(|t| t.group == group && t.versions.iter().any(|v| v == version))
            .collect()
    }

    /// Adds or replaces the resource a CRD defines. Returns the new type.
    pub fn register_crd(&mut self, crd: &Value) -> Result<ResourceType, String> {
        let t = crd_resource(crd)?;
        if let Some(old) = self.types.iter().position(|x| x.key() == t.key()) {
            if !self.types[old].crd {
                return Err(format!("{} is a built-in resource", t.key()));
            }
            self.types[old] = t.clone();
        } else {
            self.types.push(t.clone());
        }
        Ok(t)
    }

    /// Removes the resource a CRD defined; returns its store key.
    pub fn unregister_crd(&mut self, crd: &Value) -> Option<String> {
        let t = crd_resource(crd).ok()?;
        let key = t.key();
        let before = self.types.len();
        self.types.retain(|x| !(x.crd && x.key() == key));
        (self.types.len() != before).then_some(key)
    }
}

/// Reads a CRD object into the resource type it defines.
pub fn crd_resource(crd: &Value) -> Result<ResourceType, String> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let text = |v: &Value, what: &str| -> Result<String, String> {
        match v.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(format!("spec.{what}: Required value")),
        }
    };
    let group = text(&spec["group"], "group")?;
    let plural = text(&names["plural"], "names.plural")?;
    let kind = text(&names["kind"], "names.kind")?;
    let served = served_versions(spec);
    if served.is_empty() {
        return Err("spec.versions: Invalid value: must have at least one served version".into());
    }
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let sub = first_subresources(spec);
    Ok(ResourceType {
        versions: served,
        list_kind: names["listKind"]
            .as_str()
            .map(str::to_string)
            .unwrap_or(format!("{kind}List")),
        singular: names["singular"]
            .as_str()
            .map(str::to_string)
            .unwrap_or(kind.to_lowercase()),
        short_names: strs(&names["shortNames"]),
        categories: strs(&names["categories"]),
        namespaced: spec["scope"].as_str() != Some("Cluster"),
        verbs: FULL.iter().map(|s| s.to_string()).collect(),
        status: sub.get("status").is_some(),
        scale: sub.get("scale").map(|s| ScalePaths {
            spec: s["specReplicasPath"]
                .as_str()
                .unwrap_or(".spec.replicas")
                .to_string(),
            status: s["statusReplicasPath"]
                .as_str()
                .unwrap_or(".status.replicas")
                .to_string(),
            selector: s["labelSelectorPath"].as_str().map(str::to_string),
        }),
        crd: true,
        group,
        kind,
        plural,
    })
}

/// Served version names, highest priority first.
fn served_versions(spec: &Value) -> Vec<String> {
    let mut out: Vec<String> = spec["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["served"].as_bool().unwrap_or(true))
                .filter_map(|v| v["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if out.is_empty() {
        if let Some(v) = spec["version"].as_str() {
            out.push(v.to_string());
        }
    }
    out.sort_by_key(|v| version_rank(v));
    out
}

/// The `subresources` of the storage version (or the first version declaring any).
fn first_subresources(spec: &Value) -> Value {
    let vs = spec["versions"].as_array().cloned().unwrap_or_default();
    let pick = vs
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true) && v.get("subresources").is_some())
        .or_else(|| vs.iter().find(|v| v.get("subresources").is_some()));
    match pick {
        Some(v) => v["subresources"].clone(),
        None => spec["subresources"].clone(),
    }
}
