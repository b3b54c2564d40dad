//! Selectors for the server: label selectors (matchLabels + matchExpressions with
//! In/NotIn/Exists/DoesNotExist) and field selectors encoded to the query-string
//! syntax; a parser of that syntax (for tests and the debug CLI); a local matcher;
//! query-string escaping. Pure functions, used on whichever thread builds a request.

use super::error::KubeError;
use std::collections::BTreeMap;
use vendor_k8s_types::{LabelSelector, LabelSelectorRequirement};

/// Encodes a label selector as `a=b,c in (x,y),!d`. Requirements are sorted by key
/// (as client-go does) and values sorted, so equal selectors encode equally.
pub fn encode_label_selector(sel: &LabelSelector) -> Result<String, KubeError> {
    let mut parts: Vec<(String, String)> = Vec::new();
    for (k, v) in &sel.match_labels {
        check_key(k)?;
        parts.push((k.clone(), format!("{k}={v}")));
    }
    for r in &sel.match_expressions {
        check_key(&r.key)?;
        let mut vals = r.values.clone();
        vals.sort();
        vals.dedup();
        let k = &r.key;
        let s = match r.operator.as_str() {
            "In" | "NotIn" if vals.is_empty() => {
                return Err(KubeError::Selector(format!(
                    "key '{k}': operator {} needs at least one value",
                    r.operator
                )));
            }
            "In" => format!("{k} in ({})", vals.join(",")),
            "NotIn" => format!("{k} notin ({})", vals.join(",")),
            "Exists" | "DoesNotExist" if !vals.is_empty() => {
                return Err(KubeError::Selector(format!(
                    "key '{k}': operator {} takes no values",
                    r.operator
                )));
            }
            "Exists" => k.clone(),
            "DoesNotExist" => format!("!{k}"),
            op => {
                return Err(KubeError::Selector(format!(
                    "key '{k}': unknown operator '{op}'"
                )));
            }
        };
        parts.push((k.clone(), s));
    }
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(parts
        .into_iter()
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(","))
}

fn check_key(k: &str) -> Result<(), KubeError> {
    let ok = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    if ok {
        Ok(())
    } else {
        Err(KubeError::Selector(format!("invalid label key '{k}'")))
    }
}

/// One field selector requirement as hooks write it: `{field, operator, value}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub(crate) struct FieldRequirement {
    pub(crate) field: String,
    pub(crate) operator: String,
    #[serde(default)]
    pub(crate) value: String,
}

/// Encodes field requirements, ANDed: `=`, `==`, `Equals` → `f=v`; `!=`, `NotEquals`
/// → `f!=v`. Values are escaped (`\`, `,` and `=`) as the API server expects.
pub(crate) fn encode_field_selector(reqs: &[FieldRequirement]) -> Result<String, KubeError> {
    let mut out = Vec::with_capacity(reqs.len());
    for r in reqs {
        let op = match r.operator.as_str() {
            "=" | "==" | "Equals" => "=",
            "!=" | "NotEquals" => "!=",
            op => {
                return Err(KubeError::Selector(format!(
                    "{}{op}{}: operator '{op}' is not recognized",
                    r.field, r.value
                )));
            }
        };
        out.push(format!("{}{op}{}", r.field, escape_field_value(&r.value)));
    }
    Ok(out.join(","))
}

fn escape_field_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        if matches!(c, '\\' | ',' | '=') {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

/// Parses the label selector syntax back into a [`LabelSelector`]: `k=v`, `k==v`,
/// `k!=v` (NotIn with one value), `k in (a,b)`, `k notin (a)`, `k`, `!k`.
pub fn parse_label_selector(s: &str) -> Result<LabelSelector, KubeError> {
    let mut sel = LabelSelector::default();
    for term in split_terms(s) {
        let t = term.trim();
        if t.is_empty() {
            continue;
        }
        let bad = || KubeError::Selector(format!("cannot parse '{t}'"));
        if let Some(k) = t.strip_prefix('!') {
            push_expr(&mut sel, k.trim(), "DoesNotExist", vec![])?;
        } else if let Some((k, v)) = t.split_once("!=") {
            push_expr(&mut sel, k.trim(), "NotIn", vec![v.trim().to_string()])?;
        } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
            check_key(k.trim())?;
            sel.match_labels
                .insert(k.trim().to_string(), v.trim().to_string());
        } else if let Some((k, rest)) = t.split_once(" notin ").or_else(|| t.split_once(" in ")) {
            let op = if t.contains(" notin ") { "NotIn" } else { "In" };
            let inner = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(bad)?;
            let vals = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            push_expr(&mut sel, k.trim(), op, vals)?;
        } else if t.contains(char::is_whitespace) || t.contains('(') {
            return Err(bad());
        } else {
            push_expr(&mut sel, t, "Exists", vec![])?;
        }
    }
    Ok(sel)
}

fn push_expr(
    sel: &mut LabelSelector,
    k: &str,
    op: &str,
    values: Vec<String>,
) -> Result<(), KubeError> {
    check_key(k)?;
    sel.match_expressions.push(LabelSelectorRequirement {
        key: k.to_string(),
        operator: op.to_string(),
        values,
    });
    Ok(())
}

/// Splits on commas outside parentheses.
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
    out
}

/// Whether `labels` satisfy `sel` (the server's semantics, for local checks).
pub(crate) fn matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    sel.match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && sel.match_expressions.iter().all(|r| {
            let got = labels.get(&r.key);
            match r.operator.as_str() {
                "In" => got.is_some_and(|v| r.values.contains(v)),
                "NotIn" => got.is_none_or(|v| !r.values.contains(v)),
                "Exists" => got.is_some(),
                "DoesNotExist" => got.is_none(),
                _ => false,
            }
        })
}

/// Percent-encodes a query-string value (RFC 3986 unreserved characters pass).
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(k: &str, op: &str, vals: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: k.into(),
            operator: op.into(),
            values: vals.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// (selector, encoded form): encoding gives the string, parsing it gives back an
    /// equivalent selector (same encoding).
    #[test]
    fn label_selector_table() {
        let labels = |p: &[(&str, &str)]| {
            p.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let table: Vec<(LabelSelector, &str)> = vec![
            (LabelSelector::default(), ""),
            (
                LabelSelector {
                    match_labels: labels(&[("app", "web")]),
                    ..Default::default()
                },
                "app=web",
            ),
            (
                LabelSelector {
                    match_labels: labels(&[("tier", "db"), ("app", "web")]),
                    ..Default::default()
                },
                "app=web,tier=db",
            ),
            (
                LabelSelector {
                    match_expressions: vec![req("env", "In", &["prod", "dev"])],
                    ..Default::default()
                },
                "env in (dev,prod)",
            ),
            (
                LabelSelector {
                    match_expressions: vec![req("env", "NotIn", &["qa"])],
                    ..Default::default()
                },
                "env notin (qa)",
            ),
            (
                LabelSelector {
                    match_expressions: vec![req("example.com/x", "Exists", &[])],
                    ..Default::default()
                },
                "example.com/x",
            ),
            (
                LabelSelector {
                    match_expressions: vec![req("gone", "DoesNotExist", &[])],
                    ..Default::default()
                },
                "!gone",
            ),
            (
                LabelSelector {
                    match_labels: labels(&[("b", "1")]),
                    match_expressions: vec![req("c", "Exists", &[]), req("a", "In", &["x"])],
                },
                "a in (x),b=1,c",
            ),
        ];
        for (sel, want) in &table {
            let got = encode_label_selector(sel).unwrap();
            assert_eq!(&got, want);
            let back = parse_label_selector(&got).unwrap();
            assert_eq!(
                encode_label_selector(&back).unwrap(),
                *want,
                "round trip of {want}"
            );
        }
    }

    #[test]
    fn label_selector_errors() {
        let bad = [
            LabelSelector {
                match_expressions: vec![req("a", "In", &[])],
                ..Default::default()
            },
            LabelSelector {
                match_expressions: vec![req("a", "Exists", &["x"])],
                ..Default::default()
            },
            LabelSelector {
                match_expressions: vec![req("a", "Gt", &["1"])],
                ..Default::default()
            },
            LabelSelector {
                match_expressions: vec![req("a b", "Exists", &[])],
                ..Default::default()
            },
        ];
        for s in bad {
            assert!(encode_label_selector(&s).is_err(), "{s:?}");
        }
        for s in ["a in x", "a b", "a in (x"] {
            assert!(parse_label_selector(s).is_err(), "{s}");
        }
    }

    #[test]
    fn parser_accepts_all_forms() {
        let s = parse_label_selector("a==1, b!=2,c in (x, y),d notin (z),e,!f").unwrap();
        assert_eq!(s.match_labels.get("a").map(String::as_str), Some("1"));
        assert_eq!(s.match_expressions[0], req("b", "NotIn", &["2"]));
        assert_eq!(s.match_expressions[1], req("c", "In", &["x", "y"]));
        assert_eq!(s.match_expressions[2], req("d", "NotIn", &["z"]));
        assert_eq!(s.match_expressions[3], req("e", "Exists", &[]));
        assert_eq!(s.match_expressions[4], req("f", "DoesNotExist", &[]));
        let l: BTreeMap<String, String> = [("a", "1"), ("c", "y"), ("e", "")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert!(matches(&s, &l));
        let mut l2 = l.clone();
        l2.insert("f".into(), "1".into());
        assert!(!matches(&s, &l2));
    }

    #[test]
    fn field_selector_table() {
        let f = |field: &str, op: &str, v: &str| FieldRequirement {
            field: field.into(),
            operator: op.into(),
            value: v.into(),
        };
        let table = [
            (vec![f("metadata.name", "=", "x")], "metadata.name=x"),
            (vec![f("metadata.name", "==", "x")], "metadata.name=x"),
            (vec![f("metadata.name", "Equals", "x")], "metadata.name=x"),
            (
                vec![f("status.phase", "!=", "Running")],
                "status.phase!=Running",
            ),
            (
                vec![
                    f("status.phase", "NotEquals", "Running"),
                    f("metadata.namespace", "=", "a"),
                ],
                "status.phase!=Running,metadata.namespace=a",
            ),
            (
                vec![f("metadata.name", "=", "a,b=c\\")],
                "metadata.name=a\\,b\\=c\\\\",
            ),
        ];
        for (reqs, want) in table {
            assert_eq!(encode_field_selector(&reqs).unwrap(), want);
        }
        let e = encode_field_selector(&[f("a", "in", "b")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ainb: operator 'in' is not recognized"), "{e}");
    }

    #[test]
    fn query_escaping() {
        assert_eq!(query_escape("app in (a,b)"), "app%20in%20%28a%2Cb%29");
        assert_eq!(query_escape("x.y-z_~"), "x.y-z_~");
    }
}
