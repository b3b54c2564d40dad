//! OpenAPI schemas for one values scope (spec §4): `openapi/config-values.yaml` (config
//! schema) and `openapi/values.yaml` (values schema, plus a derived helm schema).
//!
//! Loading: YAML with anchors and `<<` merge keys → JSON; `nullable: true` becomes a
//! `[T, "null"]` type; unset `additionalProperties` becomes `false` through `properties`
//! and `items`; `x-extend` merges the config schema into the values schema; the helm schema
//! adds `x-required-for-helm` to `required`. Schemas are compiled as JSON Schema draft 4
//! (OpenAPI 3.0 semantics). Also a defaults walker for `default` keywords.
//! A `$ref` to another file of the `openapi/` folder is inlined first ([`super::refs`]).

use super::error::ValuesError;
use jsonschema::Draft;
use jsonschema::error::ValidationErrorKind;
use serde_json::{Map, Value};
use std::fmt;
use std::path::Path;

/// Most validation errors listed in one message (the count is always exact).
const MAX_LISTED_ERRORS: usize = 50;

/// Longest single error message kept (messages quote the offending value).
const MAX_MESSAGE_CHARS: usize = 300;

/// Which of a scope's three schemas to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchemaKind {
    /// `config-values.yaml`: the ConfigMap section.
    Config,
    /// `values.yaml` (+ x-extend): effective values after hook patches.
    Values,
    /// The values schema with `x-required-for-helm`: values right before Helm.
    Helm,
}

impl fmt::Display for SchemaKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchemaKind::Config => "config",
            SchemaKind::Values => "values",
            SchemaKind::Helm => "helm",
        })
    }
}

/// A transformed schema and its compiled validator.
#[derive(Debug, Clone)]
struct Compiled {
    raw: Value,
    validator: jsonschema::Validator,
}

/// The compiled schemas of one scope ("global" or a module); absent ones validate nothing.
#[derive(Debug, Clone)]
pub(crate) struct Schemas {
    scope: String,
    config: Option<Compiled>,
    values: Option<Compiled>,
    helm: Option<Compiled>,
}

impl Schemas {
    /// No schemas: every validation passes, no defaults.
    pub(crate) fn none() -> Schemas {
        Schemas {
            scope: String::new(),
            config: None,
            values: None,
            helm: None,
        }
    }

    /// `dir` is an `openapi/` directory; each of config-values.yaml and values.yaml is
    /// optional. `scope` is "global" or the module name, used in errors.
    pub(crate) fn load(dir: &Path, scope: &str) -> Result<Schemas, ValuesError> {
        let read = |file: &str| read_optional(&dir.join(file)).map_err(|m| schema_error(scope, m));
        let config = read("config-values.yaml")?;
        let values = read("values.yaml")?;
        Schemas::from_yaml_in(config.as_deref(), values.as_deref(), scope, Some(dir))
            .map_err(|m| schema_error(scope, m))
    }

    /// Builds the schemas from YAML texts (either optional); a `$ref` to a file is refused.
    pub(crate) fn from_yaml(
        config: Option<&str>,
        values: Option<&str>,
        scope: &str,
    ) -> Result<Schemas, ValuesError> {
        Schemas::from_yaml_in(config, values, scope, None).map_err(|m| schema_error(scope, m))
    }

    /// [`Schemas::from_yaml`] with `dir`, the `openapi/` folder `$ref`s to files read from.
    /// The error is the message after the scope.
    fn from_yaml_in(
        config: Option<&str>,
        values: Option<&str>,
        scope: &str,
        dir: Option<&Path>,
    ) -> Result<Schemas, SchemaProblem> {
        let mut out = Schemas::none();
        out.scope = scope.to_string();
        let config_raw = match config {
            Some(text) => load_yaml(text, "config-values.yaml", dir)?,
            None => None,
        };
        let config_raw = config_raw.map(|mut s| {
            set_additional_properties(&mut s);
            s
        });
        if let Some(values_text) = values
            && let Some(mut raw) = load_yaml(values_text, "values.yaml", dir)?
        {
            if let Some(parent) = &config_raw {
                extend(&mut raw, parent);
            }
            set_additional_properties(&mut raw);
            let mut helm = raw.clone();
            required_for_helm(&mut helm);
            out.values = Some(compile(raw, SchemaKind::Values)?);
            out.helm = Some(compile(helm, SchemaKind::Helm)?);
        }
        if let Some(raw) = config_raw {
            out.config = Some(compile(raw, SchemaKind::Config)?);
        }
        Ok(out)
    }

    #[cfg(test)]
    /// The transformed schema of `kind`, if any (for the debug API and defaults).
    pub(crate) fn raw(&self, kind: SchemaKind) -> Option<&Value> {
        self.get(kind).map(|c| &c.raw)
    }

    fn get(&self, kind: SchemaKind) -> Option<&Compiled> {
        match kind {
            SchemaKind::Config => self.config.as_ref(),
            SchemaKind::Values => self.values.as_ref(),
            SchemaKind::Helm => self.helm.as_ref(),
        }
    }

    /// Validates `section` (the scope's own values, not wrapped in `{"global":..}`).
    /// Error: `<scope>: <kind> values are invalid: <path>: <message>; ...`; several errors
    /// start with `N errors occurred: `; unknown properties say "forbidden property".
    pub(crate) fn validate(&self, kind: SchemaKind, section: &Value) -> Result<(), ValuesError> {
        let Some(compiled) = self.get(kind) else {
            return Ok(());
        };
        let problems: Vec<String> = compiled
            .validator
            .iter_errors(section)
            .flat_map(|e| describe(&e))
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        Err(ValuesError::Invalid {
            scope: self.scope.clone(),
            kind,
            problems,
        })
    }

    /// Inserts defaults from the config (Config) or values (Values, Helm) schema, defaults
    /// of defaults too; never overwrites existing keys (even null).
    pub(crate) fn apply_defaults(&self, kind: SchemaKind, section: &mut Value) {
        if let Some(compiled) = self.get(kind) {
            apply_defaults_node(&compiled.raw, section);
        }
    }
}

fn schema_error(scope: &str, message: impl std::fmt::Display) -> ValuesError {
    ValuesError::Schema {
        scope: scope.to_string(),
        message: message.to_string(),
    }
}

fn read_optional(path: &Path) -> Result<Option<String>, SchemaProblem> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("read OpenAPI schema {}: {e}", path.display()).into()),
    }
}

/// YAML text → JSON schema; an empty document means "no schema".
fn load_yaml(text: &str, file: &str, dir: Option<&Path>) -> Result<Option<Value>, SchemaProblem> {
    let bad = |e: String| format!("OpenAPI schema openapi/{file}: {e}");
    let mut yaml: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| bad(e.to_string()))?;
    if yaml.is_null() {
        return Ok(None);
    }
    yaml.apply_merge()
        .map_err(|e| bad(format!("merge keys: {e}")))?;
    let mut json = serde_json::to_value(&yaml).map_err(|e| bad(e.to_string()))?;
    if !json.is_object() {
        return Err(bad("the schema must be a mapping".to_string()).into());
    }
    super::refs::inline_file_refs(&mut json, dir, file).map_err(|e| e.to_string())?;
    rewrite_nullable(&mut json);
    Ok(Some(json))
}

fn compile(raw: Value, kind: SchemaKind) -> Result<Compiled, SchemaProblem> {
    let validator = jsonschema::options()
        .with_draft(Draft::Draft4)
        .build(&raw)
        .map_err(|e| SchemaProblem::from(format!("{kind} schema is not a valid schema: {e}")))?;
    Ok(Compiled { raw, validator })
}

/// Keys whose values are data, not subschemas: never rewritten.
const DATA_KEYWORDS: [&str; 5] = ["default", "enum", "example", "examples", "const"];

/// `nullable: true` with `type: T` → `type: [T, "null"]`, everywhere in the schema.
fn rewrite_nullable(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if map.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::String(t)) = map.get("type")
            {
                let types = vec![Value::String(t.clone()), Value::String("null".into())];
                map.insert("type".into(), Value::Array(types));
            }
            for (key, child) in map.iter_mut() {
                if !DATA_KEYWORDS.contains(&key.as_str()) && !key.starts_with("x-") {
                    rewrite_nullable(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_nullable),
        _ => {}
    }
}

/// Unset `additionalProperties` → `false` on this node and, recursively, on every
/// property schema that does not set it and on `items`.
fn set_additional_properties(node: &mut Value) {
    let Value::Object(map) = node else { return };
    map.entry("additionalProperties")
        .or_insert(Value::Bool(false));
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for prop in props.values_mut() {
            if prop.get("additionalProperties").is_none() {
                set_additional_properties(prop);
            }
        }
    }
    match map.get_mut("items") {
        Some(items @ Value::Object(_)) => set_additional_properties(items),
        Some(Value::Array(list)) => list.iter_mut().for_each(set_additional_properties),
        _ => {}
    }
}

/// `x-extend`: merge the (transformed) config schema into the values schema: definitions,
/// properties, patternProperties (child wins), required (parent first, deduped), `x-*`
/// (child wins), title/description (child if non-empty).
fn extend(child: &mut Value, parent: &Value) {
    let (Value::Object(c), Value::Object(p)) = (child, parent) else {
        return;
    };
    if !c.contains_key("x-extend") {
        return;
    }
    for key in ["definitions", "properties", "patternProperties"] {
        merge_maps(c, p, key);
    }
    merge_required(c, p.get("required"));
    for (key, value) in p.iter().filter(|(k, _)| k.starts_with("x-")) {
        c.entry(key.clone()).or_insert_with(|| value.clone());
    }
    for key in ["title", "description"] {
        let empty = c.get(key).and_then(Value::as_str).is_none_or(str::is_empty);
        if empty && let Some(v) = p.get(key) {
            c.insert(key.into(), v.clone());
        }
    }
}

fn merge_maps(child: &mut Map<String, Value>, parent: &Map<String, Value>, key: &str) {
    let Some(Value::Object(from)) = parent.get(key) else {
        return;
    };
    let entry = child
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(into) = entry {
        for (k, v) in from {
            into.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// `required` = `first` entries then `node`'s own extras, without duplicates.
fn merge_required(node: &mut Map<String, Value>, first: Option<&Value>) {
    let names = union_names(first, node.get("required"));
    if !names.is_empty() {
        node.insert("required".into(), Value::Array(names));
    }
}

/// Names of list `a` then those of `b` not yet seen.
fn union_names(a: Option<&Value>, b: Option<&Value>) -> Vec<Value> {
    let mut names: Vec<Value> = Vec::new();
    for list in [a, b] {
        for name in list.and_then(Value::as_array).into_iter().flatten() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// `x-required-for-helm` (string or list) merged into `required`, through `properties`.
fn required_for_helm(node: &mut Value) {
    let Value::Object(map) = node else { return };
    if let Some(extra) = map.get("x-required-for-helm") {
        let extra = match extra {
            Value::String(s) => Value::Array(vec![Value::String(s.clone())]),
            other => other.clone(),
        };
        let names = union_names(map.get("required"), Some(&extra));
        if !names.is_empty() {
            map.insert("required".into(), Value::Array(names));
        }
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(required_for_helm);
    }
}

/// One validation error → one or more "<path>: <message>" lines.
fn describe(e: &jsonschema::ValidationError<'_>) -> Vec<String> {
    let path = e.instance_path().as_str();
    match e.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|name| format!("{}: forbidden property", join_path(path, name)))
            .collect(),
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_string);
            vec![format!("{}: is required", join_path(path, &name))]
        }
        _ => vec![format!("{}: {}", show_path(path), clip(&e.to_string()))],
    }
}

/// Cuts a message (which may quote a whole offending value) to `MAX_MESSAGE_CHARS`.
fn clip(message: &str) -> String {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}...", &message[..cut]),
        None => message.to_string(),
    }
}

fn join_path(path: &str, name: &str) -> String {
    format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"))
}

fn show_path(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

/// One problem as it is; several counted, the first ones listed.
pub(super) fn join_problems(problems: &[String]) -> String {
    if problems.len() == 1 {
        return problems.concat();
    }
    let listed = problems
        .iter()
        .take(MAX_LISTED_ERRORS)
        .cloned()
        .collect::<Vec<_>>();
    let mut text = format!("{} errors occurred: {}", problems.len(), listed.join("; "));
    if problems.len() > MAX_LISTED_ERRORS {
        text.push_str(&format!(
            "; ... and {} more",
            problems.len() - MAX_LISTED_ERRORS
        ));
    }
    text
}

/// Defaults walker: missing properties with a `default` get a copy of it, then every
/// present property with a schema is walked (defaults of defaults); arrays walk `items`.
fn apply_defaults_node(schema: &Value, data: &mut Value) {
    match data {
        Value::Object(map) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return;
            };
            for (name, prop) in props {
                if let Some(default) = prop.get("default")
                    && !map.contains_key(name)
                {
                    map.insert(name.clone(), default.clone());
                }
            }
            for (name, value) in map.iter_mut() {
                if let Some(prop) = props.get(name) {
                    apply_defaults_node(prop, value);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema @ Value::Object(_)) = schema.get("items") {
                items
                    .iter_mut()
                    .for_each(|item| apply_defaults_node(item_schema, item));
            }
        }
        _ => {}
    }
}

/// Why an OpenAPI schema file cannot be used: the file and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaProblem {
    problem: String,
}

impl From<String> for SchemaProblem {
    fn from(problem: String) -> SchemaProblem {
        SchemaProblem { problem }
    }
}

impl From<&str> for SchemaProblem {
    fn from(problem: &str) -> SchemaProblem {
        SchemaProblem::from(problem.to_string())
    }
}

impl std::fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for SchemaProblem {}
