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
    pub(crate) version: ConfigVersion,
    /// `onStartup: ORDER`; `None` when the hook has no onStartup binding.
    pub(crate) on_startup: Option<f64>,
    pub(crate) schedule: Vec<ScheduleBinding>,
    /// v1 `kubernetes` bindings, or v0 `onKubernetesEvent` bindings converted.
    pub(crate) kubernetes: Vec<KubernetesBinding>,
    pub(crate) validating: Vec<AdmissionBinding>,
    pub(crate) mutating: Vec<AdmissionBinding>,
    pub(crate) conversion: Vec<ConversionBinding>,
    pub settings: Settings,
    /// addon-operator's lifecycle bindings (`beforeAll: ORDER`, ...); empty for
    /// shell-operator hooks, which may not have them.
    pub(crate) lifecycle: Lifecycle,
}

/// Which program a hook belongs to, deciding which top-level bindings it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookKind {
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
    pub(crate) fn lifecycle_keys(self) -> &'static [&'static str] {
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
    pub(crate) before_all: Option<f64>,
    pub(crate) after_all: Option<f64>,
    pub(crate) before_helm: Option<f64>,
    pub(crate) after_helm: Option<f64>,
    /// flant's newer binding: runs just before `helm uninstall`.
    pub(crate) before_delete_helm: Option<f64>,
    pub(crate) after_delete_helm: Option<f64>,
}

impl Lifecycle {
    /// The order of the binding named `key` (`beforeAll`, `afterHelm`, ...), if set.
    pub(crate) fn order(&self, key: &str) -> Option<f64> {
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
    pub(crate) fn set(&mut self, key: &str, order: f64) {
        if let Some(slot) = self.slot(key) {
            *slot = Some(order);
        }
    }
}

/// Hook-level `settings`: the token-bucket rate limit for runs of this hook.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub(crate) execution_min_interval: Option<Duration>,
    pub(crate) execution_burst: Option<u32>,
}

/// One `schedule` binding.
#[derive(Debug, Clone)]
pub struct ScheduleBinding {
    /// Binding name; `schedule` when not given.
    pub(crate) name: String,
    /// The crontab as written; it already passed `CronSchedule::parse`.
    pub(crate) crontab: String,
    pub(crate) allow_failure: bool,
    /// Queue name; `main` when not given (always `main` for v0).
    pub(crate) queue: String,
    pub(crate) group: Option<String>,
    /// Own list, then the group's kubernetes binding names (group merge).
    pub(crate) include_snapshots_from: Vec<String>,
}

/// A Kubernetes watch event type a binding reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchEventType {
    Added,
    Modified,
    Deleted,
}

impl WatchEventType {
    /// All three, in flant's order; the default when no list is given (v1).
    pub(crate) const ALL: [WatchEventType; 3] = [Self::Added, Self::Modified, Self::Deleted];

    /// The name used in configs and binding contexts.
    pub(crate) fn as_str(self) -> &'static str {
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
    pub(crate) name: String,
    /// `group/version` or `version`; `None` means the preferred version.
    pub(crate) api_version: Option<String>,
    /// Kind, plural or short name as written; resolved at run time.
    pub(crate) kind: String,
    /// Absent in v1 means all three; `[]` means never on events; v0 absent means none.
    pub(crate) execute_hook_on_event: Vec<WatchEventType>,
    pub(crate) execute_hook_on_synchronization: bool,
    /// `false` only when the config says false *and* sets a queue (flant's rule).
    pub(crate) wait_for_synchronization: bool,
    pub(crate) keep_full_objects_in_memory: bool,
    /// `nameSelector.matchNames`; `Some(vec![])` selects every object.
    pub(crate) name_selector: Option<Vec<String>>,
    pub(crate) label_selector: Option<LabelSelector>,
    pub(crate) field_selector: Vec<FieldRequirement>,
    pub(crate) namespace: Option<NamespaceSelector>,
    /// Not compiled here; the hook loader compiles it.
    pub(crate) jq_filter: Option<String>,
    pub(crate) allow_failure: bool,
    pub(crate) include_snapshots_from: Vec<String>,
    pub(crate) queue: String,
    pub(crate) group: Option<String>,
    /// Accepted and kept (tests read it), but it does nothing (as in flant).
    #[allow(dead_code)]
    pub(crate) resynchronization_period: Option<String>,
}

/// Label selectors are the shared Kubernetes type (validated by the config parser).
pub(crate) use vendor_k8s_types::{LabelSelector, LabelSelectorRequirement};

/// One `fieldSelector.matchExpressions` item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldRequirement {
    pub(crate) field: String,
    pub(crate) operator: FieldOp,
    pub(crate) value: String,
}

/// Field selector operator: `=`, `==`, `Equals` or `!=`, `NotEquals`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum FieldOp {
    Equals,
    NotEquals,
}

/// `namespace` of a kubernetes binding: by names, by labels, or both.
#[derive(Debug, Clone, Default)]
pub(crate) struct NamespaceSelector {
    pub(crate) name_selector: Option<Vec<String>>,
    pub(crate) label_selector: Option<LabelSelector>,
}

/// One `kubernetesValidating` or `kubernetesMutating` binding.
#[derive(Debug, Clone)]
pub struct AdmissionBinding {
    pub(crate) name: String,
    pub(crate) group: Option<String>,
    pub(crate) include_snapshots_from: Vec<String>,
    /// Validated rule objects, copied as-is into the webhook configuration.
    pub(crate) rules: Vec<serde_json::Value>,
    /// `Ignore` or `Fail`; `None` means the operator's default.
    pub(crate) failure_policy: Option<String>,
    /// `None` (default) or `NoneOnDryRun`.
    pub(crate) side_effects: String,
    /// Default 10.
    pub(crate) timeout_seconds: i64,
    /// `{name, expression}` objects.
    pub(crate) match_conditions: Vec<serde_json::Value>,
    /// Becomes the webhook's `objectSelector`.
    pub(crate) label_selector: Option<LabelSelector>,
    /// `namespace.labelSelector`; becomes the webhook's `namespaceSelector`.
    pub(crate) namespace_label_selector: Option<LabelSelector>,
}

/// One `kubernetesCustomResourceConversion` binding.
#[derive(Debug, Clone)]
pub struct ConversionBinding {
    pub(crate) name: String,
    pub(crate) crd_name: String,
    /// `(fromVersion, toVersion)` pairs in config order.
    pub(crate) conversions: Vec<(String, String)>,
    pub(crate) group: Option<String>,
    pub(crate) include_snapshots_from: Vec<String>,
}
