//! Reading a patch file: a stream of concatenated JSON documents, or else a
//! multi-document YAML stream (`---` separators). Every document is validated
//! (see `validate`) before the caller applies anything. Documents are numbered
//! from 1, in the order they appear; empty YAML documents are skipped but
//! counted, so the numbers match what a user counts in the file.

use super::error::PatchError;
use super::{Operation, validate};
use serde::Deserialize;
use serde_json::Value;

/// Parses and validates a whole patch file. An empty (or whitespace-only) file
/// is no operations. The first invalid document fails the whole file.
pub fn parse(bytes: &[u8]) -> Result<Vec<Operation>, PatchError> {
    let docs = documents(bytes)?;
    let mut ops = Vec::with_capacity(docs.len());
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        ops.push(validate::operation(i + 1, doc)?);
    }
    Ok(ops)
}

/// The file's documents: JSON first, YAML as the fallback. When both fail, the
/// error of the format the file looks like (`{` or `[` first: JSON) is reported.
fn documents(bytes: &[u8]) -> Result<Vec<Value>, PatchError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| PatchError::syntax(format!("not UTF-8 text: {e}")))?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let json_err = match json_stream(text) {
        Ok(docs) => return Ok(docs),
        Err(e) => e,
    };
    match yaml_stream(text) {
        Ok(docs) => Ok(docs),
        Err(_) if looks_like_json(text) => Err(json_err),
        Err(yaml_err) => Err(yaml_err),
    }
}

fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with(['{', '['])
}

/// Concatenated JSON documents (whitespace between them is optional).
fn json_stream(text: &str) -> Result<Vec<Value>, PatchError> {
    let mut docs = Vec::new();
    for v in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        match v {
            Ok(v) => docs.push(v),
            Err(e) => {
                return Err(PatchError::syntax(format!(
                    "document {} is not valid JSON: {e}",
                    docs.len() + 1
                )));
            }
        }
    }
    Ok(docs)
}

/// Multi-document YAML.
fn yaml_stream(text: &str) -> Result<Vec<Value>, PatchError> {
    crate::yaml_depth::check(text).map_err(PatchError::syntax)?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        match Value::deserialize(doc) {
            Ok(v) => docs.push(v),
            Err(e) => {
                return Err(PatchError::syntax(format!(
                    "document {} is not valid YAML: {e}",
                    docs.len() + 1
                )));
            }
        }
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_stream_yaml_and_empty() {
        let ops = |s: &str| documents(s.as_bytes()).map(|d| d.len());
        assert_eq!(ops("").ok(), Some(0));
        assert_eq!(ops(" \n\t\n").ok(), Some(0));
        assert_eq!(ops(r#"{"a":1}{"b":2} {"c":3}"#).ok(), Some(3));
        assert_eq!(ops("a: 1\n---\nb: 2\n").ok(), Some(2));
        assert_eq!(ops("{\"a\": 1}\n---\n{\"b\": 2}\n").ok(), Some(2));
    }

    #[test]
    fn reports_the_format_the_file_looks_like() {
        let e = documents(br#"{"a":1} {"b": }"#).unwrap_err().to_string();
        assert!(
            e.starts_with("patch file: document 2 is not valid JSON"),
            "{e}"
        );
        let e = documents(b"a: 1\n---\nb: [\n").unwrap_err().to_string();
        assert!(
            e.starts_with("patch file: document 2 is not valid YAML"),
            "{e}"
        );
    }
}
