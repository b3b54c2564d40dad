//! The operator's own validating webhook for ModuleSettings objects: a CREATE or
//! UPDATE is refused unless the object names a module (or `global`), its `spec`
//! reads ([`SettingsObject`]) and `spec.settings` passes that module's OpenAPI
//! config schema, the same check the ConfigMap's sections get. Each schema error
//! is reported with its JSON path under the object (`spec.settings.replicas`).
//!
//! The schemas are copied at bind, and again by a reload that adds modules or
//! changes schemas (`addon/reload/`), so a review takes no lock of the engine. Runs on the admission server's
//! handler threads, through [`BuiltinAdmission`].

use super::spec::{GLOBAL, SettingsObject};
use crate::addon::config::values::{Scope, ValuesError};
use crate::webhook::admission::BuiltinAdmission;
use serde_json::Value;
use std::collections::BTreeMap;

/// Every module's (and `global`'s) config schema, by object name.
pub(crate) struct Validator {
    scopes: std::sync::RwLock<BTreeMap<String, Scope>>,
}

impl Validator {
    pub(crate) fn new(scopes: BTreeMap<String, Scope>) -> Validator {
        Validator {
            scopes: std::sync::RwLock::new(scopes),
        }
    }

    /// Replaces the schemas (a reload's).
    pub(crate) fn replace(&self, scopes: BTreeMap<String, Scope>) {
        *self.scopes.write().unwrap_or_else(|p| p.into_inner()) = scopes;
    }

    /// `Ok` when `request` (an AdmissionReview's) may be stored; else the denial.
    pub(crate) fn check(&self, request: &Value) -> Result<(), String> {
        let object = request.get("object").filter(|o| o.is_object());
        let Some(object) = object else {
            return Ok(()); // DELETE and CONNECT carry no object to check.
        };
        let obj = SettingsObject::from_object(object).map_err(|e| e.to_string())?;
        let scopes = self.scopes.read().unwrap_or_else(|p| p.into_inner());
        let Some(scope) = scopes.get(&obj.name) else {
            return Err(unknown(&obj.name, scopes.keys()));
        };
        if obj.name == GLOBAL && (obj.enabled.is_some() || obj.maintenance.is_some()) {
            return Err(format!(
                "ModuleSettings {GLOBAL}: only spec.settings applies to global"
            ));
        }
        let Some(settings) = &obj.settings else {
            return Ok(());
        };
        scope
            .check_config(settings)
            .map_err(|e| denial(&obj.name, &e))
    }
}

impl BuiltinAdmission for Validator {
    fn review(&self, request: &Value) -> Result<(), String> {
        self.check(request)
    }
}

/// The denial of settings that break the schema: every problem with its path
/// under the object.
fn denial(name: &str, e: &ValuesError) -> String {
    match e {
        ValuesError::Invalid { problems, .. } => {
            let listed: Vec<String> = problems.iter().map(|p| under_spec(p)).collect();
            format!(
                "ModuleSettings {name}: spec.settings breaks the module's config schema: {}",
                listed.join("; ")
            )
        }
        other => format!("ModuleSettings {name}: {other}"),
    }
}

/// `/a/0/b: message` (a JSON pointer into the section) as
/// `spec.settings.a[0].b: message`.
fn under_spec(problem: &str) -> String {
    let Some((pointer, message)) = problem.split_once(": ") else {
        return problem.to_string();
    };
    let mut path = String::from("spec.settings");
    for token in pointer.split('/').skip(1).filter(|t| !t.is_empty()) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if token.parse::<usize>().is_ok() {
            path.push_str(&format!("[{token}]"));
        } else {
            path.push('.');
            path.push_str(&token);
        }
    }
    format!("{path}: {message}")
}

fn unknown<'a>(name: &str, known: impl Iterator<Item = &'a String>) -> String {
    let known: Vec<&str> = known.map(String::as_str).collect();
    format!(
        "ModuleSettings {name}: no module named '{name}'; the object's name is a module's \
         name or 'global' (known: {})",
        known.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addon::config::values::Schemas;
    use serde_json::json;

    fn validator() -> Validator {
        let schema = "type: object\nadditionalProperties: false\nproperties:\n  replicas:\n    \
                      type: integer\n    minimum: 1\n  list:\n    type: array\n    items: {type: string}\n";
        let schemas = Schemas::from_yaml(Some(schema), None, "echo").expect("schemas");
        let mut scopes = BTreeMap::new();
        scopes.insert("echo".to_string(), Scope::new("echo", json!({}), schemas));
        scopes.insert(
            "global".to_string(),
            Scope::new("global", json!({}), Schemas::none()),
        );
        Validator::new(scopes)
    }

    fn request(name: &str, spec: Value) -> Value {
        json!({"operation": "CREATE", "object": {"metadata": {"name": name}, "spec": spec}})
    }

    #[test]
    fn schema_errors_are_refused_with_their_path_under_the_object() {
        let v = validator();
        assert_eq!(
            v.check(&request("echo", json!({"settings": {"replicas": 2}}))),
            Ok(())
        );
        let err = v
            .check(&request(
                "echo",
                json!({"settings": {"replicas": 0, "list": ["a", 1], "typo": true}}),
            ))
            .expect_err("refused");
        for needle in [
            "ModuleSettings echo: spec.settings breaks the module's config schema",
            "spec.settings.replicas: ",
            "spec.settings.list[1]: ",
            "spec.settings.typo: forbidden property",
        ] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
        let answer = v.review(&request("echo", json!({"settings": {"replicas": "x"}})));
        let message = answer.expect_err("denied");
        assert!(message.contains("spec.settings.replicas"), "{message}");
    }

    #[test]
    fn unknown_names_and_bad_specs_are_refused() {
        let v = validator();
        let err = v.check(&request("ecko", json!({}))).expect_err("unknown");
        assert!(err.contains("no module named 'ecko'"), "{err}");
        assert!(err.contains("echo, global"), "{err}");
        let err = v
            .check(&request("echo", json!({"enabled": "yes"})))
            .expect_err("bad");
        assert!(err.contains("spec.enabled must be a boolean"), "{err}");
        let err = v
            .check(&request("global", json!({"enabled": false})))
            .expect_err("global");
        assert!(err.contains("only spec.settings"), "{err}");
        assert_eq!(v.check(&json!({"operation": "DELETE"})), Ok(()));
    }
}
