//! Discovery endpoints: `/version`, `/api`, `/apis`, `/apis/<g>` and the
//! per-group-version resource lists (`/api/v1`, `/apis/<g>/<v>`). Everything is
//! derived from the live registry, so CRDs appear as soon as they are created.
//! Aggregated discovery is not offered; clients fall back to these lists. The
//! OpenAPI documents live in `openapi`.

use crate::registry::{Registry, ResourceType};
use serde_json::{Value, json};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "35", "gitVersion": "v1.35.0-kube-sim",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn api_versions(host: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]
    })
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn api_groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, or None when the group is unknown.
pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let (g, vs) = reg.groups().into_iter().find(|(g, _)| g == group)?;
    let mut v = group_json(&g, &vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

fn resource_entries(t: &ResourceType) -> Vec<Value> {
    let mut main = json!({
        "name": t.plural, "singularName": t.singular, "namespaced": t.namespaced,
        "kind": t.kind, "verbs": t.verbs,
        "storageVersionHash": format!("{:016x}", fnv(t.key().as_bytes()))[..12].to_string(),
    });
    if !t.short_names.is_empty() {
        main["shortNames"] = json!(t.short_names);
    }
    if !t.categories.is_empty() {
        main["categories"] = json!(t.categories);
    }
    let mut out = vec![main];
    let sub_verbs = json!(["get", "patch", "update"]);
    if t.status {
        out.push(
            json!({"name": format!("{}/status", t.plural), "singularName": "",
            "namespaced": t.namespaced, "kind": t.kind, "verbs": sub_verbs}),
        );
    }
    if t.scale.is_some() {
        out.push(
            json!({"name": format!("{}/scale", t.plural), "singularName": "",
            "namespaced": t.namespaced, "group": "autoscaling", "version": "v1",
            "kind": "Scale", "verbs": sub_verbs}),
        );
    }
    out
}

/// `/api/v1` or `/apis/<g>/<v>`, or None when nothing is served there.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types = reg.in_group_version(group, version);
    if types.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<Value> = types.iter().flat_map(|t| resource_entries(t)).collect();
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// FNV-1a, for stable short hashes.
pub fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
