//! TEMPORARY stub of the hook configuration types (the real parser lands from the
//! hook-config branch). Only the types, so the rest of the crate compiles.
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum ConfigVersion {
    V0,
    V1,
}
#[derive(Debug, Clone)]
pub struct HookConfig {
    pub version: ConfigVersion,
    pub on_startup: Option<f64>,
    pub schedule: Vec<ScheduleBinding>,
    pub kubernetes: Vec<KubernetesBinding>,
    pub validating: Vec<AdmissionBinding>,
    pub mutating: Vec<AdmissionBinding>,
    pub conversion: Vec<ConversionBinding>,
    pub settings: Settings,
}
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub execution_min_interval: Option<Duration>,
    pub execution_burst: Option<u32>,
}
#[derive(Debug, Clone)]
pub struct ScheduleBinding {
    pub name: String,
    pub crontab: String,
    pub allow_failure: bool,
    pub queue: String,
    pub group: Option<String>,
    pub include_snapshots_from: Vec<String>,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventType {
    Added,
    Modified,
    Deleted,
}
#[derive(Debug, Clone)]
pub struct KubernetesBinding {
    pub name: String,
    pub api_version: Option<String>,
    pub kind: String,
    pub execute_hook_on_event: Vec<WatchEventType>,
    pub execute_hook_on_synchronization: bool,
    pub wait_for_synchronization: bool,
    pub keep_full_objects_in_memory: bool,
    pub name_selector: Option<Vec<String>>,
    pub label_selector: Option<LabelSelector>,
    pub field_selector: Vec<FieldRequirement>,
    pub namespace: Option<NamespaceSelector>,
    pub jq_filter: Option<String>,
    pub allow_failure: bool,
    pub include_snapshots_from: Vec<String>,
    pub queue: String,
    pub group: Option<String>,
    pub resynchronization_period: Option<String>,
}
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<LabelSelectorRequirement>,
}
#[derive(Debug, Clone, PartialEq)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRequirement {
    pub field: String,
    pub operator: FieldOp,
    pub value: String,
}
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldOp {
    Equals,
    NotEquals,
}
#[derive(Debug, Clone, Default)]
pub struct NamespaceSelector {
    pub name_selector: Option<Vec<String>>,
    pub label_selector: Option<LabelSelector>,
}
#[derive(Debug, Clone)]
pub struct AdmissionBinding {
    pub name: String,
    pub group: Option<String>,
    pub include_snapshots_from: Vec<String>,
    pub rules: Vec<serde_json::Value>,
    pub failure_policy: Option<String>,
    pub side_effects: String,
    pub timeout_seconds: i64,
    pub match_conditions: Vec<serde_json::Value>,
    pub label_selector: Option<LabelSelector>,
    pub namespace_label_selector: Option<LabelSelector>,
}
#[derive(Debug, Clone)]
pub struct ConversionBinding {
    pub name: String,
    pub crd_name: String,
    pub conversions: Vec<(String, String)>,
    pub group: Option<String>,
    pub include_snapshots_from: Vec<String>,
}
#[derive(Debug)]
pub struct ConfigError(pub String);
impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}
pub fn parse(hook_name: &str, _text: &str) -> Result<HookConfig, ConfigError> {
    Err(ConfigError(format!(
        "hook '{hook_name}': config parser not merged yet"
    )))
}
pub mod duration {
    pub fn go_duration(s: &str) -> Result<std::time::Duration, String> {
        s.trim_end_matches('s')
            .parse::<f64>()
            .map(std::time::Duration::from_secs_f64)
            .map_err(|e| e.to_string())
    }
}
