//! How the addon engine reacts to its ConfigMap: the watch's current object is
//! parsed and checked against the schemas; a bad one changes nothing (logged and
//! counted), a good one is applied at once and the lifecycle is told: a converge
//! (global section or `*Enabled` flags changed, or `enabled` scripts that answer
//! otherwise after a module's section changed) or the changed modules' values.
//! Keys of modules that do not exist are set aside (warned about and counted when
//! they change), never a reason to refuse the rest.
//! The ConfigMap task is never stuck behind a failing module: failed runs leave
//! the queue (`lifecycle.rs`).

use crate::addon::config::configmap::{ConfigError, KubeConfig, UnknownKey};
use crate::addon::config::settings::spec::{Overlay, SettingsObject, SpecError, overlay};
use crate::addon::engine::AddonHandler;
use crate::addon::run::lifecycle::Input;
use crate::addon::state::AddonMetrics;
use crate::log;
use crate::queue::Task;

impl AddonHandler {
    /// The ConfigMap as the watch holds it now, compared with the applied one.
    /// A bad ConfigMap changes nothing; a good one is applied and reacted to.
    pub(in crate::addon) fn configmap_changed(&self) -> Vec<Task> {
        let shared = &self.shared;
        let object = self.runner.kube.as_ref().and_then(|k| {
            let items = k.store.snapshot(shared.cm_hook, 0);
            let text = items.first()?.object.clone()?;
            serde_json::from_str::<serde_json::Value>(&text).ok()
        });
        let layout = shared.layout();
        let keys = layout.module_keys();
        let objects = self.settings_objects();
        let config = KubeConfig::from_object(object.as_ref(), &keys)
            .and_then(|c| self.with_objects(c, &objects))
            .and_then(|c| self.check_config(&c).map(|()| c));
        let config = match config {
            Ok(c) => {
                *shared
                    .refused_config
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = None;
                c
            }
            Err(_) if self.refused_again(&refused_input(&object, &objects)) => {
                return Vec::new();
            }
            Err(e) => {
                shared.metrics.config_values_errors_total.inc();
                log::error(
                    "ConfigMap is invalid; the last good configuration stays",
                    &[("configmap", &shared.config_map), ("error", &e.to_string())],
                );
                return Vec::new();
            }
        };
        let mut st = shared.lock();
        if st.config == config {
            return Vec::new();
        }
        if st.config.unknown != config.unknown {
            report_unknown_keys(&shared.metrics, &shared.config_map, &config.unknown);
        }
        let reload = st.config.global != config.global || st.config.enabled != config.enabled;
        st.global.config = config.global.clone();
        let mut changed = Vec::new();
        for (m, module) in shared.layout().modules.iter().enumerate() {
            let section = config.section(&module.key);
            let maintenance = |c: &KubeConfig| c.no_resource_reconciliation(&module.key);
            if st.modules[m].scope.config != section
                || maintenance(&st.config) != maintenance(&config)
            {
                st.modules[m].scope.config = section;
                changed.push(m);
            }
        }
        st.config = config;
        log::info("ConfigMap changed", &[("reload_all", &reload.to_string())]);
        if reload {
            let event = "KubeConfigChanged".to_string();
            return shared.step_locked(&mut st, Input::ConvergeRequested { event });
        }
        let layout = &shared.layout();
        let scripted = changed
            .iter()
            .any(|&m| layout.modules[m].enabled_script.is_some());
        drop(st);
        if scripted && self.enabled_modules_moved() {
            let event = "KubeConfigChanged".to_string();
            return shared.step(Input::ConvergeRequested { event });
        }
        let mut st = shared.lock();
        let mut tasks = Vec::new();
        for module in changed {
            let event = "KubeConfig-Changed-Modules".to_string();
            tasks.extend(shared.step_locked(&mut st, Input::ValuesChanged { module, event }));
        }
        tasks
    }

    /// Whether the `enabled` scripts, run again with the values as they are now,
    /// enable other modules than the lifecycle has (the docs' script that disables
    /// its module when its own section says so); a failing script is a yes, so the
    /// converge that follows reports and retries it.
    fn enabled_modules_moved(&self) -> bool {
        let copy = self.shared.lock().clone();
        match crate::addon::modules::enabled::compute(&self.shared, &copy) {
            Ok(enabled) => {
                let moved = enabled != copy.lifecycle.enabled_modules();
                if moved {
                    log::info("enabled modules change with the ConfigMap", &[]);
                }
                moved
            }
            Err(_) => true,
        }
    }

    /// Config schemas of the global section and of every module section: every
    /// error at once.
    pub(in crate::addon) fn check_config(&self, config: &KubeConfig) -> Result<(), ConfigError> {
        let layout = &self.shared.layout();
        let mut errors: Vec<ConfigError> = Vec::new();
        let st = self.shared.lock();
        let invalid = |r: Result<(), _>| r.err().map(ConfigError::Invalid);
        errors.extend(invalid(st.global.check_config(&config.global)));
        for (m, module) in layout.modules.iter().enumerate() {
            if let Some(section) = config.modules.get(&module.key) {
                errors.extend(invalid(st.modules[m].scope.check_config(section)));
            }
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(ConfigError::Several(errors)),
        }
    }

    /// The ModuleSettings objects the watch holds now (feature on), each read or
    /// the reason it cannot be.
    fn settings_objects(&self) -> Vec<Result<SettingsObject, SpecError>> {
        let (Some(rt), Some(kube)) = (&self.shared.settings, &self.runner.kube) else {
            return Vec::new();
        };
        let items = kube
            .store
            .snapshot(rt.hook, crate::addon::config::settings::WATCH_BINDING);
        let texts = items.iter().filter_map(|i| i.object.as_deref());
        texts
            .filter_map(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .map(|o| SettingsObject::from_object(&o))
            .collect()
    }

    /// `config` with the objects laid over it (the precedence rule); an object
    /// that cannot be read makes the whole configuration invalid, as a bad key of
    /// the ConfigMap does.
    fn with_objects(
        &self,
        config: KubeConfig,
        objects: &[Result<SettingsObject, SpecError>],
    ) -> Result<KubeConfig, ConfigError> {
        let Some(rt) = &self.shared.settings else {
            return Ok(config);
        };
        let bad: Vec<String> = objects
            .iter()
            .filter_map(|o| o.as_ref().err().map(ToString::to_string))
            .collect();
        if !bad.is_empty() {
            return Err(ConfigError::Unreadable(bad));
        }
        let good: Vec<SettingsObject> = objects.iter().filter_map(|o| o.clone().ok()).collect();
        let overlay = overlay(config, &good, &self.shared.layout().settings_names());
        let mut reported = rt.reported.lock().unwrap_or_else(|p| p.into_inner());
        let now = (overlay.unknown.clone(), overlay.shadowed.clone());
        if reported.as_ref() != Some(&now) {
            report_overlay(&overlay);
            *reported = Some(now);
        }
        Ok(overlay.config)
    }

    /// Whether `input` (the ConfigMap's `data` and the objects) is the one refused
    /// last time: a change of metadata only is neither logged nor counted again.
    fn refused_again(&self, input: &serde_json::Value) -> bool {
        let mut refused = self
            .shared
            .refused_config
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let data = input.clone();
        if refused.as_ref() == Some(&data) {
            return true;
        }
        *refused = Some(data);
        false
    }
}

/// What a refused configuration was read from: the ConfigMap's `data` and the
/// objects' specs.
fn refused_input(
    configmap: &Option<serde_json::Value>,
    objects: &[Result<SettingsObject, SpecError>],
) -> serde_json::Value {
    let data = configmap.as_ref().and_then(|o| o.get("data")).cloned();
    let specs: Vec<serde_json::Value> = objects
        .iter()
        .map(|o| match o {
            Ok(o) => serde_json::json!([o.name, o.spec()]),
            Err(e) => serde_json::Value::String(e.to_string()),
        })
        .collect();
    serde_json::json!({"data": data, "objects": specs})
}

/// Warns about ModuleSettings objects of no module and about modules whose
/// ConfigMap keys an object sets aside.
pub(in crate::addon) fn report_overlay(overlay: &Overlay) {
    for name in &overlay.unknown {
        log::warn(
            "ModuleSettings object of no module ignored",
            &[("name", name)],
        );
    }
    for name in &overlay.shadowed {
        log::info(
            "the module's ModuleSettings object takes precedence over its ConfigMap keys",
            &[("module", name)],
        );
    }
}

/// Warns about each ConfigMap key of a module that does not exist (with the module
/// key it most likely meant) and sets `config_unknown_module_keys` to exactly them.
pub(in crate::addon) fn report_unknown_keys(
    metrics: &AddonMetrics,
    configmap: &str,
    unknown: &[UnknownKey],
) {
    metrics.config_unknown_module_keys.reset();
    for key in unknown {
        log::warn(
            "ConfigMap key of no module ignored",
            &[("configmap", configmap), ("error", &key.to_string())],
        );
        metrics
            .config_unknown_module_keys
            .with_label_values(&[&key.key])
            .set(1.0);
    }
}
