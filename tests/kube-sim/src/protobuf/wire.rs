//! The protobuf wire format, just enough for Kubernetes request bodies: a
//! field reader (varint, length-delimited, fixed), typed field helpers, and
//! `simple`, which decodes a message from a table of (field number, JSON name,
//! kind) rows. `messages` holds those tables.

use base64::Engine;
use serde_json::{Map, Value, json};

/// One decoded field value.
pub(super) enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Iterates over (field number, value) pairs of one message.
pub(super) struct Reader<'a> {
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
pub(super) fn each<'a>(
    buf: &'a [u8],
    mut f: impl FnMut(u64, Field<'a>) -> Result<(), String>,
) -> Result<(), String> {
    let mut r = Reader { buf };
    while let Some((n, v)) = r.next_field()? {
        f(n, v)?;
    }
    Ok(())
}

pub(super) fn string(v: &Field) -> Result<String, String> {
    match v {
        Field::Bytes(b) => String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8 string".into()),
        _ => Err("expected a length-delimited string".into()),
    }
}

pub(super) fn bytes<'a>(v: &Field<'a>) -> Result<&'a [u8], String> {
    match v {
        Field::Bytes(b) => Ok(b),
        _ => Err("expected length-delimited bytes".into()),
    }
}

pub(super) fn int(v: &Field) -> Result<i64, String> {
    match v {
        Field::Varint(x) => Ok(*x as i64),
        _ => Err("expected a varint".into()),
    }
}

/// A map entry (key = 1, value = 2); `b64` encodes a bytes value as base64.
pub(super) fn map_entry(v: &Field, obj: &mut Map<String, Value>, b64: bool) -> Result<(), String> {
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
pub(super) fn time(v: &Field, micro: bool) -> Result<Value, String> {
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

pub(super) fn push(obj: &mut Map<String, Value>, key: &str, v: Value) {
    match obj.get_mut(key) {
        Some(Value::Array(a)) => a.push(v),
        _ => {
            obj.insert(key.to_string(), json!([v]));
        }
    }
}

pub(super) fn map_field(
    obj: &mut Map<String, Value>,
    key: &str,
    f: &Field,
    b64: bool,
) -> Result<(), String> {
    let m = obj.entry(key.to_string()).or_insert_with(|| json!({}));
    match m.as_object_mut() {
        Some(m) => map_entry(f, m, b64),
        None => Err(format!("{key} is not a map")),
    }
}

/// A message of plain fields: `spec` maps field numbers to (name, kind).
pub(super) fn simple(buf: &[u8], spec: &[(u64, &str, Kind)]) -> Result<Value, String> {
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

pub(super) type Decoder = fn(&[u8]) -> Result<Value, String>;

/// How one field is decoded.
#[derive(Clone, Copy)]
pub(super) enum Kind {
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
