//! Who set a drifted field: the server's `managedFields` read along a drift path
//! ([`super::compare`]'s form), so a log line and the debug CLI can say which
//! manager (`kubectl-edit`, a controller, another applier) changes what a release
//! declares, newest first. A pure function of the live object.

use serde_json::Value;

/// The managers owning `path` of `live`: `<manager> (<operation>[ <subresource>],
/// <time>)`, newest first; empty when the server keeps no managedFields.
pub(crate) fn managers_of(live: &Value, path: &str) -> Vec<String> {
    let Some(entries) = live["metadata"]["managedFields"].as_array() else {
        return Vec::new();
    };
    let segments: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let mut owners: Vec<(&str, String)> = entries
        .iter()
        .filter(|e| owns(&e["fieldsV1"], &segments))
        .map(|e| {
            let time = e["time"].as_str().unwrap_or("");
            let mut op = e["operation"].as_str().unwrap_or("?").to_string();
            if let Some(sub) = e["subresource"].as_str().filter(|s| !s.is_empty()) {
                op = format!("{op} {sub}");
            }
            let manager = e["manager"].as_str().unwrap_or("?");
            (time, format!("{manager} ({op}, {time})"))
        })
        .collect();
    owners.sort_by(|a, b| b.0.cmp(a.0));
    owners.into_iter().map(|(_, line)| line).collect()
}

/// Whether a `fieldsV1` tree holds the field at `segments` (or a whole value above it).
fn owns(fields: &Value, segments: &[String]) -> bool {
    let mut node = fields;
    for seg in segments {
        let Some(map) = node.as_object() else {
            return false;
        };
        if map.is_empty() || map.contains_key(".") && map.len() == 1 {
            // A leaf: the manager owns this value whole (an atomic list or map).
            return true;
        }
        let key = match seg.split_once('=') {
            Some(("name", name)) => format!("k:{}", serde_json::json!({ "name": name })),
            _ if seg.parse::<usize>().is_ok() => return true,
            _ => format!("f:{seg}"),
        };
        match map.get(&key) {
            Some(child) => node = child,
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live() -> Value {
        json!({"metadata": {"managedFields": [
            {"manager": "helm", "operation": "Update", "time": "2026-11-28T05:00:00Z",
             "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                 "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}},
            {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-28T06:00:00Z",
             "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                 "k:{\"name\":\"web\"}": {"f:image": {}}}}}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale",
             "time": "2026-11-28T07:00:00Z", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]}})
    }

    #[test]
    fn names_every_owner_of_a_field_newest_first() {
        let image = managers_of(&live(), "/spec/template/spec/containers/name=web/image");
        assert_eq!(
            image,
            [
                "kubectl-edit (Update, 2026-11-28T06:00:00Z)",
                "helm (Update, 2026-11-28T05:00:00Z)"
            ]
        );
        let replicas = managers_of(&live(), "/spec/replicas");
        assert_eq!(
            replicas[0],
            "kube-controller-manager (Update scale, 2026-11-28T07:00:00Z)"
        );
        assert_eq!(replicas.len(), 2);
    }

    #[test]
    fn a_field_nobody_owns_has_no_manager() {
        assert!(managers_of(&live(), "/spec/paused").is_empty());
        assert!(managers_of(&json!({}), "/spec/replicas").is_empty());
    }
}
