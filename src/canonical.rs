//! One pass from an object's JSON text to the form hooks get: compact, object
//! keys sorted (exactly what serde_json writes for the same object as a `Value`),
//! optionally with `apiVersion`/`kind` filled in, plus the metadata the client
//! needs (namespace, name, resourceVersion). No tree of values is built: each
//! object level borrows its entries from the input, sorts them, and writes them
//! out, so the cost is about one output string, not a `Value` tree ten times the
//! object's size. Used by the reflector for every watch event and by the monitor
//! for listed objects.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// The metadata read while writing an object.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Meta {
    pub namespace: String,
    pub name: String,
    pub resource_version: String,
    /// Whether the object itself had `apiVersion` and `kind`.
    pub has_type_meta: bool,
}

/// The canonical text of the JSON object `text` and its metadata. `type_meta`
/// (apiVersion, kind) is added where the object lacks those keys.
pub fn canonicalize(text: &str, type_meta: Option<(&str, &str)>) -> Result<(String, Meta), String> {
    let bad = |e: serde_json::Error| format!("bad object: {e}");
    // The type meta as JSON strings, made first so the entries can borrow them.
    let quoted: Vec<(&str, Box<RawValue>)> = type_meta
        .into_iter()
        .flat_map(|(api, kind)| [("apiVersion", api), ("kind", kind)])
        .filter_map(|(k, v)| {
            Some((
                k,
                RawValue::from_string(serde_json::to_string(v).ok()?).ok()?,
            ))
        })
        .collect();
    let mut w = Writer::new(text.len() + 64);
    w.read_entries(text).map_err(bad)?;
    let has = |key: &str| w.scratch.iter().any(|(k, _)| k == key);
    let (has_api_version, has_kind) = (has("apiVersion"), has("kind"));
    let mut meta = Meta {
        has_type_meta: has_api_version && has_kind,
        ..Meta::default()
    };
    for (key, value) in &quoted {
        let present = if *key == "kind" {
            has_kind
        } else {
            has_api_version
        };
        if !present {
            w.scratch.push((Cow::Borrowed(*key), &**value));
        }
    }
    w.write_entries(0, Some(&mut meta), 0).map_err(bad)?;
    let text = String::from_utf8(w.out).map_err(|e| format!("bad object: {e}"))?;
    Ok((text, meta))
}

/// The canonical text of any JSON value (a jq filter's result, say).
pub fn canonical_value(text: &str) -> Result<String, String> {
    let raw: &RawValue = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut w = Writer::new(text.len());
    w.write_value(raw, 0).map_err(|e| e.to_string())?;
    String::from_utf8(w.out).map_err(|e| e.to_string())
}

/// An object entry, borrowed from the input.
type Entry<'a> = (Cow<'a, str>, &'a RawValue);

/// serde_json's own nesting limit for a value tree.
const MAX_DEPTH: usize = 128;

/// The output and one scratch list of entries shared by every object level: a
/// level appends its entries, sorts its own part, writes them, and truncates.
struct Writer<'a> {
    out: Vec<u8>,
    scratch: Vec<Entry<'a>>,
}

impl<'a> Writer<'a> {
    fn new(capacity: usize) -> Writer<'a> {
        Writer {
            out: Vec::with_capacity(capacity),
            // Entries live along one path from the top: 16 hold a typical object.
            scratch: Vec::with_capacity(16),
        }
    }

    /// Appends the entries of the object `text` to the scratch list.
    fn read_entries(&mut self, text: &'a str) -> Result<(), serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde::de::DeserializeSeed::deserialize(AppendEntries(&mut self.scratch), &mut de)?;
        de.end()
    }

    /// Writes one JSON value canonically, `depth` levels down.
    fn write_value(&mut self, raw: &'a RawValue, depth: usize) -> Result<(), serde_json::Error> {
        if depth > MAX_DEPTH {
            return Err(de::Error::custom("nested too deep"));
        }
        let text = raw.get();
        match text.as_bytes().first() {
            Some(b'{') => {
                let start = self.scratch.len();
                self.read_entries(text)?;
                self.write_entries(start, None, depth)
            }
            Some(b'[') => {
                self.out.push(b'[');
                let mut de = serde_json::Deserializer::from_str(text);
                de::Deserializer::deserialize_seq(&mut de, WriteItems { w: self, depth })?;
                de.end()?;
                self.out.push(b']');
                Ok(())
            }
            // Without escapes a string is already in serde_json's form: a raw
            // string holds no quote, backslash or control character.
            Some(b'"') if !text.contains('\\') => {
                self.out.extend_from_slice(text.as_bytes());
                Ok(())
            }
            Some(b'"') => {
                let s: Str = serde_json::from_str(text)?;
                serde_json::to_writer(&mut self.out, &*s.0)
            }
            _ if is_plain(text) => {
                self.out.extend_from_slice(text.as_bytes());
                Ok(())
            }
            _ => {
                // Numbers, booleans and null: serde_json's own form (`1e3` → `1000.0`).
                let scalar: serde_json::Value = serde_json::from_str(text)?;
                serde_json::to_writer(&mut self.out, &scalar)
            }
        }
    }

    /// Writes the scratch entries from `start` on, sorted by key (of duplicates the
    /// last wins, as in a `Value`), then drops them. With `meta`, this is the top
    /// level and its `metadata` is read too.
    fn write_entries(
        &mut self,
        start: usize,
        mut meta: Option<&mut Meta>,
        depth: usize,
    ) -> Result<(), serde_json::Error> {
        let end = self.scratch.len();
        // Stable, so of equal keys the last stays last.
        self.scratch[start..].sort_by(|a, b| a.0.cmp(&b.0));
        self.out.push(b'{');
        let mut first = true;
        for i in start..end {
            if i + 1 < end && self.scratch[i + 1].0 == self.scratch[i].0 {
                continue;
            }
            let (key, value) = self.scratch[i].clone();
            if !first {
                self.out.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut self.out, &*key)?;
            self.out.push(b':');
            if let (Some(meta), "metadata") = (meta.as_deref_mut(), &*key) {
                read_meta(value, meta);
            }
            self.write_value(value, depth + 1)?;
        }
        self.scratch.truncate(start);
        self.out.push(b'}');
        Ok(())
    }
}

/// Whether a scalar's text is already what serde_json writes: `true`, `false`,
/// `null`, or an integer small enough for an `i64` without a leading minus zero.
fn is_plain(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    matches!(text, "true" | "false" | "null")
        || (!digits.is_empty()
            && digits.len() <= 18
            && digits.bytes().all(|b| b.is_ascii_digit())
            && text != "-0")
}

/// Fills namespace, name and resourceVersion from a `metadata` object.
fn read_meta(metadata: &RawValue, meta: &mut Meta) {
    #[derive(serde::Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Fields<'a> {
        #[serde(borrow)]
        namespace: Option<Str<'a>>,
        #[serde(borrow)]
        name: Option<Str<'a>>,
        #[serde(borrow)]
        resource_version: Option<Str<'a>>,
    }
    if let Ok(f) = serde_json::from_str::<Fields>(metadata.get()) {
        let own = |s: Option<Str>| s.map(|s| s.0.into_owned()).unwrap_or_default();
        meta.namespace = own(f.namespace);
        meta.name = own(f.name);
        meta.resource_version = own(f.resource_version);
    }
}

/// Reads an object's entries onto the end of a list.
struct AppendEntries<'s, 'a>(&'s mut Vec<Entry<'a>>);

impl<'de: 'a, 'a> serde::de::DeserializeSeed<'de> for AppendEntries<'_, 'a> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for AppendEntries<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Str>()? {
            self.0.push((key.0, map.next_value::<&RawValue>()?));
        }
        Ok(())
    }
}

/// Writes an array's items as they are read (arrays keep their order).
struct WriteItems<'w, 'a> {
    w: &'w mut Writer<'a>,
    depth: usize,
}

impl<'de: 'a, 'a> Visitor<'de> for WriteItems<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut first = true;
        while let Some(item) = seq.next_element::<&RawValue>()? {
            if !first {
                self.w.out.push(b',');
            }
            first = false;
            self.w
                .write_value(item, self.depth + 1)
                .map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// A string borrowed from the input when it has no escapes.
#[derive(Default)]
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The reference: serde_json's own writing of the parsed value.
    fn via_value(text: &str) -> String {
        serde_json::from_str::<Value>(text)
            .expect("json")
            .to_string()
    }

    #[test]
    fn matches_serde_json_value_output() {
        for text in [
            r#"{"b":1,"a":{"z":[3,{"y":"\u00e9\n","x":null}],"m":true},"c":-0.5e3,"d":"q\"\\"}"#,
            r#"{ "metadata" : { "name" : "p\u002d1", "namespace":"ns", "resourceVersion":"7" }, "k": 1E2 }"#,
            r#"{"dup":1,"dup":2,"e":{},"f":[],"g":12345678901234567890,"h":1.0}"#,
            r#"{"emoji":"\ud83d\ude00","ctl":"\u0001","slash":"\/"}"#,
            r#"{"n":[0,-0,7,-12,123456789012345678,1234567890123456789,-9223372036854775808,1.0,2e0,true,false,null]}"#,
            r#"{"plain":"é ü 日本","t":"tab\there"}"#,
        ] {
            let (got, _) = canonicalize(text, None).expect("canonical");
            assert_eq!(got, via_value(text), "{text}");
        }
    }

    #[test]
    fn reads_metadata_and_fills_type_meta() {
        let text =
            r#"{"metadata":{"name":"p-\u0031","namespace":"ns","resourceVersion":"42"},"spec":{}}"#;
        let (got, meta) = canonicalize(text, Some(("v1", "Pod"))).expect("canonical");
        assert_eq!(
            got,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p-1","namespace":"ns","resourceVersion":"42"},"spec":{}}"#
        );
        assert_eq!((meta.namespace.as_str(), meta.name.as_str()), ("ns", "p-1"));
        assert_eq!(meta.resource_version, "42");
        assert!(!meta.has_type_meta);
        let (kept, meta) =
            canonicalize(r#"{"kind":"X","apiVersion":"a/v1"}"#, Some(("v1", "Pod"))).expect("ok");
        assert_eq!(kept, r#"{"apiVersion":"a/v1","kind":"X"}"#);
        assert!(meta.has_type_meta);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for bad in ["", "[1]", "{", r#"{"a":}"#, "nul", r#"{"a":1}x"#, "\"s\""] {
            assert!(canonicalize(bad, None).is_err(), "{bad:?}");
        }
        // Deep nesting stops at serde_json's recursion limit, with an error.
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(canonicalize(&deep, None).is_err());
    }
}
