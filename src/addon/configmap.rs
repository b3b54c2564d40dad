//! The ConfigMap that configures addon-operator (`ADDON_OPERATOR_CONFIG_MAP` in
//! `ADDON_OPERATOR_NAMESPACE`): reading its `data` into config values and writing
//! hooks' config patches back.
//!
//! `data.global` is the YAML of the global section, `data.<moduleKey>` a module's
//! section (a map), `data.<moduleKey>Enabled` exactly `"true"` or `"false"`. A key
//! that does not round-trip camelCase → kebab-case → camelCase, bad YAML or a bad
//! flag makes the whole ConfigMap invalid: the caller keeps the last good one.
//! A ConfigMap that does not exist is an empty configuration.
//!
//! Errors are a [`ConfigError`]: unreadable keys, keys of modules that do not
//! exist, sections that break a schema, or the API server refusing a read or write;
//! each names the ConfigMap key and says what to change.

use super::values::{ValuesError, module_name_of_key, values_key};
use crate::json_kind::json_kind;
use crate::kube::{Client, KubeError, Resource};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt;

/// Why a ConfigMap was refused, or could not be read or written.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// `data` is over the cap.
    TooLarge { size: usize },
    /// Keys that cannot be read (bad YAML, a bad flag, not a module key), every one.
    Unreadable(Vec<String>),
    /// Sections or flags of modules that do not exist, every one.
    UnknownModules(Vec<String>),
    /// A section breaks its scope's config schema.
    Invalid(ValuesError),
    /// Several of the above, found by one check.
    Several(Vec<ConfigError>),
    /// The API server refused a read or write of the ConfigMap (`namespace/name`).
    Kube {
        configmap: String,
        /// The key being written; `None` for a read.
        key: Option<String>,
        /// Boxed: a Kubernetes error is large, and most results are `Ok`.
        error: Box<KubeError>,
    },
    /// A write lost every race against other writers.
    Conflict { configmap: String, key: String },
    /// Something else made a write impossible (a section that is not YAML, an
    /// object that is not an object).
    Write { configmap: String, message: String },
}

impl ConfigError {
    #[cfg(test)]
    /// True when the ConfigMap's text could not be read at all (as opposed to
    /// keys of unknown modules or a schema violation).
    pub(crate) fn is_unreadable(&self) -> bool {
        match self {
            ConfigError::TooLarge { .. } | ConfigError::Unreadable(_) => true,
            ConfigError::Several(all) => all.iter().any(ConfigError::is_unreadable),
            _ => false,
        }
    }

    #[cfg(test)]
    /// True when a section breaks its config schema.
    pub(crate) fn is_schema_violation(&self) -> bool {
        match self {
            ConfigError::Invalid(_) => true,
            ConfigError::Several(all) => all.iter().any(ConfigError::is_schema_violation),
            _ => false,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::TooLarge { size } => {
                write!(f, "data is {size} bytes; at most {MAX_DATA} are read")
            }
            ConfigError::Unreadable(all) | ConfigError::UnknownModules(all) => match all.len() {
                1 => f.write_str(&all[0]),
                n => write!(f, "{n} errors: {}", all.join("; ")),
            },
            ConfigError::Invalid(e) => e.fmt(f),
            ConfigError::Several(all) => {
                let texts: Vec<String> = all.iter().map(ToString::to_string).collect();
                f.write_str(&texts.join("; "))
            }
            ConfigError::Kube {
                configmap,
                key,
                error,
            } => {
                write!(f, "ConfigMap {configmap}: ")?;
                if let Some(key) = key {
                    write!(f, "writing key '{key}': ")?;
                }
                write!(f, "{error}")?;
                if error.status_code() == Some(403) {
                    let verbs = if key.is_some() {
                        "get, update and create"
                    } else {
                        "get"
                    };
                    write!(
                        f,
                        " (grant the operator's ServiceAccount {verbs} on configmaps in its namespace)"
                    )?;
                }
                Ok(())
            }
            ConfigError::Conflict { configmap, key } => write!(
                f,
                "ConfigMap {configmap}: writing key '{key}': still conflicting after 5 tries \
                 (another writer keeps changing it; the hook run is retried)"
            ),
            ConfigError::Write { configmap, message } => {
                write!(f, "ConfigMap {configmap}: {message}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// The boundary to callers whose own errors are still text (startup, the engine's
/// steps): `?` turns the error into its message.
impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

/// The configuration a ConfigMap holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct KubeConfig {
    /// The `global` section; an empty map when absent.
    pub(crate) global: Value,
    /// Module sections by values key.
    pub(crate) modules: BTreeMap<String, Value>,
    /// `<key>Enabled` flags by values key.
    pub(crate) enabled: BTreeMap<String, bool>,
    /// Keys whose flag was written in the seeds' form (`<key>: "false"`).
    pub(crate) section_flags: std::collections::BTreeSet<String>,
    /// `<key>Maintenance` by values key (flant's newer key): `true` for
    /// `NoResourceReconciliation` (helm leaves the release alone), `false` for `""`.
    pub(crate) maintenance: BTreeMap<String, bool>,
}

/// Most a ConfigMap's data may hold (the API server's own limit is 1 MiB).
const MAX_DATA: usize = 4 << 20;

impl KubeConfig {
    /// Parses a ConfigMap object (its `data`); `None` is a deleted or absent ConfigMap.
    pub(crate) fn from_object(object: Option<&Value>) -> Result<KubeConfig, ConfigError> {
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
            return Err(ConfigError::TooLarge { size });
        }
        // Every bad key is reported at once, so one edit can fix them all.
        let mut errors = Vec::new();
        for (key, value) in data {
            let read = match value.as_str() {
                Some(text) => config.read_key(key, text),
                None => Err(format!("key '{key}': value is not a string")),
            };
            errors.extend(read.err());
        }
        config.check_disable_forms(data, &mut errors);
        match errors.is_empty() {
            true => Ok(config),
            false => Err(ConfigError::Unreadable(errors)),
        }
    }

    /// The seeds' `<key>: "false"` (a module section that is the flag itself) next
    /// to a `<key>Enabled` that says the opposite is a contradiction.
    fn check_disable_forms(&self, data: &Map<String, Value>, errors: &mut Vec<String>) {
        for (key, value) in data {
            let flag = value.as_str().and_then(section_flag);
            let enabled = self.enabled.get(key.as_str());
            if let (Some(flag), Some(enabled)) = (flag, enabled)
                && flag != *enabled
            {
                errors.push(format!(
                    "key '{key}': says {flag} while '{key}Enabled' says {enabled}"
                ));
            }
        }
    }

    /// Refuses every section or flag of a module that does not exist, naming the
    /// key (`known`: the values keys of the discovered modules); all at once.
    pub(crate) fn check_module_keys(&self, known: &[&str]) -> Result<(), ConfigError> {
        let unknown = |key: &str, shown: String| {
            (!known.contains(&key)).then(|| {
                format!(
                    "key '{shown}': no module has the values key '{key}'{}",
                    hint(known)
                )
            })
        };
        let mut errors: Vec<String> = self
            .modules
            .keys()
            .filter_map(|k| unknown(k, k.clone()))
            .collect();
        errors.extend(
            self.enabled
                .keys()
                .filter(|k| !self.modules.contains_key(*k))
                .filter_map(|k| match self.section_flags.contains(k) {
                    true => unknown(k, k.clone()),
                    false => unknown(k, format!("{k}Enabled")),
                }),
        );
        errors.extend(
            self.maintenance
                .keys()
                .filter_map(|k| unknown(k, format!("{k}Maintenance"))),
        );
        match errors.is_empty() {
            true => Ok(()),
            false => Err(ConfigError::UnknownModules(errors)),
        }
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
        // The seeds' `<key>: "false"` disables the module (and "true" enables it):
        // the flag, with an empty section.
        if let Some(flag) = section_flag(text) {
            self.enabled.entry(key.to_string()).or_insert(flag);
            self.section_flags.insert(key.to_string());
            return Ok(());
        }
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
    pub(crate) fn no_resource_reconciliation(&self, key: &str) -> bool {
        self.maintenance.get(key).copied().unwrap_or(false)
    }

    /// The section of `key` ("global" or a module key), an empty map when unset.
    pub(crate) fn section(&self, key: &str) -> Value {
        if key == "global" {
            return self.global.clone();
        }
        self.modules.get(key).cloned().unwrap_or_else(|| json!({}))
    }
}

/// A module section that is a flag (`"false"`, `"true"`), as the seeds write it.
fn section_flag(text: &str) -> Option<bool> {
    match text.trim() {
        "false" => Some(false),
        "true" => Some(true),
        _ => None,
    }
}

/// ` (module keys: a, b)`: what the key could have been.
fn hint(known: &[&str]) -> String {
    match known.is_empty() {
        true => " (there are no modules)".to_string(),
        false => format!(" (module keys: {})", known.join(", ")),
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
pub(crate) fn read(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, ConfigError> {
    let api = client.api(&configmaps(), Some(namespace));
    match api.get(name) {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_status(&e, 404) => Ok(None),
        Err(error) => Err(ConfigError::Kube {
            configmap: format!("{namespace}/{name}"),
            key: None,
            error: Box::new(error),
        }),
    }
}

/// Writes one section (`key` is "global" or a module key) into the ConfigMap,
/// keeping every other key: get, change, update; a conflict (someone else wrote in
/// between) retries from the get; a missing ConfigMap is created.
pub(crate) fn write_section(
    client: &Client,
    namespace: &str,
    name: &str,
    key: &str,
    section: &Value,
) -> Result<(), ConfigError> {
    let configmap = format!("{namespace}/{name}");
    let text = serde_yaml::to_string(section).map_err(|e| ConfigError::Write {
        configmap: configmap.clone(),
        message: format!("key '{key}': {e}"),
    })?;
    let api = client.api(&configmaps(), Some(namespace));
    let fail = |error: KubeError| ConfigError::Kube {
        configmap: configmap.clone(),
        key: Some(key.to_string()),
        error: Box::new(error),
    };
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
                    None => {
                        return Err(ConfigError::Write {
                            configmap,
                            message: "is not an object".into(),
                        });
                    }
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
    Err(ConfigError::Conflict {
        configmap,
        key: key.to_string(),
    })
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

    /// A ConfigMap that cannot be read and one with keys of unknown modules are told
    /// apart by their variant; the text stays as before.
    #[test]
    fn unreadable_and_unknown_keys_are_different_variants() {
        let bad =
            KubeConfig::from_object(Some(&cm(json!({"global": "a: [1"})))).expect_err("bad YAML");
        assert!(bad.is_unreadable() && !bad.is_schema_violation(), "{bad:?}");
        let c = KubeConfig::from_object(Some(&cm(json!({"wbe": "a: 1"})))).expect("readable");
        let unknown = c.check_module_keys(&["web"]).expect_err("unknown");
        assert!(
            matches!(&unknown, ConfigError::UnknownModules(k) if k.len() == 1)
                && !unknown.is_unreadable(),
            "{unknown:?}"
        );
        let both = ConfigError::Several(vec![unknown, bad]);
        assert!(both.is_unreadable());
        assert!(
            both.to_string()
                .starts_with("key 'wbe': no module has the values key 'wbe'")
        );
    }

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
            (json!({"anotherModule": "yes"}), "must be a map"),
            (json!({"fooEnabled": "yes"}), "fooEnabled"),
            (json!({"global": "a: [1"}), "bad YAML"),
            (json!({"fooMaintenance": "Off"}), "NoResourceReconciliation"),
        ] {
            let err = KubeConfig::from_object(Some(&cm(data)))
                .expect_err("invalid")
                .to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn the_seeds_false_form_disables_a_module() {
        let c = KubeConfig::from_object(Some(&cm(json!({
            "anotherModule": "false",
            "simpleModule": "modParam2: newValue2\n",
        }))))
        .expect("the seeds' example is valid");
        assert_eq!(c.enabled.get("anotherModule"), Some(&false));
        assert_eq!(c.section("anotherModule"), json!({}));
        assert!(
            c.check_module_keys(&["anotherModule", "simpleModule"])
                .is_ok()
        );
        let err = KubeConfig::from_object(Some(&cm(json!({
            "web": "false", "webEnabled": "true",
        }))))
        .expect_err("contradiction")
        .to_string();
        assert!(err.contains("'webEnabled' says true"), "{err}");
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let err = KubeConfig::from_object(Some(&cm(json!({
            "global": "a: [1",
            "fooEnabled": "yes",
            "Bad-key": "a: 1",
        }))))
        .expect_err("invalid")
        .to_string();
        assert!(err.starts_with("3 errors: "), "{err}");
        for needle in ["'global'", "'fooEnabled'", "'Bad-key'"] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn sections_of_modules_that_do_not_exist_are_refused() {
        let c = KubeConfig::from_object(Some(&cm(json!({
            "wbe": "a: 1\n",
            "nosuchModuleEnabled": "true",
            "gone": "false",
            "wbeMaintenance": "NoResourceReconciliation",
            "webMaintenance": "",
            "web": "a: 2\n",
            "webEnabled": "true",
        }))))
        .expect("parses");
        let err = c
            .check_module_keys(&["web"])
            .expect_err("unknown keys")
            .to_string();
        assert!(err.starts_with("4 errors: "), "{err}");
        for needle in [
            "key 'wbe': no module has the values key 'wbe' (module keys: web)",
            "key 'nosuchModuleEnabled'",
            "key 'gone'",
            "key 'wbeMaintenance'",
        ] {
            assert!(err.contains(needle), "{needle}: {err}");
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
