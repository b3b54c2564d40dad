//! Opt-in stand-ins for the controllers a real cluster runs (`Sim::set_auto_ready`):
//! when a workload is written, the status a healthy controller would
//! eventually report is written right after it, as a separate MODIFIED event.
//! Deployments, StatefulSets, ReplicaSets and DaemonSets become fully
//! available at their current generation, Jobs complete, Pods run and are Ready.
//! This lets `kubectl rollout status`, `kubectl wait` and `helm --wait` finish.

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
        "jobs" => s["completionTime"].is_string(),
        _ => {
            s["observedGeneration"].as_i64() == Some(generation)
                && (rt.plural == "daemonsets"
                    || s["availableReplicas"] == obj["spec"]["replicas"]
                    || (obj["spec"]["replicas"].is_null() && s["availableReplicas"] == 1))
        }
    }
}
