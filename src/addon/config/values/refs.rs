//! `$ref`s from a scope's OpenAPI schemas to other files of its `openapi/` folder
//! (flant's newer modules split their schemas: `$ref: common.yaml#/definitions/x`).
//!
//! Each such `$ref` is replaced by what it points to (the whole file, or the node at
//! the JSON pointer after `#`), before the schema is transformed, so
//! `additionalProperties`, `nullable`, `x-extend` and defaults see the inlined
//! schema. Refs inside an inlined file are resolved the same way, a `#/...` ref
//! there against that file. A `$ref` of the main document that is only a fragment
//! (`#/definitions/x`) stays for the validator, as before.
//!
//! Only files inside the folder are read, however the path is written (relative,
//! or absolute to a file in the folder): a URL (`http:`, `file:`, ...) or a path
//! that resolves outside the folder (`..`, an absolute path elsewhere, a symlink
//! out of it) is refused, with the schema file and the `$ref` named. Cycles stop at [`MAX_DEPTH`].

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Most nested file refs followed (a cycle ends here).
const MAX_DEPTH: usize = 32;
/// Largest referenced file read.
const MAX_FILE: u64 = 4 << 20;

/// Keys whose values are data, not subschemas.
const DATA_KEYWORDS: [&str; 5] = ["default", "enum", "example", "examples", "const"];

/// Inlines every file `$ref` of `schema` (read from `openapi/<file>`); `dir` is the
/// scope's `openapi/` folder (`None`: a schema given as text, where file refs are
/// refused).
pub(crate) fn inline_file_refs(
    schema: &mut Value,
    dir: Option<&Path>,
    file: &str,
) -> Result<(), RefProblem> {
    let mut resolver =
        Resolver {
            dir: match dir {
                Some(d) => Some(d.canonicalize().map_err(|e| {
                    RefProblem::from(format!("openapi folder {}: {e}", d.display()))
                })?),
                None => None,
            },
            files: HashMap::new(),
        };
    let main = format!("openapi/{file}");
    resolver.walk(schema, None, file, 0).map_err(|e| {
        if e.problem.starts_with(&main) {
            e
        } else {
            RefProblem::from(format!("{main}: {e}"))
        }
    })
}

struct Resolver {
    dir: Option<PathBuf>,
    /// Files read so far, by canonical path.
    files: HashMap<PathBuf, Value>,
}

impl Resolver {
    /// Resolves the refs under `node`; `root` is the document `#` refers to (`None`
    /// for the main document, whose fragment refs stay); `file` names it in errors.
    fn walk(
        &mut self,
        node: &mut Value,
        root: Option<&Value>,
        file: &str,
        depth: usize,
    ) -> Result<(), RefProblem> {
        match node {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get("$ref") {
                    let target = target.clone();
                    if let Some((mut inlined, new_root, new_file)) =
                        self.resolve(&target, root, file, depth)?
                    {
                        self.walk(&mut inlined, Some(&new_root), &new_file, depth + 1)?;
                        *node = inlined;
                        return Ok(());
                    }
                }
                for (key, child) in map.iter_mut() {
                    if !DATA_KEYWORDS.contains(&key.as_str()) {
                        self.walk(child, root, file, depth)?;
                    }
                }
                Ok(())
            }
            Value::Array(items) => items
                .iter_mut()
                .try_for_each(|item| self.walk(item, root, file, depth)),
            _ => Ok(()),
        }
    }

    /// What `target` points to, with the document and file it came from; `None` for
    /// a fragment ref of the main document.
    fn resolve(
        &mut self,
        target: &str,
        root: Option<&Value>,
        file: &str,
        depth: usize,
    ) -> Result<Option<(Value, Value, String)>, RefProblem> {
        let bad =
            |why: RefProblem| RefProblem::from(format!("openapi/{file}: $ref {target:?}: {why}"));
        if depth >= MAX_DEPTH {
            return Err(bad(
                format!("more than {MAX_DEPTH} nested refs (a cycle?)").into()
            ));
        }
        let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
        let (doc, doc_file) = if path.is_empty() {
            let Some(root) = root else {
                return Ok(None);
            };
            (root.clone(), file.to_string())
        } else {
            let (doc, rel) = self.load(path).map_err(bad)?;
            (doc, rel)
        };
        let node = if fragment.is_empty() || fragment == "/" {
            doc.clone()
        } else {
            doc.pointer(fragment).cloned().ok_or_else(|| {
                bad(format!("openapi/{doc_file} has nothing at #{fragment}").into())
            })?
        };
        Ok(Some((node, doc, doc_file)))
    }

    /// Reads `path` (relative to the folder); (document, its path in the folder).
    fn load(&mut self, path: &str) -> Result<(Value, String), RefProblem> {
        let Some(dir) = &self.dir else {
            return Err("refs to other files need the schema's openapi folder".into());
        };
        let remote = path.contains("://")
            || path
                .split_once(':')
                .is_some_and(|(scheme, _)| !scheme.contains('/'));
        if remote {
            return Err("remote refs are not supported: only files of the openapi folder".into());
        }
        // An absolute path is as good as a relative one when it resolves inside.
        let joined = dir.join(path);
        let real = joined
            .canonicalize()
            .map_err(|e| RefProblem::from(format!("{}: {e}", joined.display())))?;
        if !real.starts_with(dir) {
            return Err(format!(
                "{} is outside the openapi folder {}",
                real.display(),
                dir.display()
            )
            .into());
        }
        let rel = real
            .strip_prefix(dir)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if let Some(doc) = self.files.get(&real) {
            return Ok((doc.clone(), rel));
        }
        let size = std::fs::metadata(&real)
            .map_err(|e| RefProblem::from(format!("{}: {e}", real.display())))?
            .len();
        if size > MAX_FILE {
            return Err(format!("{}: {size} bytes; at most {MAX_FILE}", real.display()).into());
        }
        let text = std::fs::read_to_string(&real)
            .map_err(|e| RefProblem::from(format!("{}: {e}", real.display())))?;
        crate::yaml_depth::check(&text)
            .map_err(|e| RefProblem::from(format!("openapi/{rel}: {e}")))?;
        let mut yaml: serde_yaml::Value = serde_yaml::from_str(&text)
            .map_err(|e| RefProblem::from(format!("openapi/{rel}: {e}")))?;
        yaml.apply_merge()
            .map_err(|e| RefProblem::from(format!("openapi/{rel}: merge keys: {e}")))?;
        let doc = serde_json::to_value(&yaml)
            .map_err(|e| RefProblem::from(format!("openapi/{rel}: {e}")))?;
        self.files.insert(real, doc.clone());
        Ok((doc, rel))
    }
}

/// Why a `$ref` of an OpenAPI schema cannot be inlined: the schema file, the ref and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefProblem {
    problem: String,
}

impl From<String> for RefProblem {
    fn from(problem: String) -> RefProblem {
        RefProblem { problem }
    }
}

impl From<&str> for RefProblem {
    fn from(problem: &str) -> RefProblem {
        RefProblem::from(problem.to_string())
    }
}

impl std::fmt::Display for RefProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for RefProblem {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn folder(tag: &str, files: &[(&str, &str)]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ao-refs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for (name, text) in files {
            let p = d.join(name);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
        d
    }

    #[test]
    fn file_refs_are_inlined_and_their_own_refs_resolved() {
        let d = folder(
            "ok",
            &[
                (
                    "openapi/common.yaml",
                    "definitions:\n  port: {type: integer, default: 80}\n  \
                     endpoint:\n    type: object\n    properties:\n      port: {$ref: '#/definitions/port'}\n      \
                     host: {$ref: 'sub/host.yaml'}\n",
                ),
                ("openapi/sub/host.yaml", "type: string\n"),
            ],
        );
        let mut schema = json!({"type": "object", "properties": {
            "endpoint": {"$ref": "common.yaml#/definitions/endpoint"},
            "local": {"$ref": "#/definitions/mine"},
            "text": {"type": "string", "default": {"$ref": "not a ref"}}
        }});
        inline_file_refs(&mut schema, Some(&d.join("openapi")), "values.yaml").expect("inline");
        assert_eq!(
            schema["properties"]["endpoint"],
            json!({"type": "object", "properties": {
                "port": {"type": "integer", "default": 80},
                "host": {"type": "string"}}})
        );
        assert_eq!(
            schema["properties"]["local"],
            json!({"$ref": "#/definitions/mine"})
        );
        assert_eq!(
            schema["properties"]["text"]["default"],
            json!({"$ref": "not a ref"})
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// flant reads an absolute `$ref` to a file of the module's own folder.
    #[test]
    fn an_absolute_path_to_a_file_of_the_folder_is_read() {
        let d = folder(
            "absolute",
            &[("openapi/defs.yaml", "port: {type: integer, default: 80}\n")],
        );
        let dir = d.join("openapi").canonicalize().expect("canonical");
        let target = format!("{}/./defs.yaml#/port", dir.display());
        let mut schema = json!({"properties": {"port": {"$ref": target}}});
        inline_file_refs(&mut schema, Some(&dir), "config-values.yaml").expect("inside");
        assert_eq!(
            schema["properties"]["port"],
            json!({"type": "integer", "default": 80})
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn refs_outside_the_folder_remote_or_cyclic_are_refused_naming_the_file() {
        let d = folder(
            "bad",
            &[
                ("secret.yaml", "type: string\n"),
                ("openapi/a.yaml", "$ref: b.yaml\n"),
                ("openapi/b.yaml", "$ref: a.yaml\n"),
            ],
        );
        let dir = d.join("openapi");
        for (target, want) in [
            ("../secret.yaml", "outside the openapi folder"),
            (
                "https://example.com/s.yaml",
                "remote refs are not supported",
            ),
            ("file:///etc/passwd", "remote refs are not supported"),
            ("/etc/hostname", "outside the openapi folder"),
            ("a.yaml", "a cycle"),
            ("missing.yaml", "missing.yaml"),
            ("a.yaml#/nope", "nothing at #/nope"),
        ] {
            let mut schema = json!({"properties": {"x": {"$ref": target}}});
            let err = inline_file_refs(&mut schema, Some(&dir), "config-values.yaml")
                .expect_err(target)
                .to_string();
            assert!(
                err.contains("openapi/config-values.yaml") && err.contains(want),
                "{target}: {err}"
            );
        }
        let mut schema = json!({"$ref": "a.yaml"});
        let err = inline_file_refs(&mut schema, None, "values.yaml")
            .expect_err("no folder")
            .to_string();
        assert!(err.contains("openapi folder"), "{err}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
