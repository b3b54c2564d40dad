//! Config v0 (no `configVersion`): `onStartup`, `schedule` and
//! `onKubernetesEvent`. The top level is strict, but flant reads the binding
//! items without a schema, so unknown keys inside items are ignored here too;
//! wrong types are still errors. v0 bindings always use queue `main`, have no
//! snapshots or groups, and `onKubernetesEvent` is converted into the same
//! `KubernetesBinding` v1 uses (event names add/update/delete mapped).

use serde_json::{Map, Value};

use super::error::Problem;
use super::selectors::label_selector_v0;
use super::types::{
    ConfigVersion, HookConfig, HookKind, KubernetesBinding, NamespaceSelector, ScheduleBinding,
    Settings, WatchEventType,
};
use super::v1::{check_crontab, lifecycle, non_empty, on_startup};
use super::validate::{Checker, binding_at};

const TOP_KEYS: &[&str] = &["onStartup", "schedule", "onKubernetesEvent"];
const V1_ONLY_KEYS: &[&str] = &[
    "kubernetes",
    "kubernetesValidating",
    "kubernetesMutating",
    "kubernetesCustomResourceConversion",
    "settings",
];

/// Parse a v0 config; an explicit `configVersion: v0` is allowed (our fix).
pub(crate) fn parse(
    m: &Map<String, Value>,
    probs: &mut Vec<Problem>,
    kind: HookKind,
) -> HookConfig {
    top_level(m, probs, kind);
    HookConfig {
        version: ConfigVersion::V0,
        on_startup: m.get("onStartup").and_then(|v| on_startup(probs, v)),
        schedule: items(m, "schedule", probs, schedule),
        kubernetes: items(m, "onKubernetesEvent", probs, kubernetes),
        validating: Vec::new(),
        mutating: Vec::new(),
        conversion: Vec::new(),
        settings: Settings::default(),
        lifecycle: lifecycle(m, probs, kind),
    }
}

/// Strict top-level keys (`configVersion` only reaches here as `v0`), with a
/// hint when a v1 key is used without `configVersion: v1`.
fn top_level(m: &Map<String, Value>, probs: &mut Vec<Problem>, kind: HookKind) {
    let mut c = Checker::new(probs, "");
    let lifecycle_keys = kind.lifecycle_keys();
    let known =
        |k: &str| TOP_KEYS.contains(&k) || k == "configVersion" || lifecycle_keys.contains(&k);
    for key in m.keys().filter(|k| !known(k)) {
        let msg = if V1_ONLY_KEYS.contains(&key.as_str()) {
            format!("{key} is a forbidden property in config v0; add 'configVersion: v1' to use it")
        } else {
            let accepted = TOP_KEYS.join(", ");
            format!("{key} is a forbidden property; accepted properties: {accepted}")
        };
        c.err(key, msg);
    }
    let has_binding = TOP_KEYS
        .iter()
        .chain(lifecycle_keys)
        .any(|k| m.contains_key(*k));
    if !has_binding {
        let msg = "config has no bindings: expected onStartup, schedule or onKubernetesEvent \
                   (v0), or configVersion: v1";
        c.err("", msg);
    }
}

/// Every item of the list `key` (may be empty in v0).
fn items<T>(
    m: &Map<String, Value>,
    key: &str,
    probs: &mut Vec<Problem>,
    parse_item: fn(&mut Checker, &Value) -> Option<T>,
) -> Vec<T> {
    let Some(v) = m.get(key) else {
        return Vec::new();
    };
    let Some(list) = Checker::new(probs, "").as_array(key, v, 0) else {
        return Vec::new();
    };
    let each = list.iter().enumerate();
    each.filter_map(|(i, item)| {
        parse_item(&mut Checker::new(probs, binding_at(key, i, item)), item)
    })
    .collect()
}

/// A v0 schedule item: `{name, crontab, allowFailure}`.
fn schedule(c: &mut Checker, item: &Value) -> Option<ScheduleBinding> {
    let m = c.as_object("", item)?;
    let crontab = c.req_str(m, "", "crontab");
    if let Some(crontab) = &crontab {
        check_crontab(c, crontab);
    }
    Some(ScheduleBinding {
        name: non_empty(c, m, "name").unwrap_or_else(|| "schedule".into()),
        crontab: crontab.unwrap_or_default(),
        allow_failure: c.opt_bool(m, "", "allowFailure").unwrap_or(false),
        queue: "main".into(),
        group: None,
        include_snapshots_from: Vec::new(),
    })
}

/// A v0 `onKubernetesEvent` item. v0 hooks get no Synchronization run, and their
/// contexts carry no object body, only its kind, namespace and name; objects are
/// kept so those can be read at event time.
fn kubernetes(c: &mut Checker, item: &Value) -> Option<KubernetesBinding> {
    let m = c.as_object("", item)?;
    let object_name = non_empty(c, m, "objectName");
    Some(KubernetesBinding {
        name: non_empty(c, m, "name").unwrap_or_else(|| "onKubernetesEvent".into()),
        api_version: None,
        kind: c.opt_str(m, "", "kind").unwrap_or_default(),
        execute_hook_on_event: events(c, m),
        execute_hook_on_synchronization: false,
        wait_for_synchronization: false,
        keep_full_objects_in_memory: true,
        name_selector: object_name.map(|n| vec![n]),
        label_selector: m
            .get("selector")
            .and_then(|v| label_selector_v0(c, "selector", v)),
        field_selector: Vec::new(),
        namespace: m.get("namespaceSelector").and_then(|v| namespace(c, v)),
        jq_filter: non_empty(c, m, "jqFilter"),
        allow_failure: c.opt_bool(m, "", "allowFailure").unwrap_or(false),
        include_snapshots_from: Vec::new(),
        queue: "main".into(),
        group: None,
        resynchronization_period: None,
    })
}

/// `event: [add, update, delete]`; absent means no events (unlike v1).
fn events(c: &mut Checker, m: &Map<String, Value>) -> Vec<WatchEventType> {
    let names = c.opt_str_list(m, "", "event", 0).unwrap_or_default();
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        match name.as_str() {
            "add" => out.push(WatchEventType::Added),
            "update" => out.push(WatchEventType::Modified),
            "delete" => out.push(WatchEventType::Deleted),
            other => {
                let msg = format!("event '{other}' is unsupported; accepted: add, update, delete");
                c.err(&format!("event[{i}]"), msg);
            }
        }
    }
    out
}

/// `namespaceSelector: {matchNames, any}`; `any: true` means all namespaces.
fn namespace(c: &mut Checker, v: &Value) -> Option<NamespaceSelector> {
    let m = c.as_object("namespaceSelector", v)?;
    let names = c.opt_str_list(m, "namespaceSelector", "matchNames", 0);
    let any = c.opt_bool(m, "namespaceSelector", "any").unwrap_or(false);
    if any {
        return None;
    }
    Some(NamespaceSelector {
        name_selector: Some(names.unwrap_or_default()),
        label_selector: None,
    })
}
