//! Module settings as custom resources (`--module-settings-resources`, off by
//! default; docs/module-settings.md): one cluster-scoped `ModuleSettings` object
//! of the group `addon-operator-rs.io` per module, named as the module, and one
//! named `global`, side by side with the ConfigMap.
//!
//! # Layout
//! - this file: the group and kind, the CRD (installed at bind, before any watch),
//!   the bindings added to the operator's internal ConfigMap hook (the objects'
//!   watch and the validating webhook), and [`Runtime`], what the engine keeps.
//! - `spec`: an object's spec, the precedence rule over the ConfigMap, and the
//!   export's conversions (pure).
//! - `admission`: the webhook's check against the module's config schema.
//! - `status`: the status the operator writes (pure); `report`: writing it after
//!   module runs, deletes and converges, and hooks' config patches written back.
//! - `export`: the debug command that moves settings between the ConfigMap and
//!   the objects.
//!
//! The objects reach the engine as the ConfigMap does: a second kubernetes binding
//! of the internal ConfigMap hook, whose runs the engine handles by reading both
//! the ConfigMap and the objects (`config_changes.rs`).

pub(crate) mod admission;
pub(crate) mod export;
pub(crate) mod spec;
pub(crate) mod status;

use crate::hook::Hook;
use crate::hook::config::{AdmissionBinding, KubernetesBinding, WatchEventType};
use crate::kube::{Client, KubeError, Resource};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// The API group: a domain that names this project, so the objects cannot be
/// taken for Deckhouse's `ModuleConfig` (`deckhouse.io`), whose semantics differ.
pub(crate) const GROUP: &str = "addon-operator-rs.io";
pub(crate) const VERSION: &str = "v1alpha1";
pub(crate) const KIND: &str = "ModuleSettings";
pub(crate) const PLURAL: &str = "modulesettings";
/// The CRD's name (`<plural>.<group>`).
pub(crate) const CRD_NAME: &str = "modulesettings.addon-operator-rs.io";
/// Name of the webhook binding (and of its entry in the configuration).
const WEBHOOK_NAME: &str = "modulesettings.addon-operator-rs.io";
/// How long bind waits for the CRD to be served.
pub(crate) const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a ModuleSettings object or the CRD could not be read or written.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum SettingsError {
    /// The CRD could not be installed or was not served in time.
    Crd(String),
    /// The API server refused a request about object `name` (`what` it was).
    Kube {
        name: String,
        what: &'static str,
        error: Box<KubeError>,
    },
    /// A write lost every race against other writers.
    Conflict { name: String },
    /// An object that cannot be read as settings.
    Spec(spec::SpecError),
    /// Anything else (the message says what and where it stopped).
    Other(String),
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsError::Crd(e) => write!(f, "CRD {CRD_NAME}: {e}"),
            SettingsError::Kube { name, what, error } => {
                write!(f, "{KIND} {name}: {what}: {error}")?;
                if error.status_code() == Some(403) {
                    write!(
                        f,
                        " (grant the operator's ServiceAccount get, list, watch, create, \
                         update and delete on {PLURAL}.{GROUP} and update on {PLURAL}/status)"
                    )?;
                }
                Ok(())
            }
            SettingsError::Conflict { name } => write!(
                f,
                "{KIND} {name}: still conflicting after 5 tries (another writer keeps changing it)"
            ),
            SettingsError::Spec(e) => e.fmt(f),
            SettingsError::Other(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for SettingsError {}

impl SettingsError {
    /// The kind of failure: the CRD not served yet and lost races are
    /// transient, a refused request is as its API call says, an object that is
    /// not settings is invalid input.
    pub(crate) fn cause(&self) -> crate::queue::Cause {
        use crate::queue::Cause;
        match self {
            SettingsError::Crd(_) | SettingsError::Conflict { .. } => Cause::Transient,
            SettingsError::Kube { error, .. } => Cause::of_kube(error),
            SettingsError::Spec(_) => Cause::InvalidInput,
            SettingsError::Other(_) => Cause::Internal,
        }
    }
}

/// The ModuleSettings resource.
pub(crate) fn resource() -> Resource {
    Resource {
        group: GROUP.into(),
        version: VERSION.into(),
        resource: PLURAL.into(),
        kind: KIND.into(),
        namespaced: false,
    }
}

/// The CRD the operator installs: the spec's schema (settings are checked by the
/// webhook against each module's own schema), the status subresource and the
/// printer columns of `kubectl get modulesettings`.
pub(crate) fn crd() -> Value {
    let spec_schema = json!({
        "type": "object",
        "properties": {
            "enabled": {"type": "boolean", "description": "Enables or disables the module; absent: its default (values.yaml, enabled script)."},
            "settings": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "description": "The module's config values (its ConfigMap section), checked against its openapi/config-values.yaml."},
            "maintenance": {"type": "string", "enum": ["", spec::NO_RESOURCE_RECONCILIATION],
                "description": "NoResourceReconciliation: helm leaves the release alone."},
        },
    });
    let column =
        |name: &str, kind: &str, path: &str| json!({"name": name, "type": kind, "jsonPath": path});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "labels": {"heritage": "addon-operator"}},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"kind": KIND, "listKind": format!("{KIND}List"), "plural": PLURAL,
                      "singular": "modulesetting", "shortNames": ["modset"]},
            "versions": [{
                "name": VERSION, "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    column("Enabled", "boolean", ".status.enabled"),
                    column("State", "string", ".status.state"),
                    column("Revision", "integer", ".status.revision"),
                    column("Converged", "date", ".status.lastConvergeTime"),
                    column("Error", "string", ".status.lastError"),
                    column("Age", "date", ".metadata.creationTimestamp"),
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "Settings of one addon-operator module (named as the module) or of global.",
                    "properties": {
                        "spec": spec_schema,
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    })
}

/// Every ModuleSettings object, read once at startup.
pub(crate) fn list(client: &Client) -> Result<Vec<spec::SettingsObject>, SettingsError> {
    let api = client.api(&resource(), None);
    let list = api
        .list_all(&Default::default())
        .map_err(|e| SettingsError::Kube {
            name: "*".into(),
            what: "list",
            error: Box::new(e),
        })?;
    list.items
        .iter()
        .map(|o| spec::SettingsObject::from_object(o).map_err(SettingsError::Spec))
        .collect()
}

/// Index of the ModuleSettings binding in the ConfigMap's internal hook (the
/// ConfigMap's own is 0).
pub(crate) const WATCH_BINDING: usize = 1;

/// Adds to the operator's internal ConfigMap hook a kubernetes binding on every
/// ModuleSettings object (its runs are the engine's, like the ConfigMap's) and
/// the validating binding the operator answers itself ([`admission::Validator`]),
/// refusing when it cannot answer (`failurePolicy: Fail`): a bad setting never
/// reaches the store. One hook for both watches, so its Enable lists both before
/// the first Synchronization run reads them together.
pub(crate) fn extend_hook(hook: &mut Hook) {
    let watch = KubernetesBinding {
        name: "module-settings".into(),
        api_version: Some(format!("{GROUP}/{VERSION}")),
        kind: KIND.into(),
        execute_hook_on_event: WatchEventType::ALL.to_vec(),
        execute_hook_on_synchronization: true,
        wait_for_synchronization: true,
        keep_full_objects_in_memory: true,
        name_selector: None,
        label_selector: None,
        field_selector: Vec::new(),
        namespace: None,
        jq_filter: Some(WATCH_FILTER.into()),
        allow_failure: false,
        include_snapshots_from: Vec::new(),
        queue: crate::startup::MAIN_QUEUE.into(),
        group: None,
        resynchronization_period: None,
    };
    let validate = AdmissionBinding {
        name: WEBHOOK_NAME.into(),
        group: None,
        include_snapshots_from: Vec::new(),
        rules: vec![json!({
            "apiGroups": [GROUP], "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"], "resources": [PLURAL], "scope": "Cluster",
        })],
        failure_policy: Some("Fail".into()),
        side_effects: "None".into(),
        timeout_seconds: 10,
        match_conditions: Vec::new(),
        label_selector: None,
        namespace_label_selector: None,
    };
    hook.config.kubernetes.push(watch);
    hook.jq_filters.push(watch_filter());
    hook.config.validating.push(validate);
}

/// What of an object the watch compares: its spec and generation, so the
/// operator's own status writes are no event.
const WATCH_FILTER: &str = "{generation: .metadata.generation, spec: .spec}";

/// [`WATCH_FILTER`], compiled.
fn watch_filter() -> Option<std::sync::Arc<crate::jq::JqFilter>> {
    crate::jq::JqFilter::compile(WATCH_FILTER, None, &[])
        .ok()
        .map(std::sync::Arc::new)
}

/// What the engine keeps of the objects while it runs.
pub(crate) struct Runtime {
    /// The operator's own client (status and spec writes).
    pub(crate) client: Client,
    /// The internal ConfigMap hook's index: its binding [`WATCH_BINDING`] holds
    /// the objects.
    pub(crate) hook: usize,
    /// The status written last, by object name (conditions keep their times).
    pub(crate) written: Mutex<HashMap<String, Value>>,
    /// Where each module's current run is (the `Error` condition's reason).
    pub(crate) phases: Mutex<HashMap<usize, status::Phase>>,
    /// The objects of no module and the modules whose ConfigMap keys an object
    /// sets aside, as last logged (logged again only when they change).
    pub(crate) reported: Mutex<Option<(Vec<String>, Vec<String>)>>,
}

impl Runtime {
    pub(crate) fn new(client: Client, hook: usize) -> Runtime {
        Runtime {
            client,
            hook,
            written: Default::default(),
            phases: Default::default(),
            reported: Default::default(),
        }
    }
}
