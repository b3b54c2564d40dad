//! Opt-in stand-ins for the controllers a real cluster runs (`Sim::set_auto_ready`):
//! when a workload is written, the status a healthy controller would
//! eventually report is written right after it, as a separate MODIFIED event.
//! Deployments, StatefulSets, ReplicaSets and DaemonSets become fully
//! available at their current generation, Jobs complete, Pods run and are Ready,
//! PersistentVolumeClaims are Bound. A Deployment also gets the ReplicaSet its
//! controller would own for the current pod template (`replica_set_for`; older
//! ones are scaled to 0 by the store), because helm 3's `--wait` looks for it.
//! This lets `kubectl rollout status`, `kubectl wait` and `helm --wait` (3 and 4) finish.

use crate::discovery::fnv;
use crate::registry::ResourceType;
use crate::util::{fmt_time, now_secs};
use serde_json::{Value, json};

/// The "ready" status for `obj`, or None when the kind has no controller here
/// or the object already has it.
pub fn ready_status(rt: &ResourceType, obj: &Value) -> Option<Value> {
    let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let cond = |t: &str, reason: &str| {
        json!({"type": t, "status": "True", "reason": reason,
               "lastTransitionTime": fmt_time(now_secs()), "lastUpdateTime": fmt_time(now_secs())})
    };
    let want = match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments") => json!({
            "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas,
            "conditions": [cond("Available", "MinimumReplicasAvailable"),
                           cond("Progressing", "NewReplicaSetAvailable")],
        }),
        ("apps", "statefulsets") => json!({
            "observedGeneration": generation, "replicas": replicas, "readyReplicas": replicas,
            "currentReplicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas,
        }),
        ("apps", "replicasets") => json!({
            "observedGeneration": generation, "replicas": replicas, "fullyLabeledReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas,
        }),
        ("apps", "daemonsets") => json!({
            "observedGeneration": generation, "currentNumberScheduled": 1, "desiredNumberScheduled": 1,
            "numberAvailable": 1, "numberReady": 1, "numberMisscheduled": 0, "updatedNumberScheduled": 1,
        }),
        ("batch", "jobs") => json!({
            "succeeded": obj["spec"]["completions"].as_i64().unwrap_or(1), "ready": 0,
            "startTime": fmt_time(now_secs()), "completionTime": fmt_time(now_secs()),
            "conditions": [cond("SuccessCriteriaMet", "CompletionsReached"), cond("Complete", "CompletionsReached")],
        }),
        ("", "persistentvolumeclaims") => json!({
            "phase": "Bound", "accessModes": obj["spec"]["accessModes"].clone(),
            "capacity": obj["spec"]["resources"]["requests"].clone(),
        }),
        ("", "pods") => json!({
            "phase": "Running", "podIP": "10.0.0.1", "startTime": fmt_time(now_secs()),
            "conditions": [cond("PodScheduled", ""), cond("Initialized", ""),
                           cond("ContainersReady", ""), cond("Ready", "")],
        }),
        _ => return None,
    };
    (!already(rt, obj, generation)).then_some(want)
}

/// Whether the object already carries a ready status for its generation.
fn already(rt: &ResourceType, obj: &Value, generation: i64) -> bool {
    let s = &obj["status"];
    match rt.plural.as_str() {
        "pods" => s["phase"] == "Running",
        "persistentvolumeclaims" => s["phase"] == "Bound",
        "jobs" => s["completionTime"].is_string(),
        _ => {
            s["observedGeneration"].as_i64() == Some(generation)
                && (rt.plural == "daemonsets"
                    || s["availableReplicas"] == obj["spec"]["replicas"]
                    || (obj["spec"]["replicas"].is_null() && s["availableReplicas"] == 1))
        }
    }
}

/// The `pod-template-hash` of a pod template: a short stable hash of its JSON.
fn template_hash(template: &Value) -> String {
    format!("{:016x}", fnv(template.to_string().as_bytes()))[..10].to_string()
}

/// The ReplicaSet (without status) that the deployment controller would own for
/// `deploy`'s current pod template: named `<deployment>-<hash>`, labelled and
/// selected with `pod-template-hash`, controlled by the Deployment (its uid), with
/// the Deployment's replicas. None when the Deployment has no template or uid.
pub fn replica_set_for(deploy: &Value) -> Option<Value> {
    let meta = &deploy["metadata"];
    let (name, uid) = (meta["name"].as_str()?, meta["uid"].as_str()?);
    let spec = &deploy["spec"];
    let mut template = spec.get("template")?.clone();
    let hash = template_hash(&template);
    if !template["metadata"]["labels"].is_object() {
        template["metadata"]["labels"] = json!({});
    }
    template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    let mut selector = spec["selector"].clone();
    if !selector["matchLabels"].is_object() {
        selector["matchLabels"] = json!({});
    }
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    Some(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{name}-{hash}"), "namespace": meta["namespace"].clone(),
            "labels": template["metadata"]["labels"].clone(),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"replicas": spec["replicas"].as_i64().unwrap_or(1), "selector": selector, "template": template},
    }))
}

/// Whether `obj` has a controller ownerReference to the object with `uid`.
pub fn controlled_by(obj: &Value, uid: &str) -> bool {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r["uid"] == uid && r["controller"].as_bool() == Some(true))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy(image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "a", "uid": "u-1"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}}})
    }

    #[test]
    fn replica_set_follows_the_template() {
        let rs = replica_set_for(&deploy("nginx:1")).unwrap();
        let name = rs["metadata"]["name"].as_str().unwrap().to_string();
        let hash = rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"]
            .as_str()
            .unwrap();
        assert_eq!(name, format!("web-{hash}"));
        assert_eq!(
            rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
            hash
        );
        assert_eq!(rs["spec"]["selector"]["matchLabels"]["app"], "web");
        assert_eq!(rs["spec"]["replicas"], 2);
        assert!(controlled_by(&rs, "u-1") && !controlled_by(&rs, "u-2"));
        let other = replica_set_for(&deploy("nginx:2")).unwrap();
        assert_ne!(other["metadata"]["name"], name);
        assert_eq!(replica_set_for(&deploy("nginx:1")).unwrap(), rs);
    }
}
