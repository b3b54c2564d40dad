//! The converge cycle ("reload all modules") of the addon engine: its phases
//! (beforeAll hooks, the enabled state, afterAll hooks, the checks after it), the
//! purge of releases no module owns after the first one, and the one list of
//! releases a converge's module runs share. Which modules are deleted and run, and
//! when afterAll comes, is the lifecycle's to say (`lifecycle.rs`): each phase
//! tells it what happened and queues what it answers.

use crate::addon::engine::AddonHandler;
use crate::addon::modules::Owner;
use crate::addon::modules::enabled;
use crate::addon::release::helm;
use crate::addon::release::secrets_driver;
use crate::addon::run::lifecycle::Input;
use crate::hook::context::BindingType;
use crate::log;
use crate::queue::{ConvergePhase, Step, Task};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::time::Instant;

impl AddonHandler {
    pub(in crate::addon) fn converge(
        &self,
        phase: ConvergePhase,
        event: &str,
    ) -> Result<Vec<Task>, crate::addon::Error> {
        let next = |phase| {
            Task::addon(Step::Converge {
                phase,
                event: event.to_string(),
            })
        };
        match phase {
            ConvergePhase::BeforeAll => {
                let now = Instant::now();
                self.shared.step(Input::ConvergeStarted {
                    event: event.to_string(),
                    now,
                });
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
            ConvergePhase::Modules => Ok(self.modules_phase()),
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

    /// The enabled state (at the first converge, with the modules that have a
    /// release); the lifecycle answers with the deletes and runs it calls for. A
    /// failure is the lifecycle's to retry: it holds back no other task.
    pub(in crate::addon) fn modules_phase(&self) -> Vec<Task> {
        let shared = &self.shared;
        // The drift check lists anew for this converge.
        shared.lock().listed.clear();
        // One list of releases serves the inventory and the module runs.
        let listed = match secrets_driver() {
            true => helm::releases_from_secrets(&shared.bookkeeping, &shared.namespace, "").ok(),
            false => None,
        };
        if shared.lock().lifecycle.wants_inventory() {
            self.inventory(listed.as_ref());
        }
        // Enabled scripts run on a copy, so other queues' hooks are not kept waiting.
        let copy = shared.lock().clone();
        let enabled = match enabled::compute(shared, &copy) {
            Ok(enabled) => enabled,
            Err(error) => {
                let error = error.to_string();
                shared.metrics.discover_error();
                log::error("modules discovery failed, will retry", &[("error", &error)]);
                let now = Instant::now();
                return shared.step(Input::EnabledFailed { error, now });
            }
        };
        let layout = shared.layout();
        let names: Vec<&str> = enabled
            .iter()
            .map(|&m| layout.modules[m].name.as_str())
            .collect();
        log::info("enabled modules", &[("modules", &names.join(","))]);
        let tasks = shared.step(Input::Enabled {
            modules: enabled.clone(),
        });
        if let Some(all) = listed {
            self.prefetch_releases(&enabled, all);
        }
        tasks
    }

    /// Tells the lifecycle which modules have a release when the operator starts
    /// (or takes over), so those that are not enabled are deleted.
    fn inventory(&self, listed: Option<&BTreeMap<String, helm::Release>>) {
        let releases: Vec<String> = match listed {
            Some(all) => all.keys().cloned().collect(),
            None => match self.release_names() {
                Ok(r) => r,
                Err(e) => {
                    log::error(
                        "cannot list helm releases; releases of disabled modules stay",
                        &[("error", &e.to_string())],
                    );
                    return;
                }
            },
        };
        let modules = (self.shared.layout().modules.iter().enumerate())
            .filter(|(_, m)| m.has_chart && releases.contains(&m.name))
            .map(|(i, _)| i)
            .collect();
        self.shared.step(Input::Inventory { modules });
    }

    /// Adds the finished converge's duration to `convergence_seconds`.
    pub(in crate::addon) fn converge_took(&self, event: &str) {
        let began = self.shared.lock().lifecycle.converge_began();
        if let Some(began) = began {
            self.shared
                .metrics
                .convergence_seconds
                .with_label_values(&[event])
                .inc_by(began.elapsed().as_secs_f64());
        }
    }

    pub(in crate::addon) fn converge_done(&self, before: u64) -> Vec<Task> {
        let mut tasks = Vec::new();
        let first = !self.shared.lock().lifecycle.converge_status().1;
        if first {
            tasks.extend(self.purge_tasks());
            self.shared.ready.store(true, Ordering::Release);
            log::info("first converge done", &[]);
        }
        let mut st = self.shared.lock();
        st.releases.clear();
        st.listed.clear();
        let changed = hash(&st.global_checksum()) != before;
        tasks.extend(
            self.shared
                .step_locked(&mut st, Input::ConvergeDone { changed }),
        );
        drop(st);
        self.report_converged();
        tasks
    }

    /// ModulePurge for every release in the namespace no module owns, in reverse
    /// name order (flant v1.0: releases of known but disabled modules are deleted
    /// by ModuleDelete, not purged).
    pub(in crate::addon) fn purge_tasks(&self) -> Vec<Task> {
        let releases = match self.release_names() {
            Ok(r) => r,
            Err(e) => {
                log::error(
                    "cannot list helm releases; nothing purged",
                    &[("error", &e.to_string())],
                );
                return Vec::new();
            }
        };
        let known = |r: &String| self.shared.layout().modules.iter().any(|m| &m.name == r);
        let ignored = |r: &String| *r == self.shared.ignore_release;
        let mut purge: Vec<String> = releases
            .into_iter()
            .filter(|r| !known(r) && !ignored(r))
            .collect();
        purge.sort();
        purge.reverse();
        purge
            .into_iter()
            .map(|release| Task::addon(Step::ModulePurge { release }))
            .collect()
    }

    pub(in crate::addon) fn purge(&self, release: &str) {
        log::info("purge helm release of no module", &[("release", release)]);
        let uninstall = || self.shared.helm.uninstall(release);
        if let Err(e) = self
            .shared
            .metrics
            .helm_op(release, "", "uninstall", uninstall)
        {
            log::error(
                "purge failed",
                &[("release", release), ("error", &e.to_string())],
            );
        }
    }

    /// Every release name in the namespace: one list of helm's Secrets, or `helm list`.
    pub(in crate::addon) fn release_names(&self) -> Result<Vec<String>, crate::addon::Error> {
        if secrets_driver() {
            let (client, ns) = (&self.shared.bookkeeping, &self.shared.namespace);
            let all = helm::releases_from_secrets(client, ns, "")
                .map_err(crate::addon::Error::Release)?;
            Ok(all.into_keys().collect())
        } else {
            Ok(self.shared.helm.list()?)
        }
    }

    /// Keeps each enabled module's entry of the converge's one list of releases for
    /// its module run.
    pub(in crate::addon) fn prefetch_releases(
        &self,
        enabled: &[usize],
        mut all: BTreeMap<String, helm::Release>,
    ) {
        let mut st = self.shared.lock();
        st.releases = enabled
            .iter()
            .filter(|&&m| self.shared.layout().modules[m].has_chart)
            .map(|&m| {
                let name = self.shared.layout().modules[m].name.clone();
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
