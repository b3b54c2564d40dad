//! Writing to ModuleSettings objects while the engine runs: the `status` after a
//! module's run, failure or delete and after a converge (`global`), and the
//! `spec.settings` a hook's config patch changed.
//!
//! A status write never fails the run it reports: a refused write is logged and
//! the next run writes again. Only modules whose configuration comes from an
//! object get a status (a module configured by the ConfigMap alone has none to
//! write to). Runs on the queue thread of the run it reports, after the run.

use crate::addon::config::settings::status::{self, Facts, Outcome, Phase};
use crate::addon::config::settings::{KIND, SettingsError, resource, spec::GLOBAL};
use crate::addon::engine::AddonHandler;
use crate::kube::{Client, Patch, PatchParams};
use crate::log;
use serde_json::{Value, json};

/// How many times a spec write is tried while others write the object.
const WRITE_ATTEMPTS: usize = 5;

impl AddonHandler {
    /// Records where module `m`'s run is: a failure from now on is this phase's.
    pub(crate) fn note_phase(&self, m: usize, phase: Phase) {
        if let Some(rt) = &self.shared.settings {
            let mut phases = rt.phases.lock().unwrap_or_else(|p| p.into_inner());
            phases.insert(m, phase);
        }
    }

    /// The status after module `m`'s run: converged, or failed with `error`.
    pub(crate) fn report_run(&self, m: usize, error: Option<&str>) {
        let Some(rt) = &self.shared.settings else {
            return;
        };
        let phase = {
            let mut phases = rt.phases.lock().unwrap_or_else(|p| p.into_inner());
            phases.remove(&m).unwrap_or(Phase::Startup)
        };
        let layout = self.shared.layout();
        let Some(module) = layout.modules.get(m) else {
            return;
        };
        if !self
            .shared
            .lock()
            .config
            .resources
            .contains_key(&module.key)
        {
            return; // Configured by the ConfigMap alone: no object to write to.
        }
        let outcome = match error {
            Some(e) => Outcome::Failed {
                phase,
                error: e.to_string(),
            },
            None => Outcome::Converged {
                revision: self.revision(&module.name, module.has_chart),
                at: status::now(),
            },
        };
        self.report(&module.name, &module.key, Some(m), outcome);
    }

    /// The status after module `m` was disabled (its release deleted).
    pub(crate) fn report_deleted(&self, m: usize) {
        if self.shared.settings.is_none() {
            return;
        }
        if let Some(module) = self.shared.layout().modules.get(m) {
            self.report(&module.name, &module.key, Some(m), Outcome::Disabled);
        }
    }

    /// The status of `global` after a converge finished.
    pub(crate) fn report_converged(&self) {
        if self.shared.settings.is_none() {
            return;
        }
        let at = status::now();
        let outcome = Outcome::Converged { revision: None, at };
        self.report(GLOBAL, GLOBAL, None, outcome);
    }

    /// The release's last revision, read from helm's Secrets (no helm process).
    fn revision(&self, name: &str, has_chart: bool) -> Option<u64> {
        if !has_chart {
            return None;
        }
        let s = &self.shared;
        match crate::addon::release::helm::release_from_secrets(&s.bookkeeping, &s.namespace, name)
        {
            Ok(release) => release.map(|r| r.revision),
            Err(e) => {
                log::warn(
                    "release revision unknown for the module's status",
                    &[("module", name), ("error", &e.to_string())],
                );
                None
            }
        }
    }

    /// Writes the status of object `name` (values key `key`, module `m`), if the
    /// configuration comes from one.
    fn report(&self, name: &str, key: &str, m: Option<usize>, outcome: Outcome) {
        let Some(rt) = &self.shared.settings else {
            return;
        };
        let facts = {
            let st = self.shared.lock();
            let Some(generation) = st.config.resources.get(key).copied() else {
                return;
            };
            let (enabled, checksum) = match m {
                Some(m) => (st.lifecycle.is_enabled(m), st.module_checksum(m)),
                None => (true, st.global_checksum()),
            };
            Facts {
                generation,
                enabled,
                checksum,
                outcome,
            }
        };
        // Not held across the write: parallel runs of other modules write theirs.
        let prev = {
            let written = rt.written.lock().unwrap_or_else(|p| p.into_inner());
            written.get(name).cloned()
        };
        let new = status::build(prev.as_ref(), &facts, &status::now());
        match write_status(&rt.client, name, &new) {
            Ok(()) => {
                let mut written = rt.written.lock().unwrap_or_else(|p| p.into_inner());
                written.insert(name.to_string(), new);
            }
            Err(e) => log::warn(
                "cannot write the status of the module's settings object",
                &[("module", name), ("error", &e.to_string())],
            ),
        }
    }
}

/// Merge-patches the status subresource of object `name`.
fn write_status(client: &Client, name: &str, status: &Value) -> Result<(), SettingsError> {
    let api = client.api(&resource(), None);
    let patch = Patch::Merge(json!({ "status": status }));
    api.patch_subresource("status", name, &patch, &PatchParams::default())
        .map(drop)
        .map_err(|error| SettingsError::Kube {
            name: name.to_string(),
            what: "writing status",
            error: Box::new(error),
        })
}

/// Writes `section` as `spec.settings` of object `name` (a hook's config patch):
/// get, change, update; a conflict retries from the get.
pub(crate) fn write_settings(
    client: &Client,
    name: &str,
    section: &Value,
) -> Result<(), SettingsError> {
    let api = client.api(&resource(), None);
    let fail = |what, error| SettingsError::Kube {
        name: name.to_string(),
        what,
        error: Box::new(error),
    };
    for _ in 0..WRITE_ATTEMPTS {
        let mut obj = api.get(name).map_err(|e| fail("reading", e))?;
        let spec = obj
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut);
        match spec {
            Some(spec) => spec.insert("settings".into(), section.clone()),
            None => {
                return Err(SettingsError::Other(format!(
                    "{KIND} {name}: spec is not an object"
                )));
            }
        };
        match api.replace(name, &obj) {
            Ok(_) => {
                log::info(
                    "config values saved to the module's settings object",
                    &[("kind", KIND), ("name", name)],
                );
                return Ok(());
            }
            Err(e) if e.status_code() == Some(409) => continue,
            Err(e) => return Err(fail("writing spec.settings", e)),
        }
    }
    Err(SettingsError::Conflict {
        name: name.to_string(),
    })
}
