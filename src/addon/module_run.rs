//! A module's run and delete in the addon engine: startup (its CRDs, onStartup hooks, then
//! its bindings' Enable tasks), beforeHelm hooks, the helm phase (the upgrade
//! decision of spec §5.3, a revision left pending by a killed helm), afterHelm hooks;
//! and ModuleDelete (schedules and watches off, beforeDeleteHelm, helm uninstall,
//! afterDeleteHelm).
//! Each tells the lifecycle where the module is (`lifecycle.rs`) and queues what it
//! answers: a failed run is retried by the lifecycle, off the queue.

use super::engine::AddonHandler;
use super::helm::{self, ListKey, ObjectRef};
use super::lifecycle::Input;
use super::modules::Owner;
use super::release_record::Record;
use crate::hook::context::{BindingContext, BindingType};
use crate::log;
use crate::queue::{Task, TaskKind};
use crate::schedule::Control;
use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Instant;

impl AddonHandler {
    /// A ModuleRun task: never fails the task, since a failed run is retried by
    /// the lifecycle (and a new input for the module replaces that retry).
    pub(super) fn counted_run(
        &self,
        m: usize,
        do_startup: bool,
        event: &str,
    ) -> Result<Vec<Task>, String> {
        let start = Instant::now();
        let result = self.module_run(m, do_startup, event);
        self.shared
            .metrics
            .module_run_seconds
            .with_label_values(&[&self.module_name(m), event])
            .observe(start.elapsed().as_secs_f64());
        Ok(result.unwrap_or_else(|error| {
            let name = self.module_name(m);
            if crate::process::shutdown_requested() {
                // Its hooks or helm were stopped by the operator's own shutdown:
                // no module error, and no retry comes.
                log::info(
                    "module run stopped by the operator's shutdown",
                    &[("module", &name), ("error", &error)],
                );
            } else {
                self.shared
                    .metrics
                    .module_run_errors_total
                    .with_label_values(&[&name])
                    .inc();
                log::error(
                    "module run failed, will retry",
                    &[("module", &name), ("error", &error)],
                );
            }
            let now = Instant::now();
            self.shared.step(Input::RunFailed {
                module: m,
                error,
                now,
            })
        }))
    }

    /// A ModuleDelete task; a failure fails it, so the queue retries it first.
    pub(super) fn counted_delete(&self, m: usize) -> Result<Vec<Task>, String> {
        self.shared.step(Input::DeleteStarted { module: m });
        self.module_delete(m)
            .map(|()| self.shared.step(Input::DeleteFinished { module: m }))
            .inspect_err(|e| {
                let name = self.module_name(m);
                if crate::process::shutdown_requested() {
                    log::info(
                        "module delete stopped by the operator's shutdown",
                        &[("module", &name), ("error", e)],
                    );
                    return;
                }
                self.shared
                    .metrics
                    .module_delete_errors_total
                    .with_label_values(&[&name])
                    .inc();
                log::error(
                    "module delete failed, will retry",
                    &[("module", &name), ("error", e)],
                );
            })
    }

    pub(super) fn module_name(&self, m: usize) -> String {
        self.shared
            .layout
            .modules
            .get(m)
            .map(|m| m.name.clone())
            .unwrap_or_default()
    }

    pub(super) fn module_run(
        &self,
        m: usize,
        do_startup: bool,
        event: &str,
    ) -> Result<Vec<Task>, String> {
        let (enabled, started) = {
            let mut st = self.shared.lock();
            let event = event.to_string();
            st.lifecycle.step(Input::RunStarted { module: m, event });
            (st.lifecycle.may_run(m), st.lifecycle.is_started(m))
        };
        if !enabled {
            return Ok(Vec::new());
        }
        let name = self.module_name(m);
        if !started {
            return self.module_startup(m, &name, event);
        }
        log::info(
            "module run",
            &[
                ("module", &name),
                ("event", event),
                ("startup", &do_startup.to_string()),
            ],
        );
        self.run_lifecycle(Owner::Module(m), BindingType::BeforeHelm)?;
        if self.shared.layout.modules[m].has_chart {
            self.helm_phase(m, event)?;
        }
        let before = self.shared.lock().module_checksum(m);
        self.run_lifecycle(Owner::Module(m), BindingType::AfterHelm)?;
        let again = self.shared.lock().module_checksum(m) != before;
        Ok(self.shared.step(Input::RunFinished { module: m, again }))
    }

    /// onStartup hooks, then Enable tasks for the module's bindings (their
    /// Synchronization runs next), then the module run proper.
    pub(super) fn module_startup(
        &self,
        m: usize,
        name: &str,
        event: &str,
    ) -> Result<Vec<Task>, String> {
        log::info("module startup", &[("module", name), ("event", event)]);
        self.install_crds(m, name)?;
        let hooks = self.shared.hooks_of(Owner::Module(m));
        let on_startup = crate::startup::by_order(hooks.map(|(i, h)| (i, h.config.on_startup)));
        for i in on_startup {
            let hook = &self.shared.hooks[i];
            let task = Task::hook_run(i, &hook.name, false, false, BindingContext::on_startup());
            self.runner.run_hook(&task, "main")?;
        }
        let kube_enabled = self.shared.lock().lifecycle.kube_enabled(m);
        let mut tasks = Vec::new();
        for (i, hook) in self.shared.hooks_of(Owner::Module(m)) {
            if hook.has_kube_bindings() && !kube_enabled {
                tasks.push(Task::enable(
                    TaskKind::EnableKubernetesBindings,
                    i,
                    &hook.name,
                ));
            }
            if !hook.config.schedule.is_empty() {
                tasks.push(Task::enable(
                    TaskKind::EnableScheduleBindings,
                    i,
                    &hook.name,
                ));
            }
        }
        tasks.extend(self.shared.step(Input::StartupDone { module: m }));
        Ok(tasks)
    }

    /// Decides whether to upgrade (spec §5.3) and upgrades; timed as `module_helm_seconds`.
    pub(super) fn helm_phase(&self, m: usize, event: &str) -> Result<(), String> {
        let start = Instant::now();
        let result = self.helm_phase_untimed(m, event);
        self.shared
            .metrics
            .module_helm_seconds
            .with_label_values(&[&self.module_name(m), event])
            .observe(start.elapsed().as_secs_f64());
        result
    }

    pub(super) fn helm_phase_untimed(&self, m: usize, event: &str) -> Result<(), String> {
        let module = &self.shared.layout.modules[m];
        let values = {
            let st = self.shared.lock();
            if st.config.no_resource_reconciliation(&module.key) {
                log::info(
                    "module in maintenance (NoResourceReconciliation): helm upgrade skipped",
                    &[("module", &module.name)],
                );
                return Ok(());
            }
            let enabled = st.enabled_names(&self.shared.layout, None);
            let (_, values) = st.module_files(m, enabled)?;
            let section = values.get(&module.key).cloned().unwrap_or_default();
            st.modules[m]
                .scope
                .check_helm(&section)
                .map_err(|e| format!("check helm values: {e}"))?;
            values
        };
        let text = serde_json::to_vec(&values).map_err(|e| e.to_string())?;
        let stem = format!("{}.module-values.yaml", module.name);
        let file = crate::executor::ChildFile::create(&self.shared.tmp_dir, &stem, &text)
            .map_err(|e| e.to_string())?;
        let given = Given {
            file: file.path(),
            values: &values,
        };
        self.upgrade_if_needed(&module.name, &module.chart, &given, event)
    }

    /// Upgrades when [`helm::upgrade_reason`] says so. The release, its manifest and
    /// its values are read from its storage Secrets, so an unchanged module, and a
    /// first install or a changed module (one `helm upgrade`), spawn no helm process
    /// but the upgrade; only a change through `global` is rendered (`helm template`)
    /// to see whether it changes objects. A revision left pending by a killed helm is
    /// removed first (then its status is the reason).
    pub(super) fn upgrade_if_needed(
        &self,
        name: &str,
        chart: &Path,
        given: &Given,
        event: &str,
    ) -> Result<(), String> {
        let helm = &self.shared.helm;
        let metrics = &self.shared.metrics;
        let checksum = super::chart_sum::decision_checksum(given.values, chart)?;
        let (reason, last, kept_flant_checksum) =
            metrics.helm_op(name, event, "check-upgrade", || {
                let last = self.last_release(name)?;
                if let Some(r) = last.as_ref().filter(|r| r.status.starts_with("pending-")) {
                    self.clear_pending(name, r)?;
                }
                let record = OnceCell::new();
                let stored = || {
                    let r = record.get_or_init(|| self.release_record(name, event, last.as_ref()));
                    r.as_ref().map_err(String::clone)
                };
                let file = given.file;
                let rendered = || {
                    metrics.helm_op(name, event, "template", || {
                        Ok(helm.render(name, chart, file)?)
                    })
                };
                let lists = RefCell::new(HashMap::new());
                let stored_sum = last.as_ref().and_then(|r| r.checksum.as_deref());
                let facts = helm::UpgradeFacts {
                    rendered: &rendered,
                    released: &|| stored().map(|r| r.manifest.clone()),
                    exists: &|obj| self.object_listed(obj, &mut lists.borrow_mut()),
                    only_global_changed: &|| Ok(only_global_changed(given.values, stored()?)),
                };
                let reason = helm::upgrade_reason(last.as_ref(), &checksum, &facts)?;
                // Our checksum unchanged (an object to heal, a status to fix): so is
                // flant's, kept in the stored values; no render needed for it.
                let flant_checksum = (helm.flant_checksum && stored_sum == Some(checksum.as_str()))
                    .then(|| {
                        stored().ok()?.config[helm::CHECKSUM_VALUE]
                            .as_str()
                            .map(str::to_string)
                    })
                    .flatten();
                Ok::<_, String>((reason, last, flant_checksum))
            })?;
        let Some(reason) = reason else {
            log::info("helm upgrade not needed", &[("module", name)]);
            self.keep_checksum(name, last.as_ref(), &checksum);
            return Ok(());
        };
        log::info("helm upgrade", &[("module", name), ("reason", &reason)]);
        let upgrade = || {
            // With --flant-checksum, flant's: the MD5 of the plain `helm template`
            // output with the surrounding white space trimmed (as v1.5.0 reads it),
            // so flant's operator finds the release up to date after a switch back.
            let value = match &kept_flant_checksum {
                _ if !helm.flant_checksum => checksum.clone(),
                Some(kept) => kept.clone(),
                None => {
                    let plain = helm.render_plain(name, chart, given.file)?;
                    crate::md5::md5_hex(plain.trim().as_bytes())
                }
            };
            helm.upgrade(name, chart, given.file, &checksum, &value)
        };
        let result = metrics.helm_op(name, event, "upgrade", upgrade);
        // Even a failed upgrade may have written objects.
        self.shared.lock().listed.clear();
        Ok(result?)
    }

    /// The manifest and values of the release's latest revision: decoded from its
    /// storage Secret, or `helm get manifest` (no values) when it was not read from
    /// one or its record cannot be decoded.
    fn release_record(
        &self,
        name: &str,
        event: &str,
        last: Option<&helm::Release>,
    ) -> Result<Record, String> {
        if let Some(stored) = last.and_then(|r| r.stored.as_ref()) {
            match stored.decode() {
                Ok(record) => return Ok(record),
                Err(e) => log::warn(
                    "cannot read the release record; asking helm",
                    &[("module", name), ("error", &e)],
                ),
            }
        }
        let helm = &self.shared.helm;
        let manifest =
            (self.shared.metrics).helm_op(name, event, "get-manifest", || helm.manifest(name))?;
        Ok(Record {
            manifest,
            config: serde_json::Value::Null,
        })
    }

    /// After a render showed the module's new checksum makes the release's objects,
    /// stores that checksum on the release's Secret (a failure only costs the next
    /// converge a render).
    fn keep_checksum(&self, name: &str, last: Option<&helm::Release>, checksum: &str) {
        let Some(last) = last.filter(|r| r.checksum.as_deref() != Some(checksum)) else {
            return;
        };
        let Some(stored) = &last.stored else { return };
        let (client, ns) = (&self.shared.bookkeeping, &self.shared.namespace);
        if let Err(e) = helm::record_checksum(client, ns, &stored.secret, checksum) {
            log::warn(
                "cannot keep the new checksum",
                &[("module", name), ("error", &e)],
            );
        }
    }

    /// Whether `obj` is in the cluster, answered from one list of its kind in its
    /// namespace (the release namespace when it renders none) on the bookkeeping
    /// client: the converge's list when one is on (listed by its first run that asks,
    /// then shared), else this run's own (`lists`), so a run never reads an object by
    /// name.
    fn object_listed(
        &self,
        obj: &ObjectRef,
        lists: &mut HashMap<ListKey, BTreeSet<String>>,
    ) -> Result<bool, String> {
        let ns = obj.namespace.as_deref().unwrap_or(&self.shared.namespace);
        let key: ListKey = (obj.api_version.clone(), obj.kind.clone(), Some(ns.into()));
        if let Some(names) = lists.get(&key) {
            return Ok(names.contains(&obj.name));
        }
        if let Some(names) = self.shared.lock().listed.get(&key) {
            return Ok(names.contains(&obj.name));
        }
        let context = format!("helm resource {obj}");
        let (api_version, kind) = (&obj.api_version, &obj.kind);
        let client = &self.shared.bookkeeping;
        let names = helm::object_names(client, api_version, kind, Some(ns), &context)?;
        let found = names.contains(&obj.name);
        let mut st = self.shared.lock();
        if st.lifecycle.converge_status().2 {
            st.listed.insert(key.clone(), names.clone());
        }
        lists.insert(key, names);
        Ok(found)
    }

    /// A revision left `pending-install`/`-upgrade`/`-rollback` by a helm that was
    /// killed (the operator restarted mid-upgrade) makes helm refuse every later
    /// operation ("another operation is in progress"): its storage Secret is deleted,
    /// so the next upgrade starts from the last finished revision.
    pub(super) fn clear_pending(&self, name: &str, release: &helm::Release) -> Result<(), String> {
        if !secrets_driver() {
            return Err(format!(
                "release {name} is {} and HELM_DRIVER is not secrets: recover it by hand",
                release.status
            ));
        }
        let secret = format!("sh.helm.release.v1.{name}.v{}", release.revision);
        log::warn(
            "removing a release revision left pending by an interrupted helm",
            &[
                ("module", name),
                ("secret", &secret),
                ("status", &release.status),
            ],
        );
        let secrets = helm::secrets_resource();
        let api = self
            .shared
            .client
            .api(&secrets, Some(&self.shared.namespace));
        match api.delete(&secret, None) {
            Ok(()) => Ok(()),
            Err(e) if e.status_code() == Some(404) => Ok(()),
            Err(e) => Err(format!("release {name}: deleting {secret}: {e}")),
        }
    }

    /// The release's latest revision: the converge's list if it has the module's
    /// entry, else from helm's storage Secrets with our client (no helm process), or
    /// `helm history` when `HELM_DRIVER` names other storage.
    pub(super) fn last_release(&self, name: &str) -> Result<Option<helm::Release>, String> {
        if let Some(cached) = self.shared.lock().releases.remove(name) {
            return Ok(cached);
        }
        if secrets_driver() {
            helm::release_from_secrets(&self.shared.bookkeeping, &self.shared.namespace, name)
        } else {
            Ok(self.shared.helm.last_release(name)?)
        }
    }

    pub(super) fn module_delete(&self, m: usize) -> Result<(), String> {
        let name = self.module_name(m);
        let event = self.shared.lock().lifecycle.activation(m);
        log::info("module delete", &[("module", &name)]);
        for (i, hook) in self.shared.hooks_of(Owner::Module(m)) {
            if !hook.config.schedule.is_empty() {
                let _ = self.shared.scheduler.send(Control::Disable(i));
            }
            if hook.has_kube_bindings()
                && let Some(kube) = &self.runner.kube
            {
                kube.disable(i)?;
            }
        }
        if self.shared.layout.modules[m].has_chart
            && self.shared.helm.last_release(&name)?.is_some()
        {
            // As flant: only when there is a release to uninstall; a failure stops
            // the delete before helm (retried).
            self.run_lifecycle(Owner::Module(m), BindingType::BeforeDeleteHelm)?;
            let uninstall = || self.shared.helm.uninstall(&name);
            let result = (self.shared.metrics).helm_op(&name, &event, "uninstall", uninstall);
            self.shared.lock().listed.clear();
            result?;
        }
        self.run_lifecycle(Owner::Module(m), BindingType::AfterDeleteHelm)
    }
}

/// Whether helm stores releases in Secrets (its default), which we then read ourselves.
pub(super) fn secrets_driver() -> bool {
    let driver = std::env::var("HELM_DRIVER").unwrap_or_default();
    matches!(driver.as_str(), "" | "secret" | "secrets")
}

/// What a module run gives helm: the values file and its values.
pub(super) struct Given<'a> {
    pub(crate) file: &'a Path,
    pub(crate) values: &'a serde_json::Value,
}

/// Whether the module's own values are those stored with the release's latest
/// revision, so only `global` or the chart can have changed: then a render decides.
/// Compared without `global` and flant's checksum value. (Not through the stored
/// checksum: [`AddonHandler::keep_checksum`] moves that label after a render showed
/// no change, while the stored values stay those of the last upgrade.)
fn only_global_changed(values: &serde_json::Value, record: &Record) -> bool {
    let mine = own_values(values);
    mine.is_some() && mine == own_values(&record.config)
}

/// The top-level sections of `values` but `global` and flant's checksum value.
fn own_values(values: &serde_json::Value) -> Option<Vec<(&String, &serde_json::Value)>> {
    let map = values.as_object()?;
    let own = |k: &String| k != "global" && k != helm::CHECKSUM_VALUE;
    Some(map.iter().filter(|(k, _)| own(k)).collect())
}
