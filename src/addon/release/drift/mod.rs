//! Drift correction: a release's objects kept as its manifest declares them. Beyond
//! flant (addon-operator#518): flant re-creates a deleted object, but a
//! `kubectl edit` of one stays forever.
//!
//! - [`compare`]: which differences between manifest and live object are drift.
//! - [`managers`]: who set a drifted field, from `managedFields`.
//! - [`tracker`]: each object's drift lifecycle (report, correct, back off).
//! - [`watcher`]: the thread that watches the release's objects and steps the tracker.
//!
//! Three modes, `--drift-mode` for every module and `drift.yaml` in a module's
//! directory for one (read at discovery: `modules/drift_settings.rs`): `off`,
//! `warn` (the default: log and count) and `correct` (a helm upgrade of the same
//! release, queued as `HelmReleaseDriftDetected`).

pub(crate) mod compare;
mod managers;
mod tracker;
pub(crate) mod watcher;

pub(crate) use crate::addon::modules::drift_settings::Mode;

/// The run event of a correction: the module run upgrades its release even when
/// its values did not change, and without stopping an identical render.
pub(crate) const EVENT: &str = "HelmReleaseDriftDetected";
