//! Manifests read as helm and kubectl read them, and written so that they keep that
//! meaning: the post-renderer's YAML 1.1 reader and JSON writer.
//!
//! helm (3 and 4) turns each manifest document into JSON with sigs.k8s.io/yaml, which
//! decodes YAML 1.1 with go-yaml v2: plain `off` is false, `0644` is 420, `on:` is the
//! key `"true"`. yaml_serde follows YAML 1.2's core schema, where those are strings,
//! so a manifest parsed and re-written by it changes meaning (and a quoted `"off"`
//! written back plain becomes a boolean). Here [`documents`] reads a stream with
//! libyaml's events ([`events`]), resolves every scalar by go-yaml v2's rules
//! ([`resolve`]), applies anchors, aliases and `<<` merges as go-yaml v2 does and
//! converts keys as sigs.k8s.io/yaml does: each document becomes the JSON value helm
//! would send. [`write`] prints a value as JSON that YAML 1.1 and 1.2 read the same
//! way (the characters YAML treats as line breaks or refuses raw are escaped), so the
//! next reader, whichever it is, sees exactly that value.
//!
//! What cannot become JSON fails with the document and path named, as helm's own
//! conversion would fail: `.inf`/`.nan` values, null or unsigned 64-bit keys,
//! collections as keys. Nesting stops at [`crate::yaml_depth::MAX_DEPTH`] levels.
//! Aliases are limited as go-yaml v2 limits them (its alias-to-node ratio).

mod error;
mod events;
mod resolve;
mod write;

pub(crate) use error::{Problem, YamlError};
pub(crate) use write::write;

use events::{Event, Parser};
use resolve::Scalar;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// A finished node: scalars stay typed until they are known to be a key or a value.
#[derive(Clone)]
enum Node {
    Scalar(Scalar),
    Value(Value),
}

/// What the next node of an open mapping is.
enum Slot {
    Key,
    /// `<<`: the value is merged into the mapping.
    Merge,
    Value(String),
}

/// An open collection.
struct Frame {
    anchor: Option<String>,
    /// Nodes decoded within it (go-yaml v2's count, for the alias ratio).
    size: usize,
    kind: Open,
}

enum Open {
    Seq(Vec<Value>),
    Map(Map<String, Value>, Slot),
}

/// Every document of `text` that is not null (empty or comment-only documents are
/// skipped, as helm skips them), each as helm would send it. Errors name the
/// document (1-based, counting every document) and the path inside it.
pub(crate) fn documents(text: &str) -> Result<Vec<Value>, YamlError> {
    let mut parser = Parser::new(text);
    let mut out = Vec::new();
    let mut doc = Document::default();
    let mut number = 0;
    loop {
        let at = |document: usize, path: String| {
            move |problem| YamlError {
                document,
                path,
                problem,
            }
        };
        let event = (parser.next_event()).map_err(at(number.max(1), String::new()))?;
        match event {
            Event::StreamStart => {}
            Event::StreamEnd => return Ok(out),
            Event::DocumentStart => {
                number += 1;
                doc = Document::default();
            }
            Event::DocumentEnd => match doc.root.take() {
                Some(Node::Scalar(Scalar::Null)) | None => {}
                Some(node) => out.push(value(node).map_err(at(number, String::new()))?),
            },
            event => {
                if let Err(problem) = doc.event(event) {
                    return Err(at(number, doc.path())(problem));
                }
            }
        }
    }
}

/// The state of one document being read.
#[derive(Default)]
struct Document {
    stack: Vec<Frame>,
    root: Option<Node>,
    anchors: HashMap<String, (Node, usize)>,
    /// go-yaml v2's counters: nodes decoded, and those decoded through an alias.
    decoded: usize,
    aliased: usize,
}

impl Document {
    /// Takes one event inside the document.
    fn event(&mut self, event: Event) -> Result<(), Problem> {
        match event {
            Event::Scalar(s) => {
                self.decoded += 1;
                let merge = s.value == "<<"
                    && (s.plain_implicit || s.tag.as_deref() == Some(resolve::MERGE));
                let node = Node::Scalar(resolve::scalar(&s.value, s.tag.as_deref(), !s.plain)?);
                if let Some(a) = s.anchor {
                    self.anchors.insert(a, (node.clone(), 1));
                }
                self.finish(node, 1, merge)
            }
            Event::SequenceStart(anchor, _) => self.open(anchor, Open::Seq(Vec::new())),
            Event::MappingStart(anchor, _) => self.open(anchor, Open::Map(Map::new(), Slot::Key)),
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = self.stack.pop() else {
                    return Err(Problem::Unbalanced);
                };
                let node = match frame.kind {
                    Open::Seq(items) => Node::Value(Value::Array(items)),
                    Open::Map(map, Slot::Key) => Node::Value(Value::Object(map)),
                    Open::Map(..) => return Err(Problem::KeyWithoutValue),
                };
                if let Some(a) = frame.anchor {
                    self.anchors.insert(a, (node.clone(), frame.size));
                }
                self.finish(node, frame.size, false)
            }
            Event::Alias(name) => {
                if self.stack.iter().any(|f| f.anchor.as_ref() == Some(&name)) {
                    return Err(Problem::RecursiveAnchor(name));
                }
                let Some((node, size)) = self.anchors.get(&name).cloned() else {
                    return Err(Problem::UnknownAnchor(name));
                };
                let merging = matches!(
                    self.stack.last(),
                    Some(Frame {
                        kind: Open::Map(_, Slot::Merge),
                        ..
                    })
                );
                if merging && !matches!(node, Node::Value(Value::Object(_))) {
                    return Err(Problem::MergeWantsMap);
                }
                self.decoded += 1 + size;
                self.aliased += size;
                if self.aliased > 100
                    && self.decoded > 1000
                    && self.aliased as f64 / self.decoded as f64 > allowed_alias_ratio(self.decoded)
                {
                    return Err(Problem::ExcessiveAliasing);
                }
                self.finish(node, size + 1, false)
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentStart | Event::DocumentEnd => {
                Ok(())
            }
        }
    }

    /// Opens a collection.
    fn open(&mut self, anchor: Option<String>, kind: Open) -> Result<(), Problem> {
        if self.stack.len() >= crate::yaml_depth::MAX_DEPTH {
            return Err(Problem::TooDeep);
        }
        self.decoded += 1;
        self.stack.push(Frame {
            anchor,
            size: 1,
            kind,
        });
        Ok(())
    }

    /// Puts a finished node (of `size` decoded nodes) where it belongs.
    fn finish(&mut self, node: Node, size: usize, merge_key: bool) -> Result<(), Problem> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        frame.size += size;
        match &mut frame.kind {
            Open::Seq(items) => items.push(value(node)?),
            // The slot changes only once the node is in, so an error's path names it.
            Open::Map(map, slot) => match slot {
                Slot::Key if merge_key => *slot = Slot::Merge,
                Slot::Key => {
                    *slot = Slot::Value(match node {
                        Node::Scalar(s) => resolve::key(&s)?,
                        Node::Value(_) => return Err(Problem::CollectionKey),
                    })
                }
                Slot::Value(k) => {
                    let v = value(node)?;
                    map.insert(std::mem::take(k), v);
                    *slot = Slot::Key;
                }
                Slot::Merge => {
                    merge(map, node)?;
                    *slot = Slot::Key;
                }
            },
        }
        Ok(())
    }

    /// Where the reader is: `metadata.labels.` (with the trailing dot), or "".
    fn path(&self) -> String {
        let mut path = String::new();
        for frame in &self.stack {
            match &frame.kind {
                Open::Seq(items) => path.push_str(&format!("[{}]", items.len())),
                Open::Map(_, Slot::Value(k)) => {
                    if !path.is_empty() && !path.ends_with(']') {
                        path.push('.');
                    }
                    path.push_str(k);
                }
                Open::Map(..) => break,
            }
        }
        if path.is_empty() {
            path
        } else {
            format!("{path}: ")
        }
    }
}

/// A `<<` value merged into `map`: a mapping, or a sequence of mappings of which
/// the earlier ones win; keys already in `map` are overwritten, as go-yaml v2 does.
fn merge(map: &mut Map<String, Value>, node: Node) -> Result<(), Problem> {
    match node {
        Node::Value(Value::Object(m)) => map.extend(m),
        Node::Value(Value::Array(items)) => {
            if !items.iter().all(Value::is_object) {
                return Err(Problem::MergeWantsMap);
            }
            for item in items.into_iter().rev() {
                if let Value::Object(m) = item {
                    map.extend(m);
                }
            }
        }
        _ => return Err(Problem::MergeWantsMap),
    }
    Ok(())
}

/// A node as a JSON value; `.inf` and `.nan` have none (Go's JSON encoder refuses
/// them, so helm fails on them too).
fn value(node: Node) -> Result<Value, Problem> {
    Ok(match node {
        Node::Value(v) => v,
        Node::Scalar(Scalar::Null) => Value::Null,
        Node::Scalar(Scalar::Bool(b)) => Value::Bool(b),
        Node::Scalar(Scalar::Int(i)) => Value::from(i),
        Node::Scalar(Scalar::Uint(u)) => Value::from(u),
        Node::Scalar(Scalar::Str(s)) => Value::String(s),
        Node::Scalar(Scalar::Float(f)) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| {
                let name = if f.is_nan() {
                    ".nan"
                } else if f > 0.0 {
                    ".inf"
                } else {
                    "-.inf"
                };
                Problem::NoJsonForm(name)
            })?,
    })
}

/// go-yaml v2's limit on aliases: 99% of decoded nodes may come from aliases in
/// small documents, down to 10% from 4,000,000 nodes.
fn allowed_alias_ratio(decoded: usize) -> f64 {
    const LOW: f64 = 400_000.0;
    const HIGH: f64 = 4_000_000.0;
    let d = decoded as f64;
    if d <= LOW {
        0.99
    } else if d >= HIGH {
        0.10
    } else {
        0.99 - 0.89 * ((d - LOW) / (HIGH - LOW))
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
