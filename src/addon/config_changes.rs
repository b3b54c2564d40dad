//! How the addon engine reacts to its ConfigMap: the watch's current object is
//! parsed and checked against the schemas; a bad one changes nothing (logged and
//! counted), a good one is applied and starts a converge (global section or
//! `*Enabled` flags changed) or the changed modules' runs.

use super::configmap::KubeConfig;
use super::engine::AddonHandler;
use super::hook_values::request_converge;
use crate::log;
use crate::queue::{Step, Task};

impl AddonHandler {
    /// The ConfigMap as the watch holds it now, compared with the applied one.
    /// A bad ConfigMap changes nothing; a good one is applied and reacted to.
    pub(super) fn configmap_changed(&self) -> Vec<Task> {
        let shared = &self.shared;
        let object = self.runner.kube.as_ref().and_then(|k| {
            let items = k.store.snapshot(shared.cm_hook, 0);
            let text = items.first()?.object.clone()?;
            serde_json::from_str::<serde_json::Value>(&text).ok()
        });
        let config = KubeConfig::from_object(object.as_ref())
            .and_then(|c| self.check_config(&c).map(|()| c));
        let config = match config {
            Ok(c) => c,
            Err(e) => {
                shared.metrics.config_values_errors_total.inc();
                log::error(
                    "ConfigMap is invalid; the last good configuration stays",
                    &[("configmap", &shared.config_map), ("error", &e)],
                );
                return Vec::new();
            }
        };
        let mut st = shared.lock();
        if st.config == config {
            return Vec::new();
        }
        let reload = st.config.global != config.global || st.config.enabled != config.enabled;
        st.global.config = config.global.clone();
        let mut runs = Vec::new();
        for (m, module) in shared.layout.modules.iter().enumerate() {
            let section = config.section(&module.key);
            if st.modules[m].scope.config != section {
                st.modules[m].scope.config = section;
                if st.modules[m].enabled && !st.modules[m].run_pending {
                    runs.push(m);
                }
            }
        }
        st.config = config;
        log::info("ConfigMap changed", &[("reload_all", &reload.to_string())]);
        if reload {
            request_converge(shared, &mut st, "KubeConfigChanged");
            return Vec::new();
        }
        if !st.converge.started_once {
            return Vec::new();
        }
        runs.into_iter()
            .map(|m| {
                st.modules[m].run_pending = true;
                Task::step(Step::ModuleRun {
                    module: m,
                    name: shared.layout.modules[m].name.clone(),
                    do_startup: false,
                    event: "KubeConfig-Changed-Modules".into(),
                })
            })
            .collect()
    }

    /// Config schemas of the global section and of every module section.
    pub(super) fn check_config(&self, config: &KubeConfig) -> Result<(), String> {
        let st = self.shared.lock();
        st.global.check_config(&config.global)?;
        for (m, module) in self.shared.layout.modules.iter().enumerate() {
            if let Some(section) = config.modules.get(&module.key) {
                st.modules[m].scope.check_config(section)?;
            }
        }
        Ok(())
    }
}
