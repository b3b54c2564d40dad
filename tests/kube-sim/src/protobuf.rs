//! Decoding of Kubernetes protobuf request bodies
//! (`application/vnd.kubernetes.protobuf`): the `k8s\0` magic, the
//! `runtime.Unknown` envelope, and the few message types typed clients (kubectl
//! create, helm's release Secrets, leader election) send without a JSON
//! fallback: ConfigMap, Secret, Namespace, ServiceAccount, Lease and
//! DeleteOptions. Output is the JSON form the rest of kube-sim works on.
//! Field numbers follow k8s.io/api's generated.proto files.

use base64::Engine;
use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\x00";

/// One decoded field value.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Iterates over (field number, value) pairs of one message.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.buf.split_first().ok_or("truncated varint")?;
            self.buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err("truncated field".into());
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }

    fn next_field(&mut self) -> Result<Option<(u64, Field<'a>)>, String> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let value = match tag & 7 {
            0 => Field::Varint(self.varint()?),
            1 => self.take(8).map(|_| Field::Fixed)?,
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "length overflow")?;
                Field::Bytes(self.take(n)?)
            }
            5 => self.take(4).map(|_| Field::Fixed)?,
            w => return Err(format!("unsupported wire type {w}")),
        };
        Ok(Some((tag >> 3, value)))
    }
}

/// Calls `f` for every field of `buf`.
fn each<'a>(
    buf: &'a [u8],
    mut f: impl FnMut(u64, Field<'a>) -> Result<(), String>,
) -> Result<(), String> {
    let mut r = Reader { buf };
    while let Some((n, v)) = r.next_field()? {
        f(n, v)?;
    }
    Ok(())
}

fn string(v: &Field) -> Result<String, String> {
    match v {
        Field::Bytes(b) => String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8 string".into()),
        _ => Err("expected a length-delimited string".into()),
    }
}

fn bytes<'a>(v: &Field<'a>) -> Result<&'a [u8], String> {
    match v {
        Field::Bytes(b) => Ok(b),
        _ => Err("expected length-delimited bytes".into()),
    }
}

fn int(v: &Field) -> Result<i64, String> {
    match v {
        Field::Varint(x) => Ok(*x as i64),
        _ => Err("expected a varint".into()),
    }
}

/// A map entry (key = 1, value = 2); `b64` encodes a bytes value as base64.
fn map_entry(v: &Field, obj: &mut Map<String, Value>, b64: bool) -> Result<(), String> {
    let (mut k, mut val) = (String::new(), Value::String(String::new()));
    each(bytes(v)?, |n, f| {
        match n {
            1 => k = string(&f)?,
            2 if b64 => val = json!(base64::engine::general_purpose::STANDARD.encode(bytes(&f)?)),
            2 => val = json!(string(&f)?),
            _ => {}
        }
        Ok(())
    })?;
    obj.insert(k, val);
    Ok(())
}

/// `meta.v1.Time` / `MicroTime` (seconds = 1, nanos = 2) to RFC 3339.
fn time(v: &Field, micro: bool) -> Result<Value, String> {
    let (mut secs, mut nanos) = (0i64, 0i64);
    each(bytes(v)?, |n, f| {
        match n {
            1 => secs = int(&f)?,
            2 => nanos = int(&f)?,
            _ => {}
        }
        Ok(())
    })?;
    if secs == 0 && nanos == 0 {
        return Ok(Value::Null);
    }
    let base = crate::util::fmt_time(secs);
    Ok(json!(if micro {
        format!("{}.{:06}Z", base.trim_end_matches('Z'), nanos / 1000)
    } else {
        base
    }))
}

fn push(obj: &mut Map<String, Value>, key: &str, v: Value) {
    match obj.get_mut(key) {
        Some(Value::Array(a)) => a.push(v),
        _ => {
            obj.insert(key.to_string(), json!([v]));
        }
    }
}

fn map_field(obj: &mut Map<String, Value>, key: &str, f: &Field, b64: bool) -> Result<(), String> {
    let m = obj.entry(key.to_string()).or_insert_with(|| json!({}));
    match m.as_object_mut() {
        Some(m) => map_entry(f, m, b64),
        None => Err(format!("{key} is not a map")),
    }
}

/// A message of plain fields: `spec` maps field numbers to (name, kind).
fn simple(buf: &[u8], spec: &[(u64, &str, Kind)]) -> Result<Value, String> {
    let mut obj = Map::new();
    each(buf, |n, f| {
        let Some((_, name, kind)) = spec.iter().find(|(num, _, _)| *num == n) else {
            return Ok(());
        };
        let val = match kind {
            Kind::Str => json!(string(&f)?),
            Kind::Int => json!(int(&f)?),
            Kind::Bool => json!(int(&f)? != 0),
            Kind::Time => time(&f, false)?,
            Kind::MicroTime => time(&f, true)?,
            Kind::StrList => {
                push(&mut obj, name, json!(string(&f)?));
                return Ok(());
            }
            Kind::StrMap => return map_field(&mut obj, name, &f, false),
            Kind::BytesMap => return map_field(&mut obj, name, &f, true),
            Kind::Msg(dec) => dec(bytes(&f)?)?,
            Kind::MsgList(dec) => {
                push(&mut obj, name, dec(bytes(&f)?)?);
                return Ok(());
            }
        };
        // Go's encoder writes empty strings and zero times; JSON omits them.
        if val.is_null() || val == "" || (*name == "generation" && val == 0) {
            return Ok(());
        }
        obj.insert(name.to_string(), val);
        Ok(())
    })?;
    Ok(Value::Object(obj))
}

type Decoder = fn(&[u8]) -> Result<Value, String>;

/// How one field is decoded.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    Time,
    MicroTime,
    StrList,
    StrMap,
    BytesMap,
    Msg(Decoder),
    MsgList(Decoder),
}

fn owner_ref(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "kind", Str),
            (3, "name", Str),
            (4, "uid", Str),
            (5, "apiVersion", Str),
            (6, "controller", Bool),
            (7, "blockOwnerDeletion", Bool),
        ],
    )
}

fn object_meta(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "name", Str),
            (2, "generateName", Str),
            (3, "namespace", Str),
            (4, "selfLink", Str),
            (5, "uid", Str),
            (6, "resourceVersion", Str),
            (7, "generation", Int),
            (8, "creationTimestamp", Time),
            (9, "deletionTimestamp", Time),
            (10, "deletionGracePeriodSeconds", Int),
            (11, "labels", StrMap),
            (12, "annotations", StrMap),
            (13, "ownerReferences", MsgList(owner_ref)),
            (14, "finalizers", StrList),
        ],
    )
}

fn object_ref(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "kind", Str),
            (2, "namespace", Str),
            (3, "name", Str),
            (4, "uid", Str),
            (5, "apiVersion", Str),
            (6, "resourceVersion", Str),
            (7, "fieldPath", Str),
        ],
    )
}

fn local_ref(b: &[u8]) -> Result<Value, String> {
    simple(b, &[(1, "name", Kind::Str)])
}

fn config_map(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "data", StrMap),
            (3, "binaryData", BytesMap),
            (4, "immutable", Bool),
        ],
    )
}

fn secret(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "data", BytesMap),
            (3, "type", Str),
            (4, "stringData", StrMap),
            (5, "immutable", Bool),
        ],
    )
}

fn namespace_spec(b: &[u8]) -> Result<Value, String> {
    simple(b, &[(1, "finalizers", Kind::StrList)])
}

fn namespace_status(b: &[u8]) -> Result<Value, String> {
    simple(b, &[(1, "phase", Kind::Str)])
}

fn namespace(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "spec", Msg(namespace_spec)),
            (3, "status", Msg(namespace_status)),
        ],
    )
}

fn service_account(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "secrets", MsgList(object_ref)),
            (3, "imagePullSecrets", MsgList(local_ref)),
            (4, "automountServiceAccountToken", Bool),
        ],
    )
}

fn lease_spec(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "holderIdentity", Str),
            (2, "leaseDurationSeconds", Int),
            (3, "acquireTime", MicroTime),
            (4, "renewTime", MicroTime),
            (5, "leaseTransitions", Int),
            (6, "strategy", Str),
            (7, "preferredHolder", Str),
        ],
    )
}

fn lease(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "spec", Msg(lease_spec)),
        ],
    )
}

fn preconditions(b: &[u8]) -> Result<Value, String> {
    simple(
        b,
        &[(1, "uid", Kind::Str), (2, "resourceVersion", Kind::Str)],
    )
}

fn delete_options(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "gracePeriodSeconds", Int),
            (2, "preconditions", Msg(preconditions)),
            (3, "orphanDependents", Bool),
            (4, "propagationPolicy", Str),
            (5, "dryRun", StrList),
        ],
    )
}

/// Whether a body carries the protobuf magic prefix.
pub fn is_protobuf(body: &[u8]) -> bool {
    body.starts_with(MAGIC)
}

/// Decodes an enveloped protobuf body to JSON (with apiVersion and kind set).
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or("missing k8s protobuf magic prefix")?;
    let (mut type_meta, mut raw): (Value, &[u8]) = (json!({}), &[]);
    each(inner, |n, f| {
        match n {
            1 => {
                type_meta = simple(
                    bytes(&f)?,
                    &[(1, "apiVersion", Kind::Str), (2, "kind", Kind::Str)],
                )?
            }
            2 => raw = bytes(&f)?,
            _ => {}
        }
        Ok(())
    })?;
    let api_version = type_meta["apiVersion"].as_str().unwrap_or("").to_string();
    let kind = type_meta["kind"].as_str().unwrap_or("").to_string();
    let decoder: Decoder = match kind.as_str() {
        "ConfigMap" => config_map,
        "Secret" => secret,
        "Namespace" => namespace,
        "ServiceAccount" => service_account,
        "Lease" => lease,
        "DeleteOptions" => delete_options,
        other => {
            return Err(format!(
                "protobuf decoding of kind {other:?} ({api_version}) is not supported by kube-sim"
            ));
        }
    };
    let mut obj = decoder(raw)?;
    obj["apiVersion"] = json!(if api_version.is_empty() {
        "v1".to_string()
    } else {
        api_version
    });
    obj["kind"] = json!(kind);
    Ok(obj)
}

/// Encoding helpers, used by tests to build protobuf bodies the way Go clients do.
pub mod encode {
    fn varint(mut x: u64, out: &mut Vec<u8>) {
        while x >= 0x80 {
            out.push((x as u8) | 0x80);
            x >>= 7;
        }
        out.push(x as u8);
    }

    /// A length-delimited field.
    pub fn bytes_field(n: u64, data: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(data.len() as u64, out);
        out.extend_from_slice(data);
    }

    /// A varint field.
    pub fn varint_field(n: u64, x: u64, out: &mut Vec<u8>) {
        varint(n << 3, out);
        varint(x, out);
    }

    /// A map<string,string> entry field.
    pub fn map_entry(n: u64, k: &str, v: &[u8], out: &mut Vec<u8>) {
        let mut e = Vec::new();
        bytes_field(1, k.as_bytes(), &mut e);
        bytes_field(2, v, &mut e);
        bytes_field(n, &e, out);
    }

    /// Wraps a message in `k8s\0` + runtime.Unknown.
    pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        bytes_field(1, api_version.as_bytes(), &mut tm);
        bytes_field(2, kind.as_bytes(), &mut tm);
        let mut out = super::MAGIC.to_vec();
        bytes_field(1, &tm, &mut out);
        bytes_field(2, raw, &mut out);
        bytes_field(4, b"application/vnd.kubernetes.protobuf", &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::decode;
    use super::encode::*;

    #[test]
    fn decodes_secret_and_delete_options() {
        let mut meta = Vec::new();
        bytes_field(1, b"s1", &mut meta);
        map_entry(11, "owner", b"helm", &mut meta);
        let mut msg = Vec::new();
        bytes_field(1, &meta, &mut msg);
        map_entry(2, "release", b"\x00\x01", &mut msg);
        bytes_field(3, b"helm.sh/release.v1", &mut msg);
        let v = decode(&envelope("v1", "Secret", &msg)).unwrap();
        assert_eq!(v["metadata"]["labels"]["owner"], "helm");
        assert_eq!(v["data"]["release"], "AAE=");
        assert_eq!(v["type"], "helm.sh/release.v1");

        let mut d = Vec::new();
        varint_field(1, 0, &mut d);
        bytes_field(4, b"Foreground", &mut d);
        let v = decode(&envelope("meta.k8s.io/v1", "DeleteOptions", &d)).unwrap();
        assert_eq!(v["propagationPolicy"], "Foreground");
        assert_eq!(v["gracePeriodSeconds"], 0);
    }

    #[test]
    fn rejects_truncated() {
        assert!(decode(b"k8s\x00\x0a\x05ab").is_err());
        assert!(decode(b"{}").is_err());
    }
}
