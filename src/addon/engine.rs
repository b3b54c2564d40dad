//! The queue handler of addon-operator: hook runs and binding enables go to the
//! shared shell-operator [`Runner`]; converges, module runs, deletes and purges are
//! handled here. Each is one task whose phases queue the next steps at the head
//! of the queue (the worker runs a handler's returned tasks first), so flant's
//! order falls out of the queue:
//!
//! ```text
//! ConvergeModules(BeforeAll) → beforeAll hooks, ConvergeModules(Modules)
//! ConvergeModules(Modules)   → enabled state; ModuleDelete × disabled (reverse order),
//!                              ModuleRun × enabled (in order), ConvergeModules(AfterAll)
//! ConvergeModules(AfterAll)  → afterAll hooks, ConvergeModules(Done)
//! ConvergeModules(Done)      → first time: ready, ModulePurge × foreign releases;
//!                              global values changed by afterAll: a new converge
//! ModuleRun (not started)    → onStartup hooks; Enable kubernetes (Synchronization)
//!                              and schedule bindings; ModuleRun (started)
//! ModuleRun (started)        → beforeHelm hooks, helm, afterHelm hooks; values
//!                              changed by afterHelm: ModuleRun again
//! ModuleDelete               → schedules off, helm uninstall, afterDeleteHelm hooks
//! ```
//!
//! A failing step fails its task; the queue retries it with backoff and the phase
//! starts over (a module run that failed in afterHelm runs beforeHelm, helm and
//! afterHelm again, as flant documents).

use super::configmap::KubeConfig;
use super::enabled;
use super::helm::{self, object_exists_in};
use super::hook_values::request_converge;
use super::modules::Owner;
use super::state::Shared;
use crate::hook::context::{BindingContext, BindingType};
use crate::log;
use crate::queue::worker::Handler;
use crate::queue::{ConvergePhase, Step, Task, TaskKind};
use crate::runner::Runner;
use crate::schedule::Control;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The handler every queue thread of addon-operator uses.
pub struct AddonHandler {
    pub shared: Arc<Shared>,
    pub runner: Arc<Runner>,
}

impl Handler for AddonHandler {
    fn rate_limit(&self, task: &Task) -> Duration {
        self.runner.rate_limit(task)
    }

    fn handle(&self, task: &Task, queue: &str) -> Result<Vec<Task>, String> {
        match (task.kind, &task.step) {
            (TaskKind::HookRun, _) => self.hook_run(task, queue),
            (_, Some(Step::Converge { phase, event })) => self.converge(*phase, event),
            (
                _,
                Some(Step::ModuleRun {
                    module,
                    do_startup,
                    event,
                    ..
                }),
            ) => self.counted_run(*module, *do_startup, event),
            (_, Some(Step::ModuleDelete { module, .. })) => self.counted_delete(*module),
            (_, Some(Step::ModulePurge { release })) => {
                self.purge(release);
                Ok(Vec::new())
            }
            _ => self.runner.handle(task, queue),
        }
    }

    fn compacted(&self, queue: &str, hook: &str) {
        self.runner.compacted(queue, hook);
    }

    fn queue_action(&self, queue: &str, action: &str, took: Duration) {
        self.runner.queue_action(queue, action, took);
    }

    fn queue_length(&self, queue: &str, len: usize) {
        self.runner.queue_length(queue, len);
    }
}

impl AddonHandler {
    /// A queued hook run: the ConfigMap watch is handled here; runs of a disabled
    /// module's hooks are dropped (its watches keep running, see the README).
    fn hook_run(&self, task: &Task, queue: &str) -> Result<Vec<Task>, String> {
        match self.shared.owners.get(task.hook) {
            Some(Owner::ConfigMap) => {
                let tasks = self.configmap_changed();
                self.unlock(task);
                Ok(tasks)
            }
            Some(Owner::Module(m)) if !self.shared.lock().modules[*m].enabled => {
                self.unlock(task);
                Ok(Vec::new())
            }
            _ => self.runner.handle(task, queue),
        }
    }

    fn unlock(&self, task: &Task) {
        if let Some(kube) = &self.runner.kube {
            kube.unlock(task);
        }
    }

    // ---- converge --------------------------------------------------------------

    fn converge(&self, phase: ConvergePhase, event: &str) -> Result<Vec<Task>, String> {
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
    fn modules_phase(&self, event: &str) -> Result<Vec<Task>, String> {
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
    fn converge_took(&self, event: &str) {
        let began = self.shared.lock().converge.began.take();
        if let Some(began) = began {
            self.shared
                .metrics
                .convergence_seconds
                .with_label_values(&[event])
                .inc_by(began.elapsed().as_secs_f64());
        }
    }

    fn converge_done(&self, before: u64) -> Vec<Task> {
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
    fn purge_tasks(&self) -> Vec<Task> {
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

    fn purge(&self, release: &str) {
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

    // ---- module run and delete --------------------------------------------------

    /// Marks module `m` as running while `f` runs (the resource monitor skips it).
    fn in_run<T>(&self, m: usize, f: impl FnOnce() -> T) -> T {
        let mark = |on: bool| {
            if let Some(state) = self.shared.lock().modules.get_mut(m) {
                state.in_run = on;
            }
        };
        mark(true);
        let result = f();
        mark(false);
        result
    }

    fn counted_run(&self, m: usize, do_startup: bool, event: &str) -> Result<Vec<Task>, String> {
        let start = Instant::now();
        let result = self.in_run(m, || self.module_run(m, do_startup, event));
        self.shared
            .metrics
            .module_run_seconds
            .with_label_values(&[&self.module_name(m), event])
            .observe(start.elapsed().as_secs_f64());
        result.inspect_err(|e| {
            let name = self.module_name(m);
            self.shared
                .metrics
                .module_run_errors_total
                .with_label_values(&[&name])
                .inc();
            log::error(
                "module run failed, will retry",
                &[("module", &name), ("error", e)],
            );
        })
    }

    fn counted_delete(&self, m: usize) -> Result<Vec<Task>, String> {
        self.in_run(m, || self.module_delete(m))
            .map(|()| Vec::new())
            .inspect_err(|e| {
                let name = self.module_name(m);
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

    fn module_name(&self, m: usize) -> String {
        self.shared
            .layout
            .modules
            .get(m)
            .map(|m| m.name.clone())
            .unwrap_or_default()
    }

    fn module_run(&self, m: usize, do_startup: bool, event: &str) -> Result<Vec<Task>, String> {
        let (enabled, started) = {
            let mut st = self.shared.lock();
            let state = st.modules.get_mut(m).ok_or("no such module")?;
            state.run_pending = false;
            state.activation = event.to_string();
            (state.enabled, state.started)
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
        if self.shared.lock().module_checksum(m) != before {
            let again = Step::ModuleRun {
                module: m,
                name,
                do_startup: false,
                event: "AfterHelm-Hooks-Change-Values".into(),
            };
            return Ok(vec![Task::step(again)]);
        }
        Ok(Vec::new())
    }

    /// onStartup hooks, then Enable tasks for the module's bindings (their
    /// Synchronization runs next), then the module run proper.
    fn module_startup(&self, m: usize, name: &str, event: &str) -> Result<Vec<Task>, String> {
        log::info("module startup", &[("module", name), ("event", event)]);
        let mut on_startup: Vec<(f64, usize)> = self
            .shared
            .hooks_of(Owner::Module(m))
            .filter_map(|(i, h)| h.config.on_startup.map(|o| (o, i)))
            .collect();
        on_startup.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (_, i) in on_startup {
            let hook = &self.shared.hooks[i];
            let task = Task::hook_run(i, &hook.name, false, false, BindingContext::on_startup());
            self.runner.run_hook(&task, "main")?;
        }
        let kube_enabled = {
            let mut st = self.shared.lock();
            st.modules[m].started = true;
            std::mem::replace(&mut st.modules[m].kube_enabled, true)
        };
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
        tasks.push(Task::step(Step::ModuleRun {
            module: m,
            name: name.to_string(),
            do_startup: false,
            event: event.to_string(),
        }));
        Ok(tasks)
    }

    /// Decides whether to upgrade (spec §5.3) and upgrades; timed as `module_helm_seconds`.
    fn helm_phase(&self, m: usize, event: &str) -> Result<(), String> {
        let start = Instant::now();
        let result = self.helm_phase_untimed(m, event);
        self.shared
            .metrics
            .module_helm_seconds
            .with_label_values(&[&self.module_name(m), event])
            .observe(start.elapsed().as_secs_f64());
        result
    }

    fn helm_phase_untimed(&self, m: usize, event: &str) -> Result<(), String> {
        let module = &self.shared.layout.modules[m];
        let values = {
            let st = self.shared.lock();
            let enabled = st.enabled_names(&self.shared.layout, None);
            let (_, values) = st.module_files(m, enabled)?;
            let section = values.get(&module.key).cloned().unwrap_or_default();
            st.modules[m]
                .scope
                .check_helm(&section)
                .map_err(|e| format!("check helm values: {e}"))?;
            values
        };
        let file = self.shared.tmp_dir.join(format!(
            "{}.module-values.yaml-{}",
            module.name,
            std::process::id()
        ));
        let text = serde_json::to_vec(&values).map_err(|e| e.to_string())?;
        std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
        let result = self.upgrade_if_needed(&module.name, &module.path, &file, &text, event);
        let _ = std::fs::remove_file(&file);
        result
    }

    /// Upgrades when the release is absent or not deployed, or when the rendered
    /// objects differ from the release's or one of them is missing from the cluster.
    /// The release is read from its storage Secrets, so a first install costs one helm
    /// process; a release whose values and chart files have the checksum stored with it
    /// skips comparing manifests (only the missing-object check renders the chart).
    fn upgrade_if_needed(
        &self,
        name: &str,
        chart: &Path,
        file: &Path,
        values: &[u8],
        event: &str,
    ) -> Result<(), String> {
        let helm = &self.shared.helm;
        let metrics = &self.shared.metrics;
        let checksum = helm::checksum(&String::from_utf8_lossy(values), chart)?;
        let reason = metrics.helm_op(name, event, "check-upgrade", || {
            Ok::<_, String>(match self.last_release(name)? {
                None => Some("release absent".to_string()),
                Some(r) if r.status.starts_with("pending-") => {
                    self.clear_pending(name, &r)?;
                    Some(format!(
                        "status {} (revision {} left by an interrupted helm, removed)",
                        r.status, r.revision
                    ))
                }
                Some(r) if r.status != "deployed" => Some(format!("status {}", r.status)),
                Some(r) => {
                    let render = || helm.render(name, chart, file);
                    let manifest = metrics.helm_op(name, event, "template", render)?;
                    let changed = r.checksum.as_deref() != Some(checksum.as_str())
                        && !helm::same_objects(&manifest, &helm.manifest(name)?)?;
                    if changed {
                        Some("rendered objects changed".to_string())
                    } else {
                        self.missing_object(&manifest)?
                    }
                }
            })
        })?;
        match reason {
            Some(reason) => {
                log::info("helm upgrade", &[("module", name), ("reason", &reason)]);
                let upgrade = || helm.upgrade(name, chart, file, &checksum);
                metrics.helm_op(name, event, "upgrade", upgrade)
            }
            None => {
                log::info("helm upgrade not needed", &[("module", name)]);
                Ok(())
            }
        }
    }

    /// A revision left `pending-install`/`-upgrade`/`-rollback` by a helm that was
    /// killed (the operator restarted mid-upgrade) makes helm refuse every later
    /// operation ("another operation is in progress"): its storage Secret is deleted,
    /// so the next upgrade starts from the last finished revision.
    fn clear_pending(&self, name: &str, release: &helm::Release) -> Result<(), String> {
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
        let secrets = crate::kube::Resource {
            group: String::new(),
            version: "v1".into(),
            resource: "secrets".into(),
            kind: "Secret".into(),
            namespaced: true,
        };
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

    /// `Some("resource … absent")` for the first rendered object not in the cluster.
    fn missing_object(&self, manifest: &str) -> Result<Option<String>, String> {
        let (client, ns) = (&self.shared.client, &self.shared.namespace);
        for obj in helm::manifest_objects(manifest)? {
            if !object_exists_in(client, &obj, ns)? {
                return Ok(Some(format!("resource {obj} absent")));
            }
        }
        Ok(None)
    }

    /// The release's latest revision: the converge's list if it has the module's
    /// entry, else from helm's storage Secrets with our client (no helm process), or
    /// `helm history` when `HELM_DRIVER` names other storage.
    fn last_release(&self, name: &str) -> Result<Option<helm::Release>, String> {
        if let Some(cached) = self.shared.lock().releases.remove(name) {
            return Ok(cached);
        }
        if secrets_driver() {
            helm::release_from_secrets(&self.shared.client, &self.shared.namespace, name)
        } else {
            self.shared.helm.last_release(name)
        }
    }

    /// Every release name in the namespace: one list of helm's Secrets, or `helm list`.
    fn release_names(&self) -> Result<Vec<String>, String> {
        if secrets_driver() {
            let all = helm::releases_from_secrets(&self.shared.client, &self.shared.namespace, "")?;
            Ok(all.into_keys().collect())
        } else {
            self.shared.helm.list()
        }
    }

    /// Reads every module's release in one list for the module runs of this converge.
    fn prefetch_releases(&self, enabled: &[usize]) {
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

    fn module_delete(&self, m: usize) -> Result<(), String> {
        let name = self.module_name(m);
        let event = {
            let mut st = self.shared.lock();
            let event = st.converge.event.clone();
            if let Some(state) = st.modules.get_mut(m) {
                state.activation = event.clone();
            }
            event
        };
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
        self.shared.lock().modules[m].kube_enabled = false;
        if self.shared.layout.modules[m].has_chart
            && self.shared.helm.last_release(&name)?.is_some()
        {
            let uninstall = || self.shared.helm.uninstall(&name);
            self.shared
                .metrics
                .helm_op(&name, &event, "uninstall", uninstall)?;
        }
        self.run_lifecycle(Owner::Module(m), BindingType::AfterDeleteHelm)?;
        self.shared.lock().modules[m].started = false;
        Ok(())
    }

    // ---- lifecycle hooks --------------------------------------------------------

    /// Hooks of `owner` with the lifecycle binding, by (ORDER, name).
    fn lifecycle_hooks(&self, owner: Owner, binding: BindingType) -> Vec<usize> {
        let mut found: Vec<(f64, usize)> = self
            .shared
            .hooks_of(owner)
            .filter_map(|(i, h)| h.config.lifecycle.order(binding.as_str()).map(|o| (o, i)))
            .collect();
        found.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        found.into_iter().map(|(_, i)| i).collect()
    }

    fn lifecycle_task(&self, hook: usize, binding: BindingType) -> Task {
        let h = &self.shared.hooks[hook];
        let mut names: Vec<String> = h.config.kubernetes.iter().map(|b| b.name.clone()).collect();
        names.dedup();
        Task::hook_run(
            hook,
            &h.name,
            false,
            false,
            BindingContext::lifecycle(binding, names),
        )
    }

    /// Global beforeAll/afterAll hooks as queued tasks (each retried on its own).
    fn lifecycle_tasks(&self, owner: Owner, binding: BindingType) -> Vec<Task> {
        self.lifecycle_hooks(owner, binding)
            .into_iter()
            .map(|i| self.lifecycle_task(i, binding))
            .collect()
    }

    /// Runs a module's lifecycle hooks in this task; the first failure fails it.
    fn run_lifecycle(&self, owner: Owner, binding: BindingType) -> Result<(), String> {
        for i in self.lifecycle_hooks(owner, binding) {
            self.runner
                .run_hook(&self.lifecycle_task(i, binding), "main")?;
        }
        Ok(())
    }

    // ---- the ConfigMap ----------------------------------------------------------

    /// The ConfigMap as the watch holds it now, compared with the applied one.
    /// A bad ConfigMap changes nothing; a good one is applied and reacted to.
    fn configmap_changed(&self) -> Vec<Task> {
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
    fn check_config(&self, config: &KubeConfig) -> Result<(), String> {
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

/// Whether helm stores releases in Secrets (its default), which we then read ourselves.
fn secrets_driver() -> bool {
    let driver = std::env::var("HELM_DRIVER").unwrap_or_default();
    matches!(driver.as_str(), "" | "secret" | "secrets")
}

fn hash(text: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}
