//! The built-in kinds of a Kubernetes 1.35 API server that charts and clients use:
//! one compact row per (group/version, kind) with plural, short names, scope,
//! subresources and categories, as `kubectl api-resources` shows them on a real
//! cluster. `registry` turns the rows into `ResourceType`s; rows of the same
//! group and plural under several versions (autoscaling v2 and v1) become one
//! resource served under all of them, the highest version preferred.

use crate::registry::{ResourceType, ScalePaths, split_api_version};
use crate::util::version_rank;

/// All verbs of an ordinary resource.
pub const FULL: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Verbs of resources without `deletecollection` (namespaces).
const NO_COLLECTION: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// Namespaced (otherwise cluster-scoped).
const NS: u8 = 1;
/// Has a `status` subresource.
const STATUS: u8 = 2;
/// Has a `scale` subresource (`.spec.replicas` / `.status.replicas`).
const SCALE: u8 = 4;
/// In the `all` category.
const ALL: u8 = 8;
/// In the `api-extensions` category.
const EXT: u8 = 16;
/// No `deletecollection` verb.
const NO_DC: u8 = 32;

/// One row: (apiVersion, kind, plural, short names, flags).
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    u8,
);

#[rustfmt::skip]
const BUILTINS: &[Builtin] = &[
    // core
    ("v1", "Pod", "pods", &["po"], NS | STATUS | ALL),
    ("v1", "ConfigMap", "configmaps", &["cm"], NS),
    ("v1", "Secret", "secrets", &[], NS),
    ("v1", "Namespace", "namespaces", &["ns"], STATUS | NO_DC),
    ("v1", "Service", "services", &["svc"], NS | STATUS | ALL),
    ("v1", "Event", "events", &["ev"], NS),
    ("v1", "Node", "nodes", &["no"], STATUS),
    ("v1", "ServiceAccount", "serviceaccounts", &["sa"], NS),
    ("v1", "Endpoints", "endpoints", &["ep"], NS),
    ("v1", "LimitRange", "limitranges", &["limits"], NS),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", &["pvc"], NS | STATUS),
    ("v1", "PersistentVolume", "persistentvolumes", &["pv"], STATUS),
    ("v1", "PodTemplate", "podtemplates", &[], NS),
    ("v1", "ReplicationController", "replicationcontrollers", &["rc"], NS | STATUS | SCALE | ALL),
    ("v1", "ResourceQuota", "resourcequotas", &["quota"], NS | STATUS),
    // apiregistration.k8s.io
    ("apiregistration.k8s.io/v1", "APIService", "apiservices", &[], STATUS | EXT),
    // apps
    ("apps/v1", "ControllerRevision", "controllerrevisions", &[], NS),
    ("apps/v1", "DaemonSet", "daemonsets", &["ds"], NS | STATUS | ALL),
    ("apps/v1", "Deployment", "deployments", &["deploy"], NS | STATUS | SCALE | ALL),
    ("apps/v1", "ReplicaSet", "replicasets", &["rs"], NS | STATUS | SCALE | ALL),
    ("apps/v1", "StatefulSet", "statefulsets", &["sts"], NS | STATUS | SCALE | ALL),
    // events.k8s.io
    ("events.k8s.io/v1", "Event", "events", &["ev"], NS),
    // autoscaling (v2 preferred, v1 also served)
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", &["hpa"], NS | STATUS | ALL),
    ("autoscaling/v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", &["hpa"], NS | STATUS | ALL),
    // batch
    ("batch/v1", "CronJob", "cronjobs", &["cj"], NS | STATUS | ALL),
    ("batch/v1", "Job", "jobs", &[], NS | STATUS | ALL),
    // certificates.k8s.io
    ("certificates.k8s.io/v1", "CertificateSigningRequest", "certificatesigningrequests", &["csr"], STATUS),
    // networking.k8s.io
    ("networking.k8s.io/v1", "IngressClass", "ingressclasses", &[], 0),
    ("networking.k8s.io/v1", "Ingress", "ingresses", &["ing"], NS | STATUS),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", &["netpol"], NS),
    ("networking.k8s.io/v1", "IPAddress", "ipaddresses", &["ip"], 0),
    ("networking.k8s.io/v1", "ServiceCIDR", "servicecidrs", &[], STATUS),
    // policy
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", &["pdb"], NS | STATUS),
    // rbac.authorization.k8s.io
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", &[], 0),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", &[], 0),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", &[], NS),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", &[], NS),
    // storage.k8s.io
    ("storage.k8s.io/v1", "CSIDriver", "csidrivers", &[], 0),
    ("storage.k8s.io/v1", "CSINode", "csinodes", &[], 0),
    ("storage.k8s.io/v1", "CSIStorageCapacity", "csistoragecapacities", &[], NS),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", &["sc"], 0),
    ("storage.k8s.io/v1", "VolumeAttachment", "volumeattachments", &[], STATUS),
    ("storage.k8s.io/v1", "VolumeAttributesClass", "volumeattributesclasses", &["vac"], 0),
    // admissionregistration.k8s.io
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", &[], EXT),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", &[], STATUS | EXT),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", &[], EXT),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", &[], EXT),
    // apiextensions.k8s.io
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", &["crd", "crds"], STATUS | EXT),
    // scheduling.k8s.io
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", &["pc"], 0),
    // coordination.k8s.io
    ("coordination.k8s.io/v1", "Lease", "leases", &[], NS),
    // node.k8s.io
    ("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", &[], 0),
    // discovery.k8s.io
    ("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", &[], NS),
];

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn categories(flags: u8) -> Vec<String> {
    let mut out = Vec::new();
    if flags & ALL != 0 {
        out.push("all".to_string());
    }
    if flags & EXT != 0 {
        out.push("api-extensions".to_string());
    }
    out
}

fn from_row(&(gv, kind, plural, short, flags): &Builtin) -> ResourceType {
    let (group, version) = split_api_version(gv);
    let verbs = if flags & NO_DC != 0 {
        NO_COLLECTION
    } else {
        FULL
    };
    ResourceType {
        group: group.to_string(),
        versions: vec![version.to_string()],
        kind: kind.to_string(),
        list_kind: format!("{kind}List"),
        plural: plural.to_string(),
        singular: kind.to_lowercase(),
        short_names: strings(short),
        categories: categories(flags),
        namespaced: flags & NS != 0,
        verbs: strings(verbs),
        status: flags & STATUS != 0,
        scale: (flags & SCALE != 0).then(|| ScalePaths {
            spec: ".spec.replicas".into(),
            status: ".status.replicas".into(),
            selector: None,
        }),
        crd: false,
    }
}

/// Every built-in resource, in table order, with versions of one group and
/// plural merged (preferred version first).
pub fn all() -> Vec<ResourceType> {
    let mut out: Vec<ResourceType> = Vec::new();
    for row in BUILTINS {
        let t = from_row(row);
        match out.iter_mut().find(|o| o.key() == t.key()) {
            Some(o) => {
                o.versions.extend(t.versions);
                o.versions.sort_by_key(|v| version_rank(v));
            }
            None => out.push(t),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(all: &'a [ResourceType], key: &str) -> &'a ResourceType {
        all.iter().find(|t| t.key() == key).unwrap()
    }

    #[test]
    fn versions_of_one_resource_merge_preferred_first() {
        let all = all();
        let hpa = find(&all, "autoscaling/horizontalpodautoscalers");
        assert_eq!(hpa.versions, ["v2", "v1"]);
        assert_eq!(
            all.iter()
                .filter(|t| t.plural == "horizontalpodautoscalers")
                .count(),
            1
        );
    }

    #[test]
    fn scope_verbs_and_categories_follow_the_flags() {
        let all = all();
        let ns = find(&all, "/namespaces");
        assert!(!ns.namespaced && !ns.verbs.iter().any(|v| v == "deletecollection"));
        let role = find(&all, "rbac.authorization.k8s.io/roles");
        assert!(role.namespaced && role.verbs.len() == 8 && role.categories.is_empty());
        let crb = find(&all, "rbac.authorization.k8s.io/clusterrolebindings");
        assert!(!crb.namespaced);
        let crd = find(&all, "apiextensions.k8s.io/customresourcedefinitions");
        assert_eq!(crd.categories, ["api-extensions"]);
        let deploy = find(&all, "apps/deployments");
        assert!(deploy.scale.is_some() && deploy.status && deploy.categories == ["all"]);
        assert_eq!(
            find(&all, "policy/poddisruptionbudgets").short_names,
            ["pdb"]
        );
    }

    #[test]
    fn keys_are_unique() {
        let all = all();
        let mut keys: Vec<String> = all.iter().map(ResourceType::key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), all.len());
    }
}
