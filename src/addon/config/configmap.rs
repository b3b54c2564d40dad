//! The ConfigMap that configures addon-operator (`ADDON_OPERATOR_CONFIG_MAP` in
//! `ADDON_OPERATOR_NAMESPACE`): reading its `data` into config values and writing
//! hooks' config patches back.
//!
//! `data.global` is the YAML of the global section, `data.<moduleKey>` a module's
//! section (a map), `data.<moduleKey>Enabled` exactly `"true"` or `"false"`. Bad
//! YAML or a bad flag of `global` or of a module that exists makes the whole
//! ConfigMap invalid: the caller keeps the last good one. A key of a module that
//! does not exist (a module removed from the image, a typo) is set aside unread, as
//! flant does: it never stops startup nor freezes later edits; the caller warns
//! about it ([`UnknownKey`], with the nearest module key) and counts it.
//! A ConfigMap that does not exist is an empty configuration.
//!
//! Errors are a [`ConfigError`]: unreadable keys, sections that break a schema, or
//! the API server refusing a read or write; each names the ConfigMap key and says
//! what to change.

use crate::addon::config::values::ValuesError;
use crate::json_kind::json_kind;
use crate::kube::{Client, KubeError, Resource};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt;

/// Why a ConfigMap was refused, or could not be read or written.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum ConfigError {
    /// `data` is over the cap.
    TooLarge { size: usize },
    /// Keys that cannot be read (bad YAML, a bad flag), every one.
    Unreadable(Vec<String>),
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
    /// True when the ConfigMap's text could not be read at all (as opposed to a
    /// schema violation).
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
            ConfigError::Unreadable(all) => match all.len() {
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

impl ConfigError {
    /// The kind of failure: a refused ConfigMap is invalid input; a read or
    /// write is as its API call says; a write that kept losing races is
    /// transient.
    pub(crate) fn cause(&self) -> crate::queue::Cause {
        use crate::queue::Cause;
        match self {
            ConfigError::Kube { error, .. } => Cause::of_kube(error),
            ConfigError::Conflict { .. } => Cause::Transient,
            _ => Cause::InvalidInput,
        }
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
    /// Keys of modules that do not exist, set aside unread (ConfigMap key order).
    pub(crate) unknown: Vec<UnknownKey>,
    /// Values keys (and `global`) configured by a ModuleSettings object instead,
    /// with the object's `metadata.generation` (`settings/spec.rs`).
    pub(crate) resources: BTreeMap<String, i64>,
}

/// A ConfigMap key of no module: ignored, warned about and counted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UnknownKey {
    /// The key as written in the ConfigMap.
    pub(crate) key: String,
    /// The module key it most likely meant (a typo), if one is close.
    pub(crate) nearest: Option<String>,
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key '{}' belongs to no module; ignored", self.key)?;
        match &self.nearest {
            Some(near) => write!(f, " (did you mean '{near}'?)"),
            None => Ok(()),
        }
    }
}

/// Most a ConfigMap's data may hold (the API server's own limit is 1 MiB).
const MAX_DATA: usize = 4 << 20;

impl KubeConfig {
    /// Parses a ConfigMap object (its `data`); `None` is a deleted or absent
    /// ConfigMap. `known` are the values keys of the discovered modules: keys of
    /// any other module are set aside unread ([`KubeConfig::unknown`]).
    pub(crate) fn from_object(
        object: Option<&Value>,
        known: &[&str],
    ) -> Result<KubeConfig, ConfigError> {
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
            if !belongs_to(key, known) {
                let nearest = nearest(key, known).map(str::to_string);
                let key = key.clone();
                config.unknown.push(UnknownKey { key, nearest });
                continue;
            }
            let read = match value.as_str() {
                Some(text) => config.read_key(key, text),
                None => Err(KeyError::new(key, "value is not a string")),
            };
            errors.extend(read.err().map(|e| e.to_string()));
        }
        // A map under `<known>Maintenance` is the section of a module of that key.
        let (modules, unknown): (BTreeMap<_, _>, BTreeMap<_, _>) =
            std::mem::take(&mut config.modules)
                .into_iter()
                .partition(|(k, _)| known.contains(&k.as_str()));
        config.modules = modules;
        config
            .unknown
            .extend(unknown.into_keys().map(|key| UnknownKey {
                nearest: nearest(&key, known).map(str::to_string),
                key,
            }));
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

    fn read_key(&mut self, key: &str, text: &str) -> Result<(), KeyError> {
        if self.read_maintenance(key, text)? {
            return Ok(());
        }
        if key == "global" {
            self.global = section(key, text)?;
            return Ok(());
        }
        if let Some(module_key) = key.strip_suffix("Enabled") {
            let flag = match text.trim() {
                "true" => true,
                "false" => false,
                other => {
                    let problem = format!("must be \"true\" or \"false\", got {other:?}");
                    return Err(KeyError::new(key, problem));
                }
            };
            self.enabled.insert(module_key.to_string(), flag);
            return Ok(());
        }
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
    fn read_maintenance(&mut self, key: &str, text: &str) -> Result<bool, KeyError> {
        let Some(module_key) = key.strip_suffix("Maintenance") else {
            return Ok(false);
        };
        let state = match text.trim() {
            "NoResourceReconciliation" | "noresourcereconciliation" => true,
            "" => false,
            other if !other.contains(':') && !other.starts_with('{') => {
                let problem =
                    format!("must be \"NoResourceReconciliation\" or \"\", got {other:?}");
                return Err(KeyError::new(key, problem));
            }
            _ => return Ok(false),
        };
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

/// Whether `key` is `global` or a key of one of the `known` modules: its section,
/// its seeds' flag form, `<key>Enabled` or `<key>Maintenance`.
fn belongs_to(key: &str, known: &[&str]) -> bool {
    let of = |k: Option<&str>| k.is_some_and(|k| known.contains(&k));
    key == "global"
        || of(Some(key))
        || of(key.strip_suffix("Enabled"))
        || of(key.strip_suffix("Maintenance"))
}

/// The module key closest to `key` (its `Enabled`/`Maintenance` suffix aside) by
/// edit distance, when it is close enough to be a typo: at most a third of its
/// length, and at least one edit allowed.
fn nearest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let stem = ["Enabled", "Maintenance"]
        .iter()
        .find_map(|s| key.strip_suffix(s).filter(|k| !k.is_empty()))
        .unwrap_or(key);
    // The API server allows keys of 253 characters; a longer one is no typo.
    if key.len() > 253 {
        return None;
    }
    let limit = (stem.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| (edit_distance(stem, k).min(edit_distance(key, k)), *k))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, k)| k)
}

/// Edit distance with adjacent transpositions (optimal string alignment),
/// case-insensitive: `wbe` for `web` and `Mymodule` for `myModule` are one typo.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    // d[i][j]: the distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// A section's YAML: a map (empty text is an empty map).
fn section(key: &str, text: &str) -> Result<Value, KeyError> {
    crate::yaml_depth::check(text).map_err(|e| KeyError::new(key, e))?;
    match serde_yaml::from_str::<Value>(text) {
        Ok(Value::Null) => Ok(json!({})),
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => {
            let problem = format!("the section must be a map, got {}", json_kind(&other));
            Err(KeyError::new(key, problem))
        }
        Err(e) => Err(KeyError::new(key, format!("bad YAML: {e}"))),
    }
}

/// A ConfigMap key that cannot be read: which, and why.
#[derive(Debug)]
struct KeyError {
    key: String,
    problem: String,
}

impl KeyError {
    fn new(key: &str, problem: impl fmt::Display) -> KeyError {
        KeyError {
            key: key.to_string(),
            problem: problem.to_string(),
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key '{}': {}", self.key, self.problem)
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

pub(crate) fn configmaps() -> Resource {
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

    /// Known keys for the tests: the seeds' modules and a few more.
    const KNOWN: &[&str] = &[
        "someModule",
        "other",
        "anotherModule",
        "simpleModule",
        "foo",
        "web",
    ];

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": data})
    }

    fn parse(data: Value) -> Result<KubeConfig, ConfigError> {
        KubeConfig::from_object(Some(&cm(data)), KNOWN)
    }

    #[test]
    fn sections_and_flags_are_read() {
        let c = parse(json!({
            "global": "param1: 200\n",
            "someModule": "param1: Long string\nparam2: FOO\n",
            "someModuleEnabled": "true",
            "otherEnabled": "false",
        }))
        .expect("valid");
        assert_eq!(c.global, json!({"param1": 200}));
        assert_eq!(
            c.section("someModule"),
            json!({"param1": "Long string", "param2": "FOO"})
        );
        assert_eq!(c.enabled.get("someModule"), Some(&true));
        assert_eq!(c.enabled.get("other"), Some(&false));
        assert_eq!(c.section("absent"), json!({}));
        assert!(c.unknown.is_empty());
        let absent = KubeConfig::from_object(None, KNOWN).expect("absent");
        assert_eq!(absent.global, json!({}));
    }

    #[test]
    fn a_bad_key_of_a_known_module_makes_the_whole_configmap_invalid() {
        for (data, needle) in [
            (json!({"anotherModule": "yes"}), "must be a map"),
            (json!({"fooEnabled": "yes"}), "fooEnabled"),
            (json!({"global": "a: [1"}), "bad YAML"),
            (json!({"fooMaintenance": "Off"}), "NoResourceReconciliation"),
        ] {
            let err = parse(data).expect_err("invalid");
            assert!(err.is_unreadable() && !err.is_schema_violation(), "{err:?}");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn the_seeds_false_form_disables_a_module() {
        let c = parse(json!({
            "anotherModule": "false",
            "simpleModule": "modParam2: newValue2\n",
        }))
        .expect("the seeds' example is valid");
        assert_eq!(c.enabled.get("anotherModule"), Some(&false));
        assert_eq!(c.section("anotherModule"), json!({}));
        assert!(c.unknown.is_empty());
        let err = parse(json!({"web": "false", "webEnabled": "true"}))
            .expect_err("contradiction")
            .to_string();
        assert!(err.contains("'webEnabled' says true"), "{err}");
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let err = parse(json!({
            "global": "a: [1",
            "fooEnabled": "yes",
            "web": "[1, 2]",
        }))
        .expect_err("invalid")
        .to_string();
        assert!(err.starts_with("3 errors: "), "{err}");
        for needle in ["'global'", "'fooEnabled'", "'web'"] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    /// flant ignores keys of modules that do not exist (a module removed from the
    /// image, a typo): they are set aside unread, even when their text is bad, and
    /// never make the rest of the ConfigMap invalid.
    #[test]
    fn keys_of_modules_that_do_not_exist_are_set_aside() {
        let c = parse(json!({
            "wbe": "a: 1\n",
            "nosuchModuleEnabled": "true",
            "gone": "false",
            "wbeMaintenance": "NoResourceReconciliation",
            "removedModule": "not: [valid",
            "Malformed-section-name": "a: 1",
            "webMaintenance": "",
            "web": "a: 2\n",
            "webEnabled": "true",
            "global": "g: 1\n",
        }))
        .expect("the known keys are valid");
        assert_eq!(c.section("web"), json!({"a": 2}));
        assert_eq!(c.enabled.get("web"), Some(&true));
        assert_eq!(c.global, json!({"g": 1}));
        assert_eq!(c.modules.len(), 1);
        assert_eq!(c.enabled.len(), 1);
        let unknown: Vec<(&str, Option<&str>)> = c
            .unknown
            .iter()
            .map(|u| (u.key.as_str(), u.nearest.as_deref()))
            .collect();
        assert_eq!(
            unknown,
            [
                ("Malformed-section-name", None),
                ("gone", None),
                ("nosuchModuleEnabled", None),
                ("removedModule", None),
                ("wbe", Some("web")),
                ("wbeMaintenance", Some("web")),
            ]
        );
        assert_eq!(
            c.unknown[4].to_string(),
            "key 'wbe' belongs to no module; ignored (did you mean 'web'?)"
        );
    }

    #[test]
    fn the_nearest_module_key_is_a_likely_typo_only() {
        let known = ["ingressNginx", "certManager", "foo"];
        assert_eq!(nearest("ingresNginx", &known), Some("ingressNginx"));
        assert_eq!(nearest("certmanagerEnabled", &known), Some("certManager"));
        assert_eq!(nearest("fo", &known), Some("foo"));
        assert_eq!(nearest("monitoring", &known), None);
        assert_eq!(nearest("x", &[]), None);
    }

    #[test]
    fn maintenance_keys_of_flants_newer_releases_are_read() {
        let known = ["foo", "bar", "baz", "other", "quxMaintenance"];
        let c = KubeConfig::from_object(
            Some(&cm(json!({
                "fooMaintenance": "NoResourceReconciliation",
                "barMaintenance": "",
                "bazMaintenance": "noresourcereconciliation",
                "quxMaintenance": "a: 1\n",
            }))),
            &known,
        )
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
