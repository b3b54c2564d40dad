//! Server-side defaulting the real API server applies on every write and that
//! clients observe: Secret `type: Opaque` and `stringData` folded into `data`,
//! Namespace `status.phase: Active` and its `kubernetes.io/metadata.name` label,
//! Service `type: ClusterIP`, `sessionAffinity: None`, port `protocol: TCP` and
//! a `clusterIP` (helm 3's `--wait` waits for one). The IP is derived from the
//! namespace and name (10.96.0.0/16), so re-defaulting on update keeps it.
//! Also what Go's `omitempty` drops (empty metadata maps, ConfigMap/Secret data)
//! and which kinds carry `metadata.generation` (measured on kube-apiserver 1.35).

use crate::discovery::fnv;
use crate::registry::ResourceType;
use base64::Engine;
use serde_json::{Value, json};

/// Applies the defaults for `rt` to an object about to be stored.
pub fn apply(rt: &ResourceType, obj: &mut Value) {
    omit_empty(rt, obj);
    if !rt.group.is_empty() {
        return;
    }
    match rt.plural.as_str() {
        "configmaps" => configmap(obj),
        "secrets" => secret(obj),
        "namespaces" => namespace(obj),
        "services" => service(obj),
        _ => {}
    }
}

/// What Go's `omitempty` does to a built-in object on its way through the real
/// server: empty (or null) metadata maps and lists, and ConfigMap/Secret data maps,
/// are not stored (a merge patch that removes the last label leaves no `labels: {}`).
fn omit_empty(rt: &ResourceType, obj: &mut Value) {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    if let Some(meta) = obj["metadata"].as_object_mut() {
        for f in ["labels", "annotations", "finalizers", "ownerReferences"] {
            if meta.get(f).is_some_and(empty) {
                meta.remove(f);
            }
        }
    }
    if rt.crd || !rt.group.is_empty() || !matches!(rt.plural.as_str(), "configmaps" | "secrets") {
        return;
    }
    if let Some(m) = obj.as_object_mut() {
        for f in ["data", "binaryData", "stringData"] {
            if m.get(f).is_some_and(empty) {
                m.remove(f);
            }
        }
    }
}

/// ConfigMap `data` values that are null are stored as "" (Go decodes null to the zero value).
fn configmap(obj: &mut Value) {
    if let Some(data) = obj.get_mut("data").and_then(Value::as_object_mut) {
        for v in data.values_mut().filter(|v| v.is_null()) {
            *v = json!("");
        }
    }
}

fn secret(obj: &mut Value) {
    if obj["type"].as_str().unwrap_or("").is_empty() {
        obj["type"] = json!("Opaque");
    }
    let Some(string_data) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else {
        return;
    };
    let Some(map) = string_data.as_object() else {
        return;
    };
    if !obj["data"].is_object() {
        obj["data"] = json!({});
    }
    for (k, v) in map {
        let text = v.as_str().unwrap_or("");
        obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

fn namespace(obj: &mut Value) {
    if obj["status"]["phase"].is_null() {
        obj["status"] = json!({"phase": "Active"});
    }
    let name = obj["metadata"]["name"].clone();
    if !obj["metadata"]["labels"].is_object() {
        obj["metadata"]["labels"] = json!({});
    }
    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
}

fn service(obj: &mut Value) {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    let key = format!(
        "{}/{}",
        obj["metadata"]["namespace"].as_str().unwrap_or(""),
        obj["metadata"]["name"].as_str().unwrap_or("")
    );
    let spec = &mut obj["spec"];
    if spec["type"].as_str().unwrap_or("").is_empty() {
        spec["type"] = json!("ClusterIP");
    }
    if spec["sessionAffinity"].is_null() {
        spec["sessionAffinity"] = json!("None");
    }
    if let Some(ports) = spec["ports"].as_array_mut() {
        for p in ports.iter_mut().filter(|p| p["protocol"].is_null()) {
            p["protocol"] = json!("TCP");
        }
    }
    if spec["type"] == "ExternalName" || !spec["clusterIP"].as_str().unwrap_or("").is_empty() {
        return;
    }
    let h = fnv(key.as_bytes());
    let ip = format!("10.96.{}.{}", (h >> 8) & 0xff, (h & 0xff).clamp(1, 254));
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
}

/// Whether kube-apiserver keeps `metadata.generation` for this kind (measured on
/// 1.35): custom resources, CRDs, workloads, Pods, policies and a few more do;
/// Services, Namespaces, Leases, ConfigMaps and the like do not. Kinds not measured
/// fall back to "has a spec".
pub fn tracks_generation(rt: &ResourceType, obj: &Value) -> bool {
    if rt.crd {
        return true;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods" | "replicationcontrollers")
        | ("apps", "deployments" | "statefulsets" | "daemonsets" | "replicasets")
        | ("batch", "jobs" | "cronjobs")
        | ("networking.k8s.io", "networkpolicies" | "ingresses" | "ingressclasses")
        | ("policy", "poddisruptionbudgets")
        | ("discovery.k8s.io", "endpointslices")
        | ("scheduling.k8s.io", "priorityclasses")
        | ("apiextensions.k8s.io", "customresourcedefinitions")
        | ("admissionregistration.k8s.io", _) => true,
        ("", "services" | "namespaces" | "persistentvolumeclaims" | "serviceaccounts")
        | ("", "configmaps" | "secrets" | "resourcequotas" | "limitranges")
        | ("coordination.k8s.io", "leases")
        | ("rbac.authorization.k8s.io", _)
        | ("autoscaling", "horizontalpodautoscalers")
        | ("storage.k8s.io", "storageclasses") => false,
        _ => obj.get("spec").is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn services_get_a_stable_cluster_ip() {
        let reg = Registry::builtin();
        let rt = reg.by_key("/services").unwrap();
        let svc = || json!({"metadata": {"name": "web", "namespace": "a"}, "spec": {"ports": [{"port": 80}]}});
        let (mut a, mut b) = (svc(), svc());
        apply(rt, &mut a);
        apply(rt, &mut b);
        let ip = a["spec"]["clusterIP"].as_str().unwrap().to_string();
        assert!(ip.starts_with("10.96."), "{ip}");
        assert_eq!(a, b);
        assert_eq!(a["spec"]["clusterIPs"], json!([ip]));
        assert_eq!(a["spec"]["ports"][0]["protocol"], "TCP");
        let mut headless = json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}});
        apply(rt, &mut headless);
        assert_eq!(headless["spec"]["clusterIP"], "None");
        let mut ext = json!({"metadata": {"name": "e"}, "spec": {"type": "ExternalName"}});
        apply(rt, &mut ext);
        assert!(ext["spec"].get("clusterIP").is_none());
    }
}
