//! The converge cycle ("reload all modules") of the addon engine: its phases
//! (beforeAll hooks, the enabled state with its deletes and runs, afterAll hooks,
//! the checks after it), the purge of releases no module owns after the first one,
//! and the one list of releases a converge's module runs share.

use super::enabled;
use super::engine::AddonHandler;
use super::helm;
use super::hook_values::request_converge;
use super::module_run::secrets_driver;
use super::modules::Owner;
use crate::hook::context::BindingType;
use crate::log;
use crate::queue::{ConvergePhase, Step, Task};
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::time::Instant;

impl AddonHandler {
    pub(super) fn converge(&self, phase: ConvergePhase, event: &str) -> Result<Vec<Task>, String> {
        let next = |phase| {
            Task::step(Step::Converge {
                phase,
                event: event.to_string(),
            })
        };
        match phase {
            ConvergePhase::BeforeAll => {
                {
                    let mut st = self.shared.lock();
                    st.converge.active = true;
                    st.converge.started_once = true;
                    st.converge.event = event.to_string();
                    st.converge.began = Some(Instant::now());
                }
                self.shared
                    .metrics
                    .convergence_total
                    .with_label_values(&[event])
                    .inc();
                log::info("converge modules", &[("event", event)]);
                let mut tasks = self.lifecycle_tasks(Owner::Global, BindingType::BeforeAll);
                tasks.push(next(ConvergePhase::Modules));
                Ok(tasks)
            }
            ConvergePhase::Modules => {
                let mut tasks = self.modules_phase(event)?;
                tasks.push(next(ConvergePhase::AfterAll));
                Ok(tasks)
            }
            ConvergePhase::AfterAll => {
                let checksum = hash(&self.shared.lock().global_checksum());
                let mut tasks = self.lifecycle_tasks(Owner::Global, BindingType::AfterAll);
                tasks.push(next(ConvergePhase::Done(checksum)));
                Ok(tasks)
            }
            ConvergePhase::Done(before) => {
                self.converge_took(event);
                Ok(self.converge_done(before))
            }
        }
    }

    /// The enabled state, then the deletes and runs it calls for.
    pub(super) fn modules_phase(&self, event: &str) -> Result<Vec<Task>, String> {
        let shared = &self.shared;
        // Enabled scripts run on a copy, so other queues' hooks are not kept waiting.
        let copy = shared.lock().clone();
        let enabled = enabled::compute(shared, &copy).inspect_err(|e| {
            shared.metrics.modules_discover_errors_total.inc();
            log::error("modules discovery failed, will retry", &[("error", e)]);
        })?;
        let mut st = shared.lock();
        let names = |list: &[usize]| -> String {
            let n: Vec<&str> = list
                .iter()
                .map(|&m| shared.layout.modules[m].name.as_str())
                .collect();
            n.join(",")
        };
        log::info("enabled modules", &[("modules", &names(&enabled))]);
        let mut tasks = Vec::new();
        for &m in st.enabled.iter().rev().filter(|m| !enabled.contains(m)) {
            let name = shared.layout.modules[m].name.clone();
            tasks.push(Task::step(Step::ModuleDelete { module: m, name }));
        }
        for (m, module) in st.modules.iter_mut().enumerate() {
            module.enabled = enabled.contains(&m);
        }
        for &m in &enabled {
            let name = shared.layout.modules[m].name.clone();
            let do_startup = !st.modules[m].started;
            let event = event.to_string();
            tasks.push(Task::step(Step::ModuleRun {
                module: m,
                name,
                do_startup,
                event,
            }));
        }
        st.enabled = enabled.clone();
        drop(st);
        self.prefetch_releases(&enabled);
        Ok(tasks)
    }

    /// Adds the finished converge's duration to `convergence_seconds`.
    pub(super) fn converge_took(&self, event: &str) {
        let began = self.shared.lock().converge.began.take();
        if let Some(began) = began {
            self.shared
                .metrics
                .convergence_seconds
                .with_label_values(&[event])
                .inc_by(began.elapsed().as_secs_f64());
        }
    }

    pub(super) fn converge_done(&self, before: u64) -> Vec<Task> {
        let mut tasks = Vec::new();
        let first = {
            let st = self.shared.lock();
            !st.converge.done_once
        };
        if first {
            tasks.extend(self.purge_tasks());
            self.shared.ready.store(true, Ordering::Release);
            log::info("first converge done", &[]);
        }
        let mut st = self.shared.lock();
        st.converge.done_once = true;
        st.converge.active = false;
        st.releases.clear();
        let changed = hash(&st.global_checksum()) != before;
        if changed || std::mem::take(&mut st.converge.again) {
            let event = if changed {
                "AfterAll-Hooks-Change-GlobalValues"
            } else {
                "ReloadAllModules"
            };
            request_converge(&self.shared, &mut st, event);
        }
        tasks
    }

    /// ModulePurge for every release in the namespace no module owns, in reverse
    /// name order (flant v1.0: releases of known but disabled modules are deleted
    /// by ModuleDelete, not purged).
    pub(super) fn purge_tasks(&self) -> Vec<Task> {
        let releases = match self.release_names() {
            Ok(r) => r,
            Err(e) => {
                log::error(
                    "cannot list helm releases; nothing purged",
                    &[("error", &e)],
                );
                return Vec::new();
            }
        };
        let known = |r: &String| self.shared.layout.modules.iter().any(|m| &m.name == r);
        let ignored = |r: &String| *r == self.shared.ignore_release;
        let mut purge: Vec<String> = releases
            .into_iter()
            .filter(|r| !known(r) && !ignored(r))
            .collect();
        purge.sort();
        purge.reverse();
        purge
            .into_iter()
            .map(|release| Task::step(Step::ModulePurge { release }))
            .collect()
    }

    pub(super) fn purge(&self, release: &str) {
        log::info("purge helm release of no module", &[("release", release)]);
        let uninstall = || self.shared.helm.uninstall(release);
        if let Err(e) = self
            .shared
            .metrics
            .helm_op(release, "", "uninstall", uninstall)
        {
            log::error("purge failed", &[("release", release), ("error", &e)]);
        }
    }

    pub(super) fn release_names(&self) -> Result<Vec<String>, String> {
        if secrets_driver() {
            let all = helm::releases_from_secrets(&self.shared.client, &self.shared.namespace, "")?;
            Ok(all.into_keys().collect())
        } else {
            self.shared.helm.list()
        }
    }

    /// Reads every module's release in one list for the module runs of this converge.
    pub(super) fn prefetch_releases(&self, enabled: &[usize]) {
        if !secrets_driver() {
            return;
        }
        let all = helm::releases_from_secrets(&self.shared.client, &self.shared.namespace, "");
        let Ok(mut all) = all else { return };
        let mut st = self.shared.lock();
        st.releases = enabled
            .iter()
            .filter(|&&m| self.shared.layout.modules[m].has_chart)
            .map(|&m| {
                let name = self.shared.layout.modules[m].name.clone();
                let release = all.remove(&name);
                (name, release)
            })
            .collect();
    }
}

fn hash(text: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}
