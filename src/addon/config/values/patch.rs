//! Hook JSON patches for values (spec §3.3): parsing of `VALUES_JSON_PATCH_PATH` /
//! `CONFIG_VALUES_JSON_PATCH_PATH` files, strict (hook time) and lenient (re-apply of
//! stored patches) application with RFC 6902 `add`/`remove` semantics, and compaction of
//! stored patches. Only `add` and `remove` exist; every other operation is rejected.

use super::error::{OpError, ValuesError};
use crate::json_kind::json_kind;
use serde::Deserialize;
use serde_json::{Value, json};

/// Most ops one patch file may hold.
const MAX_OPS: usize = 10_000;
/// Largest patch file accepted, in bytes.
const MAX_BYTES: usize = 16 * 1024 * 1024;

/// One values patch operation; `path` is an RFC 6901 JSON pointer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PatchOp {
    /// `{"op":"add","path":..,"value":..}`
    Add { path: String, value: Value },
    /// `{"op":"remove","path":..}`
    Remove { path: String },
}

impl PatchOp {
    /// The op's JSON pointer.
    pub(crate) fn path(&self) -> &str {
        match self {
            PatchOp::Add { path, .. } | PatchOp::Remove { path } => path,
        }
    }
}

/// File text → ops: a JSON array of ops, single op objects, or a stream of both (blank
/// lines ok); empty/whitespace = no ops. Refuses more than 10,000 ops or 16 MiB.
/// Operations are parsed one at a time and counted as they come, so a refused patch
/// costs no more memory than the ops below the cap (a 300,000-op array used to be
/// built whole before it was counted).
pub(crate) fn parse_patch(text: &[u8]) -> Result<Vec<PatchOp>, ValuesError> {
    parse_ops(text).map_err(|e| ValuesError::PatchFile(e.to_string()))
}

fn parse_ops(text: &[u8]) -> Result<Vec<PatchOp>, PatchProblem> {
    if text.len() > MAX_BYTES {
        return Err(format!(
            "values patch: {} bytes is over the {MAX_BYTES} byte limit",
            text.len()
        )
        .into());
    }
    let mut ops = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(text);
    let mut doc_index = 0;
    while de.end().is_err() {
        let mut refused = None;
        let seed = Document {
            ops: &mut ops,
            refused: &mut refused,
        };
        if let Err(e) = serde::de::DeserializeSeed::deserialize(seed, &mut de) {
            let text = refused
                .unwrap_or_else(|| format!("values patch: document {doc_index}: bad JSON: {e}"));
            return Err(text.into());
        }
        doc_index += 1;
    }
    Ok(ops)
}

/// The refusal of a document that is neither an array nor an object.
fn not_ops(kind: &str) -> String {
    format!("values patch: expected an array of operations or an operation object, got {kind}")
}

/// One document of the stream: an array of ops or one op, each pushed as it is read.
/// A refusal's message goes to `refused` (serde would add a position to it).
struct Document<'a> {
    ops: &'a mut Vec<PatchOp>,
    refused: &'a mut Option<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Document<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Document<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of operations or an operation object")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(op) = seq.next_element::<Value>()? {
            if let Err(e) = push_op(self.ops, &op) {
                return Err(serde::de::Error::custom(self.refused.insert(e.to_string())));
            }
        }
        Ok(())
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom(self.refused.insert(not_ops("a boolean"))))
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        Err(E::custom(self.refused.insert(not_ops("a number"))))
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        Err(E::custom(self.refused.insert(not_ops("a number"))))
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        Err(E::custom(self.refused.insert(not_ops("a number"))))
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        Err(E::custom(self.refused.insert(not_ops("a string"))))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Err(E::custom(self.refused.insert(not_ops("null"))))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let op = Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        push_op(self.ops, &op)
            .map_err(|e| serde::de::Error::custom(self.refused.insert(e.to_string())))
    }
}

fn push_op(ops: &mut Vec<PatchOp>, raw: &Value) -> Result<(), PatchProblem> {
    if ops.len() >= MAX_OPS {
        return Err(format!("values patch: more than {MAX_OPS} operations").into());
    }
    let op = parse_op(raw)
        .map_err(|e| PatchProblem::from(format!("values patch: operation {}: {e}", ops.len())))?;
    ops.push(op);
    Ok(())
}

fn parse_op(raw: &Value) -> Result<PatchOp, PatchProblem> {
    let Value::Object(map) = raw else {
        return Err(format!("expected an object, got {}", json_kind(raw)).into());
    };
    let op = map
        .get("op")
        .and_then(Value::as_str)
        .ok_or("missing string field 'op'")?;
    let path = map
        .get("path")
        .and_then(Value::as_str)
        .ok_or("missing string field 'path'")?
        .to_string();
    if !path.is_empty() && !path.starts_with('/') {
        return Err(format!("path '{path}' is not a JSON pointer (must start with '/')").into());
    }
    match op {
        "add" => {
            let value = map
                .get("value")
                .ok_or("'add' without field 'value'")?
                .clone();
            Ok(PatchOp::Add { path, value })
        }
        "remove" => Ok(PatchOp::Remove { path }),
        other => Err(format!("unsupported patch operation '{other}'").into()),
    }
}

/// The first path segment of an op (`/global/a` → `global`), still escaped.
pub(crate) fn root_of(op: &PatchOp) -> &str {
    let path = op.path();
    let rest = path.strip_prefix('/').unwrap_or(path);
    rest.split('/').next().unwrap_or("")
}

/// Strict apply (remove of a missing path = error, add with a missing parent = error,
/// RFC 6902 array index rules incl. `-`), atomic: on error `doc` is unchanged.
pub(crate) fn apply_strict(doc: &mut Value, ops: &[PatchOp]) -> Result<(), OpError> {
    apply(doc, ops, false)
}

/// Lenient re-apply of stored patches: `remove` of a missing path is skipped.
pub(crate) fn apply_lenient(doc: &mut Value, ops: &[PatchOp]) -> Result<(), OpError> {
    apply(doc, ops, true)
}

fn apply(doc: &mut Value, ops: &[PatchOp], lenient: bool) -> Result<(), OpError> {
    let mut work = doc.clone();
    for (index, op) in ops.iter().enumerate() {
        apply_one(&mut work, op, lenient).map_err(|reason| OpError {
            index,
            op: match op {
                PatchOp::Add { .. } => "add",
                PatchOp::Remove { .. } => "remove",
            },
            path: op.path().to_string(),
            reason: reason.to_string(),
        })?;
    }
    *doc = work;
    Ok(())
}

fn apply_one(doc: &mut Value, op: &PatchOp, lenient: bool) -> Result<(), PatchProblem> {
    let tokens = split_pointer(op.path());
    let Some((last, parents)) = tokens.split_last() else {
        return apply_to_root(doc, op);
    };
    let parent = match walk(doc, parents) {
        Some(p) => p,
        None if lenient && matches!(op, PatchOp::Remove { .. }) => return Ok(()),
        None => return Err("parent path does not exist".into()),
    };
    match op {
        PatchOp::Add { value, .. } => add_at(parent, last, value.clone()),
        PatchOp::Remove { .. } => match remove_at(parent, last) {
            Err(e) if lenient && e.missing => Ok(()),
            Err(e) => Err(e.text.into()),
            Ok(()) => Ok(()),
        },
    }
}

/// An op on the empty pointer: `add` replaces the whole document, `remove` is refused.
fn apply_to_root(doc: &mut Value, op: &PatchOp) -> Result<(), PatchProblem> {
    match op {
        PatchOp::Add { value, .. } => {
            *doc = value.clone();
            Ok(())
        }
        PatchOp::Remove { .. } => Err("cannot remove the whole document".into()),
    }
}

/// Splits a JSON pointer into unescaped tokens (`~1` → `/`, `~0` → `~`).
fn split_pointer(path: &str) -> Vec<String> {
    if path.is_empty() {
        return Vec::new();
    }
    path.strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn walk<'a>(mut node: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    for token in tokens {
        node = match node {
            Value::Object(map) => map.get_mut(token)?,
            Value::Array(items) => {
                let index = array_index(token)?;
                items.get_mut(index)?
            }
            _ => return None,
        };
    }
    Some(node)
}

/// An RFC 6901 array index: `0` or digits without a leading zero.
fn array_index(token: &str) -> Option<usize> {
    let digits_only = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

fn add_at(parent: &mut Value, token: &str, value: Value) -> Result<(), PatchProblem> {
    match parent {
        Value::Object(map) => {
            map.insert(token.to_string(), value);
            Ok(())
        }
        Value::Array(items) if token == "-" => {
            items.push(value);
            Ok(())
        }
        Value::Array(items) => {
            let index = array_index(token).ok_or(format!("'{token}' is not an array index"))?;
            if index > items.len() {
                return Err(
                    format!("index {index} is past the array end ({})", items.len()).into(),
                );
            }
            items.insert(index, value);
            Ok(())
        }
        other => Err(format!("parent is {}, not an object or array", json_kind(other)).into()),
    }
}

/// Why a remove failed; `missing` marks errors lenient mode skips.
struct RemoveError {
    text: String,
    missing: bool,
}

fn remove_at(parent: &mut Value, token: &str) -> Result<(), RemoveError> {
    let missing = |text: String| RemoveError {
        text,
        missing: true,
    };
    match parent {
        Value::Object(map) => match map.remove(token) {
            Some(_) => Ok(()),
            None => Err(missing("path does not exist".to_string())),
        },
        Value::Array(items) => {
            let index = array_index(token).ok_or(RemoveError {
                text: format!("'{token}' is not an array index"),
                missing: false,
            })?;
            if index >= items.len() {
                return Err(missing(format!(
                    "index {index} is out of range ({})",
                    items.len()
                )));
            }
            items.remove(index);
            Ok(())
        }
        other => Err(missing(format!(
            "parent is {}, not an object or array",
            json_kind(other)
        ))),
    }
}

/// Compaction of stored patches (spec §3.3): last op per path wins; an op on a parent
/// drops earlier ops on its sub-paths; the result is sorted by path.
pub(crate) fn compact(stored: &[PatchOp], new: &[PatchOp]) -> Vec<PatchOp> {
    let mut by_path: std::collections::BTreeMap<String, PatchOp> = Default::default();
    for op in stored.iter().chain(new) {
        let path = op.path();
        let prefix = format!("{path}/");
        let below: Vec<String> = by_path
            .range(prefix.clone()..)
            .map(|(p, _)| p)
            .take_while(|p| p.starts_with(&prefix))
            .cloned()
            .collect();
        for p in below {
            by_path.remove(&p);
        }
        by_path.insert(path.to_string(), op.clone());
    }
    by_path.into_values().collect()
}

/// The ops as JSON for the debug API: `[{"op":..,"path":..,"value":..}]`.
pub(crate) fn to_json(ops: &[PatchOp]) -> Value {
    let items = ops
        .iter()
        .map(|op| match op {
            PatchOp::Add { path, value } => json!({"op": "add", "path": path, "value": value}),
            PatchOp::Remove { path } => json!({"op": "remove", "path": path}),
        })
        .collect();
    Value::Array(items)
}

/// What is wrong with a values patch or one of its operations (the caller adds the file or the operation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatchProblem {
    problem: String,
}

impl From<String> for PatchProblem {
    fn from(problem: String) -> PatchProblem {
        PatchProblem { problem }
    }
}

impl From<&str> for PatchProblem {
    fn from(problem: &str) -> PatchProblem {
        PatchProblem::from(problem.to_string())
    }
}

impl std::fmt::Display for PatchProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for PatchProblem {}
