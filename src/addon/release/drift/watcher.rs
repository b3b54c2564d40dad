//! The drift watcher thread: watches every object of every running module's
//! release (one reflector thread per kind and namespace, started and stopped as
//! releases change) and compares each event's object with the release's manifest
//! at once ([`super::compare`]), so drift is seen as it happens and at startup, not
//! at a resync. What it sees steps the [`Tracker`]; a correction goes to the
//! lifecycle as a `ReleaseDrift` input (a module run that upgrades the release).
//!
//! Module runs tell it when a release changed ([`Notice`]): it then reads the
//! release's manifest again and looks at the module's objects anew. Objects of a
//! module that is running, queued or in a converge are not judged yet: the upgrade
//! under way is writing them; they are judged once the module is idle.

use super::compare::{self, Difference};
use super::managers::managers_of;
use super::tracker::{Action, Tracker};
use super::{EVENT, Mode};
use crate::addon::release::helm;
use crate::addon::state::Shared;
use crate::kube::Cache;
use crate::kube::reflector::{Event, Object, ReflectorHandle, WatchParams};
use crate::kube::{Client, Patch, PatchParams};
use crate::log;
use crossbeam_channel::{Receiver, Sender, select};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often objects deferred while their module was busy are looked at again.
const DEFERRED_CHECK: Duration = Duration::from_secs(1);

/// What module runs tell the watcher.
#[derive(Debug, Clone)]
pub(crate) enum Notice {
    /// Module `module`'s helm phase ended (`ok`: without error).
    Released { module: usize, ok: bool },
    /// Module `module` was deleted.
    Deleted { module: usize },
    /// A reload read module `module`'s `drift.yaml` anew.
    Settings {
        module: usize,
        settings: crate::addon::modules::drift_settings::Settings,
    },
}

/// One drifted object as the debug CLI shows it.
#[derive(Debug, Clone)]
pub(crate) struct Drifted {
    pub(crate) object: String,
    pub(crate) differences: Vec<Difference>,
    pub(crate) managers: Vec<Vec<String>>,
    pub(crate) corrections: u32,
    pub(crate) refused: Option<String>,
}

/// Per module name, its drifted objects (the debug CLI's `module drift`).
pub(crate) type DriftReport = Arc<Mutex<BTreeMap<String, Vec<Drifted>>>>;

/// (apiVersion, kind, namespace or "" for cluster scope): one reflector each.
type Group = (String, String, String);

/// An object of a release's manifest.
struct Desired {
    module: usize,
    group: Group,
    object: Value,
}

/// The watcher's state; [`DriftWatcher::run`] is its thread.
pub(in crate::addon) struct DriftWatcher {
    shared: Arc<Shared>,
    client: Client,
    /// `--drift-mode`.
    mode: Mode,
    /// How often every release is read again even without a notice.
    period: Duration,
    notices: Receiver<Notice>,
    report: DriftReport,
    events_tx: Sender<(Group, Event)>,
    events: Receiver<(Group, Event)>,
    reflectors: HashMap<Group, ReflectorHandle>,
    /// By `ns/Kind/name`.
    desired: BTreeMap<String, Desired>,
    /// Modules whose `drift.yaml` a reload read anew (the layout keeps the first).
    settings: HashMap<usize, crate::addon::modules::drift_settings::Settings>,
    /// Per module, the release revision `desired` holds the objects of.
    revisions: HashMap<usize, u64>,
    /// The last text of every desired object seen (the reflectors keep keys only,
    /// so objects of the same kinds that no release holds are never kept).
    live: HashMap<String, Arc<str>>,
    /// Objects seen while their module was running, queued or in a converge: judged
    /// once it is idle (looked at every second meanwhile).
    deferred: std::collections::BTreeSet<String>,
    /// Groups whose watch failed since it last listed (logged once each).
    failing: std::collections::HashSet<Group>,
    tracker: Tracker,
}

impl DriftWatcher {
    pub(in crate::addon) fn new(
        shared: Arc<Shared>,
        client: Client,
        mode: Mode,
        period: Duration,
        notices: Receiver<Notice>,
        report: DriftReport,
    ) -> DriftWatcher {
        let (events_tx, events) = crossbeam_channel::unbounded();
        DriftWatcher {
            shared,
            client,
            mode,
            period,
            notices,
            report,
            events_tx,
            events,
            reflectors: HashMap::new(),
            desired: BTreeMap::new(),
            revisions: HashMap::new(),
            settings: HashMap::new(),
            live: HashMap::new(),
            failing: Default::default(),
            deferred: Default::default(),
            tracker: Tracker::default(),
        }
    }

    /// The thread body, until `stop` closes.
    pub(in crate::addon) fn run(mut self, stop: Receiver<()>) {
        let mut next_refresh = Instant::now() + self.period;
        loop {
            let now = Instant::now();
            let mut wake = self
                .tracker
                .next_due()
                .map_or(next_refresh, |t| t.min(next_refresh));
            if !self.deferred.is_empty() {
                wake = wake.min(now + DEFERRED_CHECK);
            }
            let timeout = wake.saturating_duration_since(now);
            select! {
                recv(stop) -> _ => break,
                recv(self.notices) -> notice => match notice {
                    Ok(notice) => self.notice(notice),
                    Err(_) => break,
                },
                recv(self.events) -> event => {
                    if let Ok((group, event)) = event {
                        self.event(&group, event);
                    }
                }
                default(timeout) => {}
            }
            let now = Instant::now();
            if now >= next_refresh {
                next_refresh = now + self.period;
                for m in 0..self.shared.layout().modules.len() {
                    self.refresh(m);
                }
            }
            for key in self.tracker.due(now) {
                self.judge(&key);
            }
            for key in std::mem::take(&mut self.deferred) {
                self.judge(&key);
            }
        }
        // Asked to stop, not waited for: a reflector inside a long watch read ends
        // on its own, and must not hold up the operator's shutdown meanwhile.
        for (_, handle) in self.reflectors.drain() {
            handle.stop();
        }
    }

    fn notice(&mut self, notice: Notice) {
        match notice {
            Notice::Released { module, ok } => {
                let name = self.shared.layout().modules[module].name.clone();
                for key in self.tracker.run_done(module, ok, Instant::now()) {
                    (self.shared.metrics.module_drift_correction_failures_total)
                        .with_label_values(&[&name, kind_of(&key), "failed"])
                        .inc();
                }
                self.refresh(module);
            }
            Notice::Deleted { module } => self.drop_module(module),
            Notice::Settings { module, settings } => {
                self.settings.insert(module, settings);
                self.refresh(module);
            }
        }
        self.publish();
    }

    /// Reads module `m`'s release manifest again and judges its watched objects.
    fn refresh(&mut self, m: usize) {
        let layout = self.shared.layout();
        // A module index the layout has not (yet) is nothing to watch.
        let Some(module) = layout.modules.get(m) else {
            return;
        };
        let (name, key) = (module.name.clone(), module.key.clone());
        let watched = {
            let st = self.shared.lock();
            let life = &st.lifecycle;
            module.has_chart
                && life.is_enabled(m)
                && life.is_started(m)
                && !st.config.no_resource_reconciliation(&key)
                && self.mode_of(m) != Mode::Off
        };
        if !watched {
            self.drop_module(m);
            return;
        }
        let objects = match self.manifest_objects(m, &name) {
            Ok(Some(objects)) => objects,
            // The revision read last: its objects are known already.
            Ok(None) => return self.judge_cached(m),
            Err(e) => {
                log::warn(
                    "drift: cannot read the release's manifest; its objects are not judged",
                    &[("module", &name), ("error", &e.to_string())],
                );
                return;
            }
        };
        self.desired.retain(|_, d| d.module != m);
        for object in objects {
            if let Some((key, group)) = self.locate(&name, &object) {
                self.desired.insert(
                    key,
                    Desired {
                        module: m,
                        group,
                        object,
                    },
                );
            }
        }
        self.follow_groups();
        self.judge_cached(m);
    }

    /// The objects of the deployed revision of module `m`'s release `name` (none
    /// when it is absent or not deployed: auto-heal deals with those); `None` when
    /// that revision is the one read last (its record is not decoded again).
    fn manifest_objects(
        &mut self,
        m: usize,
        name: &str,
    ) -> Result<Option<Vec<Value>>, crate::addon::Error> {
        use crate::addon::Error;
        let ns = &self.shared.namespace;
        let selector = format!(",name={name}");
        let releases =
            helm::releases_from_secrets(&self.client, ns, &selector).map_err(Error::Release)?;
        let Some(release) = releases.get(name).filter(|r| r.status == "deployed") else {
            self.revisions.remove(&m);
            return Ok(Some(Vec::new()));
        };
        if self.revisions.get(&m) == Some(&release.revision) {
            return Ok(None);
        }
        let stored = release.stored.as_ref();
        let record = crate::addon::release::read_record(&self.shared, name, EVENT, stored)?;
        let docs =
            crate::addon::release::yaml11::documents(&record.manifest).map_err(Error::Manifest)?;
        self.revisions.insert(m, release.revision);
        Ok(Some(docs.into_iter().filter(|d| d.is_object()).collect()))
    }

    /// The key and reflector group of a manifest object; `None` (logged) when its
    /// kind is unknown to the server.
    fn locate(&self, module: &str, object: &Value) -> Option<(String, Group)> {
        let api_version = object["apiVersion"].as_str()?;
        let kind = object["kind"].as_str()?;
        let name = object["metadata"]["name"].as_str()?;
        let context = format!("drift watch of module {module}");
        let resource = match self.client.resolve(api_version, kind, &context) {
            Ok(r) => r,
            Err(e) => {
                log::warn("drift: object not watched", &[("error", &e.to_string())]);
                return None;
            }
        };
        let ns = match resource.namespaced {
            true => object["metadata"]["namespace"]
                .as_str()
                .unwrap_or(&self.shared.namespace)
                .to_string(),
            false => String::new(),
        };
        let key = format!("{ns}/{kind}/{name}");
        Some((key, (api_version.to_string(), kind.to_string(), ns)))
    }

    /// Starts a reflector for every group with desired objects; stops the rest.
    fn follow_groups(&mut self) {
        let needed: std::collections::HashSet<&Group> =
            self.desired.values().map(|d| &d.group).collect();
        self.reflectors.retain(|g, _| needed.contains(g));
        self.failing.retain(|g| needed.contains(g));
        for group in needed {
            if self.reflectors.contains_key(group) {
                continue;
            }
            let (api_version, kind, ns) = group;
            let Ok(resource) = self.client.resolve(api_version, kind, "drift watch") else {
                continue;
            };
            let params = WatchParams {
                namespace: (!ns.is_empty()).then(|| ns.clone()),
                cache: Cache::Keys,
                ..Default::default()
            };
            let (tx, tagged) = (self.events_tx.clone(), group.clone());
            let sink = move |e| tx.send((tagged.clone(), e)).is_ok();
            let handle = self.client.watch_with_sink(&resource, params, sink);
            self.reflectors.insert(group.clone(), handle);
        }
    }

    /// Judges module `m`'s objects already seen.
    fn judge_cached(&mut self, m: usize) {
        let keys: Vec<String> = self
            .desired
            .iter()
            .filter(|(k, d)| d.module == m && self.live.contains_key(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.judge(&key);
        }
    }

    fn event(&mut self, group: &Group, event: Event) {
        let objects = match event {
            Event::Synced(objects) | Event::Relisted(objects, _) => {
                self.failing.remove(group);
                objects
            }
            Event::Added(o) | Event::Modified(o) => vec![o],
            Event::Deleted(o) => {
                // Auto-heal re-creates it; it is no drift of a field.
                let key = key_of(group, &o);
                self.live.remove(&key);
                self.observe(&key, Vec::new());
                return;
            }
            Event::WatchError { message, .. } => {
                if self.failing.insert(group.clone()) {
                    log::warn(
                        "drift: cannot watch a kind of the releases' objects (it needs list and watch); retrying",
                        &[
                            ("apiVersion", &group.0),
                            ("kind", &group.1),
                            ("namespace", &group.2),
                            ("error", &message),
                        ],
                    );
                }
                return;
            }
        };
        for object in objects {
            let key = key_of(group, &object);
            if self.desired.contains_key(&key) {
                self.live.insert(key.clone(), object.json);
                self.judge(&key);
            }
        }
        self.publish();
    }

    /// Compares the last seen object `key` with its manifest object and steps the
    /// tracker.
    fn judge(&mut self, key: &str) {
        let (Some(desired), Some(text)) = (self.desired.get(key), self.live.get(key)) else {
            return;
        };
        let live: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let live = &live;
        let m = desired.module;
        if !self.shared.lock().lifecycle.idle(m) {
            self.deferred.insert(key.to_string());
            return;
        }
        let settings = self.settings_of(m);
        let kind = desired.object["kind"].as_str().unwrap_or("");
        let name = desired.object["metadata"]["name"].as_str().unwrap_or("");
        let ignored = settings.ignored(kind, name);
        let mut found = compare::differences(&desired.object, live, &ignored);
        found.retain(|d| {
            let newest = managers_of(live, &d.path);
            let owner = newest
                .first()
                .and_then(|m| m.split(' ').next())
                .unwrap_or("");
            !settings.owned_by_other(owner)
        });
        self.observe(key, found);
    }

    fn observe(&mut self, key: &str, found: Vec<Difference>) {
        let Some(m) = self.desired.get(key).map(|d| d.module) else {
            return;
        };
        let mode = self.mode_of(m);
        for action in self.tracker.observe(key, m, mode, found, Instant::now()) {
            self.act(action);
        }
    }

    fn act(&mut self, action: Action) {
        let module = |m: usize| self.shared.layout().modules[m].name.clone();
        let metrics = &self.shared.metrics;
        match action {
            Action::Report { key, module: m } => {
                let (paths, managers) = self.describe(&key);
                log::warn(
                    "release object drifted from its manifest",
                    &[
                        ("module", &module(m)),
                        ("object", &key),
                        ("fields", &paths),
                        ("set by", &managers),
                        ("mode", self.mode_of(m).as_str()),
                    ],
                );
            }
            Action::Correct { key, module: m } => self.correct(&key, m),
            Action::Fighting {
                key,
                module: m,
                corrections,
                until,
            } => {
                let (paths, managers) = self.describe(&key);
                let wait = format!("{:.0?}", until.saturating_duration_since(Instant::now()));
                log::warn(
                    "drift came back after its correction: another writer changes these fields; backing off",
                    &[
                        ("module", &module(m)),
                        ("object", &key),
                        ("fields", &paths),
                        ("set by", &managers),
                        ("corrections", &corrections.to_string()),
                        ("next try in", &wait),
                    ],
                );
                (metrics.module_drift_correction_failures_total)
                    .with_label_values(&[&module(m), kind_of(&key), "fighting"])
                    .inc();
            }
            Action::Cleared { key, module: m } => {
                log::info(
                    "release object matches its manifest again",
                    &[("module", &module(m)), ("object", &key)],
                );
            }
        }
    }

    /// Dry-runs the manifest's object (server-side apply, forced) and, when the
    /// server takes it, asks the lifecycle for a correcting run.
    fn correct(&mut self, key: &str, m: usize) {
        let name = self.shared.layout().modules[m].name.clone();
        let metrics = &self.shared.metrics;
        if let Err(refusal) = self.dry_run(key).map_err(|e| e.to_string()) {
            log::error(
                "drift cannot be corrected: the API server refuses the manifest's object (delete the object to have it re-created)",
                &[("module", &name), ("object", key), ("error", &refusal)],
            );
            (metrics.module_drift_correction_failures_total)
                .with_label_values(&[&name, kind_of(key), "refused"])
                .inc();
            self.tracker.refused(key, m, refusal);
            return;
        }
        log::info(
            "correcting drift with a helm upgrade",
            &[("module", &name), ("object", key)],
        );
        (metrics.module_drift_corrections_total)
            .with_label_values(&[&name, kind_of(key)])
            .inc();
        self.shared.release_needs_run(m, EVENT);
    }

    /// `Err` when the server refuses the manifest's object as an update (an
    /// immutable field, a failed validation); other failures let it through.
    fn dry_run(&self, key: &str) -> Result<(), crate::kube::KubeError> {
        let Some(desired) = self.desired.get(key) else {
            return Ok(());
        };
        let (api_version, kind, ns) = &desired.group;
        let Ok(resource) = self.client.resolve(api_version, kind, "drift dry run") else {
            return Ok(());
        };
        let name = desired.object["metadata"]["name"].as_str().unwrap_or("");
        let params = PatchParams {
            field_manager: Some("addon-operator-drift-check".into()),
            force: true,
            dry_run: true,
        };
        let api = self
            .client
            .api(&resource, (!ns.is_empty()).then_some(ns.as_str()));
        match api.patch(name, &Patch::Apply(desired.object.clone()), &params) {
            Err(e) if matches!(e.status_code(), Some(400 | 403 | 422)) => Err(e),
            _ => Ok(()),
        }
    }

    /// `path: want → live` of each difference, and who set each field.
    fn describe(&self, key: &str) -> (String, String) {
        let Some((_, entry)) = self.tracker.drifted().find(|(k, _)| *k == key) else {
            return (String::new(), String::new());
        };
        let live = self.live_value(key);
        let paths: Vec<String> = entry
            .differences
            .iter()
            .map(|d| format!("{}: {} -> {}", d.path, d.want, d.live))
            .collect();
        let mut managers: Vec<String> = entry
            .differences
            .iter()
            .filter_map(|d| managers_of(&live, &d.path).into_iter().next())
            .collect();
        managers.dedup();
        (paths.join("; "), managers.join("; "))
    }

    fn drop_module(&mut self, m: usize) {
        self.desired.retain(|_, d| d.module != m);
        self.revisions.remove(&m);
        self.tracker.forget(m);
        self.live.retain(|k, _| self.desired.contains_key(k));
        self.follow_groups();
    }

    /// The last seen object `key` (null when none was seen).
    fn live_value(&self, key: &str) -> Value {
        let text = self.live.get(key);
        text.and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null)
    }

    /// Module `m`'s drift settings: a reload's, or discovery's.
    fn settings_of(&self, m: usize) -> crate::addon::modules::drift_settings::Settings {
        match self.settings.get(&m) {
            Some(s) => s.clone(),
            None => (self.shared.layout().modules.get(m))
                .map(|module| module.drift.clone())
                .unwrap_or_default(),
        }
    }

    fn mode_of(&self, m: usize) -> Mode {
        self.settings_of(m).mode.unwrap_or(self.mode)
    }

    /// The debug CLI's view and the drifted-objects gauge, from the tracker.
    fn publish(&self) {
        let mut report: BTreeMap<String, Vec<Drifted>> = BTreeMap::new();
        let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
        for (key, entry) in self.tracker.drifted() {
            let module = self.shared.layout().modules[entry.module].name.clone();
            *counts
                .entry((module.clone(), kind_of(key).to_string()))
                .or_default() += 1;
            let live = self.live_value(key);
            report.entry(module).or_default().push(Drifted {
                object: key.clone(),
                managers: entry
                    .differences
                    .iter()
                    .map(|d| managers_of(&live, &d.path))
                    .collect(),
                differences: entry.differences.clone(),
                corrections: entry.corrections,
                refused: entry.refused.clone(),
            });
        }
        let gauge = &self.shared.metrics.module_drift_objects;
        gauge.reset();
        for ((module, kind), n) in counts {
            gauge.with_label_values(&[&module, &kind]).set(n as f64);
        }
        *self.report.lock().unwrap_or_else(|p| p.into_inner()) = report;
    }
}

/// `ns/Kind/name` of a watched object of `group`.
fn key_of(group: &Group, object: &Object) -> String {
    let meta = &object.meta;
    format!("{}/{}/{}", meta.namespace, group.1, meta.name)
}

/// The kind in an `ns/Kind/name` key.
fn kind_of(key: &str) -> &str {
    key.split('/').nth(1).unwrap_or("")
}
