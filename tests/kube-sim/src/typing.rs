//! Strict typing of the built-in kinds our tests write, as kube-apiserver's decoder
//! enforces it before anything else looks at a body: ObjectMeta fields, ConfigMap and
//! Secret data (Secret `data` and ConfigMap `binaryData` must be base64), Lease spec
//! (int32 durations, MicroTime timestamps) and workload `replicas`. A wrong type is
//! the Go decoder's error, so kube-sim's messages read like the real server's:
//! `json: cannot unmarshal bool into Go struct field ConfigMap.data of type string`.
//!
//! Only the fields listed in [`fields`] are checked; anything else is taken as sent.
//! Custom resources are not typed here (their schemas are not enforced at all).
//! When several fields are wrong, the first in key order is reported (the real server
//! reports the first in the document's order).

use crate::registry::ResourceType;
use crate::status::ApiError;
use serde_json::Value;

/// The Go type a field decodes into.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    Str,
    Bool,
    Int32,
    /// `map[string]string`
    MapStr,
    /// `map[string][]byte`: values are base64 strings.
    MapBytes,
    /// `[]string`
    StrList,
    /// `metav1.MicroTime`: RFC 3339 with exactly six fractional digits.
    MicroTime,
}

/// One typed field: the Go struct that holds it, its JSON path and its type.
struct Field {
    go_struct: &'static str,
    path: &'static [&'static str],
    ty: Ty,
}

const fn f(go_struct: &'static str, path: &'static [&'static str], ty: Ty) -> Field {
    Field {
        go_struct,
        path,
        ty,
    }
}

const META: &[Field] = &[
    f("ObjectMeta", &["metadata", "name"], Ty::Str),
    f("ObjectMeta", &["metadata", "generateName"], Ty::Str),
    f("ObjectMeta", &["metadata", "namespace"], Ty::Str),
    f("ObjectMeta", &["metadata", "resourceVersion"], Ty::Str),
    f("ObjectMeta", &["metadata", "labels"], Ty::MapStr),
    f("ObjectMeta", &["metadata", "annotations"], Ty::MapStr),
    f("ObjectMeta", &["metadata", "finalizers"], Ty::StrList),
];

const CONFIGMAP: &[Field] = &[
    f("ConfigMap", &["binaryData"], Ty::MapBytes),
    f("ConfigMap", &["data"], Ty::MapStr),
    f("ConfigMap", &["immutable"], Ty::Bool),
];

const SECRET: &[Field] = &[
    f("Secret", &["data"], Ty::MapBytes),
    f("Secret", &["immutable"], Ty::Bool),
    f("Secret", &["stringData"], Ty::MapStr),
    f("Secret", &["type"], Ty::Str),
];

const LEASE: &[Field] = &[
    f("LeaseSpec", &["spec", "acquireTime"], Ty::MicroTime),
    f("LeaseSpec", &["spec", "holderIdentity"], Ty::Str),
    f("LeaseSpec", &["spec", "leaseDurationSeconds"], Ty::Int32),
    f("LeaseSpec", &["spec", "leaseTransitions"], Ty::Int32),
    f("LeaseSpec", &["spec", "renewTime"], Ty::MicroTime),
];

const DEPLOYMENT: &[Field] = &[f("DeploymentSpec", &["spec", "replicas"], Ty::Int32)];
const STATEFULSET: &[Field] = &[f("StatefulSetSpec", &["spec", "replicas"], Ty::Int32)];
const REPLICASET: &[Field] = &[f("ReplicaSetSpec", &["spec", "replicas"], Ty::Int32)];

/// The typed fields of a resource (besides `metadata`), by store key.
fn fields(rt: &ResourceType) -> &'static [Field] {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "configmaps") => CONFIGMAP,
        ("", "secrets") => SECRET,
        ("coordination.k8s.io", "leases") => LEASE,
        ("apps", "deployments") => DEPLOYMENT,
        ("apps", "statefulsets") => STATEFULSET,
        ("apps", "replicasets") => REPLICASET,
        _ => &[],
    }
}

/// The name Go's decoder uses for a JSON value's type.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A decoding failure, worded as the Go decoder words it.
fn mismatch(field: &Field, v: &Value, go_type: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {}.{} of type {go_type}",
        json_type(v),
        field.go_struct,
        field.path.join(".")
    )
}

/// Checks one value against its field's type. `null` decodes to the zero value.
fn check_value(field: &Field, v: &Value) -> Result<(), String> {
    let kind_mismatch = |go_type: &str| Err(mismatch(field, v, go_type));
    match (field.ty, v) {
        (_, Value::Null) => Ok(()),
        (Ty::Str, Value::String(_)) | (Ty::Bool, Value::Bool(_)) => Ok(()),
        (Ty::Str, _) => kind_mismatch("string"),
        (Ty::Bool, _) => kind_mismatch("bool"),
        (Ty::Int32, Value::Number(n)) => match n.as_i64() {
            Some(i) if i32::try_from(i).is_ok() => Ok(()),
            _ => Err(format!(
                "json: cannot unmarshal number {n} into Go struct field {}.{} of type int32",
                field.go_struct,
                field.path.join(".")
            )),
        },
        (Ty::Int32, _) => kind_mismatch("int32"),
        (Ty::MapStr, Value::Object(m)) => match m.values().find(|x| !x.is_string() && !x.is_null())
        {
            Some(bad) => Err(mismatch(field, bad, "string")),
            None => Ok(()),
        },
        (Ty::MapStr, _) => kind_mismatch("map[string]string"),
        (Ty::MapBytes, Value::Object(m)) => {
            for x in m.values() {
                match x {
                    Value::Null => {}
                    Value::String(s) => go_base64(s)?,
                    other => return Err(mismatch(field, other, "[]uint8")),
                }
            }
            Ok(())
        }
        (Ty::MapBytes, _) => kind_mismatch("map[string][]uint8"),
        (Ty::StrList, Value::Array(a)) => match a.iter().find(|x| !x.is_string() && !x.is_null()) {
            Some(bad) => Err(mismatch(field, bad, "string")),
            None => Ok(()),
        },
        (Ty::StrList, _) => kind_mismatch("[]string"),
        (Ty::MicroTime, Value::String(s)) => micro_time(s),
        (Ty::MicroTime, _) => kind_mismatch("v1.MicroTime"),
    }
}

/// The first typing error of `obj` as a resource of `rt`, worded like Go's decoder.
pub fn first_error(rt: &ResourceType, obj: &Value) -> Option<String> {
    if rt.crd {
        return None;
    }
    if let Some(m) = obj
        .get("metadata")
        .filter(|m| !m.is_object() && !m.is_null())
    {
        return Some(format!(
            "json: cannot unmarshal {} into Go struct field {}.metadata of type v1.ObjectMeta",
            json_type(m),
            rt.kind
        ));
    }
    for field in META.iter().chain(fields(rt)) {
        let mut v = obj;
        for p in field.path {
            match v.get(*p) {
                Some(next) => v = next,
                None => {
                    v = &Value::Null;
                    break;
                }
            }
        }
        if let Err(e) = check_value(field, v) {
            return Some(e);
        }
    }
    None
}

/// A create or update body that does not decode: 400, as kube-apiserver answers
/// `ConfigMap in version "v1" cannot be handled as a ConfigMap: <decoder error>`.
pub fn check_body(rt: &ResourceType, version: &str, obj: &Value) -> Result<(), ApiError> {
    match first_error(rt, obj) {
        None => Ok(()),
        Some(e) => Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}",
            kind = rt.kind
        ))),
    }
}

/// A merge / JSON / strategic patch whose result does not decode: 422, as
/// kube-apiserver answers `"" is invalid: patch: Invalid value: "<patched object>": <error>`.
pub fn check_patched(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    match first_error(rt, obj) {
        None => Ok(()),
        Some(e) => {
            let text = serde_json::to_string(obj).unwrap_or_default();
            let value = format!("Invalid value: {}: {e}", serde_json::Value::String(text));
            Err(
                ApiError::invalid(format!(" \"\" is invalid: patch: {value}")).with_causes(&[(
                    "FieldValueInvalid",
                    value,
                    "patch",
                )]),
            )
        }
    }
}

/// Where a string was expected and something else sits, as structured-merge-diff
/// words it: `.data.a: expected string, got &value.valueUnstructured{Value:1}`.
fn smd_string_error(rt: &ResourceType, obj: &Value) -> Option<String> {
    let fields = META.iter().chain(fields(rt));
    for field in fields.filter(|f| matches!(f.ty, Ty::Str | Ty::MapStr)) {
        let Some(v) = field.path.iter().try_fold(obj, |v, p| v.get(*p)) else {
            continue;
        };
        let at = format!(".{}", field.path.join("."));
        let bad = match (field.ty, v) {
            (Ty::Str, Value::Bool(_) | Value::Number(_)) => Some((at, v)),
            (Ty::MapStr, Value::Object(m)) => m
                .iter()
                .find(|(_, x)| x.is_boolean() || x.is_number())
                .map(|(k, x)| (format!("{at}.{k}"), x)),
            _ => None,
        };
        if let Some((at, v)) = bad {
            return Some(format!(
                "{at}: expected string, got &value.valueUnstructured{{Value:{v}}}"
            ));
        }
    }
    None
}

/// A server-side apply configuration that does not fit the type: 500 with no reason,
/// as kube-apiserver answers `failed to create typed patch object (<ns>/<name>; <gvk>):
/// <error>` (its structured-merge wording for a scalar where a string belongs, else
/// the decoder's).
pub fn check_applied(rt: &ResourceType, version: &str, obj: &Value) -> Result<(), ApiError> {
    match first_error(rt, obj) {
        None => Ok(()),
        Some(e) => {
            let e = smd_string_error(rt, obj).unwrap_or(e);
            let m = &obj["metadata"];
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            Err(ApiError::new(
                500,
                "",
                format!(
                    "failed to create typed patch object ({}/{}; {}/{version}, Kind={}): {e}",
                    s("namespace"),
                    s("name"),
                    rt.group,
                    rt.kind
                ),
            ))
        }
    }
}

/// Go's `base64.StdEncoding` decoding rules (padding required, `\r`/`\n` skipped);
/// the error names the byte offset Go reports: `illegal base64 data at input byte N`.
pub fn go_base64(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let bad = |at: usize| Err(format!("illegal base64 data at input byte {at}"));
    let is_nl = |c: u8| c == b'\n' || c == b'\r';
    let is_b64 = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let mut i = 0;
    loop {
        // One quantum of up to four symbols.
        let mut j = 0;
        while j < 4 {
            if i == b.len() {
                return if j == 0 { Ok(()) } else { bad(i - j) };
            }
            let c = b[i];
            i += 1;
            if is_b64(c) {
                j += 1;
                continue;
            }
            if is_nl(c) {
                continue;
            }
            if c != b'=' || j < 2 {
                return bad(i - 1);
            }
            if j == 2 {
                // a second '=' must follow (newlines may sit between)
                while i < b.len() && is_nl(b[i]) {
                    i += 1;
                }
                if i == b.len() {
                    return bad(b.len());
                }
                if b[i] != b'=' {
                    return bad(i - 1);
                }
                i += 1;
            }
            while i < b.len() && is_nl(b[i]) {
                i += 1;
            }
            return if i < b.len() { bad(i) } else { Ok(()) };
        }
    }
}

/// `metav1.MicroTime`: Go's `time.Parse` with layout `2006-01-02T15:04:05.000000Z07:00`;
/// the error names the part of the value that did not fit, as Go's does.
fn micro_time(s: &str) -> Result<(), String> {
    const LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";
    let fail = |rest: &str, elem: &str| {
        Err(format!(
            "parsing time {s:?} as {LAYOUT:?}: cannot parse {rest:?} as {elem:?}"
        ))
    };
    let digits =
        |r: &str, n: usize| r.len() >= n && r.as_bytes()[..n].iter().all(u8::is_ascii_digit);
    // (element, digits it needs, or the literal text it must be)
    let steps: [(&str, usize); 12] = [
        ("2006", 4),
        ("-", 0),
        ("01", 2),
        ("-", 0),
        ("02", 2),
        ("T", 0),
        ("15", 2),
        (":", 0),
        ("04", 2),
        (":", 0),
        ("05", 2),
        (".000000", 7),
    ];
    let mut rest = s;
    for (elem, n) in steps {
        if elem == ".000000" {
            if !(rest.starts_with('.') && digits(&rest[1..], 6)) {
                return fail(rest, elem);
            }
            rest = &rest[7..];
        } else if n == 0 {
            match rest.strip_prefix(elem) {
                Some(r) => rest = r,
                None => return fail(rest, elem),
            }
        } else if digits(rest, n) {
            rest = &rest[n..];
        } else {
            return fail(rest, elem);
        }
    }
    let zone_ok = rest == "Z"
        || (rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && digits(&rest[1..], 2)
            && rest.as_bytes()[3] == b':'
            && digits(&rest[4..], 2));
    if zone_ok {
        Ok(())
    } else if rest.is_empty() || !matches!(rest.as_bytes()[0], b'Z' | b'+' | b'-') {
        fail(rest, "Z07:00")
    } else {
        Err(format!("parsing time {s:?}: extra text: {:?}", rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn rt(group: &str, plural: &str) -> ResourceType {
        Registry::builtin()
            .by_key(&format!("{group}/{plural}"))
            .cloned()
            .expect("built-in kind")
    }

    #[test]
    fn base64_offsets_match_go() {
        // (input, Go's answer) as measured on kube-apiserver 1.35
        let cases = [
            ("", None),
            ("YQ==", Some(None)),
            ("YR==", Some(None)),
            ("YWJj\nYWJj", Some(None)),
            ("abc", Some(Some(0))),
            ("ab=c", Some(Some(2))),
            ("YQ", Some(Some(0))),
            ("YQ=", Some(Some(3))),
            ("YQ==YQ==", Some(Some(4))),
            ("YW Jj", Some(Some(2))),
            ("not base64!", Some(Some(3))),
        ];
        for (input, want) in cases {
            let got = go_base64(input).err();
            let want = want
                .flatten()
                .map(|n| format!("illegal base64 data at input byte {n}"));
            assert_eq!(got, want, "{input:?}");
        }
    }

    #[test]
    fn configmap_values_must_be_strings() {
        let cm = rt("", "configmaps");
        let e = check_body(
            &cm,
            "v1",
            &json!({"metadata": {"name": "a"}, "data": {"a": false}}),
        )
        .unwrap_err();
        assert_eq!((e.code, e.reason.as_ref()), (400, "BadRequest"));
        assert_eq!(
            e.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal \
             bool into Go struct field ConfigMap.data of type string"
        );
        let e = first_error(&cm, &json!({"data": "x"})).unwrap();
        assert!(
            e.ends_with("ConfigMap.data of type map[string]string"),
            "{e}"
        );
        let e = first_error(&cm, &json!({"metadata": {"labels": {"a": 1}}})).unwrap();
        assert!(
            e.ends_with("ObjectMeta.metadata.labels of type string"),
            "{e}"
        );
        let e = first_error(&cm, &json!({"metadata": "x"})).unwrap();
        assert!(
            e.ends_with("ConfigMap.metadata of type v1.ObjectMeta"),
            "{e}"
        );
        assert_eq!(
            first_error(&cm, &json!({"data": {"a": null, "b": "x"}})),
            None
        );
    }

    #[test]
    fn secret_data_must_be_base64() {
        let s = rt("", "secrets");
        let e = first_error(&s, &json!({"data": {"a": "not base64!"}})).unwrap();
        assert_eq!(e, "illegal base64 data at input byte 3");
        let e = first_error(&s, &json!({"data": {"a": 1}})).unwrap();
        assert!(e.ends_with("Secret.data of type []uint8"), "{e}");
        let e = first_error(&s, &json!({"stringData": {"a": true}})).unwrap();
        assert!(e.ends_with("Secret.stringData of type string"), "{e}");
        assert_eq!(first_error(&s, &json!({"data": {"a": "YQ=="}})), None);
    }

    #[test]
    fn lease_times_need_microseconds() {
        let l = rt("coordination.k8s.io", "leases");
        let spec = |t: &str| json!({"spec": {"renewTime": t}});
        assert_eq!(first_error(&l, &spec("2024-01-01T00:00:00.000000Z")), None);
        assert_eq!(
            first_error(&l, &spec("2024-01-01T00:00:00.123456+02:00")),
            None
        );
        assert_eq!(
            first_error(&l, &spec("2024-01-01T00:00:00Z")).unwrap(),
            "parsing time \"2024-01-01T00:00:00Z\" as \"2006-01-02T15:04:05.000000Z07:00\": \
             cannot parse \"Z\" as \".000000\""
        );
        assert_eq!(
            first_error(&l, &spec("yesterday")).unwrap(),
            "parsing time \"yesterday\" as \"2006-01-02T15:04:05.000000Z07:00\": \
             cannot parse \"yesterday\" as \"2006\""
        );
        let e = first_error(&l, &json!({"spec": {"leaseDurationSeconds": "15"}})).unwrap();
        assert!(
            e.ends_with("LeaseSpec.spec.leaseDurationSeconds of type int32"),
            "{e}"
        );
    }

    #[test]
    fn apply_errors_use_the_structured_merge_wording() {
        let cm = rt("", "configmaps");
        let obj = json!({"metadata": {"name": "ssa"}, "data": {"a": 1}});
        let e = check_applied(&cm, "v1", &obj).unwrap_err();
        assert_eq!((e.code, e.reason.as_ref()), (500, ""));
        assert_eq!(
            e.message,
            "failed to create typed patch object (/ssa; /v1, Kind=ConfigMap): .data.a: expected \
             string, got &value.valueUnstructured{Value:1}"
        );
        assert!(
            e.to_status().get("reason").is_none(),
            "an empty reason is omitted"
        );
    }

    #[test]
    fn replicas_are_int32() {
        let d = rt("apps", "deployments");
        let e = first_error(&d, &json!({"spec": {"replicas": "3"}})).unwrap();
        assert_eq!(
            e,
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
    }
}
