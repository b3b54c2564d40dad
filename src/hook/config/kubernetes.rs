//! v1 `kubernetes` bindings: which objects to watch (apiVersion, kind and the
//! selectors), when to run the hook (events, synchronization), and how it is
//! queued (queue, group, snapshots). Defaults follow flant: all three events,
//! synchronization on, full objects kept, queue `main`, name `kubernetes`.

use serde_json::{Map, Value};

use super::k8s_names::group_version;
use super::selectors::{field_selector, label_selector, name_selector, namespace_selector};
use super::types::{FieldRequirement, KubernetesBinding, WatchEventType};
use super::v1::non_empty;
use super::validate::Checker;

const KEYS: &[&str] = &[
    "name",
    "apiVersion",
    "kind",
    "executeHookOnEvent",
    "watchEvent",
    "executeHookOnSynchronization",
    "waitForSynchronization",
    "keepFullObjectsInMemory",
    "resynchronizationPeriod",
    "nameSelector",
    "labelSelector",
    "fieldSelector",
    "namespace",
    "jqFilter",
    "allowFailure",
    "includeSnapshotsFrom",
    "queue",
    "group",
];

const EVENTS: &[&str] = &["Added", "Modified", "Deleted"];

/// One v1 `kubernetes` item.
pub(crate) fn parse_v1(c: &mut Checker, item: &Value) -> Option<KubernetesBinding> {
    let m = c.as_object("", item)?;
    c.strict("", m, KEYS);
    let queue = non_empty(c, m, "queue");
    let name_sel = m
        .get("nameSelector")
        .and_then(|v| name_selector(c, "nameSelector", v));
    let field_sel = m
        .get("fieldSelector")
        .map(|v| field_selector(c, "fieldSelector", v));
    let field_sel = field_sel.unwrap_or_default();
    check_name_exclusive(c, name_sel.as_deref(), &field_sel);
    Some(KubernetesBinding {
        name: non_empty(c, m, "name").unwrap_or_else(|| "kubernetes".into()),
        api_version: api_version(c, m),
        kind: kind(c, m),
        execute_hook_on_event: events(c, m),
        execute_hook_on_synchronization: c
            .opt_bool(m, "", "executeHookOnSynchronization")
            .unwrap_or(true),
        // flant honours `false` only together with a named queue.
        wait_for_synchronization: !(c.opt_bool(m, "", "waitForSynchronization") == Some(false)
            && queue.is_some()),
        keep_full_objects_in_memory: c.opt_bool(m, "", "keepFullObjectsInMemory").unwrap_or(true),
        name_selector: name_sel,
        label_selector: m
            .get("labelSelector")
            .and_then(|v| label_selector(c, "labelSelector", v)),
        field_selector: field_sel,
        namespace: m
            .get("namespace")
            .and_then(|v| namespace_selector(c, "namespace", v)),
        jq_filter: non_empty(c, m, "jqFilter"),
        allow_failure: c.opt_bool(m, "", "allowFailure").unwrap_or(false),
        include_snapshots_from: c
            .opt_str_list(m, "", "includeSnapshotsFrom", 1)
            .unwrap_or_default(),
        queue: queue.unwrap_or_else(|| "main".into()),
        group: non_empty(c, m, "group"),
        resynchronization_period: non_empty(c, m, "resynchronizationPeriod"),
    })
}

/// `apiVersion` must be `version` or `group/version` (empty means preferred).
fn api_version(c: &mut Checker, m: &Map<String, Value>) -> Option<String> {
    let v = non_empty(c, m, "apiVersion")?;
    if let Err(e) = group_version(&v) {
        c.err("apiVersion", format!("{v:?} is invalid: {e}"));
    }
    Some(v)
}

/// `kind` is required and must not be empty; it is resolved at run time.
fn kind(c: &mut Checker, m: &Map<String, Value>) -> String {
    c.req_non_empty(m, "", "kind").unwrap_or_default()
}

/// `executeHookOnEvent` wins over its deprecated alias `watchEvent`; with
/// neither the hook runs on all three events; `[]` means on none.
fn events(c: &mut Checker, m: &Map<String, Value>) -> Vec<WatchEventType> {
    let on_event = m
        .get("executeHookOnEvent")
        .and_then(|v| event_list(c, "executeHookOnEvent", v));
    let watch = m
        .get("watchEvent")
        .and_then(|v| event_list(c, "watchEvent", v));
    on_event
        .or(watch)
        .unwrap_or_else(|| WatchEventType::ALL.to_vec())
}

fn event_list(c: &mut Checker, field: &str, v: &Value) -> Option<Vec<WatchEventType>> {
    let items = c.as_array(field, v, 0)?;
    let mut out = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match c.as_enum(&format!("{field}[{i}]"), item, EVENTS).as_deref() {
            Some("Added") => out.push(WatchEventType::Added),
            Some("Modified") => out.push(WatchEventType::Modified),
            Some(_) => out.push(WatchEventType::Deleted),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// A `metadata.name` field selector cannot be combined with matchNames.
fn check_name_exclusive(c: &mut Checker, names: Option<&[String]>, fields: &[FieldRequirement]) {
    if names.is_none_or(|n| n.is_empty()) {
        return;
    }
    for _ in fields.iter().filter(|f| f.field == "metadata.name") {
        c.err(
            "fieldSelector",
            "fieldSelector 'metadata.name' and nameSelector.matchNames are mutually exclusive; \
             use only one of them",
        );
    }
}
