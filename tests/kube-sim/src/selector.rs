//! Label and field selectors as they arrive in `labelSelector` / `fieldSelector`
//! query parameters, parsed once per request and matched against stored objects
//! by list, watch and deletecollection.

use crate::registry::ResourceType;
use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

/// A parsed field selector: (dotted path, equal?, value) terms, all must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

/// Parses `(a, b)` into its values.
fn set_values(s: &str) -> Result<Vec<String>, String> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, found {s:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_label_term(t: &str) -> Result<LabelReq, String> {
    if let Some(k) = t.strip_prefix('!') {
        return checked(k.trim(), LabelReq::NotExists(k.trim().to_string()));
    }
    for (op, ne) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = t.split_once(op) {
            let (k, v) = (k.trim().to_string(), v.trim().to_string());
            let req = if ne {
                LabelReq::NotEq(k.clone(), v)
            } else {
                LabelReq::Eq(k.clone(), v)
            };
            return checked(&k, req);
        }
    }
    for (op, neg) in [(" notin ", true), (" in ", false)] {
        if let Some((k, rest)) = t.split_once(op) {
            let vals = set_values(rest)?;
            let k = k.trim().to_string();
            let req = if neg {
                LabelReq::NotIn(k.clone(), vals)
            } else {
                LabelReq::In(k.clone(), vals)
            };
            return checked(&k, req);
        }
    }
    checked(t, LabelReq::Exists(t.to_string()))
}

fn checked(key: &str, req: LabelReq) -> Result<LabelReq, String> {
    if !valid_key(key) {
        return Err(format!("invalid label key {key:?}"));
    }
    let values: &[String] = match &req {
        LabelReq::Eq(_, v) | LabelReq::NotEq(_, v) => std::slice::from_ref(v),
        LabelReq::In(_, vs) | LabelReq::NotIn(_, vs) => vs,
        _ => &[],
    };
    for (i, v) in values.iter().enumerate() {
        if v.contains(['=', '!']) {
            // what kube-apiserver's selector lexer says about `a===b`
            return Err("found '=', expected: identifier".into());
        }
        if !crate::validation::is_label_value(v) {
            return Err(format!(
                "values[{i}][{key}]: Invalid value: {v:?}: {}",
                crate::validation::LABEL_VALUE
            ));
        }
    }
    Ok(req)
}

impl LabelSelector {
    /// No requirements (matches everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses the `labelSelector` syntax (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`).
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        split_terms(s)
            .into_iter()
            .map(parse_label_term)
            .collect::<Result<_, _>>()
            .map(LabelSelector)
    }

    /// Whether `obj`'s labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// The value at a dotted path as a string (`""` when absent), like field labels.
fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for part in path.split('.') {
        cur = &cur[part];
    }
    match cur {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    /// No terms (matches everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses `path=value`, `path==value` and `path!=value` terms.
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut out = Vec::new();
        for t in split_terms(s) {
            let (k, eq, v) = if let Some((k, v)) = t.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = t.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = t.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!(
                    "invalid field selector term {t:?}: expected field=value"
                ));
            };
            if k.trim().is_empty() {
                return Err(format!("invalid field selector term {t:?}: empty field"));
            }
            out.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// Whether every term holds on `obj`.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(k, eq, v)| (field_value(obj, k) == *v) == *eq)
    }

    /// Refuses a field the resource cannot be selected on, as kube-apiserver 1.35 does
    /// (its three wordings, measured). Custom resources are not checked (their CRD's
    /// `selectableFields` are not tracked).
    pub fn check_supported(&self, rt: &ResourceType) -> Result<(), String> {
        if rt.crd {
            return Ok(());
        }
        let core_events: &[&str] = &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ];
        // (extra fields, how a refusal reads: 0 "not supported", 1 "for <Kind>", 2 "only ...")
        let (extra, style): (&[&str], u8) = match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "pods") => (
                &[
                    "spec.nodeName",
                    "spec.restartPolicy",
                    "spec.schedulerName",
                    "spec.serviceAccountName",
                    "spec.hostNetwork",
                    "status.phase",
                    "status.podIP",
                    "status.podIPs",
                    "status.nominatedNodeName",
                ],
                0,
            ),
            ("", "secrets") => (&["type"], 0),
            ("", "events") | ("events.k8s.io", "events") => (core_events, 0),
            ("", "namespaces") => (&["status.phase"], 0),
            ("", "nodes") => (&["spec.unschedulable"], 0),
            ("", "services") => (&["spec.clusterIP", "spec.type"], 0),
            ("", "replicationcontrollers") => (&["status.replicas"], 0),
            ("certificates.k8s.io", "certificatesigningrequests") => (&["spec.signerName"], 0),
            ("batch", "jobs") => (&["status.successful"], 1),
            _ => (&[], 2),
        };
        for (field, _, _) in &self.0 {
            let f = field.as_str();
            if matches!(f, "metadata.name" | "metadata.namespace") || extra.contains(&f) {
                continue;
            }
            return Err(match style {
                0 => format!("field label not supported: {f}"),
                1 => format!("field label {f:?} not supported for {}", rt.kind),
                _ => format!(
                    "{f:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                ),
            });
        }
        Ok(())
    }
}

/// What a list or watch is restricted to: namespace plus both selectors.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    /// Whether `obj` is inside this filter.
    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            if obj["metadata"]["namespace"].as_str().unwrap_or("") != ns {
                return false;
            }
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns1", "labels": {"app": "web", "tier": "fe"}},
               "status": {"phase": "Running", "ready": true}})
    }

    #[test]
    fn label_table() {
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("app notin (db)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing", false),
            ("app=web,tier=fe", true),
            ("app=web,tier=be", false),
            ("missing notin (x)", true),
            ("", true),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&obj()), want, "selector {sel:?}");
        }
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn field_table() {
        let cases = [
            ("metadata.name=a", true),
            ("metadata.name!=a", false),
            ("metadata.namespace==ns1", true),
            ("status.phase=Running", true),
            ("status.ready=true", true),
            ("spec.x=", true),
            ("metadata.name=a,status.phase!=Running", false),
        ];
        for (sel, want) in cases {
            let s = FieldSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&obj()), want, "selector {sel:?}");
        }
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
