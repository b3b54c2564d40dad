//! What counts as drift: the fields a release's manifest sets, against the object
//! the API server holds. A pure function of two JSON trees, so every rule below is
//! tested without a server; the watcher ([`super::watcher`]) calls it per event.
//!
//! - Only what the manifest sets is compared: a field the server defaulted, `status`,
//!   `metadata` other than labels and annotations, or a key another controller added
//!   is no claim of the manifest, so it is never drift.
//! - Lists of objects that each have a `name` (containers, env, ports, volumes) are
//!   matched by name, so a sidecar a webhook injected is not drift; other lists of
//!   objects are matched by position; lists of scalars (args, command) must be equal.
//! - A zero value the manifest sets (`""`, `0`, `false`, `{}`, `[]`, `null`) matches
//!   an absent field: the API drops Go's zero values.
//! - Quantities compare by value (`0.5` = `500m`, `1Gi` = `1024Mi`), and a Secret's
//!   `stringData` compares as the `data` it becomes.
//!
//! Paths are `/`-separated; a list element matched by name is written `name=<n>`,
//! one matched by position its index. Ignore rules are such paths where `*` stands
//! for any one segment; a rule ignores its path and everything under it.

use serde_json::{Map, Value};

/// One field whose live value is not the manifest's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Difference {
    pub(crate) path: String,
    /// What the manifest sets.
    pub(crate) want: Value,
    /// What the server holds (`null` when the field is absent).
    pub(crate) live: Value,
}

/// The differences between the manifest's object `want` and the live object,
/// except under the paths `ignore` names.
pub(crate) fn differences(want: &Value, live: &Value, ignore: &[String]) -> Vec<Difference> {
    let mut out = Vec::new();
    let Some(want) = want.as_object() else {
        return out;
    };
    let want = secret_string_data(want);
    let empty = Map::new();
    let live_map = live.as_object().unwrap_or(&empty);
    for (key, value) in &want {
        let live = live_map.get(key).unwrap_or(&Value::Null);
        match key.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                for part in ["labels", "annotations"] {
                    let path = format!("/metadata/{part}");
                    walk(&path, &value[part], &live[part], &mut out);
                }
            }
            _ => walk(&format!("/{}", escape(key)), value, live, &mut out),
        }
    }
    out.retain(|d| !ignore.iter().any(|rule| covers(rule, &d.path)));
    out
}

/// A Secret's `stringData` as the `data` the server makes of it.
fn secret_string_data(want: &Map<String, Value>) -> Map<String, Value> {
    let mut want = want.clone();
    if want.get("kind").and_then(Value::as_str) != Some("Secret") {
        return want;
    }
    let Some(Value::Object(strings)) = want.remove("stringData") else {
        return want;
    };
    use base64::Engine;
    let data = want
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(data) = data {
        for (k, v) in strings {
            let text = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(k, Value::String(encoded));
        }
    }
    want
}

fn walk(path: &str, want: &Value, live: &Value, out: &mut Vec<Difference>) {
    if want.is_null() {
        return;
    }
    if live.is_null() {
        if !is_zero(want) {
            out.push(diff(path, want, live));
        }
        return;
    }
    match (want, live) {
        (Value::Object(w), Value::Object(l)) => {
            for (key, value) in w {
                let live = l.get(key).unwrap_or(&Value::Null);
                walk(&format!("{path}/{}", escape(key)), value, live, out);
            }
        }
        (Value::Array(w), Value::Array(l)) => walk_list(path, w, l, out),
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => {
            out.push(diff(path, want, live))
        }
        _ if scalars_match(want, live) => {}
        _ => out.push(diff(path, want, live)),
    }
}

fn walk_list(path: &str, want: &[Value], live: &[Value], out: &mut Vec<Difference>) {
    if want.iter().all(|v| !v.is_object() && !v.is_array()) {
        let equal =
            want.len() == live.len() && want.iter().zip(live).all(|(w, l)| scalars_match(w, l));
        if !equal {
            out.push(diff(
                path,
                &Value::from(want.to_vec()),
                &Value::from(live.to_vec()),
            ));
        }
        return;
    }
    if let Some(names) = names_of(want) {
        for (name, w) in names.iter().zip(want) {
            let found = live.iter().find(|l| l["name"].as_str() == Some(name));
            let at = format!("{path}/name={}", escape(name));
            walk(&at, w, found.unwrap_or(&Value::Null), out);
        }
        return;
    }
    for (i, w) in want.iter().enumerate() {
        walk(
            &format!("{path}/{i}"),
            w,
            live.get(i).unwrap_or(&Value::Null),
            out,
        );
    }
}

/// The `name` of every element, when every element is an object with a distinct one.
fn names_of(list: &[Value]) -> Option<Vec<&str>> {
    let names: Vec<&str> = list
        .iter()
        .map(|v| v["name"].as_str())
        .collect::<Option<_>>()?;
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    (sorted.len() == names.len()).then_some(names)
}

fn diff(path: &str, want: &Value, live: &Value) -> Difference {
    Difference {
        path: path.to_string(),
        want: want.clone(),
        live: live.clone(),
    }
}

/// Go's zero values, which the API leaves out of what it returns.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Equal scalars: the same JSON, equal numbers, or equal quantities.
fn scalars_match(want: &Value, live: &Value) -> bool {
    if want == live {
        return true;
    }
    match (number_of(want), number_of(live)) {
        (Some(a), Some(b)) => (a - b).abs() <= f64::EPSILON * a.abs().max(b.abs()).max(1.0),
        _ => false,
    }
}

/// A number, or a Kubernetes quantity (`500m`, `1Gi`, `2e3`) as a number.
fn number_of(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => quantity(s),
        _ => None,
    }
}

fn quantity(text: &str) -> Option<f64> {
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let text = text.trim();
    for (suffix, factor) in SUFFIXES {
        if let Some(number) = text.strip_suffix(suffix) {
            return plain_number(number).map(|n| n * factor);
        }
    }
    plain_number(text)
}

/// A decimal number as quantities write it (no sign but `-`, no `inf`/`nan`).
fn plain_number(text: &str) -> Option<f64> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let ok = digits.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && digits
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    ok.then(|| text.parse().ok()).flatten()
}

/// A path segment with `/` and `~` escaped as in a JSON pointer.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Whether ignore rule `rule` covers `path` (`*` matches one segment; a rule
/// covers its path and everything under it).
pub(crate) fn covers(rule: &str, path: &str) -> bool {
    let rule: Vec<&str> = rule.trim_start_matches('/').split('/').collect();
    let path: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    rule.len() <= path.len() && rule.iter().zip(&path).all(|(r, p)| *r == "*" || r == p)
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
