//! OpenAPI endpoints, derived from the live registry (CRDs appear as soon as
//! they are created):
//! - `/openapi/v3`: an index of one document per group-version, and
//!   `/openapi/v3/api/v1`, `/openapi/v3/apis/<g>/<v>`: the documents;
//! - `/openapi/v2`: one Swagger 2.0 document for everything, as JSON or, when the
//!   client asks for it (as client-go's discovery does), as the gnostic
//!   `openapi_v2.Document` protobuf.
//!
//! Each document has, per resource, the PATCH operation with its
//! `x-kubernetes-group-version-kind` and a `fieldValidation` query parameter:
//! that is what kubectl and helm check (v3 first, v2 as the fallback) before
//! they rely on server-side field validation instead of validating against
//! schemas. The documents carry no schemas.

use crate::discovery::fnv;
use crate::protobuf::encode::{bytes_field, varint_field};
use crate::registry::Registry;
use serde_json::{Map, Value, json};

/// Content type of the protobuf form of `/openapi/v2`.
/// (Go's mime parser rejects the `@v1.0` form clients put in Accept, so the
/// answer uses `.v1.0`, as kube-apiserver does.)
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Query parameters every PATCH operation declares.
const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];

/// One resource's PATCH operation: its URL template and the kind it serves.
struct PatchOp {
    path: String,
    group: String,
    version: String,
    kind: String,
}

impl PatchOp {
    fn gvk(&self) -> Value {
        json!({"group": self.group, "version": self.version, "kind": self.kind})
    }

    /// The GVK as the YAML text gnostic stores for a vendor extension.
    fn gvk_yaml(&self) -> String {
        format!(
            "group: {:?}\nkind: {}\nversion: {}\n",
            self.group, self.kind, self.version
        )
    }
}

/// The PATCH operations of one group-version, empty when nothing is served there.
fn patch_ops(reg: &Registry, group: &str, version: &str) -> Vec<PatchOp> {
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    reg.in_group_version(group, version)
        .into_iter()
        .map(|t| {
            let scope = if t.namespaced {
                "/namespaces/{namespace}"
            } else {
                ""
            };
            PatchOp {
                path: format!("{prefix}{scope}/{}/{{name}}", t.plural),
                group: group.to_string(),
                version: version.to_string(),
                kind: t.kind.clone(),
            }
        })
        .collect()
}

/// All served (group, version) pairs, core first.
fn group_versions(reg: &Registry) -> Vec<(String, String)> {
    let mut out = vec![(String::new(), "v1".to_string())];
    for (g, vs) in reg.groups() {
        out.extend(vs.into_iter().map(|v| (g.clone(), v)));
    }
    out
}

/// `api/v1` or `apis/<g>/<v>`: the key used under `/openapi/v3`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of per-group-version documents.
pub fn v3_root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, v) in group_versions(reg) {
        let Some(doc) = v3_doc(reg, &g, &v) else {
            continue;
        };
        let hash = format!("{:016X}", fnv(doc.to_string().as_bytes()));
        let p = gv_path(&g, &v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

fn v3_operation(op: &PatchOp) -> Value {
    let params: Vec<Value> = PATCH_PARAMS
        .iter()
        .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    json!({
        "operationId": format!("patch{}", op.kind),
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": op.gvk(),
    })
}

/// `/openapi/v3/api/v1` etc., or None when nothing is served there.
pub fn v3_doc(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let ops = patch_ops(reg, group, version);
    if ops.is_empty() {
        return None;
    }
    let paths: Map<String, Value> = ops
        .iter()
        .map(|op| (op.path.clone(), json!({"patch": v3_operation(op)})))
        .collect();
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.35.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

/// Resolves an `/openapi/v3/...` tail (`api/v1`, `apis/apps/v1`) to its document.
pub fn v3_for_path(reg: &Registry, tail: &[&str]) -> Option<Value> {
    match tail {
        ["api", v] => v3_doc(reg, "", v),
        ["apis", g, v] => v3_doc(reg, g, v),
        _ => None,
    }
}

/// Every PATCH operation the server has, core first.
fn all_ops(reg: &Registry) -> Vec<PatchOp> {
    group_versions(reg)
        .iter()
        .flat_map(|(g, v)| patch_ops(reg, g, v))
        .collect()
}

/// `/openapi/v2` as Swagger 2.0 JSON.
pub fn v2_json(reg: &Registry) -> Value {
    let paths: Map<String, Value> = all_ops(reg)
        .iter()
        .map(|op| {
            let params: Vec<Value> = PATCH_PARAMS
                .iter()
                .map(|p| json!({"name": p, "in": "query", "type": "string", "uniqueItems": true}))
                .collect();
            let patch = json!({
                "operationId": format!("patch{}", op.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": op.gvk(),
            });
            (op.path.clone(), json!({"patch": patch}))
        })
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.35.0"},
        "paths": paths,
        "definitions": {},
    })
}

fn str_field(n: u64, s: &str, out: &mut Vec<u8>) {
    bytes_field(n, s.as_bytes(), out);
}

/// A gnostic `NamedAny` whose value is YAML text.
fn named_yaml(name: &str, yaml: &str) -> Vec<u8> {
    let mut any = Vec::new();
    str_field(2, yaml, &mut any);
    let mut out = Vec::new();
    str_field(1, name, &mut out);
    bytes_field(2, &any, &mut out);
    out
}

/// A `ParametersItem` holding a string query parameter.
fn query_param_pb(name: &str) -> Vec<u8> {
    let mut q = Vec::new();
    str_field(2, "query", &mut q);
    str_field(4, name, &mut q);
    str_field(6, "string", &mut q);
    varint_field(20, 1, &mut q);
    let mut non_body = Vec::new();
    bytes_field(3, &q, &mut non_body);
    let mut param = Vec::new();
    bytes_field(2, &non_body, &mut param);
    let mut item = Vec::new();
    bytes_field(1, &param, &mut item);
    item
}

/// `Responses` with one `200 OK`.
fn ok_responses_pb() -> Vec<u8> {
    let mut resp = Vec::new();
    str_field(1, "OK", &mut resp);
    let mut value = Vec::new();
    bytes_field(1, &resp, &mut value);
    let mut named = Vec::new();
    str_field(1, "200", &mut named);
    bytes_field(2, &value, &mut named);
    let mut out = Vec::new();
    bytes_field(1, &named, &mut out);
    out
}

/// A `NamedPathItem` with the PATCH `Operation`.
fn path_item_pb(op: &PatchOp) -> Vec<u8> {
    let mut o = Vec::new();
    str_field(5, &format!("patch{}", op.kind), &mut o);
    for p in PATCH_PARAMS {
        bytes_field(8, &query_param_pb(p), &mut o);
    }
    bytes_field(9, &ok_responses_pb(), &mut o);
    bytes_field(13, &named_yaml("x-kubernetes-action", "patch\n"), &mut o);
    let gvk = named_yaml("x-kubernetes-group-version-kind", &op.gvk_yaml());
    bytes_field(13, &gvk, &mut o);
    let mut item = Vec::new();
    bytes_field(8, &o, &mut item);
    let mut named = Vec::new();
    str_field(1, &op.path, &mut named);
    bytes_field(2, &item, &mut named);
    named
}

/// `/openapi/v2` as the gnostic `openapi_v2.Document` protobuf.
pub fn v2_protobuf(reg: &Registry) -> Vec<u8> {
    let mut info = Vec::new();
    str_field(1, "Kubernetes", &mut info);
    str_field(2, "v1.35.0", &mut info);
    let mut paths = Vec::new();
    for op in all_ops(reg) {
        bytes_field(2, &path_item_pb(&op), &mut paths);
    }
    let mut doc = Vec::new();
    str_field(1, "2.0", &mut doc);
    bytes_field(2, &info, &mut doc);
    bytes_field(8, &paths, &mut doc);
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_group_version_has_a_v3_document() {
        let reg = Registry::builtin();
        let root = v3_root(&reg);
        for p in [
            "api/v1",
            "apis/rbac.authorization.k8s.io/v1",
            "apis/autoscaling/v2",
            "apis/autoscaling/v1",
            "apis/policy/v1",
        ] {
            assert!(root["paths"].get(p).is_some(), "{p} missing: {root}");
        }
        let rbac = v3_doc(&reg, "rbac.authorization.k8s.io", "v1").unwrap();
        let role = &rbac["paths"]["/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}"]
            ["patch"];
        assert_eq!(role["x-kubernetes-group-version-kind"]["kind"], "Role");
        let cr = &rbac["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["patch"];
        assert_eq!(cr["x-kubernetes-group-version-kind"]["kind"], "ClusterRole");
        assert!(v3_doc(&reg, "nope.example.com", "v1").is_none());
    }

    #[test]
    fn v2_json_lists_patch_operations_with_field_validation() {
        let doc = v2_json(&Registry::builtin());
        let op = &doc["paths"]["/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/{name}"]
            ["patch"];
        assert_eq!(
            op["x-kubernetes-group-version-kind"]["group"],
            "networking.k8s.io"
        );
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
    }

    #[test]
    fn v2_protobuf_starts_with_swagger_and_names_each_path() {
        let pb = v2_protobuf(&Registry::builtin());
        assert!(pb.starts_with(&[0x0a, 3, b'2', b'.', b'0']));
        let text = String::from_utf8_lossy(&pb);
        assert!(
            text.contains("/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}")
        );
        assert!(
            text.contains("group: \"rbac.authorization.k8s.io\"\nkind: RoleBinding\nversion: v1\n")
        );
        assert!(text.contains("group: \"\"\nkind: ConfigMap\nversion: v1\n"));
    }
}
