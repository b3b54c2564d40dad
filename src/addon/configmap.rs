//! The ConfigMap that configures addon-operator (`ADDON_OPERATOR_CONFIG_MAP` in
//! `ADDON_OPERATOR_NAMESPACE`): reading its `data` into config values and writing
//! hooks' config patches back.
//!
//! `data.global` is the YAML of the global section, `data.<moduleKey>` a module's
//! section (a map), `data.<moduleKey>Enabled` exactly `"true"` or `"false"`. A key
//! that does not round-trip camelCase → kebab-case → camelCase, bad YAML or a bad
//! flag makes the whole ConfigMap invalid: the caller keeps the last good one.
//! A ConfigMap that does not exist is an empty configuration.

use super::values::{module_name_of_key, values_key};
use crate::json_kind::json_kind;
use crate::kube::{Client, KubeError, Resource};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The configuration a ConfigMap holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeConfig {
    /// The `global` section; an empty map when absent.
    pub global: Value,
    /// Module sections by values key.
    pub modules: BTreeMap<String, Value>,
    /// `<key>Enabled` flags by values key.
    pub enabled: BTreeMap<String, bool>,
    /// `<key>Maintenance` by values key (flant's newer key): `true` for
    /// `NoResourceReconciliation` (helm leaves the release alone), `false` for `""`.
    pub maintenance: BTreeMap<String, bool>,
}

/// Most a ConfigMap's data may hold (the API server's own limit is 1 MiB).
const MAX_DATA: usize = 4 << 20;

impl KubeConfig {
    /// Parses a ConfigMap object (its `data`); `None` is a deleted or absent ConfigMap.
    pub fn from_object(object: Option<&Value>) -> Result<KubeConfig, String> {
        let mut config = KubeConfig {
            global: json!({}),
            ..KubeConfig::default()
        };
        let Some(data) = object
            .and_then(|o| o.get("data"))
            .and_then(Value::as_object)
        else {
            return Ok(config);
        };
        let size: usize = data
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if size > MAX_DATA {
            return Err(format!("data is {size} bytes; at most {MAX_DATA} are read"));
        }
        for (key, value) in data {
            let text = value
                .as_str()
                .ok_or_else(|| format!("key '{key}': value is not a string"))?;
            config.read_key(key, text)?;
        }
        Ok(config)
    }

    fn read_key(&mut self, key: &str, text: &str) -> Result<(), String> {
        if self.read_maintenance(key, text)? {
            return Ok(());
        }
        if key == "global" {
            self.global = section(key, text)?;
            return Ok(());
        }
        if let Some(module_key) = key.strip_suffix("Enabled") {
            check_key(key, module_key)?;
            let flag = match text.trim() {
                "true" => true,
                "false" => false,
                other => {
                    return Err(format!(
                        "key '{key}': must be \"true\" or \"false\", got {other:?}"
                    ));
                }
            };
            self.enabled.insert(module_key.to_string(), flag);
            return Ok(());
        }
        check_key(key, key)?;
        self.modules.insert(key.to_string(), section(key, text)?);
        Ok(())
    }

    /// `<key>Maintenance`, flant's newer key: `NoResourceReconciliation` (or
    /// `noresourcereconciliation`) or empty. Returns whether `key` was one; a value
    /// that is a map is left to be read as the section of a module named
    /// `<name>-maintenance`.
    fn read_maintenance(&mut self, key: &str, text: &str) -> Result<bool, String> {
        let Some(module_key) = key.strip_suffix("Maintenance") else {
            return Ok(false);
        };
        let state = match text.trim() {
            "NoResourceReconciliation" | "noresourcereconciliation" => true,
            "" => false,
            other if !other.contains(':') && !other.starts_with('{') => {
                return Err(format!(
                    "key '{key}': must be \"NoResourceReconciliation\" or \"\", got {other:?}"
                ));
            }
            _ => return Ok(false),
        };
        check_key(key, module_key)?;
        self.maintenance.insert(module_key.to_string(), state);
        Ok(true)
    }

    /// Whether module `key` is in maintenance (`<key>Maintenance: NoResourceReconciliation`):
    /// its release is neither upgraded nor healed.
    pub fn no_resource_reconciliation(&self, key: &str) -> bool {
        self.maintenance.get(key).copied().unwrap_or(false)
    }

    /// The section of `key` ("global" or a module key), an empty map when unset.
    pub fn section(&self, key: &str) -> Value {
        if key == "global" {
            return self.global.clone();
        }
        self.modules.get(key).cloned().unwrap_or_else(|| json!({}))
    }
}

/// A module key must survive camelCase → kebab-case → camelCase.
fn check_key(key: &str, module_key: &str) -> Result<(), String> {
    if module_key.is_empty() || values_key(&module_name_of_key(module_key)) != module_key {
        return Err(format!(
            "key '{key}': not a module key (must be the camelCase of a kebab-case module name)"
        ));
    }
    Ok(())
}

/// A section's YAML: a map (empty text is an empty map).
fn section(key: &str, text: &str) -> Result<Value, String> {
    crate::yaml_depth::check(text).map_err(|e| format!("key '{key}': {e}"))?;
    match serde_yaml::from_str::<Value>(text) {
        Ok(Value::Null) => Ok(json!({})),
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!(
            "key '{key}': the section must be a map, got {}",
            json_kind(&other)
        )),
        Err(e) => Err(format!("key '{key}': bad YAML: {e}")),
    }
}

/// Reads the ConfigMap once (at startup); absent is `None`.
pub fn read(client: &Client, namespace: &str, name: &str) -> Result<Option<Value>, String> {
    let api = client.api(&configmaps(), Some(namespace));
    match api.get(name) {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_status(&e, 404) => Ok(None),
        Err(e) => Err(format!("ConfigMap {namespace}/{name}: {e}")),
    }
}

/// Writes one section (`key` is "global" or a module key) into the ConfigMap,
/// keeping every other key: get, change, update; a conflict (someone else wrote in
/// between) retries from the get; a missing ConfigMap is created.
pub fn write_section(
    client: &Client,
    namespace: &str,
    name: &str,
    key: &str,
    section: &Value,
) -> Result<(), String> {
    let text = serde_yaml::to_string(section).map_err(|e| format!("key '{key}': {e}"))?;
    let api = client.api(&configmaps(), Some(namespace));
    let fail = |e: KubeError| format!("ConfigMap {namespace}/{name}: writing key '{key}': {e}");
    for _ in 0..5 {
        let result = match api.get(name) {
            Ok(mut cm) => {
                let data = cm
                    .as_object_mut()
                    .map(|o| o.entry("data").or_insert_with(|| json!({})));
                match data {
                    Some(Value::Object(d)) => {
                        d.insert(key.to_string(), Value::String(text.clone()))
                    }
                    Some(other) => {
                        *other = json!({ key: text });
                        None
                    }
                    None => return Err(format!("ConfigMap {namespace}/{name} is not an object")),
                };
                api.replace(name, &cm).map(drop)
            }
            Err(e) if is_status(&e, 404) => {
                let mut data = Map::new();
                data.insert(key.to_string(), Value::String(text.clone()));
                let cm = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace},
                    "data": data,
                });
                api.create(&cm).map(drop)
            }
            Err(e) => return Err(fail(e)),
        };
        match result {
            Ok(()) => return Ok(()),
            Err(e) if is_status(&e, 409) => continue,
            Err(e) => return Err(fail(e)),
        }
    }
    Err(format!(
        "ConfigMap {namespace}/{name}: writing key '{key}': still conflicting after 5 tries"
    ))
}

fn is_status(e: &KubeError, code: u16) -> bool {
    e.status_code() == Some(code)
}

fn configmaps() -> Resource {
    Resource {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        kind: "ConfigMap".into(),
        namespaced: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": data})
    }

    #[test]
    fn sections_and_flags_are_read() {
        let c = KubeConfig::from_object(Some(&cm(json!({
            "global": "param1: 200\n",
            "someModule": "param1: Long string\nparam2: FOO\n",
            "someModuleEnabled": "true",
            "otherEnabled": "false",
        }))))
        .expect("valid");
        assert_eq!(c.global, json!({"param1": 200}));
        assert_eq!(
            c.section("someModule"),
            json!({"param1": "Long string", "param2": "FOO"})
        );
        assert_eq!(c.enabled.get("someModule"), Some(&true));
        assert_eq!(c.enabled.get("other"), Some(&false));
        assert_eq!(c.section("absent"), json!({}));
        assert_eq!(
            KubeConfig::from_object(None).expect("absent").global,
            json!({})
        );
    }

    #[test]
    fn a_bad_key_makes_the_whole_configmap_invalid() {
        for (data, needle) in [
            (
                json!({"Malformed-section-name": "a: 1"}),
                "Malformed-section-name",
            ),
            (json!({"anotherModule": "false"}), "must be a map"),
            (json!({"fooEnabled": "yes"}), "fooEnabled"),
            (json!({"global": "a: [1"}), "bad YAML"),
            (json!({"fooMaintenance": "Off"}), "NoResourceReconciliation"),
        ] {
            let err = KubeConfig::from_object(Some(&cm(data))).expect_err("invalid");
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn maintenance_keys_of_flants_newer_releases_are_read() {
        let c = KubeConfig::from_object(Some(&cm(json!({
            "fooMaintenance": "NoResourceReconciliation",
            "barMaintenance": "",
            "bazMaintenance": "noresourcereconciliation",
            "quxMaintenance": "a: 1\n",
        }))))
        .expect("valid");
        assert!(c.no_resource_reconciliation("foo"));
        assert!(!c.no_resource_reconciliation("bar"));
        assert!(c.no_resource_reconciliation("baz"));
        assert!(!c.no_resource_reconciliation("other"));
        assert_eq!(c.maintenance.len(), 3);
        assert_eq!(
            c.modules.get("quxMaintenance"),
            Some(&json!({"a": 1})),
            "a map is the section of module qux-maintenance"
        );
    }
}
