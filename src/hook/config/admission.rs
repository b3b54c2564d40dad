//! `kubernetesValidating` and `kubernetesMutating` bindings: the webhook entry
//! each one becomes (rules, policies, selectors). Besides flant's schema we run
//! the Kubernetes admissionregistration checks the API server would run on the
//! webhook configuration (name syntax and uniqueness, timeout range, rule
//! wildcards), for mutating bindings too: flant skips them there, and the
//! registration then fails at run time instead of at startup.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::error::Problem;
use super::group::check_snapshot_names;
use super::k8s_names::fully_qualified_name;
use super::selectors::label_selector;
use super::types::{AdmissionBinding, LabelSelector};
use super::v1::{each, non_empty};
use super::validate::{Checker, join};

const KEYS: &[&str] = &[
    "name",
    "group",
    "includeSnapshotsFrom",
    "failurePolicy",
    "sideEffects",
    "timeoutSeconds",
    "matchConditions",
    "labelSelector",
    "namespace",
    "rules",
];
const RULE_KEYS: &[&str] = &[
    "apiVersions",
    "apiGroups",
    "resources",
    "operations",
    "scope",
];
const OPERATIONS: &[&str] = &["CREATE", "UPDATE", "DELETE", "CONNECT", "*"];
const SCOPES: &[&str] = &["Cluster", "Namespaced", "*"];

/// Parse the binding list `key`, then check snapshot names and name uniqueness.
pub(crate) fn parse_list(
    m: &Map<String, Value>,
    key: &str,
    probs: &mut Vec<Problem>,
    kube_names: &[String],
) -> Vec<AdmissionBinding> {
    let items = each(m, key, probs, parse);
    let mut first_seen: HashMap<String, String> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for (at, b) in items {
        check_snapshot_names(probs, &at, &b.include_snapshots_from, kube_names);
        if let Some(first) = first_seen.get(&b.name) {
            let msg = format!("duplicate name {:?}: {first} already uses it", b.name);
            Checker::new(probs, at.clone()).err("name", msg);
        } else {
            first_seen.insert(b.name.clone(), at);
        }
        out.push(b);
    }
    out
}

/// One admission binding.
fn parse(c: &mut Checker, item: &Value) -> Option<AdmissionBinding> {
    let m = c.as_object("", item)?;
    c.strict("", m, KEYS);
    let name = c.req_str(m, "", "name");
    if let Some(Err(e)) = name.as_deref().map(fully_qualified_name) {
        let msg = format!("{:?} is invalid: {e}", name.as_deref().unwrap_or_default());
        c.err("name", msg);
    }
    Some(AdmissionBinding {
        name: name.unwrap_or_default(),
        group: non_empty(c, m, "group"),
        include_snapshots_from: c
            .opt_str_list(m, "", "includeSnapshotsFrom", 1)
            .unwrap_or_default(),
        rules: rules(c, m),
        failure_policy: m
            .get("failurePolicy")
            .and_then(|v| c.as_enum("failurePolicy", v, &["Ignore", "Fail"])),
        side_effects: m
            .get("sideEffects")
            .and_then(|v| c.as_enum("sideEffects", v, &["None", "NoneOnDryRun"]))
            .unwrap_or_else(|| "None".into()),
        timeout_seconds: timeout(c, m),
        match_conditions: match_conditions(c, m),
        label_selector: m
            .get("labelSelector")
            .and_then(|v| label_selector(c, "labelSelector", v)),
        namespace_label_selector: namespace(c, m),
    })
}

/// `timeoutSeconds`: default 10; Kubernetes accepts 1 to 30.
fn timeout(c: &mut Checker, m: &Map<String, Value>) -> i64 {
    let Some(t) = c.opt_int(m, "", "timeoutSeconds") else {
        return 10;
    };
    if !(1..=30).contains(&t) {
        c.err(
            "timeoutSeconds",
            format!("{t} is invalid: must be between 1 and 30 seconds"),
        );
    }
    t
}

/// `namespace: {labelSelector}` (strict, labelSelector required).
fn namespace(c: &mut Checker, m: &Map<String, Value>) -> Option<LabelSelector> {
    let ns = c.as_object("namespace", m.get("namespace")?)?;
    c.strict("namespace", ns, &["labelSelector"]);
    let sel = c.required(ns, "namespace", "labelSelector")?;
    label_selector(c, "namespace.labelSelector", sel)
}

/// `matchConditions: [{name, expression}]`, both required, names unique. Other
/// keys are ignored (flant's schema allows and drops them).
fn match_conditions(c: &mut Checker, m: &Map<String, Value>) -> Vec<Value> {
    let Some(items) = m
        .get("matchConditions")
        .and_then(|v| c.as_array("matchConditions", v, 0))
    else {
        return Vec::new();
    };
    let mut out: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("matchConditions[{i}]");
        let Some(obj) = c.as_object(&field, item) else {
            continue;
        };
        let name = c.req_str(obj, &field, "name");
        let expression = c.req_str(obj, &field, "expression");
        let (Some(name), Some(expression)) = (name, expression) else {
            continue;
        };
        if out.iter().any(|o| o["name"] == name.as_str()) {
            c.err(
                &join(&field, "name"),
                format!("duplicate match condition name {name:?}"),
            );
        }
        out.push(json!({"name": name, "expression": expression}));
    }
    out
}

/// `rules`: at least one rule when given; each rule is kept as written.
fn rules(c: &mut Checker, m: &Map<String, Value>) -> Vec<Value> {
    let Some(items) = m.get("rules").and_then(|v| c.as_array("rules", v, 1)) else {
        return Vec::new();
    };
    for (i, rule) in items.iter().enumerate() {
        check_rule(c, &format!("rules[{i}]"), rule);
    }
    items.to_vec()
}

/// Schema and Kubernetes checks of one rule.
fn check_rule(c: &mut Checker, field: &str, rule: &Value) {
    let Some(m) = c.as_object(field, rule) else {
        return;
    };
    c.strict(field, m, RULE_KEYS);
    let list = |c: &mut Checker, key: &str| {
        let v = c.required(m, field, key)?;
        c.as_str_list(&join(field, key), v, 1)
    };
    let (groups, versions) = (list(c, "apiGroups"), list(c, "apiVersions"));
    let (resources, operations) = (list(c, "resources"), list(c, "operations"));
    if let Some(scope) = m.get("scope") {
        c.as_enum(&join(field, "scope"), scope, SCOPES);
    }
    let mut k8s = Vec::new();
    k8s.extend(groups.and_then(|g| lone_star("apiGroups", &g, "API group")));
    if let Some(v) = &versions {
        k8s.extend(lone_star("apiVersions", v, "API version"));
        k8s.extend(no_empty("apiVersions", v));
    }
    if let Some(ops) = &operations {
        k8s.extend(lone_star("operations", ops, "operation"));
        k8s.extend(unknown_operations(ops));
    }
    if let Some(r) = &resources {
        k8s.extend(resource_problems(r));
    }
    for (sub, msg) in k8s {
        c.err(&join(field, &sub), msg);
    }
}

fn unknown_operations(ops: &[String]) -> Vec<(String, String)> {
    let bad = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !OPERATIONS.contains(&o.as_str()));
    let msg = |o: &String| format!("{o:?} should be one of [{}]", OPERATIONS.join(", "));
    bad.map(|(i, o)| (format!("operations[{i}]"), msg(o)))
        .collect()
}

/// `*` must be the only entry of its list.
fn lone_star(key: &str, list: &[String], what: &str) -> Option<(String, String)> {
    let mixed = list.len() > 1 && list.iter().any(|s| s == "*");
    mixed.then(|| {
        (
            key.to_owned(),
            format!("'*' must be the only {what} when present"),
        )
    })
}

fn no_empty(key: &str, list: &[String]) -> Vec<(String, String)> {
    let empty = list.iter().enumerate().filter(|(_, s)| s.is_empty());
    empty
        .map(|(i, _)| (format!("{key}[{i}]"), "must not be empty".to_owned()))
        .collect()
}

/// Kubernetes' resource list rules: no empty entries; `*/*` alone; `*` not
/// with plain resources; `x/*` and `*/y` not with `x/...` and `.../y`.
fn resource_problems(resources: &[String]) -> Vec<(String, String)> {
    let mut out = no_empty("resources", resources);
    let plain = resources
        .iter()
        .any(|r| !r.is_empty() && r != "*" && !r.contains('/'));
    let has = |s: &str| resources.iter().any(|r| r == s);
    if resources.len() > 1 && has("*/*") {
        out.push((
            "resources".into(),
            "'*/*' must be the only resource when present".into(),
        ));
    }
    if has("*") && plain {
        out.push((
            "resources".into(),
            "'*' must not be combined with resources without a subresource".into(),
        ));
    }
    for (i, r) in resources.iter().enumerate() {
        let Some((res, sub)) = r.split_once('/') else {
            continue;
        };
        let earlier = &resources[..i];
        if res != "*" && sub != "*" && earlier.iter().any(|e| *e == format!("{res}/*")) {
            out.push((
                format!("resources[{i}]"),
                format!("{r:?} is already covered by '{res}/*'"),
            ));
        }
        if res != "*" && sub != "*" && earlier.iter().any(|e| *e == format!("*/{sub}")) {
            out.push((
                format!("resources[{i}]"),
                format!("{r:?} is already covered by '*/{sub}'"),
            ));
        }
    }
    out
}
