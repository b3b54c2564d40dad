//! From an object's JSON text to the form hooks get: compact, object keys sorted
//! (exactly what serde_json writes for the same object as a `Value`), optionally
//! with `apiVersion`/`kind` filled in, plus the metadata the client needs
//! (namespace, name, resourceVersion). Used by the reflector for every watch
//! event and listed object, and by jq for its results. The same scanner splits
//! LIST pages into their items without decoding them ([`split_list`]).
//!
//! No tree of values is built: a small JSON scanner checks an object's entries,
//! keeping their keys (borrowed from the input) and where their values are on a
//! stack shared by all levels, sorts them, and writes each value as it reads it
//! again. Nested text is scanned once more per level, by a loop over bytes that
//! allocates nothing; the output goes to a scratch buffer each thread reuses, then
//! once into the shared text: the only allocation about the object's size.
//! Strings with escapes and numbers not already in serde_json's form (rare in
//! Kubernetes objects) are handed to serde_json for exactly its output.

use std::borrow::Cow;

/// Why a text is not the JSON it should be: what was expected, and at which
/// byte of the text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScanError {
    what: String,
    at: usize,
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// Why an object, a value or a list could not be made canonical.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CanonicalError {
    /// The object's text is not JSON.
    Object(ScanError),
    /// The text is JSON but not an object.
    NotObject,
    /// The canonical text of an object is not UTF-8 (a bug: it is written from
    /// UTF-8 input).
    Utf8(std::str::Utf8Error),
    /// A value's text is not JSON.
    Value(ScanError),
    /// The canonical text of a value is not UTF-8.
    Text(std::str::Utf8Error),
    /// A LIST response is not JSON of a list.
    List(ScanError),
}

impl std::fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CanonicalError::Object(e) => write!(f, "bad object: {e}"),
            CanonicalError::NotObject => f.write_str("bad object: not a JSON object"),
            CanonicalError::Utf8(e) => write!(f, "bad object: {e}"),
            CanonicalError::Value(e) => e.fmt(f),
            CanonicalError::Text(e) => e.fmt(f),
            CanonicalError::List(e) => write!(f, "bad list: {e}"),
        }
    }
}

impl std::error::Error for CanonicalError {}

/// The metadata read while writing an object.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Meta {
    pub(crate) namespace: String,
    pub name: String,
    pub(crate) resource_version: String,
    /// Whether the object itself had `apiVersion` and `kind`.
    pub(crate) has_type_meta: bool,
}

/// The canonical text of the JSON object `text` and its metadata, as a `String`
/// (tests; the data path uses [`canonical_arc`]). `type_meta` (apiVersion, kind)
/// is added where the object lacks those keys.
#[cfg(test)]
pub(crate) fn canonicalize(
    text: &str,
    type_meta: Option<(&str, &str)>,
) -> Result<(String, Meta), CanonicalError> {
    let mut buf = Vec::with_capacity(text.len() + 64);
    let meta = canonicalize_into(text, type_meta, &mut buf)?;
    let text = String::from_utf8(buf).map_err(|e| CanonicalError::Utf8(e.utf8_error()))?;
    Ok((text, meta))
}

/// The canonical text of the JSON object `text`, shared, and its metadata.
/// `type_meta` (apiVersion, kind) is added where the object lacks those keys. The
/// text is written into this thread's scratch buffer (kept between calls, so a
/// reflector thread reuses one), then copied once into the `Arc`.
pub(crate) fn canonical_arc(
    text: &str,
    type_meta: Option<(&str, &str)>,
) -> Result<(std::sync::Arc<str>, Meta), CanonicalError> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    /// A buffer grown past this by one big object is not kept.
    const KEEP: usize = 64 << 10;
    SCRATCH.with(|cell| {
        let mut buf = cell.take();
        buf.clear();
        buf.reserve(text.len() + 64);
        let out = canonicalize_into(text, type_meta, &mut buf).and_then(|meta| {
            let json = std::str::from_utf8(&buf).map_err(CanonicalError::Utf8)?;
            Ok((std::sync::Arc::from(json), meta))
        });
        if buf.capacity() <= KEEP {
            cell.replace(buf);
        }
        out
    })
}

/// Writes the canonical text of the JSON object `text` into the empty `buf` and
/// returns its metadata.
fn canonicalize_into(
    text: &str,
    type_meta: Option<(&str, &str)>,
    buf: &mut Vec<u8>,
) -> Result<Meta, CanonicalError> {
    crate::parse_count::parsed(text);
    let mut s = Scanner::checking(text);
    s.buf = std::mem::take(buf);
    s.skip_ws();
    if s.peek() != Some(b'{') {
        *buf = s.buf;
        return Err(CanonicalError::NotObject);
    }
    let mut meta = Meta::default();
    let result = s
        .object(0, true, Some((&mut meta, type_meta)))
        .and_then(|()| s.end())
        .map_err(CanonicalError::Object);
    *buf = s.buf;
    result.map(|()| meta)
}

/// The canonical text of any JSON value (a jq filter's result, say).
pub(crate) fn canonical_value(text: &str) -> Result<String, CanonicalError> {
    let mut s = Scanner::new(text);
    s.value(0, true)
        .and_then(|()| s.end())
        .map_err(CanonicalError::Value)?;
    String::from_utf8(s.buf).map_err(|e| CanonicalError::Text(e.utf8_error()))
}

/// A LIST response (`{"metadata":{...},"items":[...],...}`) split, not decoded:
/// the text of each item, found by skipping over it (quotes jumped, brackets
/// counted, nothing checked), for [`canonicalize`] to decode, and therefore
/// check, once; and the list's `metadata` text. Every other field is checked
/// here. So each byte of a page is validated once and each item decoded once,
/// as a watch event's object is.
pub(crate) struct ListParts<'a> {
    pub(crate) items: Vec<&'a str>,
    pub(crate) metadata: Option<&'a str>,
}

/// Splits a LIST response; see [`ListParts`]. `"items": null` is no items.
pub(crate) fn split_list(text: &str) -> Result<ListParts<'_>, CanonicalError> {
    let mut s = Scanner::checking(text);
    let mut parts = ListParts {
        items: Vec::new(),
        metadata: None,
    };
    s.expect(b'{').map_err(CanonicalError::List)?;
    s.skip_ws();
    if s.peek() == Some(b'}') {
        s.pos += 1;
    } else {
        s.list_entries(&mut parts).map_err(CanonicalError::List)?;
    }
    s.end().map_err(CanonicalError::List)?;
    Ok(parts)
}

/// The string value of top-level field `key` of a JSON object's text, found by
/// walking the top level only (nested values are skipped over, nothing is built);
/// `None` when absent or not a string. For text this module wrote, where a key
/// appears once.
pub(crate) fn top_level_str(text: &str, key: &str) -> Option<String> {
    let mut s = Scanner::checking(text);
    s.expect(b'{').ok()?;
    loop {
        s.skip_ws();
        if s.peek() != Some(b'"') {
            return None;
        }
        let (raw, escaped) = s.string().ok()?;
        s.expect(b':').ok()?;
        s.skip_ws();
        let name = &raw[1..raw.len() - 1];
        if !escaped && name == key {
            if s.peek() != Some(b'"') {
                return None;
            }
            let (value, escaped) = s.string().ok()?;
            return match escaped {
                true => serde_json::from_str(value).ok(),
                false => Some(value[1..value.len() - 1].to_string()),
            };
        }
        s.skip().ok()?;
        s.skip_ws();
        match s.peek() {
            Some(b',') => s.pos += 1,
            _ => return None,
        }
    }
}

/// serde_json's own nesting limit: 127 containers inside one another, a 128th
/// is refused.
const MAX_DEPTH: usize = 127;

/// The top level's own handling: where its metadata goes, and the type meta to add.
type Top<'m, 't> = Option<(&'m mut Meta, Option<(&'t str, &'t str)>)>;

/// An object entry on the shared stack: its key and where its value's text lies
/// in the input; for a type meta field we add, `ADDED..i` with `i` its place in
/// [`Scanner::added`].
struct Entry<'a> {
    key: Cow<'a, str>,
    value: std::ops::Range<usize>,
}

const ADDED: usize = usize::MAX;

struct Scanner<'a> {
    text: &'a str,
    pos: usize,
    /// The canonical text written so far.
    buf: Vec<u8>,
    entries: Vec<Entry<'a>>,
    /// The JSON text of type meta values added at the top level.
    added: Vec<String>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Scanner<'a> {
        Scanner {
            text,
            pos: 0,
            buf: Vec::with_capacity(text.len() + 64),
            entries: Vec::with_capacity(16),
            added: Vec::new(),
        }
    }

    /// A scanner that only checks and splits: no output buffer.
    fn checking(text: &'a str) -> Scanner<'a> {
        Scanner {
            text,
            pos: 0,
            buf: Vec::new(),
            entries: Vec::new(),
            added: Vec::new(),
        }
    }

    /// The entries of a LIST response's top object, up to its `}`.
    fn list_entries(&mut self, parts: &mut ListParts<'a>) -> Result<(), ScanError> {
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a key"));
            }
            let (key, _) = self.string()?;
            self.expect(b':')?;
            self.skip_ws();
            let from = self.pos;
            match key {
                "\"items\"" if self.peek() == Some(b'[') => self.list_items(&mut parts.items)?,
                _ => self.value(1, false)?,
            }
            if key == "\"metadata\"" {
                parts.metadata = self.text.get(from..self.pos);
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    /// The items array: each element's text, skipped over.
    fn list_items(&mut self, items: &mut Vec<&'a str>) -> Result<(), ScanError> {
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            let from = self.pos;
            self.skip()?;
            let text = self.text;
            items.push(
                text.get(from..self.pos)
                    .ok_or_else(|| self.error("bad item"))?,
            );
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn error(&self, what: &str) -> ScanError {
        ScanError {
            what: what.to_string(),
            at: self.pos,
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), ScanError> {
        self.skip_ws();
        if self.peek() != Some(byte) {
            return Err(self.error(&format!("expected '{}'", byte as char)));
        }
        self.pos += 1;
        Ok(())
    }

    /// Nothing but whitespace may follow the value.
    fn end(&mut self) -> Result<(), ScanError> {
        self.skip_ws();
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("trailing characters")),
        }
    }

    /// Reads one value; with `emit`, appends its canonical text to the buffer,
    /// else only checks it (an object's entries are checked first, then written
    /// in key order).
    fn value(&mut self, depth: usize, emit: bool) -> Result<(), ScanError> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(depth, emit, None),
            Some(b'[') => self.array(depth, emit),
            Some(b'"') => {
                let (raw, escaped) = self.string()?;
                if escaped {
                    let s: String =
                        serde_json::from_str(raw).map_err(|e| self.error(&e.to_string()))?;
                    if emit {
                        write_str(&mut self.buf, &s);
                    }
                } else if emit {
                    self.buf.extend_from_slice(raw.as_bytes());
                }
                Ok(())
            }
            Some(b't') => self.literal("true", emit),
            Some(b'f') => self.literal("false", emit),
            Some(b'n') => self.literal("null", emit),
            Some(b'-' | b'0'..=b'9') => self.number(emit),
            _ => Err(self.error("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &str, emit: bool) -> Result<(), ScanError> {
        if !self.text[self.pos..].starts_with(word) {
            return Err(self.error("expected a JSON value"));
        }
        self.pos += word.len();
        if emit {
            self.buf.extend_from_slice(word.as_bytes());
        }
        Ok(())
    }

    /// A string's raw text, quotes included, and whether it has escapes (checked
    /// by serde_json when it decodes them).
    fn string(&mut self) -> Result<(&'a str, bool), ScanError> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let mut escaped = false;
        self.pos += 1;
        loop {
            let rest = bytes.get(self.pos..).unwrap_or_default();
            let Some(found) = rest
                .iter()
                .position(|b| *b == b'"' || *b == b'\\' || *b < 0x20)
            else {
                self.pos = bytes.len();
                return Err(self.error("unterminated string"));
            };
            self.pos += found;
            match bytes[self.pos] {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.pos += 2;
                }
                _ => return Err(self.error("control character in string")),
            }
        }
        self.pos += 1;
        let text = self.text;
        let raw = text
            .get(start..self.pos)
            .ok_or_else(|| self.error("bad string"))?;
        Ok((raw, escaped))
    }

    /// A number by JSON's grammar. An integer that fits an `i64` (not `-0`) is
    /// already in serde_json's form; any other goes through serde_json.
    fn number(&mut self, emit: bool) -> Result<(), ScanError> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let digits = |pos: &mut usize| {
            let from = *pos;
            while bytes.get(*pos).is_some_and(u8::is_ascii_digit) {
                *pos += 1;
            }
            *pos > from
        };
        let mut pos = start + usize::from(bytes.get(start) == Some(&b'-'));
        let int_start = pos;
        if !digits(&mut pos) || (bytes[int_start] == b'0' && pos - int_start > 1) {
            return Err(self.error("bad number"));
        }
        let mut plain = true;
        if bytes.get(pos) == Some(&b'.') {
            pos += 1;
            plain = false;
            if !digits(&mut pos) {
                return Err(self.error("bad number"));
            }
        }
        if matches!(bytes.get(pos), Some(b'e' | b'E')) {
            pos += 1;
            plain = false;
            pos += usize::from(matches!(bytes.get(pos), Some(b'+' | b'-')));
            if !digits(&mut pos) {
                return Err(self.error("bad number"));
            }
        }
        self.pos = pos;
        let raw = &self.text[start..pos];
        if plain && pos - int_start <= 18 && raw != "-0" {
            if emit {
                self.buf.extend_from_slice(raw.as_bytes());
            }
            return Ok(());
        }
        let n: serde_json::Value =
            serde_json::from_str(raw).map_err(|e| self.error(&e.to_string()))?;
        if emit {
            serde_json::to_writer(&mut self.buf, &n).map_err(|e| self.error(&e.to_string()))?;
        }
        Ok(())
    }

    fn array(&mut self, depth: usize, emit: bool) -> Result<(), ScanError> {
        if depth >= MAX_DEPTH {
            return Err(self.error("nested too deep"));
        }
        self.pos += 1;
        self.push(b'[', emit);
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.push(b']', emit);
            return Ok(());
        }
        loop {
            self.value(depth + 1, emit)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.push(b',', emit);
                }
                Some(b']') => {
                    self.pos += 1;
                    self.push(b']', emit);
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    /// Reads a value [`skip`](Self::skip) passed over (writing it with `emit`): it
    /// must be one valid value that ends exactly where the skip ended.
    fn check_skipped(
        &mut self,
        value: std::ops::Range<usize>,
        depth: usize,
        emit: bool,
    ) -> Result<(), ScanError> {
        self.pos = value.start;
        self.value(depth + 1, emit)?;
        if self.pos != value.end {
            return Err(self.error("malformed value"));
        }
        Ok(())
    }

    /// Moves past the value at `pos` without checking it: strings are jumped over,
    /// brackets counted, a scalar ends at the next delimiter. Whatever is skipped
    /// is checked when it is written, which must end exactly here.
    fn skip(&mut self) -> Result<(), ScanError> {
        let bytes = self.text.as_bytes();
        let mut depth = 0usize;
        let mut pos = self.pos;
        loop {
            match bytes.get(pos) {
                None => return Err(self.error("unexpected end of input")),
                // A quote right after a scalar ends it (the check then fails there).
                Some(b'"') if depth == 0 && pos > self.pos => break,
                Some(b'"') => {
                    pos =
                        string_end(bytes, pos).ok_or_else(|| self.error("unterminated string"))?;
                    if depth == 0 {
                        break;
                    }
                }
                Some(b'{' | b'[') => {
                    depth += 1;
                    pos += 1;
                }
                Some(b'}' | b']') if depth > 0 => {
                    depth -= 1;
                    pos += 1;
                    if depth == 0 {
                        break;
                    }
                }
                Some(b',' | b'}' | b']' | b':' | b' ' | b'\t' | b'\n' | b'\r') if depth == 0 => {
                    break;
                }
                Some(_) => pos += 1,
            }
        }
        self.pos = pos;
        Ok(())
    }

    fn push(&mut self, byte: u8, emit: bool) {
        if emit {
            self.buf.push(byte);
        }
    }

    /// Reads an object: its entries (keys, and where their values are) are
    /// checked first, then, with `emit`, written in key order, each value read
    /// again from the input and written as it is read.
    fn object(&mut self, depth: usize, emit: bool, top: Top<'_, '_>) -> Result<(), ScanError> {
        if depth >= MAX_DEPTH {
            return Err(self.error("nested too deep"));
        }
        let first = self.entries.len();
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            self.read_entries(depth, emit)?;
        }
        let end = self.pos;
        if emit {
            if let Some((meta, type_meta)) = top {
                self.add_type_meta(first, meta, type_meta);
                self.write_entries(first, depth, Some(meta))?;
            } else {
                self.write_entries(first, depth, None)?;
            }
        }
        self.entries.truncate(first);
        self.pos = end;
        Ok(())
    }

    /// Pushes the entries of the object whose first key is next, up to its `}`.
    /// Values to be written are only skipped here (writing checks them); others
    /// are checked now.
    fn read_entries(&mut self, depth: usize, emit: bool) -> Result<(), ScanError> {
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a key"));
            }
            let (raw, escaped) = self.string()?;
            let key = if escaped {
                let key: String =
                    serde_json::from_str(raw).map_err(|e| self.error(&e.to_string()))?;
                Cow::Owned(key)
            } else {
                Cow::Borrowed(&raw[1..raw.len() - 1])
            };
            self.expect(b':')?;
            self.skip_ws();
            let from = self.pos;
            if emit {
                self.skip()?;
            } else {
                self.value(depth + 1, false)?;
            }
            self.entries.push(Entry {
                key,
                value: from..self.pos,
            });
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    /// The top level: notes whether the object has its type meta, and adds the
    /// given one where it lacks it.
    fn add_type_meta(&mut self, first: usize, meta: &mut Meta, type_meta: Option<(&str, &str)>) {
        let has = |key: &str| self.entries[first..].iter().any(|e| e.key == key);
        let (has_api, has_kind) = (has("apiVersion"), has("kind"));
        meta.has_type_meta = has_api && has_kind;
        let Some((api, kind)) = type_meta else { return };
        for (key, value, present) in [("apiVersion", api, has_api), ("kind", kind, has_kind)] {
            if !present {
                let mut json = Vec::new();
                write_str(&mut json, value);
                self.entries.push(Entry {
                    key: Cow::Borrowed(key),
                    value: ADDED..self.added.len(),
                });
                self.added.push(String::from_utf8_lossy(&json).into_owned());
            }
        }
    }

    /// Writes the entries from `first` on in key order; of duplicate keys the last
    /// wins, as in a `Value`. With `meta`, `metadata` is read on the way.
    fn write_entries(
        &mut self,
        first: usize,
        depth: usize,
        mut meta: Option<&mut Meta>,
    ) -> Result<(), ScanError> {
        // Stable, so of equal keys the last stays last.
        self.entries[first..].sort_by(|a, b| a.key.cmp(&b.key));
        self.buf.push(b'{');
        let mut written = false;
        for i in first..self.entries.len() {
            let value = self.entries[i].value.clone();
            if self
                .entries
                .get(i + 1)
                .is_some_and(|next| next.key == self.entries[i].key)
            {
                // Not written (a later entry has the key), but it must be valid JSON.
                self.check_skipped(value, depth, false)?;
                continue;
            }
            if written {
                self.buf.push(b',');
            }
            written = true;
            write_str(&mut self.buf, &self.entries[i].key);
            self.buf.push(b':');
            let from = self.buf.len();
            if value.start == ADDED {
                let json = self.added.get(value.end).map_or("null", String::as_str);
                self.buf.extend_from_slice(json.as_bytes());
            } else {
                self.check_skipped(value, depth, true)?;
            }
            if let (Some(meta), "metadata") = (meta.as_deref_mut(), &*self.entries[i].key) {
                read_meta(&self.buf[from..], meta);
            }
        }
        self.buf.push(b'}');
        Ok(())
    }
}

/// Just past the end of the string whose opening quote is at `open` (its escapes
/// skipped; the monitor's interner walks texts with it too).
pub(crate) fn string_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut pos = open + 1;
    loop {
        pos += bytes
            .get(pos..)?
            .iter()
            .position(|b| *b == b'"' || *b == b'\\')?;
        if bytes[pos] == b'"' {
            return Some(pos + 1);
        }
        pos += 2;
    }
}

/// A JSON string as serde_json writes it: only `"`, `\` and control characters
/// are escaped.
fn write_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, s).is_err() {
        // Writing a str into a Vec cannot fail; keep the output valid JSON anyway.
        out.extend_from_slice(b"\"\"");
    }
}

/// Fills namespace, name and resourceVersion from a `metadata` object's
/// canonical text.
fn read_meta(metadata: &[u8], meta: &mut Meta) {
    #[derive(serde::Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Fields {
        namespace: Option<String>,
        name: Option<String>,
        resource_version: Option<String>,
    }
    if let Ok(f) = serde_json::from_slice::<Fields>(metadata) {
        meta.namespace = f.namespace.unwrap_or_default();
        meta.name = f.name.unwrap_or_default();
        meta.resource_version = f.resource_version.unwrap_or_default();
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

    /// The scanner accepts exactly what serde_json accepts, and writes what it
    /// writes, on the edges of JSON's grammar.
    #[test]
    fn accepts_and_refuses_what_serde_json_does() {
        for text in [
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":-}"#,
            r#"{"a":-01}"#,
            r#"{"a":1e}"#,
            r#"{"a":1e+}"#,
            r#"{"a":1E-2}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":tru}"#,
            r#"{"a":nulll}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":1,}"#,
            r#"{,}"#,
            r#"{"a" 1}"#,
            "{\"a\":\"tab\tin\"}",
            r#"{"a":1e400}"#,
            r#"{"a":-1e400}"#,
            "{\"a\":\"x\"}  \n",
            r#"{"a":1}{}"#,
            r#"{"a":[[]],"b":{"c":{}}}"#,
            r#"{1:2}"#,
            r#"{"a":99999999999999999999}"#,
            r#"{"a":-99999999999999999999}"#,
            r#"{"a":123456789012345678}"#,
            r#"{"a":-123456789012345678}"#,
            r#"{"\u0041":1,"A":2}"#,
            r#"{"a":"\u00e9\/"}"#,
            "{\"a\":1\u{a0}}",
            r#"{"a":[1 2]}"#,
            r#"{"a":true false}"#,
            r#"{"a":1,"a":1e400}"#,
            r#"{"a":"\ud800","a":1}"#,
            // Found by fuzzing: a string right after a scalar, in an entry whose key
            // comes again (so the value is only checked, never written).
            r#"{"a":0"x","a":1}"#,
            r#"{"a":0"x"}"#,
            r#"{"a":[1]"x","a":2}"#,
            "{\"a\":\"\\\u{e9}\"}",
        ] {
            let ours = canonicalize(text, None).map(|(t, _)| t);
            let theirs = serde_json::from_str::<Value>(text).map(|v| v.to_string());
            match (&ours, &theirs) {
                (Ok(o), Ok(t)) => assert_eq!(o, t, "{text}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{text}: ours {ours:?}, serde_json {theirs:?}"),
            }
        }
        for depth in [126, 127, 128, 129] {
            let text = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
            let ours = canonical_value(&text).is_ok();
            let theirs = serde_json::from_str::<Value>(&text).is_ok();
            assert_eq!(ours, theirs, "arrays nested {depth} deep");
            let text = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
            let ours = canonical_value(&text).is_ok();
            let theirs = serde_json::from_str::<Value>(&text).is_ok();
            assert_eq!(ours, theirs, "objects nested {depth} deep");
        }
    }

    #[test]
    fn top_level_strings_are_found_without_decoding() {
        let text = r#"{"a":{"kind":"inner"},"b":[1,"kind"],"kind":"Pod","z":"\u0041"}"#;
        assert_eq!(top_level_str(text, "kind").as_deref(), Some("Pod"));
        assert_eq!(top_level_str(text, "z").as_deref(), Some("A"));
        assert_eq!(top_level_str(text, "a"), None);
        assert_eq!(top_level_str(text, "missing"), None);
        assert_eq!(top_level_str("{}", "kind"), None);
        assert_eq!(top_level_str("[1]", "kind"), None);
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
