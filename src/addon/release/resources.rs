//! Release auto-healing (the resource monitor): one thread that, every check period,
//! looks at every running module's release and the objects its chart rendered, and
//! queues a `ModuleRun` when something is wrong:
//!
//! - the release's latest revision is not `deployed` (`HelmReleaseUnexpectedStatus`,
//!   `modules_helm_release_redeployed_total{module}`);
//! - a rendered object is gone from the cluster (`AbsentHelmResourcesDetected`,
//!   `modules_absent_resources_total{module,resource}`).
//!
//! A check costs one list of helm's release Secrets (each revision's manifest is read
//! from its Secret once, `helm get manifest` only when that record cannot be
//! decoded), and one list per kind and namespace of the
//! rendered objects (never one GET per object), on its own client
//! (`HELM_MONITOR_KUBE_CLIENT_QPS/_BURST`; the module runs' drift check shares it). Modules that are disabled, not started,
//! running, or already have a run queued are skipped, and so is every module while a
//! converge is on, so one problem queues one run.
//!
//! Each module is judged on its own: a release manifest that cannot be read, or a
//! kind that cannot be listed (its CRD deleted), is logged and counted
//! (`modules_resource_check_errors_total{module,kind}`) for the modules concerned,
//! and every other module and kind is still checked and healed.

use crate::addon::release::helm::{self, ListKey, ObjectRef};
use crate::addon::state::Shared;
use crate::kube::Client;
use crate::log;
use crossbeam_channel::Receiver;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the monitor knows of one module's release: the revision whose manifest
/// it read and the namespaced objects that manifest holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched {
    pub(crate) revision: u64,
    pub(crate) objects: Vec<ObjectRef>,
}

/// Per module name, what the monitor watches (the debug CLI shows it).
pub(crate) type WatchedModules = Arc<Mutex<BTreeMap<String, Watched>>>;

/// The monitor thread's state.
pub(crate) struct ResourceMonitor {
    pub(crate) shared: Arc<Shared>,
    pub(crate) client: Client,
    pub(crate) period: Duration,
    pub(crate) watched: WatchedModules,
}

impl ResourceMonitor {
    /// The thread body: a check every period until `stop` closes.
    pub(crate) fn run(self, stop: Receiver<()>) {
        loop {
            let wait = self.period + jitter(self.period);
            if !matches!(
                stop.recv_timeout(wait),
                Err(crossbeam_channel::RecvTimeoutError::Timeout)
            ) {
                return;
            }
            if let Err(e) = self.check() {
                log::error(
                    "resource monitor check failed",
                    &[("error", &e.to_string())],
                );
            }
        }
    }

    /// One check of every module that is up and idle.
    pub(crate) fn check(&self) -> Result<(), helm::ReleaseError> {
        let modules = self.idle_modules();
        if modules.is_empty() {
            return Ok(());
        }
        let ns = &self.shared.namespace;
        let releases = helm::releases_from_secrets(&self.client, ns, "")?;
        let mut objects: Vec<(usize, ObjectRef)> = Vec::new();
        for &(m, ref name) in &modules {
            match releases.get(name) {
                Some(r) if r.status == "deployed" => match self.objects_of(name, r) {
                    Ok(found) => objects.extend(found.into_iter().map(|o| (m, o))),
                    // This module is not checked this time; the others are.
                    Err(e) => log::error(
                        "resource monitor cannot read the release's manifest",
                        &[("module", name), ("error", &e.to_string())],
                    ),
                },
                other => {
                    let status = other.map_or("absent", |r| r.status.as_str());
                    log::warn(
                        "release is not deployed; module runs again",
                        &[("module", name), ("status", status)],
                    );
                    let metrics = &self.shared.metrics;
                    metrics
                        .modules_helm_release_redeployed_total
                        .with_label_values(&[name])
                        .inc();
                    self.queue_run(m, "HelmReleaseUnexpectedStatus");
                }
            }
        }
        let mut reported: BTreeSet<usize> = BTreeSet::new();
        for (m, obj) in self.missing(&objects) {
            if !reported.insert(m) {
                continue;
            }
            let name = &self.shared.layout().modules[m].name;
            let resource = format!(
                "{}/{}/{}",
                obj.namespace.as_deref().unwrap_or(ns),
                obj.kind,
                obj.name
            );
            log::warn(
                "rendered object is missing; module runs again",
                &[("module", name), ("resource", &resource)],
            );
            let metrics = &self.shared.metrics;
            metrics
                .modules_absent_resources_total
                .with_label_values(&[name, &resource])
                .inc();
            self.queue_run(m, "AbsentHelmResourcesDetected");
        }
        Ok(())
    }

    /// Enabled, started modules with a chart, not running and with no run queued;
    /// not those in maintenance (`<key>Maintenance: NoResourceReconciliation`).
    fn idle_modules(&self) -> Vec<(usize, String)> {
        let st = self.shared.lock();
        // A converge runs every module anyway.
        if st.lifecycle.converge_status().2 {
            return Vec::new();
        }
        let (layout, lifecycle) = (&self.shared.layout(), &st.lifecycle);
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for (m, module) in layout.modules.iter().enumerate() {
            let maintenance = st.config.no_resource_reconciliation(&module.key);
            if !(lifecycle.is_enabled(m) && lifecycle.is_started(m) && module.has_chart)
                || maintenance
            {
                watched.remove(&module.name);
                continue;
            }
            if lifecycle.idle(m) {
                out.push((m, module.name.clone()));
            }
        }
        out
    }

    /// The namespaced objects of a release revision (its manifest read once, from its
    /// storage Secret's record, or `helm get manifest` when that cannot be decoded).
    fn objects_of(
        &self,
        name: &str,
        release: &helm::Release,
    ) -> Result<Vec<ObjectRef>, crate::addon::Error> {
        let revision = release.revision;
        let known = {
            let watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
            watched
                .get(name)
                .filter(|w| w.revision == revision)
                .map(|w| w.objects.clone())
        };
        if let Some(objects) = known {
            return Ok(objects);
        }
        let stored = release.stored.as_ref();
        let record = crate::addon::release::read_record(&self.shared, name, "", stored)?;
        let objects =
            helm::manifest_objects(&record.manifest).map_err(crate::addon::Error::Release)?;
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        watched.insert(
            name.to_string(),
            Watched {
                revision,
                objects: objects.clone(),
            },
        );
        Ok(objects)
    }

    /// The objects not in the cluster: one list per kind and namespace. A list that
    /// fails (the kind's CRD deleted, no permission) is reported for each module
    /// with objects of that kind ([`Self::report_list_error`]); those objects are not
    /// judged this time, and every other list still is.
    fn missing(&self, objects: &[(usize, ObjectRef)]) -> Vec<(usize, ObjectRef)> {
        let mut groups: HashMap<ListKey, Vec<&(usize, ObjectRef)>> = HashMap::new();
        for entry in objects {
            let o = &entry.1;
            let ns = o
                .namespace
                .clone()
                .or_else(|| Some(self.shared.namespace.clone()));
            groups
                .entry((o.api_version.clone(), o.kind.clone(), ns))
                .or_default()
                .push(entry);
        }
        let mut missing = Vec::new();
        for ((api_version, kind, ns), entries) in groups {
            let names = match self.names_of(&api_version, &kind, ns) {
                Ok(names) => names,
                Err(e) => {
                    self.report_list_error(&entries, &api_version, &kind, &e.to_string());
                    continue;
                }
            };
            for (m, obj) in entries {
                if !names.contains(obj.name.as_str()) {
                    missing.push((*m, obj.clone()));
                }
            }
        }
        missing.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        missing
    }

    /// The names of the objects of one kind in `ns` (or cluster-wide).
    fn names_of(
        &self,
        api_version: &str,
        kind: &str,
        ns: Option<String>,
    ) -> Result<BTreeSet<String>, helm::ReleaseError> {
        let context = format!("resource monitor {api_version} {kind}");
        helm::object_names(&self.client, api_version, kind, ns.as_deref(), &context)
    }

    /// One error line and one `modules_resource_check_errors_total{module,kind}` per
    /// module whose objects of `kind` could not be listed.
    fn report_list_error(
        &self,
        entries: &[&(usize, ObjectRef)],
        api_version: &str,
        kind: &str,
        error: &str,
    ) {
        let modules: BTreeSet<usize> = entries.iter().map(|(m, _)| *m).collect();
        for m in modules {
            let name = &self.shared.layout().modules[m].name;
            log::error(
                "resource monitor cannot list a module's objects; its other kinds and other modules are still checked",
                &[
                    ("module", name),
                    ("apiVersion", api_version),
                    ("kind", kind),
                    ("error", error),
                ],
            );
            self.shared
                .metrics
                .modules_resource_check_errors_total
                .with_label_values(&[name, kind])
                .inc();
        }
    }

    /// Tells the lifecycle module `m`'s release drifted (it queues one run).
    fn queue_run(&self, m: usize, event: &str) {
        self.shared.release_needs_run(m, event);
    }
}

/// flant adds 0–59 s to its 4m30s period; periods under a minute get none.
fn jitter(period: Duration) -> Duration {
    if period < Duration::from_secs(60) {
        return Duration::ZERO;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_secs(u64::from(nanos % 60))
}
