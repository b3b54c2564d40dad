//! The export command (`module settings export resources|configmap` of the debug
//! CLI): moves every module's settings from the ConfigMap into ModuleSettings
//! objects, or from the objects back into the ConfigMap, without a moment where
//! the configuration in effect differs, so no module runs and helm makes no
//! revision.
//!
//! Both ways rely on the precedence rule (an object wins over the ConfigMap):
//! - **to resources**: an object is created for `global` and each module that
//!   has none (a module that has one keeps it, and its ConfigMap keys stay); once
//!   the operator's watch holds them all, their modules' keys leave the ConfigMap.
//! - **to configmap**: every object's spec is written into the ConfigMap in its
//!   keys (`<key>`, `<key>Enabled`, `<key>Maintenance`); once the operator's
//!   watch holds that ConfigMap, the objects are deleted.
//!
//! Waiting for the watch between the two writes is what keeps the configuration
//! in effect: the engine reads both watches' snapshots together
//! (`config_changes.rs`), so at no read is a section missing from both.
//! Runs on a debug server thread, never under the engine's lock.

use super::spec::{self, SettingsObject};
use super::{SettingsError, resource};
use crate::addon::config::configmap::{self, KubeConfig};
use crate::addon::state::Shared;
use crate::kube::KubeError;
use crate::log;
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// How long the export waits for the operator's own watch to see its writes.
const SEEN_TIMEOUT: Duration = Duration::from_secs(60);

/// Which way the settings go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    ToResources,
    ToConfigMap,
}

impl Direction {
    pub(crate) fn parse(text: &str) -> Option<Direction> {
        match text {
            "resources" => Some(Direction::ToResources),
            "configmap" => Some(Direction::ToConfigMap),
            _ => None,
        }
    }
}

/// Runs the export; returns what it did.
pub(in crate::addon) fn export(shared: &Shared, to: Direction) -> Result<Value, SettingsError> {
    let Some(rt) = &shared.settings else {
        return Err(SettingsError::Other(
            "ModuleSettings resources are off (--module-settings-resources)".into(),
        ));
    };
    match to {
        Direction::ToResources => to_resources(shared, rt.hook),
        Direction::ToConfigMap => to_configmap(shared),
    }
}

fn to_resources(shared: &Shared, hook: usize) -> Result<Value, SettingsError> {
    let layout = shared.layout();
    let (names, keys) = (layout.settings_names(), layout.module_keys());
    let cm = configmap::read(&shared.client, &shared.namespace, &shared.config_map)
        .map_err(|e| SettingsError::Other(e.to_string()))?;
    let config = KubeConfig::from_object(cm.as_ref(), &keys)
        .map_err(|e| SettingsError::Other(format!("ConfigMap: {e}")))?;
    let api = shared.client.api(&resource(), None);
    let (mut created, mut skipped) = (Vec::new(), Vec::new());
    for obj in spec::objects_from_configmap(&config, &names) {
        let body = json!({
            "apiVersion": format!("{}/{}", super::GROUP, super::VERSION),
            "kind": super::KIND,
            "metadata": {"name": obj.name},
            "spec": obj.spec(),
        });
        match api.create(&body) {
            Ok(_) => created.push(obj.name),
            Err(e) if e.status_code() == Some(409) => skipped.push(obj.name),
            Err(e) => return Err(kube(&obj.name, "creating", e)),
        }
    }
    wait_seen(|| {
        let seen = objects_seen(shared, hook);
        created.iter().all(|n| seen.iter().any(|o| &o.name == n))
    })?;
    let mut removed = Vec::new();
    for name in &created {
        if let Some(key) = spec::key_of(name, &names) {
            removed.extend(spec::configmap_keys(key));
        }
    }
    let removed = edit_configmap(shared, &removed, &[])?;
    log::info(
        "module settings exported to ModuleSettings objects",
        &[
            ("created", &created.join(",")),
            ("skipped", &skipped.join(",")),
        ],
    );
    Ok(json!({"created": created, "skipped": skipped, "configMapKeysRemoved": removed}))
}

fn to_configmap(shared: &Shared) -> Result<Value, SettingsError> {
    let layout = shared.layout();
    let names = layout.settings_names();
    let objects = super::list(&shared.client)?;
    let mut remove = Vec::new();
    let mut entries = Vec::new();
    let mut moved = Vec::new();
    for obj in &objects {
        let Some(key) = spec::key_of(&obj.name, &names) else {
            continue; // An object of no module stays where it is.
        };
        remove.extend(spec::configmap_keys(key));
        let yaml = spec::configmap_entries(obj, key)
            .map_err(|e| SettingsError::Other(format!("{}: {e}", obj.name)))?;
        entries.extend(yaml);
        moved.push(obj.name.clone());
    }
    let remove: Vec<String> = remove
        .into_iter()
        .filter(|k| !entries.iter().any(|(e, _)| e == k))
        .collect();
    let written = edit_configmap(shared, &remove, &entries)?;
    wait_seen(|| configmap_seen(shared, &remove, &entries))?;
    let api = shared.client.api(&resource(), None);
    for name in &moved {
        match api.delete(name, None) {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(kube(name, "deleting", e)),
        }
    }
    log::info(
        "module settings exported to the ConfigMap",
        &[("deleted", &moved.join(","))],
    );
    let keys: Vec<&String> = entries.iter().map(|(k, _)| k).collect();
    Ok(json!({"configMapKeysWritten": keys, "configMapKeysRemoved": written, "deleted": moved}))
}

/// Removes `remove` from the ConfigMap's data and sets `set`, in one update
/// (retried on conflicts; an absent ConfigMap is created). Returns the keys
/// that were there and are gone.
fn edit_configmap(
    shared: &Shared,
    remove: &[String],
    set: &[(String, String)],
) -> Result<Vec<String>, SettingsError> {
    let cm_name = &shared.config_map;
    if remove.is_empty() && set.is_empty() {
        return Ok(Vec::new());
    }
    let api = shared
        .client
        .api(&configmap::configmaps(), Some(&shared.namespace));
    for _ in 0..5 {
        let (mut cm, exists) = match api.get(cm_name) {
            Ok(cm) => (cm, true),
            Err(e) if e.is_not_found() => (
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": cm_name, "namespace": shared.namespace}}),
                false,
            ),
            Err(e) => return Err(kube(cm_name, "reading the ConfigMap", e)),
        };
        let Some(obj) = cm.as_object_mut() else {
            return Err(SettingsError::Other(
                "the ConfigMap is not an object".into(),
            ));
        };
        let data = obj.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        let data = data.as_object_mut().expect("an object, set above");
        let gone: Vec<String> = remove
            .iter()
            .filter(|k| data.remove(k.as_str()).is_some())
            .cloned()
            .collect();
        for (k, v) in set {
            data.insert(k.clone(), Value::String(v.clone()));
        }
        let result = match exists {
            true => api.replace(cm_name, &cm),
            false => api.create(&cm),
        };
        match result {
            Ok(_) => return Ok(gone),
            Err(e) if e.status_code() == Some(409) => continue,
            Err(e) => return Err(kube(cm_name, "writing the ConfigMap", e)),
        }
    }
    Err(SettingsError::Conflict {
        name: cm_name.clone(),
    })
}

/// The objects the operator's watch holds now.
fn objects_seen(shared: &Shared, hook: usize) -> Vec<SettingsObject> {
    let Some(store) = &shared.store else {
        return Vec::new();
    };
    store
        .snapshot(hook, super::WATCH_BINDING)
        .iter()
        .filter_map(|item| item.object.as_deref())
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .filter_map(|o| SettingsObject::from_object(&o).ok())
        .collect()
}

/// Whether the operator's ConfigMap watch holds `set` and none of `remove`.
fn configmap_seen(shared: &Shared, remove: &[String], set: &[(String, String)]) -> bool {
    let Some(store) = &shared.store else {
        return false;
    };
    let items = store.snapshot(shared.cm_hook, 0);
    let data = items
        .first()
        .and_then(|i| i.object.as_deref())
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|o| o.get("data").cloned())
        .and_then(|d| d.as_object().cloned())
        .unwrap_or_else(Map::new);
    remove.iter().all(|k| !data.contains_key(k))
        && set
            .iter()
            .all(|(k, v)| data.get(k).and_then(Value::as_str) == Some(v.as_str()))
}

/// Polls `seen` until true, or fails after [`SEEN_TIMEOUT`].
fn wait_seen(mut seen: impl FnMut() -> bool) -> Result<(), SettingsError> {
    let deadline = Instant::now() + SEEN_TIMEOUT;
    while !seen() {
        if Instant::now() > deadline {
            return Err(SettingsError::Other(format!(
                "the operator's watch did not see the export's first write within {}s; \
                 nothing else was changed (run the export again)",
                SEEN_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn kube(name: &str, what: &'static str, error: KubeError) -> SettingsError {
    SettingsError::Kube {
        name: name.to_string(),
        what,
        error: Box::new(error),
    }
}
