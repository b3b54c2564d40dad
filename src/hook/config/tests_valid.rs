//! Tests: valid configs parse into exactly the expected structs. One full v1
//! config exercising every field of every binding type (in YAML and in JSON),
//! the defaults, flant's validation oracles, the group merge, and v0.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use super::*;

fn ok(text: &str) -> HookConfig {
    parse("hooks/test.sh", text).unwrap_or_else(|e| panic!("unexpected error:\n{e}"))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const FULL_V1_YAML: &str = r#"
configVersion: v1
onStartup: 10
settings:
  executionMinInterval: 1m30s
  executionBurst: 3
schedule:
- name: every-min
  crontab: "* * * * *"
  allowFailure: true
  includeSnapshotsFrom: [pods]
  queue: slow
  group: g1
kubernetes:
- name: pods
  apiVersion: v1
  kind: Pod
  executeHookOnEvent: [Added, Deleted]
  watchEvent: [Modified]
  executeHookOnSynchronization: false
  waitForSynchronization: false
  keepFullObjectsInMemory: false
  resynchronizationPeriod: 10m
  nameSelector:
    matchNames: [pod-0, pod-1]
  labelSelector:
    matchLabels:
      app.kubernetes.io/name: web
      tier: ""
    matchExpressions:
    - key: env
      operator: In
      values: [prod, stage]
    - key: canary
      operator: DoesNotExist
  fieldSelector:
    matchExpressions:
    - field: status.phase
      operator: Equals
      value: Running
    - field: spec.nodeName
      operator: "!="
      value: node-1
  namespace:
    nameSelector:
      matchNames: [default]
    labelSelector:
      matchLabels: {team: a}
  jqFilter: .metadata.labels
  allowFailure: true
  includeSnapshotsFrom: [pods]
  queue: pods-queue
  group: g1
- name: cms
  apiVersion: apps.example.com/v1beta1
  kind: ConfigMap
  watchEvent: [Modified]
  group: g1
kubernetesValidating:
- name: check.example.com
  group: g1
  includeSnapshotsFrom: [cms]
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE, UPDATE]
    resources: [pods, pods/status]
    scope: Namespaced
  failurePolicy: Ignore
  sideEffects: NoneOnDryRun
  timeoutSeconds: 5
  matchConditions:
  - name: not-system
    expression: "request.namespace != 'kube-system'"
  labelSelector:
    matchLabels: {validate: "true"}
  namespace:
    labelSelector:
      matchExpressions:
      - key: skip
        operator: NotIn
        values: ["yes"]
kubernetesMutating:
- name: mutate.example.com
  rules:
  - apiGroups: ["*"]
    apiVersions: ["*"]
    operations: ["*"]
    resources: ["*/*"]
kubernetesCustomResourceConversion:
- name: crontab-conv
  crdName: crontabs.stable.example.com
  group: g1
  includeSnapshotsFrom: [pods]
  conversions:
  - fromVersion: stable.example.com/v1alpha1
    toVersion: stable.example.com/v1alpha2
  - fromVersion: v1alpha2
    toVersion: v1
"#;

/// The same config as `FULL_V1_YAML`, written as tab-indented JSON.
fn full_v1_json() -> String {
    let yaml: serde_json::Value = serde_yaml::from_str(FULL_V1_YAML).unwrap();
    serde_json::to_string_pretty(&yaml)
        .unwrap()
        .replace("  ", "\t")
}

fn assert_full_v1(c: &HookConfig) {
    assert_eq!(c.version, ConfigVersion::V1);
    assert_eq!(c.on_startup, Some(10.0));
    let settings = Settings {
        execution_min_interval: Some(Duration::from_secs(90)),
        execution_burst: Some(3),
    };
    assert_eq!(c.settings, settings);
    assert_full_schedule(c);
    assert_full_pods(&c.kubernetes[0]);
    assert_full_cms(&c.kubernetes[1]);
    assert_eq!(c.kubernetes.len(), 2);
    assert_full_validating(c);
    assert_full_mutating(c);
    assert_full_conversion(c);
}

fn assert_full_schedule(c: &HookConfig) {
    assert_eq!(c.schedule.len(), 1);
    let s = &c.schedule[0];
    assert_eq!(s.name, "every-min");
    assert_eq!(s.crontab, "* * * * *");
    assert!(s.allow_failure);
    assert_eq!(s.queue, "slow");
    assert_eq!(s.group.as_deref(), Some("g1"));
    // Own list first, then the group's kubernetes bindings (pods, cms).
    assert_eq!(s.include_snapshots_from, strings(&["pods", "cms"]));
}

fn assert_full_pods(k: &KubernetesBinding) {
    assert_eq!(k.name, "pods");
    assert_eq!(k.api_version.as_deref(), Some("v1"));
    assert_eq!(k.kind, "Pod");
    // executeHookOnEvent wins over watchEvent.
    assert_eq!(
        k.execute_hook_on_event,
        vec![WatchEventType::Added, WatchEventType::Deleted]
    );
    assert!(!k.execute_hook_on_synchronization);
    assert!(
        !k.wait_for_synchronization,
        "false is honoured with a queue"
    );
    assert!(!k.keep_full_objects_in_memory);
    assert_eq!(k.name_selector, Some(strings(&["pod-0", "pod-1"])));
    let want = LabelSelector {
        match_labels: labels(&[("app.kubernetes.io/name", "web"), ("tier", "")]),
        match_expressions: vec![
            LabelSelectorRequirement {
                key: "env".into(),
                operator: "In".into(),
                values: strings(&["prod", "stage"]),
            },
            LabelSelectorRequirement {
                key: "canary".into(),
                operator: "DoesNotExist".into(),
                values: vec![],
            },
        ],
    };
    assert_eq!(k.label_selector, Some(want));
    let fields = vec![
        FieldRequirement {
            field: "status.phase".into(),
            operator: FieldOp::Equals,
            value: "Running".into(),
        },
        FieldRequirement {
            field: "spec.nodeName".into(),
            operator: FieldOp::NotEquals,
            value: "node-1".into(),
        },
    ];
    assert_eq!(k.field_selector, fields);
    let ns = k.namespace.as_ref().expect("namespace");
    assert_eq!(ns.name_selector, Some(strings(&["default"])));
    let ns_labels = LabelSelector {
        match_labels: labels(&[("team", "a")]),
        ..Default::default()
    };
    assert_eq!(ns.label_selector, Some(ns_labels));
    assert_eq!(k.jq_filter.as_deref(), Some(".metadata.labels"));
    assert!(k.allow_failure);
    assert_eq!(k.include_snapshots_from, strings(&["pods", "cms"]));
    assert_eq!(k.queue, "pods-queue");
    assert_eq!(k.group.as_deref(), Some("g1"));
    assert_eq!(k.resynchronization_period.as_deref(), Some("10m"));
}

fn assert_full_cms(k: &KubernetesBinding) {
    assert_eq!(k.name, "cms");
    assert_eq!(k.api_version.as_deref(), Some("apps.example.com/v1beta1"));
    assert_eq!(k.kind, "ConfigMap");
    assert_eq!(k.execute_hook_on_event, vec![WatchEventType::Modified]);
    assert!(k.execute_hook_on_synchronization);
    assert!(k.wait_for_synchronization);
    assert!(k.keep_full_objects_in_memory);
    assert_eq!(k.name_selector, None);
    assert_eq!(k.label_selector, None);
    assert!(k.field_selector.is_empty());
    assert!(k.namespace.is_none());
    assert_eq!(k.jq_filter, None);
    assert!(!k.allow_failure);
    assert_eq!(k.include_snapshots_from, strings(&["pods", "cms"]));
    assert_eq!(k.queue, "main");
    assert_eq!(k.resynchronization_period, None);
}

fn assert_full_validating(c: &HookConfig) {
    assert_eq!(c.validating.len(), 1);
    let v = &c.validating[0];
    assert_eq!(v.name, "check.example.com");
    assert_eq!(v.group.as_deref(), Some("g1"));
    assert_eq!(v.include_snapshots_from, strings(&["cms", "pods"]));
    let rule = json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
        "resources": ["pods", "pods/status"], "scope": "Namespaced"});
    assert_eq!(v.rules, vec![rule]);
    assert_eq!(v.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(v.side_effects, "NoneOnDryRun");
    assert_eq!(v.timeout_seconds, 5);
    let cond = json!({"name": "not-system", "expression": "request.namespace != 'kube-system'"});
    assert_eq!(v.match_conditions, vec![cond]);
    let obj = LabelSelector {
        match_labels: labels(&[("validate", "true")]),
        ..Default::default()
    };
    assert_eq!(v.label_selector, Some(obj));
    let ns = LabelSelector {
        match_labels: BTreeMap::new(),
        match_expressions: vec![LabelSelectorRequirement {
            key: "skip".into(),
            operator: "NotIn".into(),
            values: strings(&["yes"]),
        }],
    };
    assert_eq!(v.namespace_label_selector, Some(ns));
}

fn assert_full_mutating(c: &HookConfig) {
    assert_eq!(c.mutating.len(), 1);
    let m = &c.mutating[0];
    assert_eq!(m.name, "mutate.example.com");
    assert_eq!(m.group, None);
    assert!(m.include_snapshots_from.is_empty());
    let rule = json!({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]});
    assert_eq!(m.rules, vec![rule]);
    assert_eq!(m.failure_policy, None);
    assert_eq!(m.side_effects, "None");
    assert_eq!(m.timeout_seconds, 10);
    assert!(m.match_conditions.is_empty());
    assert_eq!(m.label_selector, None);
    assert_eq!(m.namespace_label_selector, None);
}

fn assert_full_conversion(c: &HookConfig) {
    assert_eq!(c.conversion.len(), 1);
    let v = &c.conversion[0];
    assert_eq!(v.name, "crontab-conv");
    assert_eq!(v.crd_name, "crontabs.stable.example.com");
    let pairs = vec![
        (
            "stable.example.com/v1alpha1".to_string(),
            "stable.example.com/v1alpha2".to_string(),
        ),
        ("v1alpha2".to_string(), "v1".to_string()),
    ];
    assert_eq!(v.conversions, pairs);
    assert_eq!(v.group.as_deref(), Some("g1"));
    assert_eq!(v.include_snapshots_from, strings(&["pods", "cms"]));
}

#[test]
fn full_v1_yaml_sets_every_field() {
    assert_full_v1(&ok(FULL_V1_YAML));
}

#[test]
fn full_v1_json_sets_every_field() {
    let json = full_v1_json();
    assert!(json.contains("\n\t\"configVersion\""), "tab-indented JSON");
    assert_full_v1(&ok(&json));
}

#[test]
fn v1_defaults() {
    let c = ok("configVersion: v1\nschedule:\n- crontab: '@every 5s'\nkubernetes:\n- kind: Pod\n");
    let s = &c.schedule[0];
    assert_eq!((s.name.as_str(), s.queue.as_str()), ("schedule", "main"));
    assert!(!s.allow_failure && s.group.is_none() && s.include_snapshots_from.is_empty());
    let k = &c.kubernetes[0];
    assert_eq!((k.name.as_str(), k.queue.as_str()), ("kubernetes", "main"));
    assert_eq!(k.execute_hook_on_event, WatchEventType::ALL.to_vec());
    assert!(k.execute_hook_on_synchronization && k.wait_for_synchronization);
    assert!(k.keep_full_objects_in_memory && !k.allow_failure);
    assert_eq!(c.on_startup, None);
    assert_eq!(c.settings, Settings::default());
}

#[test]
fn wait_for_synchronization_false_needs_a_queue() {
    let c = ok("configVersion: v1\nkubernetes:\n- kind: Pod\n  waitForSynchronization: false\n");
    assert!(c.kubernetes[0].wait_for_synchronization);
}

#[test]
fn booleans_accept_strings_and_yaml_1_1_words() {
    let text = "configVersion: v1\nkubernetes:\n- kind: Pod\n  executeHookOnSynchronization: 'false'\n  \
                keepFullObjectsInMemory: no\n  allowFailure: yes\n";
    let k = &ok(text).kubernetes[0];
    assert!(!k.execute_hook_on_synchronization);
    assert!(!k.keep_full_objects_in_memory);
    assert!(k.allow_failure);
}

#[test]
fn oracle_on_startup_without_version_is_v0() {
    let c = ok(r#"{"onStartup":1}"#);
    assert_eq!((c.version, c.on_startup), (ConfigVersion::V0, Some(1.0)));
    let c = ok(r#"{"configVersion":"v1","onStartup":1}"#);
    assert_eq!((c.version, c.on_startup), (ConfigVersion::V1, Some(1.0)));
}

#[test]
fn oracle_settings_30s_and_burst_1() {
    let c = ok("configVersion: v1\nsettings:\n  executionMinInterval: 30s\n  executionBurst: 1\n");
    assert_eq!(
        c.settings.execution_min_interval,
        Some(Duration::from_secs(30))
    );
    assert_eq!(c.settings.execution_burst, Some(1));
    assert!(c.schedule.is_empty() && c.kubernetes.is_empty() && c.on_startup.is_none());
}

#[test]
fn oracle_empty_event_lists_mean_no_events() {
    for key in ["executeHookOnEvent", "watchEvent"] {
        let c = ok(&format!(
            "configVersion: v1\nkubernetes:\n- kind: Pod\n  {key}: []\n"
        ));
        assert!(c.kubernetes[0].execute_hook_on_event.is_empty(), "{key}");
    }
}

#[test]
fn oracle_empty_label_value_is_ok() {
    let c = ok(
        "configVersion: v1\nkubernetes:\n- kind: Pod\n  labelSelector:\n    matchLabels: {a: ''}\n",
    );
    let sel = c.kubernetes[0].label_selector.clone().unwrap();
    assert_eq!(sel.match_labels, labels(&[("a", "")]));
}

#[test]
fn group_merge_example() {
    let text = r#"
configVersion: v1
schedule:
- {name: sch, crontab: "* * * * *", group: grp, includeSnapshotsFrom: [s3, s2, s1]}
kubernetes:
- {name: s1, kind: Pod, group: grp}
- {name: s2, kind: Pod}
- {name: s4, kind: Pod, group: grp}
- {name: s3, kind: Pod, group: grp}
- {name: other, kind: Pod, group: other, includeSnapshotsFrom: [s2]}
"#;
    let c = ok(text);
    assert_eq!(
        c.schedule[0].include_snapshots_from,
        strings(&["s3", "s2", "s1", "s4"])
    );
    assert_eq!(
        c.kubernetes[0].include_snapshots_from,
        strings(&["s1", "s4", "s3"])
    );
    assert!(c.kubernetes[1].include_snapshots_from.is_empty());
    assert_eq!(
        c.kubernetes[4].include_snapshots_from,
        strings(&["s2", "other"])
    );
}

#[test]
fn only_the_first_yaml_document_is_read() {
    let c = ok("configVersion: v1\nonStartup: 5\n---\nconfigVersion: v2\n");
    assert_eq!(c.on_startup, Some(5.0));
}

const FULL_V0_YAML: &str = r#"
onStartup: 7
schedule:
- name: nightly
  crontab: "0 3 * * *"
  allowFailure: true
- crontab: "@hourly"
onKubernetesEvent:
- name: ns-events
  kind: namespace
  event: [add, update, delete]
  selector:
    matchLabels: {team: a}
  objectName: default
  namespaceSelector:
    matchNames: [kube-system]
  jqFilter: .metadata.labels
  allowFailure: true
- kind: Pod
  namespaceSelector: {any: true}
"#;

fn assert_full_v0(c: &HookConfig) {
    assert_eq!(c.version, ConfigVersion::V0);
    assert_eq!(c.on_startup, Some(7.0));
    let s = &c.schedule;
    assert_eq!(
        (
            s[0].name.as_str(),
            s[0].crontab.as_str(),
            s[0].allow_failure
        ),
        ("nightly", "0 3 * * *", true)
    );
    assert_eq!(
        (s[1].name.as_str(), s[1].queue.as_str(), s[1].allow_failure),
        ("schedule", "main", false)
    );
    let k = &c.kubernetes[0];
    assert_eq!(
        (k.name.as_str(), k.kind.as_str(), k.queue.as_str()),
        ("ns-events", "namespace", "main")
    );
    assert_eq!(k.execute_hook_on_event, WatchEventType::ALL.to_vec());
    let sel = LabelSelector {
        match_labels: labels(&[("team", "a")]),
        ..Default::default()
    };
    assert_eq!(k.label_selector, Some(sel));
    assert_eq!(k.name_selector, Some(strings(&["default"])));
    let ns = k.namespace.as_ref().expect("namespace");
    assert_eq!(
        (ns.name_selector.clone(), ns.label_selector.clone()),
        (Some(strings(&["kube-system"])), None)
    );
    assert_eq!(k.jq_filter.as_deref(), Some(".metadata.labels"));
    assert!(k.allow_failure);
    assert!(
        !k.execute_hook_on_synchronization
            && !k.wait_for_synchronization
            && k.keep_full_objects_in_memory
    );
    assert_eq!(
        (
            k.api_version.clone(),
            k.group.clone(),
            k.resynchronization_period.clone()
        ),
        (None, None, None)
    );
    assert!(k.field_selector.is_empty() && k.include_snapshots_from.is_empty());
    let k = &c.kubernetes[1];
    assert_eq!(k.name, "onKubernetesEvent");
    assert!(
        k.execute_hook_on_event.is_empty(),
        "v0: absent event list means no events"
    );
    assert!(k.namespace.is_none(), "any: true means all namespaces");
    assert!(c.validating.is_empty() && c.mutating.is_empty() && c.conversion.is_empty());
    assert_eq!(c.settings, Settings::default());
}

#[test]
fn full_v0_yaml_sets_every_field() {
    assert_full_v0(&ok(FULL_V0_YAML));
}

#[test]
fn full_v0_json_sets_every_field() {
    let yaml: serde_json::Value = serde_yaml::from_str(FULL_V0_YAML).unwrap();
    assert_full_v0(&ok(&yaml.to_string()));
}

#[test]
fn explicit_v0_is_accepted() {
    // flant rejects `configVersion: v0` (its v0 schema forbids the key); we accept it.
    let c = ok("configVersion: v0\nonStartup: 2\n");
    assert_eq!((c.version, c.on_startup), (ConfigVersion::V0, Some(2.0)));
}

#[test]
fn v0_items_ignore_unknown_keys_like_flant() {
    let c = ok("schedule:\n- crontab: '* * * * *'\n  queue: ignored\n");
    assert_eq!(c.schedule[0].queue, "main");
}

#[test]
fn watch_event_type_displays_its_name() {
    assert_eq!(WatchEventType::Modified.to_string(), "Modified");
}

#[test]
fn label_selector_serializes_as_kubernetes_json() {
    let text = "configVersion: v1\nkubernetes:\n- kind: Pod\n  labelSelector:\n    matchLabels: {a: b}\n    \
                matchExpressions:\n    - {key: k, operator: In, values: [v]}\n    - {key: e, operator: Exists}\n";
    let sel = ok(text).kubernetes[0].label_selector.clone().unwrap();
    let want = json!({"matchLabels": {"a": "b"}, "matchExpressions": [
        {"key": "k", "operator": "In", "values": ["v"]}, {"key": "e", "operator": "Exists"}]});
    assert_eq!(serde_json::to_value(&sel).unwrap(), want);
    let back: LabelSelector = serde_json::from_value(want).unwrap();
    assert_eq!(back, sel);
}

#[test]
fn addon_lifecycle_bindings_by_hook_kind() {
    use super::{HookKind, parse_as};
    let module = parse_as(
        "m",
        "configVersion: v1\nbeforeHelm: 10\nafterDeleteHelm: 2",
        HookKind::Module,
    )
    .expect("module hook");
    assert_eq!(module.lifecycle.before_helm, Some(10.0));
    assert_eq!(module.lifecycle.after_delete_helm, Some(2.0));
    assert_eq!(module.lifecycle.before_all, None);
    // flant's newer binding (issue 30 item 6), v1 and v0.
    for text in [
        "configVersion: v1\nbeforeDeleteHelm: 3",
        "{\"beforeDeleteHelm\": 3}",
    ] {
        let newer = parse_as("m", text, HookKind::Module).expect("beforeDeleteHelm");
        assert_eq!(newer.lifecycle.before_delete_helm, Some(3.0), "{text}");
    }
    let global = parse_as(
        "g",
        "{\"beforeAll\": 5, \"onStartup\": 1}",
        HookKind::Global,
    )
    .expect("v0 global hook");
    assert_eq!(global.lifecycle.order("beforeAll"), Some(5.0));
    let wrong = parse_as("g", "configVersion: v1\nbeforeHelm: 1", HookKind::Global)
        .expect_err("beforeHelm is a module binding");
    assert!(
        wrong
            .to_string()
            .contains("beforeHelm is a forbidden property"),
        "{wrong}"
    );
    let shell = super::parse("s", "configVersion: v1\nafterAll: 1").expect_err("shell hook");
    assert!(shell.to_string().contains("afterAll"), "{shell}");
    let bad = parse_as("m", "configVersion: v1\nafterHelm: soon", HookKind::Module)
        .expect_err("not an integer");
    assert!(bad.to_string().contains("afterHelm"), "{bad}");
}
