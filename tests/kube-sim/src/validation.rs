//! Field validation on writes, worded as kube-apiserver 1.35 words it (measured
//! against it; see docs/kube-sim.md "Measured against a real kube-apiserver"):
//! object names (DNS-1123 subdomain, or label for Namespaces, DNS-1035 label for
//! Services, path segment for RBAC kinds), label keys and values, annotation keys,
//! finalizer names, ConfigMap/Secret data keys, and the required fields of Pods and
//! Deployments (containers with a name and an image, a selector that matches the
//! template's labels). Failures are one 422 `Invalid` with every cause, as
//! `ConfigMap "x" is invalid: [a, b]` with `details.causes`.

use crate::registry::ResourceType;
use crate::status::ApiError;
use serde_json::{Map, Value, json};

/// One field error: the field path, the cause reason and the text after the path.
struct Cause {
    field: String,
    reason: &'static str,
    text: String,
}

/// The errors found so far, in the order the real server reports them.
#[derive(Default)]
struct Errors(Vec<Cause>);

impl Errors {
    fn invalid(&mut self, field: impl Into<String>, value: &Value, why: &str) {
        let shown = serde_json::to_string(value).unwrap_or_default();
        self.0.push(Cause {
            field: field.into(),
            reason: "FieldValueInvalid",
            text: format!("Invalid value: {shown}: {why}"),
        });
    }
    fn required(&mut self, field: impl Into<String>, why: &str) {
        let text = if why.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {why}")
        };
        self.0.push(Cause {
            field: field.into(),
            reason: "FieldValueRequired",
            text,
        });
    }
    fn duplicate(&mut self, field: impl Into<String>, value: &Value) {
        let shown = serde_json::to_string(value).unwrap_or_default();
        self.0.push(Cause {
            field: field.into(),
            reason: "FieldValueDuplicate",
            text: format!("Duplicate value: {shown}"),
        });
    }
    fn too_long(&mut self, field: impl Into<String>, max: usize) {
        self.0.push(Cause {
            field: field.into(),
            reason: "FieldValueTooLong",
            text: format!("Too long: must have at most {max} bytes"),
        });
    }
}

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', \
regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_1123: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or \
'-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  \
or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and \
must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_KEY: &str = "a valid label key must consist of alphanumeric characters, '-', '_' or \
'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an \
optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
pub const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric \
characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
'MyValue',  or 'my_value',  or '12345', regex used for validation is \
'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' \
or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is \
'[-._a-zA-Z0-9]+')";

fn alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label_1123(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| alnum_lower(c) || c == '-')
        && s.starts_with(alnum_lower)
        && s.ends_with(alnum_lower)
}

fn is_subdomain(s: &str) -> bool {
    s.split('.').all(is_label_1123)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, possibly empty when `empty_ok`.
fn is_name_part(s: &str, empty_ok: bool) -> bool {
    if s.is_empty() {
        return empty_ok;
    }
    let edge = |c: char| c.is_ascii_alphanumeric();
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(edge)
        && s.ends_with(edge)
}

/// The messages a qualified name (label or annotation key, finalizer) gets.
fn qualified_name_errors(key: &str, many_slashes: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => return vec![many_slashes.to_string()],
    };
    let mut out = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            out.push("prefix part must be non-empty".to_string());
        } else {
            if p.len() > 253 {
                out.push("prefix part must be no more than 253 characters".to_string());
            }
            if !is_subdomain(p) {
                out.push(format!("prefix part {SUBDOMAIN}"));
            }
        }
    }
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".to_string());
    }
    if !is_name_part(name, false) {
        out.push(NAME_PART.to_string());
    }
    out
}

/// The name rule of a kind, by resource.
fn name_errors(rt: &ResourceType, name: &str) -> Vec<String> {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => {
            if name.contains('.') {
                vec!["must not contain dots".into()]
            } else if name.len() > 63 || !is_label_1123(name) {
                label_errors(name, 63, is_label_1123(name), LABEL_1123)
            } else {
                Vec::new()
            }
        }
        ("", "services") => {
            let ok = is_label_1123(name) && name.starts_with(|c: char| c.is_ascii_lowercase());
            label_errors(name, 63, ok, LABEL_1035)
        }
        ("rbac.authorization.k8s.io", _) => {
            if name == "." || name == ".." {
                vec![format!("may not be '{name}'")]
            } else {
                ["/", "%"]
                    .iter()
                    .filter(|s| name.contains(**s))
                    .map(|s| format!("may not contain '{s}'"))
                    .collect()
            }
        }
        _ => label_errors(name, 253, is_subdomain(name), SUBDOMAIN),
    }
}

fn label_errors(name: &str, max: usize, ok: bool, why: &str) -> Vec<String> {
    let mut out = Vec::new();
    if name.len() > max {
        out.push(format!("must be no more than {max} characters"));
    }
    if !ok {
        out.push(why.to_string());
    }
    out
}

/// A valid label value: at most 63 characters of the label-value alphabet, or empty.
pub fn is_label_value(v: &str) -> bool {
    v.len() <= 63 && is_name_part(v, true)
}

fn check_metadata(rt: &ResourceType, obj: &Value, errs: &mut Errors) {
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or("");
    if name.is_empty() {
        errs.required("metadata.name", "name or generateName is required");
    } else {
        for why in name_errors(rt, name) {
            errs.invalid("metadata.name", &json!(name), &why);
        }
    }
    let empty = Map::new();
    let labels = meta["labels"].as_object().unwrap_or(&empty);
    for (k, v) in labels {
        for why in qualified_name_errors(k, LABEL_KEY) {
            errs.invalid("metadata.labels", &json!(k), &why);
        }
        let v = v.as_str().unwrap_or("");
        if v.len() > 63 {
            errs.invalid(
                "metadata.labels",
                &json!(v),
                "must be no more than 63 characters",
            );
        }
        if !is_name_part(v, true) {
            errs.invalid("metadata.labels", &json!(v), LABEL_VALUE);
        }
    }
    let annotations = meta["annotations"].as_object().unwrap_or(&empty);
    let mut total = 0;
    for (k, v) in annotations {
        for why in qualified_name_errors(&k.to_ascii_lowercase(), LABEL_KEY) {
            errs.invalid("metadata.annotations", &json!(k), &why);
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > 256 * 1024 {
        errs.too_long("metadata.annotations", 256 * 1024);
    }
    let finalizers = meta["finalizers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, f) in finalizers.iter().enumerate() {
        let f = f.as_str().unwrap_or("");
        for why in qualified_name_errors(f, LABEL_KEY) {
            errs.invalid("metadata.finalizers", &json!(f), &why);
        }
        let standard = matches!(f, "kubernetes" | "orphan" | "foregroundDeletion");
        if !standard && !f.contains('/') {
            errs.invalid(
                format!("metadata.finalizers[{i}]"),
                &json!(f),
                "name is neither a standard finalizer name nor is it fully qualified",
            );
        }
    }
}

/// ConfigMap `data`/`binaryData` and Secret `data` keys.
fn check_data_keys(obj: &Value, fields: &[&str], errs: &mut Errors) {
    let empty = Map::new();
    for (i, field) in fields.iter().enumerate() {
        for k in obj[*field].as_object().unwrap_or(&empty).keys() {
            let at = format!("{field}[{k}]");
            let v = json!(k);
            if k == "." || k == ".." {
                errs.invalid(&at, &v, &format!("must not be '{k}'"));
            } else if k.starts_with("..") {
                errs.invalid(&at, &v, "must not start with '..'");
            } else if k.len() > 253 {
                errs.invalid(&at, &v, "must be no more than 253 characters");
            } else if k.is_empty()
                || !k
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                errs.invalid(&at, &v, CONFIG_KEY);
            }
            if i == 0 && fields.len() > 1 && obj[fields[1]].get(k).is_some() {
                errs.invalid(
                    &at,
                    &v,
                    &format!("duplicate of key present in {}", fields[1]),
                );
            }
        }
    }
}

/// A pod spec's containers: present, each with a unique name and an image.
fn check_pod_spec(spec: &Value, at: &str, errs: &mut Errors) {
    let containers = spec["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if containers.is_empty() {
        errs.required(format!("{at}.containers"), "");
    }
    let mut seen = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        let name = c["name"].as_str().unwrap_or("");
        if name.is_empty() {
            errs.required(format!("{at}.containers[{i}].name"), "");
        } else if seen.contains(&name) {
            errs.duplicate(format!("{at}.containers[{i}].name"), &json!(name));
        } else {
            seen.push(name);
        }
        if c["image"].as_str().unwrap_or("").is_empty() {
            errs.required(format!("{at}.containers[{i}].image"), "");
        }
    }
}

/// Whether `labels` satisfies a LabelSelector's `matchLabels` and `matchExpressions`.
fn selector_matches(sel: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let empty = Map::new();
    let labels_ok = sel["matchLabels"]
        .as_object()
        .unwrap_or(&empty)
        .iter()
        .all(|(k, v)| label(k) == v.as_str());
    let exprs_ok = sel["matchExpressions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str().unwrap_or("") {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        });
    labels_ok && exprs_ok
}

fn check_deployment(obj: &Value, errs: &mut Errors) {
    let spec = &obj["spec"];
    let selector = &spec["selector"];
    let template_labels = &spec["template"]["metadata"]["labels"];
    let empty_selector = selector.as_object().is_none_or(|m| {
        m.get("matchLabels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
            && m.get("matchExpressions")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
    });
    if empty_selector {
        errs.required("spec.selector", "");
    }
    if empty_selector || !selector_matches(selector, template_labels) {
        errs.invalid(
            "spec.template.metadata.labels",
            template_labels,
            "`selector` does not match template `labels`",
        );
    }
    check_pod_spec(&spec["template"]["spec"], "spec.template.spec", errs);
}

/// Validates an object of `rt` as it would be stored (defaults applied).
pub fn validate(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let mut errs = Errors::default();
    check_metadata(rt, obj, &mut errs);
    if !rt.crd {
        match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "configmaps") => check_data_keys(obj, &["data", "binaryData"], &mut errs),
            ("", "secrets") => check_data_keys(obj, &["data"], &mut errs),
            ("", "pods") => check_pod_spec(&obj["spec"], "spec", &mut errs),
            ("apps", "deployments") => check_deployment(obj, &mut errs),
            _ => {}
        }
    }
    if errs.0.is_empty() {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let what = if rt.group.is_empty() {
        rt.kind.clone()
    } else {
        format!("{}.{}", rt.kind, rt.group)
    };
    let lines: Vec<String> = errs
        .0
        .iter()
        .map(|c| format!("{}: {}", c.field, c.text))
        .collect();
    let all = if lines.len() == 1 {
        lines[0].clone()
    } else {
        format!("[{}]", lines.join(", "))
    };
    let causes: Vec<(&str, String, &str)> = errs
        .0
        .iter()
        .map(|c| (c.reason, c.text.clone(), c.field.as_str()))
        .collect();
    let mut e = ApiError::invalid(format!("{what} {name:?} is invalid: {all}"));
    let mut details = json!({"kind": rt.kind});
    if !name.is_empty() {
        details["name"] = json!(name);
    }
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    e.details = Some(details);
    Err(e.with_causes(&causes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn rt(key: &str) -> ResourceType {
        Registry::builtin()
            .by_key(key)
            .cloned()
            .expect("built-in kind")
    }

    fn message(key: &str, obj: Value) -> String {
        validate(&rt(key), &obj).unwrap_err().message
    }

    #[test]
    fn names_follow_the_kind_rule() {
        let e = validate(
            &rt("/configmaps"),
            &json!({"metadata": {"name": "Bad_Name"}}),
        )
        .unwrap_err();
        assert_eq!((e.code, e.reason.as_ref()), (422, "Invalid"));
        assert_eq!(
            e.message,
            format!(
                "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN}"
            )
        );
        let d = e.details.unwrap();
        assert_eq!(d["kind"], "ConfigMap");
        assert_eq!(d["causes"][0]["field"], "metadata.name");
        assert_eq!(d["causes"][0]["reason"], "FieldValueInvalid");
        assert!(
            message("/namespaces", json!({"metadata": {"name": "a.b"}}))
                .ends_with("must not contain dots")
        );
        assert!(
            message("/namespaces", json!({"metadata": {"name": "A"}})).contains("RFC 1123 label")
        );
        assert!(
            message("/services", json!({"metadata": {"name": "1svc"}})).contains("DNS-1035 label")
        );
        let role = json!({"metadata": {"name": "system:aggregate-to-view"}});
        assert!(validate(&rt("rbac.authorization.k8s.io/clusterroles"), &role).is_ok());
    }

    #[test]
    fn labels_annotations_and_finalizers() {
        let m = message(
            "/configmaps",
            json!({"metadata": {"name": "a", "labels": {"a b": "x y"}}}),
        );
        assert!(m.starts_with("ConfigMap \"a\" is invalid: [metadata.labels: Invalid value: \"a b\": name part must"), "{m}");
        assert!(
            m.contains(
                "metadata.labels: Invalid value: \"x y\": a valid label must be an empty string"
            ),
            "{m}"
        );
        let ok = json!({"metadata": {"name": "a", "labels": {"example.com/a": "", "b": "B_1.x"},
                        "annotations": {"helm.sh/hook": "pre install, ok"}, "finalizers": ["example.com/f"]}});
        assert!(validate(&rt("/configmaps"), &ok).is_ok());
        let m = message(
            "/configmaps",
            json!({"metadata": {"name": "a", "finalizers": ["myfinalizer"]}}),
        );
        assert_eq!(
            m,
            "ConfigMap \"a\" is invalid: metadata.finalizers[0]: Invalid value: \"myfinalizer\": \
             name is neither a standard finalizer name nor is it fully qualified"
        );
    }

    #[test]
    fn data_keys() {
        let m = message(
            "/configmaps",
            json!({"metadata": {"name": "dk"}, "data": {".": "x", "a": "1"}, "binaryData": {"a": "YQ=="}}),
        );
        assert_eq!(
            m,
            "ConfigMap \"dk\" is invalid: [data[.]: Invalid value: \".\": must not be '.', \
             data[a]: Invalid value: \"a\": duplicate of key present in binaryData]"
        );
        let m = message(
            "/secrets",
            json!({"metadata": {"name": "s"}, "data": {"a b": ""}}),
        );
        assert!(
            m.contains("data[a b]: Invalid value: \"a b\": a valid config key"),
            "{m}"
        );
    }

    #[test]
    fn pods_and_deployments_need_their_required_fields() {
        assert_eq!(
            message("/pods", json!({"metadata": {"name": "p"}, "spec": {}})),
            "Pod \"p\" is invalid: spec.containers: Required value"
        );
        assert_eq!(
            message(
                "/pods",
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"image": "x"}]}})
            ),
            "Pod \"p\" is invalid: spec.containers[0].name: Required value"
        );
        let d = json!({"metadata": {"name": "d1"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        assert_eq!(
            message("apps/deployments", d),
            "Deployment.apps \"d1\" is invalid: [spec.selector: Required value, \
             spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`]"
        );
        let d = json!({"metadata": {"name": "d1"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": [{"image": "x"}]}}}});
        assert_eq!(
            message("apps/deployments", d),
            "Deployment.apps \"d1\" is invalid: [spec.template.metadata.labels: Invalid value: {\"a\":\"c\"}: \
             `selector` does not match template `labels`, spec.template.spec.containers[0].name: Required value]"
        );
        let ok = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b", "c": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        assert!(validate(&rt("apps/deployments"), &ok).is_ok());
    }
}
