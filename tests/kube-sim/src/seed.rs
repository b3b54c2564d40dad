//! Seeding: loads every `.yaml`, `.yml` and `.json` file in a directory
//! (sorted by name, multi-document YAML allowed, `kind: List` expanded) and
//! creates the objects in order, CRDs first so their custom resources resolve.

use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// Parses all manifests in `dir` into objects, CRDs first.
pub fn load_dir(dir: &Path) -> Result<Vec<Value>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        out.extend(parse_docs(&text).map_err(|e| format!("{}: {e}", f.display()))?);
    }
    out.sort_by_key(|o| o["kind"] != "CustomResourceDefinition");
    Ok(out)
}

/// Parses a multi-document YAML (or JSON) text, expanding `kind: List`.
pub fn parse_docs(text: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| e.to_string())?;
        match v {
            Value::Null => {}
            Value::Object(_)
                if v["kind"].as_str().is_some_and(|k| k.ends_with("List"))
                    && v["items"].is_array() =>
            {
                out.extend(v["items"].as_array().cloned().unwrap_or_default());
            }
            Value::Object(_) => out.push(v),
            _ => return Err("a document is not a mapping".into()),
        }
    }
    Ok(out)
}
