//! Parsing and validating the file a hook writes to `$METRICS_PATH`: a stream of
//! JSON objects (any whitespace between them, not necessarily one per line), each
//! one metric operation. The whole file is checked before anything is applied, so
//! a bad line fails the hook run and leaves the store untouched.
//!
//! Errors name the line where the bad object starts and the field at fault, e.g.
//! `line 3: field 'value': required for action "set"`.

use crate::json_kind::json_kind;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What one operation does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Counter add (never negative).
    Add(f64),
    /// Gauge set.
    Set(f64),
    /// Histogram observe with the family's bucket bounds (sorted, deduplicated).
    Observe { value: f64, buckets: Vec<f64> },
    /// Drop every series of the op's group.
    Expire,
}

/// One validated operation; `line` is where its object starts in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub(crate) line: usize,
    /// Empty only for `Expire`.
    pub(crate) name: String,
    pub(crate) action: Action,
    pub(crate) labels: BTreeMap<String, String>,
    pub group: Option<String>,
}

/// Parses and validates the whole file; the first problem is the error.
pub fn parse(bytes: &[u8]) -> Result<Vec<Op>, FileError> {
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<Value>();
    let mut ops = Vec::new();
    loop {
        let line = line_of_next(bytes, stream.byte_offset());
        match stream.next() {
            None => return Ok(ops),
            Some(Err(e)) => {
                let problem = format!("not valid JSON: {e}");
                return Err(FileError::from(problem).at(e.line().max(line)));
            }
            Some(Ok(Value::Object(obj))) => {
                let mut o = op(&obj).map_err(|e| e.at(line))?;
                o.line = line;
                ops.push(o);
            }
            Some(Ok(other)) => {
                let problem = format!("expected a JSON object, got {}", json_kind(&other));
                return Err(FileError::from(problem).at(line));
            }
        }
    }
}

/// The 1-based line of the first non-blank byte at or after `offset`.
fn line_of_next(bytes: &[u8], offset: usize) -> usize {
    let start = bytes
        .get(offset..)
        .and_then(|rest| rest.iter().position(|b| !b.is_ascii_whitespace()))
        .map_or(bytes.len(), |p| offset + p);
    1 + bytes[..start].iter().filter(|&&b| b == b'\n').count()
}

/// Builds one op from its object, checking every field.
fn op(obj: &Map<String, Value>) -> Result<Op, FileError> {
    let group = match obj.get("group") {
        None | Some(Value::Null) => None,
        Some(Value::String(g)) if !g.is_empty() => Some(g.clone()),
        Some(Value::String(_)) => return Err("field 'group': must not be empty".into()),
        Some(v) => {
            return Err(format!("field 'group': must be a string, got {}", json_kind(v)).into());
        }
    };
    let action = action(obj)?;
    let name = match (obj.get("name"), &action) {
        (None | Some(Value::Null), Action::Expire) => String::new(),
        (None | Some(Value::Null), _) => return Err("field 'name': required".into()),
        (Some(Value::String(n)), _) => check_name(n)?,
        (Some(v), _) => {
            return Err(format!("field 'name': must be a string, got {}", json_kind(v)).into());
        }
    };
    if action == Action::Expire && group.is_none() {
        return Err("field 'group': required for action \"expire\"".into());
    }
    Ok(Op {
        line: 0,
        name,
        action,
        labels: labels(obj.get("labels"))?,
        group,
    })
}

/// The action, from `action` + `value` (+ `buckets`) or the `add`/`set` shorthands.
fn action(obj: &Map<String, Value>) -> Result<Action, FileError> {
    let short_add = obj.get("add");
    let short_set = obj.get("set");
    let explicit = match obj.get("action") {
        None | Some(Value::Null) => None,
        Some(Value::String(a)) => Some(a.as_str()),
        Some(v) => {
            return Err(format!("field 'action': must be a string, got {}", json_kind(v)).into());
        }
    };
    let (name, value) = match (explicit, short_add, short_set) {
        (None, Some(_), Some(_)) => {
            return Err("field 'action': both \"add\" and \"set\" shorthands given".into());
        }
        (None, Some(v), None) => ("add", Some(("add", v))),
        (None, None, Some(v)) => ("set", Some(("set", v))),
        (None, None, None) => {
            return Err("field 'action': required (add, set, observe or expire)".into());
        }
        (Some(a), ..) => (a, obj.get("value").map(|v| ("value", v))),
    };
    let number = || -> Result<f64, FileError> {
        match value {
            Some((_, Value::Number(n))) => n
                .as_f64()
                .ok_or_else(|| "field 'value': not a finite number".into()),
            Some((field, v)) if !v.is_null() => {
                Err(format!("field '{field}': must be a number, got {}", json_kind(v)).into())
            }
            _ => Err(format!("field 'value': required for action {name:?}").into()),
        }
    };
    match name {
        "add" => {
            let v = number()?;
            if v < 0.0 {
                return Err(format!("field 'value': {v} would decrease a counter").into());
            }
            Ok(Action::Add(v))
        }
        "set" => Ok(Action::Set(number()?)),
        "observe" => Ok(Action::Observe {
            value: number()?,
            buckets: buckets(obj.get("buckets"))?,
        }),
        "expire" => Ok(Action::Expire),
        other => Err(format!(
            "field 'action': unknown action {other:?} (add, set, observe or expire)"
        )
        .into()),
    }
}

fn buckets(v: Option<&Value>) -> Result<Vec<f64>, FileError> {
    let Some(Value::Array(items)) = v else {
        return Err(
            "field 'buckets': required for action \"observe\" (an array of numbers)".into(),
        );
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item.as_f64() {
            Some(b) => out.push(b),
            None => return Err(format!("field 'buckets': {item} is not a number").into()),
        }
    }
    out.sort_by(f64::total_cmp);
    out.dedup();
    Ok(out)
}

fn labels(v: Option<&Value>) -> Result<BTreeMap<String, String>, FileError> {
    let obj = match v {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o,
        Some(v) => {
            return Err(format!("field 'labels': must be an object, got {}", json_kind(v)).into());
        }
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        if !valid_label_name(k) {
            return Err(format!("field 'labels': {k:?} is not a valid label name").into());
        }
        let Value::String(s) = v else {
            return Err(format!(
                "field 'labels': label {k:?} must be a string, got {}",
                json_kind(v)
            )
            .into());
        };
        out.insert(k.clone(), s.clone());
    }
    Ok(out)
}

fn check_name(n: &str) -> Result<String, FileError> {
    let mut chars = n.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(n.to_string())
    } else {
        Err(format!("field 'name': {n:?} is not a valid metric name").into())
    }
}

fn valid_label_name(k: &str) -> bool {
    let mut chars = k.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && !k.starts_with("__") && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a `$METRICS_PATH` file was refused: the problem, on which line (1-based)
/// when it is one line's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    line: Option<usize>,
    problem: String,
}

impl FileError {
    /// The same problem, found on `line`.
    fn at(self, line: usize) -> FileError {
        FileError {
            line: Some(line),
            problem: self.problem,
        }
    }
}

impl From<String> for FileError {
    fn from(problem: String) -> FileError {
        FileError {
            line: None,
            problem,
        }
    }
}

impl From<&str> for FileError {
    fn from(problem: &str) -> FileError {
        FileError::from(problem.to_string())
    }
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.problem),
            None => f.write_str(&self.problem),
        }
    }
}

impl std::error::Error for FileError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text.as_bytes()).expect_err("should fail").to_string()
    }

    #[test]
    fn stream_of_objects_and_shorthands() {
        let text = "{\"name\":\"a\",\"add\":2}\n\n  {\"name\":\"b\",\n\"set\":3,\"labels\":{\"k\":\"v\"}} {\"group\":\"g\",\"action\":\"expire\"}\n{\"name\":\"h\",\"action\":\"observe\",\"value\":1.5,\"buckets\":[5,1,2]}";
        let ops = parse(text.as_bytes()).expect("parse");
        assert_eq!(ops.len(), 4);
        assert_eq!(ops[0].action, Action::Add(2.0));
        assert_eq!(ops[1].action, Action::Set(3.0));
        assert_eq!(ops[1].labels.get("k").map(String::as_str), Some("v"));
        assert_eq!(ops[2].action, Action::Expire);
        assert_eq!(ops[2].group.as_deref(), Some("g"));
        assert_eq!(
            ops[3].action,
            Action::Observe {
                value: 1.5,
                buckets: vec![1.0, 2.0, 5.0]
            }
        );
        assert!(parse(b"").expect("empty").is_empty());
    }

    #[test]
    fn errors_name_line_and_field() {
        let ok = "{\"name\":\"a\",\"add\":1}\n";
        assert_eq!(
            err(&format!("{ok}{ok}{{\"name\":\"a\",\"action\":\"set\"}}")),
            "line 3: field 'value': required for action \"set\""
        );
        assert_eq!(
            err(&format!("{ok}{{\"action\":\"add\",\"value\":1}}")),
            "line 2: field 'name': required"
        );
        assert_eq!(
            err("{\"name\":\"a\",\"action\":\"inc\",\"value\":1}"),
            "line 1: field 'action': unknown action \"inc\" (add, set, observe or expire)"
        );
        assert_eq!(
            err("{\"name\":\"a\",\"add\":1,\"set\":2}"),
            "line 1: field 'action': both \"add\" and \"set\" shorthands given"
        );
        assert_eq!(
            err("{\"action\":\"expire\"}"),
            "line 1: field 'group': required for action \"expire\""
        );
        assert_eq!(
            err("{\"name\":\"h\",\"action\":\"observe\",\"value\":1}"),
            "line 1: field 'buckets': required for action \"observe\" (an array of numbers)"
        );
        assert_eq!(
            err("{\"name\":\"a-b\",\"add\":1}"),
            "line 1: field 'name': \"a-b\" is not a valid metric name"
        );
        assert_eq!(
            err("{\"name\":\"a\",\"add\":1,\"labels\":{\"x\":1}}"),
            "line 1: field 'labels': label \"x\" must be a string, got a number"
        );
        assert_eq!(
            err("{\"name\":\"a\",\"add\":\"1\"}"),
            "line 1: field 'add': must be a number, got a string"
        );
        assert_eq!(
            err("{\"name\":\"a\",\"add\":-1}"),
            "line 1: field 'value': -1 would decrease a counter"
        );
        assert!(err(&format!("{ok}{ok}{{\"name\": ")).starts_with("line 3: not valid JSON"));
        assert_eq!(err("[1]"), "line 1: expected a JSON object, got an array");
    }
}
