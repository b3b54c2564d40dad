//! ModuleSettings objects as configuration: reading one object's `spec`, laying
//! the objects over the ConfigMap's configuration (the precedence rule), and the
//! conversions the export command makes between the two.
//!
//! **Precedence**: a module (or `global`) that has a ModuleSettings object takes
//! its whole configuration from it: `spec.settings` is its section,
//! `spec.enabled` its `<key>Enabled` flag and `spec.maintenance` its
//! `<key>Maintenance`; whatever the ConfigMap says about that module (its section,
//! both flags, the seeds' `<key>: "false"` form) is set aside. A module without an
//! object keeps its ConfigMap keys. Nothing is merged field by field, so one look
//! at the object tells the whole configuration of its module.
//!
//! Pure functions over `serde_json::Value`, tested without a server.

use crate::addon::config::configmap::KubeConfig;
use crate::json_kind::json_kind;
use serde_json::{Map, Value, json};
use std::fmt;

/// The name of the object that holds the global section.
pub(crate) const GLOBAL: &str = "global";

/// `spec.maintenance`'s one non-empty value (the ConfigMap's `<key>Maintenance`).
pub(crate) const NO_RESOURCE_RECONCILIATION: &str = "NoResourceReconciliation";

/// One ModuleSettings object, read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SettingsObject {
    /// `metadata.name`: a module's name or `global`.
    pub(crate) name: String,
    /// `metadata.generation` (0 when the server gave none).
    pub(crate) generation: i64,
    /// `spec.enabled`; `None`: the module's default (values.yaml, enabled script).
    pub(crate) enabled: Option<bool>,
    /// `spec.settings`; `None` when absent.
    pub(crate) settings: Option<Value>,
    /// `spec.maintenance` is `NoResourceReconciliation`.
    pub(crate) maintenance: Option<bool>,
}

/// Why an object cannot be read as settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SpecError {
    /// No `metadata.name`.
    NoName,
    /// A field has the wrong type: (object, field path, what it is).
    WrongType {
        name: String,
        field: &'static str,
        want: &'static str,
        got: &'static str,
    },
    /// `spec.maintenance` is neither `NoResourceReconciliation` nor empty.
    BadMaintenance { name: String, got: String },
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::NoName => f.write_str("ModuleSettings object without metadata.name"),
            SpecError::WrongType {
                name,
                field,
                want,
                got,
            } => write!(
                f,
                "ModuleSettings {name}: {field} must be {want}, got {got}"
            ),
            SpecError::BadMaintenance { name, got } => write!(
                f,
                "ModuleSettings {name}: spec.maintenance must be \
                 \"{NO_RESOURCE_RECONCILIATION}\" or \"\", got {got:?}"
            ),
        }
    }
}

impl std::error::Error for SpecError {}

impl SettingsObject {
    /// Reads an object as the API server stores it.
    pub(crate) fn from_object(obj: &Value) -> Result<SettingsObject, SpecError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(SpecError::NoName)?
            .to_string();
        let generation = obj
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
        let wrong = |field, want, v: &Value| SpecError::WrongType {
            name: name.clone(),
            field,
            want,
            got: json_kind(v),
        };
        if !spec.is_object() {
            return Err(wrong("spec", "an object", &spec));
        }
        let enabled = match spec.get("enabled") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => return Err(wrong("spec.enabled", "a boolean", other)),
        };
        let settings = match spec.get("settings") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(other) => return Err(wrong("spec.settings", "an object", other)),
        };
        let maintenance = match spec.get("maintenance") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => Some(false),
            Some(Value::String(s)) if s == NO_RESOURCE_RECONCILIATION => Some(true),
            Some(other) => {
                let got = other
                    .as_str()
                    .map_or_else(|| other.to_string(), str::to_string);
                return Err(SpecError::BadMaintenance { name, got });
            }
        };
        Ok(SettingsObject {
            name,
            generation,
            enabled,
            settings,
            maintenance,
        })
    }

    /// The object's `spec` as written back (absent fields left out).
    pub(crate) fn spec(&self) -> Value {
        let mut spec = Map::new();
        if let Some(e) = self.enabled {
            spec.insert("enabled".into(), e.into());
        }
        if let Some(s) = &self.settings {
            spec.insert("settings".into(), s.clone());
        }
        if let Some(m) = self.maintenance {
            let text = if m { NO_RESOURCE_RECONCILIATION } else { "" };
            spec.insert("maintenance".into(), text.into());
        }
        Value::Object(spec)
    }
}

/// A module's name (the object's name) and values key (the ConfigMap's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Names<'a> {
    pub(crate) name: &'a str,
    pub(crate) key: &'a str,
}

/// The values key of the object named `name`: `global`, or the key of the module
/// of that name; `None` for no module.
pub(crate) fn key_of<'a>(name: &str, modules: &[Names<'a>]) -> Option<&'a str> {
    if name == GLOBAL {
        return Some(GLOBAL);
    }
    modules.iter().find(|m| m.name == name).map(|m| m.key)
}

/// The ConfigMap's configuration with the objects laid over it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Overlay {
    pub(crate) config: KubeConfig,
    /// Objects named after no module (ignored).
    pub(crate) unknown: Vec<String>,
    /// Modules whose ConfigMap keys are set aside for their object.
    pub(crate) shadowed: Vec<String>,
}

/// Applies the precedence rule (module doc): each object of a known module (or
/// `global`) replaces that module's configuration from the ConfigMap.
pub(crate) fn overlay(
    mut config: KubeConfig,
    objects: &[SettingsObject],
    modules: &[Names<'_>],
) -> Overlay {
    let mut unknown = Vec::new();
    let mut shadowed = Vec::new();
    for obj in objects {
        let Some(key) = key_of(&obj.name, modules) else {
            unknown.push(obj.name.clone());
            continue;
        };
        if has_configmap_keys(&config, key) {
            shadowed.push(obj.name.clone());
        }
        config.resources.insert(key.to_string(), obj.generation);
        if key == GLOBAL {
            config.global = obj.settings.clone().unwrap_or_else(|| json!({}));
            continue;
        }
        config.modules.remove(key);
        config.enabled.remove(key);
        config.section_flags.remove(key);
        config.maintenance.remove(key);
        if let Some(s) = &obj.settings {
            config.modules.insert(key.to_string(), s.clone());
        }
        if let Some(e) = obj.enabled {
            config.enabled.insert(key.to_string(), e);
        }
        if let Some(m) = obj.maintenance {
            config.maintenance.insert(key.to_string(), m);
        }
    }
    Overlay {
        config,
        unknown,
        shadowed,
    }
}

/// Whether the ConfigMap says anything about `key`.
fn has_configmap_keys(config: &KubeConfig, key: &str) -> bool {
    if key == GLOBAL {
        return config.global.as_object().is_some_and(|g| !g.is_empty());
    }
    config.modules.contains_key(key)
        || config.enabled.contains_key(key)
        || config.maintenance.contains_key(key)
}

/// What the export makes of a ConfigMap's configuration: one object per module
/// and one for `global`, each with what the ConfigMap says of it.
pub(crate) fn objects_from_configmap(
    config: &KubeConfig,
    modules: &[Names<'_>],
) -> Vec<SettingsObject> {
    let global = SettingsObject {
        name: GLOBAL.into(),
        generation: 0,
        enabled: None,
        settings: Some(config.global.clone()),
        maintenance: None,
    };
    let each = modules.iter().map(|m| SettingsObject {
        name: m.name.to_string(),
        generation: 0,
        enabled: config.enabled.get(m.key).copied(),
        settings: config.modules.get(m.key).cloned(),
        maintenance: config.maintenance.get(m.key).copied(),
    });
    std::iter::once(global).chain(each).collect()
}

/// The ConfigMap keys of module (or global) `key`: what the export to objects
/// removes from the ConfigMap.
pub(crate) fn configmap_keys(key: &str) -> Vec<String> {
    if key == GLOBAL {
        return vec![GLOBAL.into()];
    }
    vec![
        key.to_string(),
        format!("{key}Enabled"),
        format!("{key}Maintenance"),
    ]
}

/// The ConfigMap `data` entries that say what `obj` says (the export back),
/// `key` being its values key; the section as YAML.
pub(crate) fn configmap_entries(
    obj: &SettingsObject,
    key: &str,
) -> Result<Vec<(String, String)>, serde_yaml::Error> {
    let mut out = Vec::new();
    if let Some(s) = &obj.settings {
        out.push((key.to_string(), serde_yaml::to_string(s)?));
    }
    if key == GLOBAL {
        return Ok(out);
    }
    if let Some(e) = obj.enabled {
        out.push((format!("{key}Enabled"), e.to_string()));
    }
    if let Some(true) = obj.maintenance {
        out.push((
            format!("{key}Maintenance"),
            NO_RESOURCE_RECONCILIATION.into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULES: &[Names<'static>] = &[
        Names {
            name: "echo",
            key: "echo",
        },
        Names {
            name: "cert-manager",
            key: "certManager",
        },
    ];

    fn object(name: &str, spec: Value) -> SettingsObject {
        let obj = json!({"metadata": {"name": name, "generation": 3}, "spec": spec});
        SettingsObject::from_object(&obj).expect("object")
    }

    fn configmap(data: Value) -> KubeConfig {
        let cm = json!({"data": data});
        KubeConfig::from_object(Some(&cm), &["echo", "certManager"]).expect("configmap")
    }

    #[test]
    fn specs_are_read_and_bad_fields_named() {
        let o = object(
            "echo",
            json!({"enabled": false, "settings": {"a": 1}, "maintenance": "NoResourceReconciliation"}),
        );
        assert_eq!(
            (o.generation, o.enabled, o.settings.clone(), o.maintenance),
            (3, Some(false), Some(json!({"a": 1})), Some(true))
        );
        assert_eq!(
            o.spec(),
            json!({"enabled": false, "settings": {"a": 1}, "maintenance": "NoResourceReconciliation"})
        );
        let bad = |spec: Value| {
            let obj = json!({"metadata": {"name": "echo"}, "spec": spec});
            SettingsObject::from_object(&obj)
                .expect_err("bad")
                .to_string()
        };
        assert_eq!(
            bad(json!({"enabled": "yes"})),
            "ModuleSettings echo: spec.enabled must be a boolean, got a string"
        );
        assert_eq!(
            bad(json!({"settings": [1]})),
            "ModuleSettings echo: spec.settings must be an object, got an array"
        );
        assert!(bad(json!({"maintenance": "Off"})).contains("\"Off\""));
        assert_eq!(
            SettingsObject::from_object(&json!({"spec": {}})),
            Err(SpecError::NoName)
        );
    }

    /// The rule: an object replaces its module's whole configuration from the
    /// ConfigMap; modules without one keep theirs.
    #[test]
    fn an_object_replaces_its_modules_configmap_keys_whole() {
        let cm = configmap(json!({
            "global": "g: 1\n",
            "echo": "a: 1\nb: 2\n",
            "echoEnabled": "false",
            "echoMaintenance": "NoResourceReconciliation",
            "certManager": "c: 1\n",
        }));
        let objects = [
            object("echo", json!({"settings": {"a": 5}})),
            object("nosuch", json!({"settings": {"x": 1}})),
        ];
        let out = overlay(cm.clone(), &objects, MODULES);
        let c = &out.config;
        assert_eq!(c.section("echo"), json!({"a": 5}), "no field merge");
        assert_eq!(
            c.enabled.get("echo"),
            None,
            "the ConfigMap's flag is set aside"
        );
        assert!(!c.no_resource_reconciliation("echo"));
        assert_eq!(c.section("certManager"), json!({"c": 1}));
        assert_eq!(c.global, json!({"g": 1}));
        assert_eq!(out.unknown, ["nosuch"]);
        assert_eq!(out.shadowed, ["echo"]);
        assert_eq!(c.resources.get("echo"), Some(&3));

        let global = [
            object("global", json!({})),
            object("cert-manager", json!({"enabled": false})),
        ];
        let out = overlay(cm, &global, MODULES);
        assert_eq!(out.config.global, json!({}));
        assert_eq!(out.config.enabled.get("certManager"), Some(&false));
        assert!(!out.config.modules.contains_key("certManager"));
        assert_eq!(out.shadowed, ["global", "cert-manager"]);
    }

    /// Exporting a ConfigMap into objects and laying them over an emptied
    /// ConfigMap gives the same configuration, and back again the same data.
    #[test]
    fn the_export_round_trip_keeps_the_configuration() {
        let cm = configmap(json!({
            "global": "g: 1\n",
            "echo": "a: 1\n",
            "echoEnabled": "true",
            "certManager": "false",
            "certManagerMaintenance": "NoResourceReconciliation",
        }));
        let objects = objects_from_configmap(&cm, MODULES);
        assert_eq!(objects.len(), 3);
        let names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["global", "echo", "cert-manager"]);
        let laid = overlay(configmap(json!({})), &objects, MODULES).config;
        let same = |c: &KubeConfig| {
            (
                c.global.clone(),
                c.section("echo"),
                c.section("certManager"),
                c.enabled.clone(),
                c.maintenance.clone(),
            )
        };
        assert_eq!(same(&laid), same(&cm));
        let mut data = Map::new();
        for o in &objects {
            let key = key_of(&o.name, MODULES).expect("known");
            for (k, v) in configmap_entries(o, key).expect("yaml") {
                data.insert(k, v.into());
            }
        }
        assert_eq!(same(&configmap(Value::Object(data))), same(&cm));
        assert_eq!(
            configmap_keys("echo"),
            ["echo", "echoEnabled", "echoMaintenance"]
        );
        assert_eq!(configmap_keys("global"), ["global"]);
    }
}
