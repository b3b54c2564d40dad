//! The values of modules a reload adds: their static values and schemas from
//! discovery, and their ConfigMap section. Until the reload, such a section was
//! set aside as the key of no module (`config_unknown_module_keys`); the reload
//! reads the ConfigMap the watch holds now with the added modules' keys known
//! (with `--module-settings-resources`, the ModuleSettings objects the watch
//! holds laid over it), checks each added module's section against its config
//! schema (a bad one fails the reload, as it fails startup), and moves the
//! sections into the applied configuration without touching the running
//! modules' (a ConfigMap change meanwhile is still the ConfigMap watch's to
//! apply). Also the added modules' `crds/` files.

use super::ReloadError;
use crate::addon::config::configmap::KubeConfig;
use crate::addon::config::settings::spec::{Names, SettingsObject, overlay};
use crate::addon::config::values::{Schemas, Scope};
use crate::addon::modules::{Layout, Module};
use crate::addon::state::Shared;
use std::path::PathBuf;

/// The added modules' values.
pub(super) struct Added {
    /// Each added module's scope, in `Matched::added` order.
    pub(super) scopes: Vec<Scope>,
    /// The ConfigMap read with the added modules' keys known; `None` when the
    /// watch holds none or it does not read (the last good one stays, and the
    /// added modules get their sections when the ConfigMap is good again).
    pub(super) config: Option<KubeConfig>,
    /// The added modules' values keys.
    pub(super) keys: Vec<String>,
    /// The added modules' CRD files.
    pub(super) crds: Vec<Vec<PathBuf>>,
}

/// The scopes of the modules at `added` (indices into `layout`), their
/// schemas taken out of it, each with its ConfigMap section, checked.
pub(super) fn added_scopes(
    shared: &Shared,
    layout: &mut Layout,
    added: &[usize],
) -> Result<Added, ReloadError> {
    let keys: Vec<String> = added
        .iter()
        .map(|&n| layout.modules[n].key.clone())
        .collect();
    let new: Vec<&Module> = added.iter().map(|&n| &layout.modules[n]).collect();
    let config = match added.is_empty() {
        true => None,
        false => read_configmap(shared, &new),
    };
    let crds = (new.iter())
        .map(|m| shared.crds.find(m).map_err(ReloadError::Crds))
        .collect::<Result<_, _>>()?;
    let mut scopes = Vec::new();
    for &n in added {
        let m = &mut layout.modules[n];
        let schemas = std::mem::replace(&mut m.schemas, Schemas::none());
        let mut scope = Scope::new(&m.key, m.static_values.clone(), schemas);
        if let Some(section) = config.as_ref().and_then(|c| c.modules.get(&m.key)) {
            scope
                .check_config(section)
                .map_err(|e| ReloadError::Config {
                    module: m.name.clone(),
                    error: e.to_string(),
                })?;
            scope.config = section.clone();
        }
        scopes.push(scope);
    }
    Ok(Added {
        scopes,
        config,
        keys,
        crds,
    })
}

/// The ConfigMap as the operator's watch holds it, read with the running
/// modules' keys and `added`'s known, the ModuleSettings objects laid over it
/// when that feature is on (objects that do not read are left out here).
fn read_configmap(shared: &Shared, added: &[&Module]) -> Option<KubeConfig> {
    let store = shared.store.as_ref()?;
    let items = store.snapshot(shared.cm_hook, 0);
    let text = items.first()?.object.clone()?;
    let object: serde_json::Value = serde_json::from_str(&text).ok()?;
    let layout = shared.layout();
    let mut keys = layout.module_keys();
    keys.extend(added.iter().map(|m| m.key.as_str()));
    let config = KubeConfig::from_object(Some(&object), &keys).ok()?;
    let Some(rt) = &shared.settings else {
        return Some(config);
    };
    let watched = store.snapshot(rt.hook, crate::addon::config::settings::WATCH_BINDING);
    let objects: Vec<SettingsObject> = (watched.iter())
        .filter_map(|i| serde_json::from_str(i.object.as_deref()?).ok())
        .filter_map(|o: serde_json::Value| SettingsObject::from_object(&o).ok())
        .collect();
    let mut names = layout.settings_names();
    names.extend(added.iter().map(|m| Names {
        name: &m.name,
        key: &m.key,
    }));
    Some(overlay(config, &objects, &names).config)
}

/// Moves the added modules' keys of `fresh` into the applied configuration
/// and drops them from its unknown keys.
pub(super) fn merge(applied: &mut KubeConfig, fresh: &KubeConfig, keys: &[String]) {
    for key in keys {
        if let Some(section) = fresh.modules.get(key) {
            applied.modules.insert(key.clone(), section.clone());
        }
        if let Some(&on) = fresh.enabled.get(key) {
            applied.enabled.insert(key.clone(), on);
        }
        if let Some(&on) = fresh.maintenance.get(key) {
            applied.maintenance.insert(key.clone(), on);
        }
        if fresh.section_flags.contains(key) {
            applied.section_flags.insert(key.clone());
        }
        if let Some(&generation) = fresh.resources.get(key) {
            applied.resources.insert(key.clone(), generation);
        }
    }
    let still = |k: &str| fresh.unknown.iter().any(|u| u.key == k);
    applied.unknown.retain(|u| still(&u.key));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_added_module_s_keys_move_from_unknown_into_the_applied_config() {
        let data = json!({"data": {
            "echo": "a: 1\n",
            "newMod": "x: 2\n",
            "newModEnabled": "true",
            "typo": "b: 3\n",
        }});
        let mut applied = KubeConfig::from_object(Some(&data), &["echo"]).expect("old");
        let names: Vec<&str> = applied.unknown.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(names, ["newMod", "newModEnabled", "typo"]);
        let fresh = KubeConfig::from_object(Some(&data), &["echo", "newMod"]).expect("new");
        merge(&mut applied, &fresh, &["newMod".to_string()]);
        assert_eq!(applied.modules.get("newMod"), Some(&json!({"x": 2})));
        assert_eq!(applied.enabled.get("newMod"), Some(&true));
        let names: Vec<&str> = applied.unknown.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(names, ["typo"]);
        assert_eq!(applied.modules.get("echo"), Some(&json!({"a": 1})));
    }
}
