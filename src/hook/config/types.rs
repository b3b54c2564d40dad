//! The typed hook configuration that `parse` produces: one struct per binding
//! type, with flant's defaults already applied. Everything downstream (queues,
//! scheduler, monitors, webhooks) reads these and never the raw `--config` text.

use std::fmt;
use std::time::Duration;

/// Which schema the hook's `--config` output followed.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigVersion {
    /// Legacy: no `configVersion` key (or our accepted explicit `v0`).
    V0,
    /// `configVersion: v1`.
    V1,
}

/// A hook's whole configuration after validation, conversion and group merge.
#[derive(Debug, Clone)]
pub struct HookConfig {
    pub version: ConfigVersion,
    /// `onStartup: ORDER`; `None` when the hook has no onStartup binding.
    pub on_startup: Option<f64>,
    pub schedule: Vec<ScheduleBinding>,
    /// v1 `kubernetes` bindings, or v0 `onKubernetesEvent` bindings converted.
    pub kubernetes: Vec<KubernetesBinding>,
    pub validating: Vec<AdmissionBinding>,
    pub mutating: Vec<AdmissionBinding>,
    pub conversion: Vec<ConversionBinding>,
    pub settings: Settings,
    /// addon-operator's lifecycle bindings (`beforeAll: ORDER`, ...); empty for
    /// shell-operator hooks, which may not have them.
    pub lifecycle: Lifecycle,
}

/// Which program a hook belongs to, deciding which top-level bindings it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    /// shell-operator's hooks: no lifecycle bindings.
    Shell,
    /// addon-operator's global hooks: `beforeAll`, `afterAll`.
    Global,
    /// addon-operator's module hooks: `beforeHelm`, `afterHelm`, `beforeDeleteHelm`,
    /// `afterDeleteHelm`.
    Module,
}

impl HookKind {
    /// The lifecycle binding keys this kind of hook may use.
    pub fn lifecycle_keys(self) -> &'static [&'static str] {
        match self {
            HookKind::Shell => &[],
            HookKind::Global => &["beforeAll", "afterAll"],
            HookKind::Module => &[
                "beforeHelm",
                "afterHelm",
                "beforeDeleteHelm",
                "afterDeleteHelm",
            ],
        }
    }
}

/// addon-operator's ordered lifecycle bindings: `ORDER` of each one the hook has.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lifecycle {
    pub before_all: Option<f64>,
    pub after_all: Option<f64>,
    pub before_helm: Option<f64>,
    pub after_helm: Option<f64>,
    /// flant's newer binding: runs just before `helm uninstall`.
    pub before_delete_helm: Option<f64>,
    pub after_delete_helm: Option<f64>,
}

impl Lifecycle {
    /// The order of the binding named `key` (`beforeAll`, `afterHelm`, ...), if set.
    pub fn order(&self, key: &str) -> Option<f64> {
        match key {
            "beforeAll" => self.before_all,
            "afterAll" => self.after_all,
            "beforeHelm" => self.before_helm,
            "afterHelm" => self.after_helm,
            "beforeDeleteHelm" => self.before_delete_helm,
            "afterDeleteHelm" => self.after_delete_helm,
            _ => None,
        }
    }

    fn slot(&mut self, key: &str) -> Option<&mut Option<f64>> {
        match key {
            "beforeAll" => Some(&mut self.before_all),
            "afterAll" => Some(&mut self.after_all),
            "beforeHelm" => Some(&mut self.before_helm),
            "afterHelm" => Some(&mut self.after_helm),
            "beforeDeleteHelm" => Some(&mut self.before_delete_helm),
            "afterDeleteHelm" => Some(&mut self.after_delete_helm),
            _ => None,
        }
    }

    /// Sets the order of `key`; unknown keys are ignored.
    pub fn set(&mut self, key: &str, order: f64) {
        if let Some(slot) = self.slot(key) {
            *slot = Some(order);
        }
    }
}

/// Hook-level `settings`: the token-bucket rate limit for runs of this hook.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub execution_min_interval: Option<Duration>,
    pub execution_burst: Option<u32>,
}

/// One `schedule` binding.
#[derive(Debug, Clone)]
pub struct ScheduleBinding {
    /// Binding name; `schedule` when not given.
    pub name: String,
    /// The crontab as written; it already passed `CronSchedule::parse`.
    pub crontab: String,
    pub allow_failure: bool,
    /// Queue name; `main` when not given (always `main` for v0).
    pub queue: String,
    pub group: Option<String>,
    /// Own list, then the group's kubernetes binding names (group merge).
    pub include_snapshots_from: Vec<String>,
}

/// A Kubernetes watch event type a binding reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventType {
    Added,
    Modified,
    Deleted,
}

impl WatchEventType {
    /// All three, in flant's order; the default when no list is given (v1).
    pub const ALL: [WatchEventType; 3] = [Self::Added, Self::Modified, Self::Deleted];

    /// The name used in configs and binding contexts.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "Added",
            Self::Modified => "Modified",
            Self::Deleted => "Deleted",
        }
    }
}

impl fmt::Display for WatchEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `kubernetes` binding (v1) or `onKubernetesEvent` binding (v0).
#[derive(Debug, Clone)]
pub struct KubernetesBinding {
    /// Binding name; `kubernetes` (v1) or `onKubernetesEvent` (v0) when not given.
    pub name: String,
    /// `group/version` or `version`; `None` means the preferred version.
    pub api_version: Option<String>,
    /// Kind, plural or short name as written; resolved at run time.
    pub kind: String,
    /// Absent in v1 means all three; `[]` means never on events; v0 absent means none.
    pub execute_hook_on_event: Vec<WatchEventType>,
    pub execute_hook_on_synchronization: bool,
    /// `false` only when the config says false *and* sets a queue (flant's rule).
    pub wait_for_synchronization: bool,
    pub keep_full_objects_in_memory: bool,
    /// `nameSelector.matchNames`; `Some(vec![])` selects every object.
    pub name_selector: Option<Vec<String>>,
    pub label_selector: Option<LabelSelector>,
    pub field_selector: Vec<FieldRequirement>,
    pub namespace: Option<NamespaceSelector>,
    /// Not compiled here; the hook loader compiles it.
    pub jq_filter: Option<String>,
    pub allow_failure: bool,
    pub include_snapshots_from: Vec<String>,
    pub queue: String,
    pub group: Option<String>,
    /// Accepted and kept, but it does nothing (as in flant).
    pub resynchronization_period: Option<String>,
}

/// Label selectors are the shared Kubernetes type (validated by the config parser).
pub use vendor_k8s_types::{LabelSelector, LabelSelectorRequirement};

/// One `fieldSelector.matchExpressions` item.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRequirement {
    pub field: String,
    pub operator: FieldOp,
    pub value: String,
}

/// Field selector operator: `=`, `==`, `Equals` or `!=`, `NotEquals`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldOp {
    Equals,
    NotEquals,
}

/// `namespace` of a kubernetes binding: by names, by labels, or both.
#[derive(Debug, Clone, Default)]
pub struct NamespaceSelector {
    pub name_selector: Option<Vec<String>>,
    pub label_selector: Option<LabelSelector>,
}

/// One `kubernetesValidating` or `kubernetesMutating` binding.
#[derive(Debug, Clone)]
pub struct AdmissionBinding {
    pub name: String,
    pub group: Option<String>,
    pub include_snapshots_from: Vec<String>,
    /// Validated rule objects, copied as-is into the webhook configuration.
    pub rules: Vec<serde_json::Value>,
    /// `Ignore` or `Fail`; `None` means the operator's default.
    pub failure_policy: Option<String>,
    /// `None` (default) or `NoneOnDryRun`.
    pub side_effects: String,
    /// Default 10.
    pub timeout_seconds: i64,
    /// `{name, expression}` objects.
    pub match_conditions: Vec<serde_json::Value>,
    /// Becomes the webhook's `objectSelector`.
    pub label_selector: Option<LabelSelector>,
    /// `namespace.labelSelector`; becomes the webhook's `namespaceSelector`.
    pub namespace_label_selector: Option<LabelSelector>,
}

/// One `kubernetesCustomResourceConversion` binding.
#[derive(Debug, Clone)]
pub struct ConversionBinding {
    pub name: String,
    pub crd_name: String,
    /// `(fromVersion, toVersion)` pairs in config order.
    pub conversions: Vec<(String, String)>,
    pub group: Option<String>,
    pub include_snapshots_from: Vec<String>,
}
