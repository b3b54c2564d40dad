//! A module's run and delete in the addon engine: startup (its admission webhooks,
//! its CRDs and their conversion, onStartup hooks, then its bindings' Enable tasks),
//! beforeHelm hooks, the helm phase (the upgrade decision of spec §5.3 with the
//! release deduplicated by its rendered objects, and maintenance; the release's own
//! questions are `release/mod.rs`'s), afterHelm hooks; and ModuleDelete (webhooks,
//! schedules and watches off, beforeDeleteHelm, helm uninstall, afterDeleteHelm).
//! Each tells the lifecycle where the module is (`lifecycle.rs`) and queues what it
//! answers: a failed run is retried by the lifecycle, off the queue.

use crate::addon::Error;
use crate::addon::config::settings::status::Phase;
use crate::addon::engine::AddonHandler;
use crate::addon::modules::Owner;
use crate::addon::release::ModuleRelease;
use crate::addon::release::drift::{self, watcher::Notice};
use crate::addon::release::helm;
use crate::addon::run::lifecycle::Input;
use crate::hook::context::{BindingContext, BindingType};
use crate::log;
use crate::queue::{Task, TaskKind};
use crate::schedule::Control;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

impl AddonHandler {
    /// A ModuleRun task: never fails the task, since a failed run is retried by
    /// the lifecycle (and a new input for the module replaces that retry).
    pub(in crate::addon) fn counted_run(
        &self,
        m: usize,
        do_startup: bool,
        event: &str,
    ) -> Result<Vec<Task>, Error> {
        let start = Instant::now();
        self.note_phase(m, Phase::Startup);
        let result = self.module_run(m, do_startup, event);
        let ok = result.is_ok();
        self.shared
            .metrics
            .module_run_seconds
            .with_label_values(&[&self.module_name(m), event])
            .observe(start.elapsed().as_secs_f64());
        self.report_outcome(m, &result);
        let tasks = result.unwrap_or_else(|failure| {
            let name = self.module_name(m);
            let error = failure.to_string();
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
                // Retried by the lifecycle, not the queue: counted here.
                (self.runner.metrics).task_error(
                    crate::startup::MAIN_QUEUE,
                    TaskKind::ModuleRun.as_str(),
                    failure.cause().as_str(),
                );
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
        });
        // After the lifecycle step, so the drift watcher finds the module idle.
        let notice = Notice::Released { module: m, ok };
        self.shared.drift_notice(notice);
        Ok(tasks)
    }

    /// A ModuleDelete task; a failure fails it, so the queue retries it first.
    pub(in crate::addon) fn counted_delete(&self, m: usize) -> Result<Vec<Task>, Error> {
        self.shared.step(Input::DeleteStarted { module: m });
        self.shared.drift_notice(Notice::Deleted { module: m });
        self.module_delete(m)
            .map(|()| {
                self.report_deleted(m);
                self.shared.step(Input::DeleteFinished { module: m })
            })
            .inspect_err(|e| {
                let name = self.module_name(m);
                if crate::process::shutdown_requested() {
                    log::info(
                        "module delete stopped by the operator's shutdown",
                        &[("module", &name), ("error", &e.to_string())],
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
                    &[("module", &name), ("error", &e.to_string())],
                );
            })
    }

    /// The module's settings status after a run that did its work (a run that
    /// waited for its order, or only started the module, reports nothing yet).
    fn report_outcome(&self, m: usize, result: &Result<Vec<Task>, Error>) {
        match result {
            Err(e) if !crate::process::shutdown_requested() => {
                self.report_run(m, Some(&e.to_string()))
            }
            Ok(_)
                if self
                    .shared
                    .lock()
                    .lifecycle
                    .view(m)
                    .is_some_and(|v| v.state == "Ready") =>
            {
                self.report_run(m, None)
            }
            _ => {}
        }
    }

    pub(in crate::addon) fn module_name(&self, m: usize) -> String {
        self.shared
            .layout()
            .modules
            .get(m)
            .map(|m| m.name.clone())
            .unwrap_or_default()
    }

    pub(in crate::addon) fn module_run(
        &self,
        m: usize,
        do_startup: bool,
        event: &str,
    ) -> Result<Vec<Task>, Error> {
        let (enabled, started) = {
            let mut st = self.shared.lock();
            let event = event.to_string();
            self.shared
                .step_locked(&mut st, Input::RunStarted { module: m, event });
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
        self.note_phase(m, Phase::BeforeHelm);
        self.run_lifecycle(Owner::Module(m), BindingType::BeforeHelm)?;
        if self.shared.layout().modules[m].has_chart {
            self.note_phase(m, Phase::Helm);
            self.helm_phase(m, event)?;
        }
        let before = self.shared.lock().module_checksum(m);
        self.note_phase(m, Phase::AfterHelm);
        self.run_lifecycle(Owner::Module(m), BindingType::AfterHelm)?;
        let again = self.shared.lock().module_checksum(m) != before;
        Ok(self.shared.step(Input::RunFinished { module: m, again }))
    }

    /// onStartup hooks, then Enable tasks for the module's bindings (their
    /// Synchronization runs next), then the module run proper.
    pub(in crate::addon) fn module_startup(
        &self,
        m: usize,
        name: &str,
        event: &str,
    ) -> Result<Vec<Task>, Error> {
        log::info("module startup", &[("module", name), ("event", event)]);
        self.follow_webhooks(m, true)?;
        (self.shared.crds)
            .install_module(&self.shared.client, m, name)
            .map_err(Error::Crds)?;
        self.configure_conversions(m)?;
        let hooks = self.shared.hooks_of(Owner::Module(m));
        let on_startup = crate::startup::by_order(hooks.map(|(i, h)| (i, h.config.on_startup)));
        for &i in &on_startup {
            let hooks = self.shared.hook_list();
            let hook = &hooks[i];
            let task = Task::hook_run(i, &hook.name, false, false, BindingContext::on_startup());
            self.runner.run_hook(&task, "main")?;
        }
        // The hooks are listed and the startup marked done under one lock: a
        // reload that changes the module's hooks meanwhile (`reload/apply.rs`)
        // comes wholly before (its hooks are listed here, and those it added
        // after the onStartup runs above run theirs next) or after (it runs
        // and enables them itself).
        let mut st = self.shared.lock();
        let kube_enabled = st.lifecycle.kube_enabled(m);
        let late = (self.shared.hooks_of(Owner::Module(m)))
            .filter(|(i, _)| !on_startup.contains(i))
            .map(|(i, h)| (i, h.config.on_startup));
        let hooks = self.shared.hook_list();
        let mut tasks: Vec<Task> = (crate::startup::by_order(late).into_iter())
            .map(|i| {
                Task::hook_run(
                    i,
                    &hooks[i].name,
                    false,
                    false,
                    BindingContext::on_startup(),
                )
            })
            .collect();
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
        tasks.extend(
            self.shared
                .step_locked(&mut st, Input::StartupDone { module: m }),
        );
        Ok(tasks)
    }

    /// Registers (`enabled`) or removes the admission entries of module `m`'s
    /// hooks: a module's webhooks are called only while it is enabled.
    fn follow_webhooks(&self, m: usize, enabled: bool) -> Result<(), Error> {
        let Some(registrar) = &self.shared.webhooks.admission else {
            return Ok(());
        };
        let hooks: Vec<usize> = self
            .shared
            .hooks_of(Owner::Module(m))
            .map(|(i, _)| i)
            .collect();
        registrar
            .set_active(&hooks, enabled)
            .map_err(|e| Error::Webhooks(format!("the module's admission webhooks: {e}")))
    }

    /// Sets the conversion webhook of every CRD module `m`'s hooks convert, right
    /// after its CRDs are installed and before helm creates custom resources; the
    /// conversion stays while the module is off (stored objects may need it).
    fn configure_conversions(&self, m: usize) -> Result<(), Error> {
        let Some(converter) = &self.shared.webhooks.conversion else {
            return Ok(());
        };
        let hooks = self.shared.hooks_of(Owner::Module(m));
        let crds: BTreeSet<String> = hooks
            .flat_map(|(_, h)| h.config.conversion.into_iter().map(|b| b.crd_name))
            .collect();
        crds.into_iter()
            .try_for_each(|crd| converter.configure(&crd).map_err(Error::Webhooks))
    }

    /// Decides whether to upgrade (spec §5.3) and upgrades; timed as `module_helm_seconds`.
    pub(in crate::addon) fn helm_phase(&self, m: usize, event: &str) -> Result<(), Error> {
        let start = Instant::now();
        let result = self.helm_phase_untimed(m, event);
        self.shared
            .metrics
            .module_helm_seconds
            .with_label_values(&[&self.module_name(m), event])
            .observe(start.elapsed().as_secs_f64());
        result
    }

    pub(in crate::addon) fn helm_phase_untimed(&self, m: usize, event: &str) -> Result<(), Error> {
        let module = &self.shared.layout().modules[m];
        let (values, maintenance) = {
            let st = self.shared.lock();
            let enabled = st.enabled_names(&self.shared.layout(), None);
            let (_, values) = st.module_files(m, enabled)?;
            let section = values.get(&module.key).cloned().unwrap_or_default();
            st.modules[m]
                .scope
                .check_helm(&section)
                .map_err(|e| Error::from(e).context("check helm values"))?;
            let maintenance = st.config.no_resource_reconciliation(&module.key);
            (values, maintenance)
        };
        let text = serde_json::to_vec(&values).map_err(Error::Encode)?;
        let stem = format!("{}.module-values.yaml", module.name);
        let file = crate::executor::ChildFile::create(&self.shared.tmp_dir, &stem, &text)
            .map_err(Error::TempFile)?;
        let given = Given {
            file: file.path(),
            values: &values,
            maintenance,
        };
        self.upgrade_if_needed(&module.name, &module.chart, &given, event)
    }

    /// Upgrades when [`helm::upgrade_reason`] says so. The release, its manifest and
    /// its values are read from its storage Secrets ([`ModuleRelease`]), so an
    /// unchanged module spawns no helm process, and a changed one spawns one: `helm
    /// upgrade`, which our post-renderer stops before a revision when the render
    /// makes the release's objects (then the checksum moves to the release, and a
    /// vanished object still calls for a real upgrade). A module in maintenance
    /// (`NoResourceReconciliation`) is installed once, labelled so, and then left
    /// alone until maintenance ends.
    pub(in crate::addon) fn upgrade_if_needed(
        &self,
        name: &str,
        chart: &Path,
        given: &Given,
        event: &str,
    ) -> Result<(), Error> {
        let metrics = &self.shared.metrics;
        let checksum = crate::addon::release::chart_sum::decision_checksum(given.values, chart)
            .map_err(Error::Chart)?;
        let (release, decision) = metrics.helm_op(name, event, "check-upgrade", || {
            let release = ModuleRelease::lookup(&self.shared, name, event)?;
            if given.maintenance && release.last().is_some() {
                return Ok::<_, Error>((release, None));
            }
            let decision = helm::upgrade_reason(release.last(), &checksum, &release.facts())
                .map_err(Error::Release)?;
            Ok((release, drift_correction(event, decision)))
        })?;
        let Some(decision) = decision else {
            if given.maintenance {
                // The release keeps the checksum it has: once maintenance ends, a
                // change made meanwhile is still a change.
                log::info(
                    "module in maintenance (NoResourceReconciliation): helm upgrade skipped",
                    &[("module", name)],
                );
            } else {
                log::info("helm upgrade not needed", &[("module", name)]);
                release.keep_checksum(&checksum);
            }
            return Ok(());
        };
        log::info(
            "helm upgrade",
            &[("module", name), ("reason", &decision.reason)],
        );
        let released = match decision.unless_same {
            true => release.released_file(),
            false => None,
        };
        let upgrade = Upgrade {
            name,
            chart,
            given,
            checksum: &checksum,
            release: &release,
            event,
        };
        let upgraded = self.run_upgrade(&upgrade, released.as_ref().map(|f| f.path()))?;
        if upgraded == helm::Upgraded::Done {
            return Ok(());
        }
        match helm::absent_object(&release.facts()).map_err(Error::Release)? {
            Some(obj) => {
                let reason = format!("resource {obj} absent");
                log::info("helm upgrade", &[("module", name), ("reason", &reason)]);
                self.run_upgrade(&upgrade, None).map(drop)
            }
            None => {
                log::info(
                    "helm upgrade not needed: the rendered objects are the release's",
                    &[("module", name)],
                );
                release.keep_checksum(&checksum);
                Ok(())
            }
        }
    }

    /// One `helm upgrade` (timed as the `upgrade` operation), stopped by the
    /// post-renderer when `released` is given and the render makes its objects.
    fn run_upgrade(&self, u: &Upgrade, released: Option<&Path>) -> Result<helm::Upgraded, Error> {
        let helm = &self.shared.helm;
        let run = || {
            // With --flant-checksum, flant's: the MD5 of the plain `helm template`
            // output with the surrounding white space trimmed (as v1.5.0 reads it),
            // so flant's operator finds the release up to date after a switch back.
            let value = match helm.flant_checksum {
                false => u.checksum.to_string(),
                true => match u.release.kept_flant_checksum(u.checksum) {
                    Some(kept) => kept,
                    None => {
                        let plain = helm.render_plain(u.name, u.chart, u.given.file)?;
                        crate::md5::md5_hex(plain.trim().as_bytes())
                    }
                },
            };
            helm.upgrade_with(&helm::UpgradeArgs {
                release: u.name,
                chart: u.chart,
                values_file: u.given.file,
                checksum: u.checksum,
                flant_checksum: &value,
                maintenance: u.given.maintenance,
                unless_same_as: released,
                force_conflicts: u.event == drift::EVENT,
            })
        };
        let result = (self.shared.metrics).helm_op(u.name, u.event, "upgrade", run);
        // Even a failed upgrade may have written objects.
        self.shared.lock().listed.clear();
        Ok(result?)
    }

    pub(in crate::addon) fn module_delete(&self, m: usize) -> Result<(), Error> {
        let name = self.module_name(m);
        let event = self.shared.lock().lifecycle.activation(m);
        log::info("module delete", &[("module", &name)]);
        self.follow_webhooks(m, false)?;
        for (i, hook) in self.shared.hooks_of(Owner::Module(m)) {
            if !hook.config.schedule.is_empty() {
                let _ = self.shared.scheduler.send(Control::Disable(i));
            }
            if hook.has_kube_bindings()
                && let Some(kube) = &self.runner.kube
            {
                kube.disable(i).map_err(Error::Monitor)?;
            }
        }
        if self.shared.layout().modules[m].has_chart
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

/// A drift correction upgrades the release whatever its checksum says, and never
/// stops at an identical render: the render is right, the cluster is not.
fn drift_correction(event: &str, decision: Option<helm::Upgrade>) -> Option<helm::Upgrade> {
    if event != drift::EVENT {
        return decision;
    }
    let reason = match decision {
        Some(d) => format!("{}; drift correction", d.reason),
        None => "drift correction".to_string(),
    };
    Some(helm::Upgrade {
        reason,
        unless_same: false,
    })
}

/// What a module run gives helm: the values file and its values, and whether the
/// module is in maintenance.
pub(in crate::addon) struct Given<'a> {
    pub(crate) file: &'a Path,
    pub(crate) values: &'a serde_json::Value,
    pub(crate) maintenance: bool,
}

/// One module's upgrade, as [`AddonHandler::run_upgrade`] runs it.
struct Upgrade<'a> {
    name: &'a str,
    chart: &'a Path,
    given: &'a Given<'a>,
    checksum: &'a str,
    release: &'a ModuleRelease<'a>,
    event: &'a str,
}
