//! Selector blocks shared by kubernetes and admission bindings: labelSelector,
//! nameSelector, fieldSelector and namespace. Each reads a raw JSON value,
//! applies flant's schema (strict keys, property counts, operator enums) and the
//! Kubernetes checks `LabelSelectorAsSelector` does (key and value syntax,
//! values required for In/NotIn and forbidden for Exists/DoesNotExist).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::k8s_names::{label_value, qualified_name};
use super::types::{
    FieldOp, FieldRequirement, LabelSelector, LabelSelectorRequirement, NamespaceSelector,
};
use super::validate::{Checker, join};

const LABEL_KEYS: &[&str] = &["matchLabels", "matchExpressions"];
const LABEL_OPS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];
const EXPR_KEYS: &[&str] = &["key", "operator", "values"];
const FIELD_KEYS: &[&str] = &["field", "operator", "value"];
const FIELD_OPS: &[&str] = &["=", "==", "Equals", "!=", "NotEquals"];

/// Check that an object has at least one of its allowed properties (flant's
/// `minProperties: 1`; unknown keys are reported by `strict`).
fn property_count(c: &mut Checker, field: &str, m: &Map<String, Value>, keys: &[&str]) {
    if !m.keys().any(|k| keys.contains(&k.as_str())) {
        let msg = format!(
            "must have at least one of the properties {}",
            keys.join(", ")
        );
        c.err(field, msg);
    }
}

/// A v1 `labelSelector`: strict, 1-2 properties.
pub(crate) fn label_selector(c: &mut Checker, field: &str, v: &Value) -> Option<LabelSelector> {
    let m = c.as_object(field, v)?;
    c.strict(field, m, LABEL_KEYS);
    property_count(c, field, m, LABEL_KEYS);
    Some(label_selector_body(c, field, m, true))
}

/// A v0 `selector`: flant reads it without a schema, so unknown keys are ignored.
pub(crate) fn label_selector_v0(c: &mut Checker, field: &str, v: &Value) -> Option<LabelSelector> {
    let m = c.as_object(field, v)?;
    Some(label_selector_body(c, field, m, false))
}

fn label_selector_body(
    c: &mut Checker,
    field: &str,
    m: &Map<String, Value>,
    strict: bool,
) -> LabelSelector {
    let mut sel = LabelSelector::default();
    if let Some(v) = m.get("matchLabels") {
        sel.match_labels = match_labels(c, &join(field, "matchLabels"), v);
    }
    if let Some(v) = m.get("matchExpressions") {
        let f = join(field, "matchExpressions");
        for (i, item) in c.as_array(&f, v, 0).unwrap_or_default().iter().enumerate() {
            if let Some(req) = label_requirement(c, &format!("{f}[{i}]"), item, strict) {
                sel.match_expressions.push(req);
            }
        }
    }
    sel
}

fn match_labels(c: &mut Checker, field: &str, v: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(m) = c.as_object(field, v) else {
        return out;
    };
    for (key, val) in m {
        let f = join(field, key);
        let Some(val) = c.as_str(&f, val) else {
            continue;
        };
        if let Err(e) = qualified_name(key).and_then(|_| label_value(&val)) {
            c.err(&f, e.to_string());
        }
        out.insert(key.clone(), val);
    }
    out
}

fn label_requirement(
    c: &mut Checker,
    field: &str,
    v: &Value,
    strict: bool,
) -> Option<LabelSelectorRequirement> {
    let m = c.as_object(field, v)?;
    if strict {
        c.strict(field, m, EXPR_KEYS);
    }
    let key = c.req_str(m, field, "key");
    let op = c.required(m, field, "operator");
    let op = op.and_then(|op| c.as_enum(&join(field, "operator"), op, LABEL_OPS));
    let values = c.opt_str_list(m, field, "values", 0).unwrap_or_default();
    let (key, operator) = (key?, op?);
    check_requirement(c, field, &key, &operator, &values);
    Some(LabelSelectorRequirement {
        key,
        operator,
        values,
    })
}

fn check_requirement(c: &mut Checker, field: &str, key: &str, op: &str, values: &[String]) {
    if let Err(e) = qualified_name(key) {
        c.err(&join(field, "key"), e.to_string());
    }
    let needs_values = op == "In" || op == "NotIn";
    if needs_values && values.is_empty() {
        let msg = format!("operator {op} needs at least one value");
        c.err(&join(field, "values"), msg);
    }
    if !needs_values && !values.is_empty() {
        let msg = format!("operator {op} takes no values, got {}", values.len());
        c.err(&join(field, "values"), msg);
    }
    for (i, val) in values.iter().enumerate() {
        if let Err(e) = label_value(val) {
            c.err(&format!("{}[{i}]", join(field, "values")), e.to_string());
        }
    }
}

/// `nameSelector: {matchNames: [...]}`; `[]` selects every object.
pub(crate) fn name_selector(c: &mut Checker, field: &str, v: &Value) -> Option<Vec<String>> {
    if v.is_array() {
        // flant's docs show `nameSelector: [default]`, which its schema rejects.
        let msg = "must be of type object: \"array\"; write nameSelector: {matchNames: [...]}";
        c.err(field, msg);
        return None;
    }
    let m = c.as_object(field, v)?;
    c.strict(field, m, &["matchNames"]);
    let names = c.required(m, field, "matchNames")?;
    c.as_str_list(&join(field, "matchNames"), names, 0)
}

/// `fieldSelector: {matchExpressions: [{field, operator, value}]}`.
pub(crate) fn field_selector(c: &mut Checker, field: &str, v: &Value) -> Vec<FieldRequirement> {
    let Some(m) = c.as_object(field, v) else {
        return Vec::new();
    };
    c.strict(field, m, &["matchExpressions"]);
    let Some(exprs) = c.required(m, field, "matchExpressions") else {
        return Vec::new();
    };
    let f = join(field, "matchExpressions");
    let items = c.as_array(&f, exprs, 0).unwrap_or_default();
    let parsed = items.iter().enumerate();
    parsed
        .filter_map(|(i, item)| field_requirement(c, &format!("{f}[{i}]"), item))
        .collect()
}

fn field_requirement(c: &mut Checker, field: &str, v: &Value) -> Option<FieldRequirement> {
    let m = c.as_object(field, v)?;
    c.strict(field, m, FIELD_KEYS);
    for key in FIELD_KEYS.iter().filter(|k| !m.contains_key(**k)) {
        let msg = "is required: each expression needs exactly field, operator and value";
        c.err(&join(field, key), msg);
    }
    let name = c.opt_str(m, field, "field");
    let op = m.get("operator");
    let op = op.and_then(|op| c.as_enum(&join(field, "operator"), op, FIELD_OPS));
    let value = c.opt_str(m, field, "value");
    let operator = match op?.as_str() {
        "!=" | "NotEquals" => FieldOp::NotEquals,
        _ => FieldOp::Equals,
    };
    Some(FieldRequirement {
        field: name?,
        operator,
        value: value?,
    })
}

/// A kubernetes binding's `namespace: {nameSelector?, labelSelector?}`.
pub(crate) fn namespace_selector(
    c: &mut Checker,
    field: &str,
    v: &Value,
) -> Option<NamespaceSelector> {
    let m = c.as_object(field, v)?;
    let keys = ["nameSelector", "labelSelector"];
    c.strict(field, m, &keys);
    property_count(c, field, m, &keys);
    let mut ns = NamespaceSelector::default();
    if let Some(v) = m.get("nameSelector") {
        ns.name_selector = name_selector(c, &join(field, "nameSelector"), v);
    }
    if let Some(v) = m.get("labelSelector") {
        ns.label_selector = label_selector(c, &join(field, "labelSelector"), v);
    }
    Some(ns)
}
