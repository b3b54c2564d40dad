//! Which admission webhooks a request reaches, by the rules kube-apiserver
//! applies: `rules` (operations, apiGroups, apiVersions, resources with
//! `*` and `x/y` subresources, scope), `matchPolicy` (Equivalent: another
//! served version of the same resource counts), `namespaceSelector` (the
//! Namespace object's labels; cluster-scoped objects always match) and
//! `objectSelector` (old or new object's labels). Selection runs under the
//! store lock; calling the webhooks (`admission`) happens after it is released.

use crate::registry::ResourceType;
use crate::store::Store;
use serde_json::Value;

/// The request facts matching looks at.
pub struct Request<'a> {
    pub operation: &'a str,
    pub rt: &'a ResourceType,
    pub version: &'a str,
    pub sub: Option<&'a str>,
    pub ns: &'a str,
    pub object: Option<&'a Value>,
    pub old: Option<&'a Value>,
}

fn list_has(v: &Value, want: &str) -> bool {
    v.as_array()
        .is_some_and(|a| a.iter().any(|x| x == "*" || x == want))
}

fn resource_matches(resources: &Value, plural: &str, sub: &str) -> bool {
    resources.as_array().is_some_and(|a| {
        a.iter().filter_map(Value::as_str).any(|entry| {
            let (r, s) = entry.split_once('/').unwrap_or((entry, ""));
            (r == "*" || r == plural) && (s == "*" || s == sub)
        })
    })
}

fn scope_matches(rule: &Value, namespaced: bool) -> bool {
    match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !namespaced,
        "Namespaced" => namespaced,
        _ => true,
    }
}

/// Whether one rule matches the request at `version`.
fn rule_matches(rule: &Value, req: &Request, version: &str) -> bool {
    list_has(&rule["operations"], req.operation)
        && list_has(&rule["apiGroups"], &req.rt.group)
        && list_has(&rule["apiVersions"], version)
        && resource_matches(&rule["resources"], &req.rt.plural, req.sub.unwrap_or(""))
        && scope_matches(rule, req.rt.namespaced)
}

/// The version the webhook is called at: the request's own when a rule
/// names it, else (matchPolicy Equivalent) the first served version a rule names.
pub fn matched_version(hook: &Value, req: &Request) -> Option<String> {
    let rules = hook["rules"].as_array()?;
    if rules.iter().any(|r| rule_matches(r, req, req.version)) {
        return Some(req.version.to_string());
    }
    if hook["matchPolicy"].as_str() == Some("Exact") {
        return None;
    }
    req.rt
        .versions
        .iter()
        .find(|v| rules.iter().any(|r| rule_matches(r, req, v)))
        .cloned()
}

/// A `metav1.LabelSelector` object (matchLabels, matchExpressions) against labels;
/// an absent or empty selector matches everything.
pub fn selector_matches(sel: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels[k].as_str();
    let by_labels = sel["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_exprs = sel["matchExpressions"].as_array().is_none_or(|es| {
        es.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match (e["operator"].as_str().unwrap_or(""), label(key)) {
                ("In", Some(v)) => values.contains(&v),
                ("NotIn", v) => v.is_none_or(|v| !values.contains(&v)),
                ("Exists", v) => v.is_some(),
                ("DoesNotExist", v) => v.is_none(),
                _ => false,
            }
        })
    });
    by_labels && by_exprs
}

fn namespace_matches(st: &Store, hook: &Value, req: &Request) -> bool {
    let sel = &hook["namespaceSelector"];
    if sel.is_null() {
        return true;
    }
    if req.rt.key() == "/namespaces" {
        let obj = req.object.or(req.old);
        return selector_matches(
            sel,
            &obj.map(|o| o["metadata"]["labels"].clone())
                .unwrap_or_default(),
        );
    }
    if !req.rt.namespaced {
        return true;
    }
    let labels = st
        .registry
        .by_path("", "v1", "namespaces")
        .and_then(|rt| st.get(rt, "", req.ns).ok())
        .map(|n| n["metadata"]["labels"].clone())
        .unwrap_or_default();
    selector_matches(sel, &labels)
}

fn object_matches(hook: &Value, req: &Request) -> bool {
    let sel = &hook["objectSelector"];
    if sel.is_null() {
        return true;
    }
    let labels = |o: Option<&Value>| o.map(|o| o["metadata"]["labels"].clone());
    [labels(req.object), labels(req.old)]
        .into_iter()
        .flatten()
        .any(|l| selector_matches(sel, &l))
}

/// Whether the configuration kinds themselves are being written: those never
/// reach webhooks (as on kube-apiserver, so a bad webhook cannot lock itself in).
pub fn exempt(rt: &ResourceType) -> bool {
    rt.group == "admissionregistration.k8s.io"
}

/// The webhooks of every stored configuration of `kind_plural` (in name order,
/// webhooks in order) that match, each with the version it is called at.
pub fn select(st: &Store, plural: &str, req: &Request) -> Vec<(Value, String)> {
    if exempt(req.rt) {
        return Vec::new();
    }
    let Some(rt) = st
        .registry
        .by_path("admissionregistration.k8s.io", "v1", plural)
        .cloned()
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for cfg in st.list(&rt) {
        for hook in cfg["webhooks"].as_array().into_iter().flatten() {
            let Some(version) = matched_version(hook, req) else {
                continue;
            };
            if namespace_matches(st, hook, req) && object_matches(hook, req) {
                out.push((hook.clone(), version));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resources_with_wildcards_and_subresources() {
        let r = json!(["pods/*"]);
        assert!(resource_matches(&r, "pods", ""));
        assert!(resource_matches(&r, "pods", "status"));
        assert!(!resource_matches(&json!(["*"]), "pods", "status"));
        assert!(resource_matches(
            &json!(["*/status"]),
            "deployments",
            "status"
        ));
        assert!(resource_matches(&json!(["*/*"]), "x", "scale"));
        assert!(!resource_matches(&json!(["configmaps"]), "secrets", ""));
    }

    #[test]
    fn label_selector_objects() {
        let labels = json!({"a": "1", "b": "2"});
        assert!(selector_matches(&json!({}), &labels));
        assert!(selector_matches(
            &json!({"matchLabels": {"a": "1"}}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"a": "2"}}),
            &labels
        ));
        let e = |op: &str, vals: Value| json!({"matchExpressions": [{"key": "b", "operator": op, "values": vals}]});
        assert!(selector_matches(&e("In", json!(["2", "3"])), &labels));
        assert!(!selector_matches(&e("NotIn", json!(["2"])), &labels));
        assert!(selector_matches(&e("Exists", json!([])), &labels));
        assert!(!selector_matches(&e("DoesNotExist", json!([])), &labels));
        assert!(selector_matches(
            &e("DoesNotExist", json!([])),
            &json!(null)
        ));
    }
}
