//! Config v1 (`configVersion: v1`): the top-level object, `onStartup`,
//! `schedule` and `settings`, and the order in which binding lists are read.
//! Kubernetes, admission and conversion bindings have their own files; this
//! one strings them together, checks `includeSnapshotsFrom` names and runs the
//! group merge.

use serde_json::{Map, Value};

use super::error::Problem;
use super::group;
use super::types::{ConfigVersion, HookConfig, HookKind, Lifecycle, ScheduleBinding, Settings};
use super::validate::{Checker, binding_at};
use super::{admission, conversion, kubernetes};
use crate::schedule::cron::CronSchedule;

const TOP_KEYS: &[&str] = &[
    "configVersion",
    "onStartup",
    "schedule",
    "kubernetes",
    "kubernetesValidating",
    "kubernetesMutating",
    "kubernetesCustomResourceConversion",
    "settings",
];

const CONVERSION: &str = "kubernetesCustomResourceConversion";

const SCHEDULE_KEYS: &[&str] = &[
    "name",
    "crontab",
    "allowFailure",
    "includeSnapshotsFrom",
    "queue",
    "group",
];

/// Parse a v1 config. Problems go to `probs`; the result is only meaningful
/// when none were recorded. Bindings are read in flant's order: kubernetes
/// first, because the others refer to kubernetes binding names.
pub(crate) fn parse(
    m: &Map<String, Value>,
    probs: &mut Vec<Problem>,
    kind: HookKind,
) -> HookConfig {
    top_level(m, probs, kind);
    let on_startup = m.get("onStartup").and_then(|v| on_startup(probs, v));
    let settings = m.get("settings").map(|v| settings(probs, v));
    let kube = each(m, "kubernetes", probs, kubernetes::parse_v1);
    let names: Vec<String> = kube.iter().map(|(_, b)| b.name.clone()).collect();
    let kubernetes = with_snapshots(kube, probs, &names, |b| &b.include_snapshots_from);
    let schedule = each(m, "schedule", probs, schedule);
    let mut config = HookConfig {
        version: ConfigVersion::V1,
        on_startup,
        kubernetes,
        schedule: with_snapshots(schedule, probs, &names, |b| &b.include_snapshots_from),
        validating: admission::parse_list(m, "kubernetesValidating", probs, &names),
        mutating: admission::parse_list(m, "kubernetesMutating", probs, &names),
        conversion: Vec::new(),
        settings: settings.unwrap_or_default(),
        lifecycle: lifecycle(m, probs, kind),
    };
    let conv = each(m, CONVERSION, probs, conversion::parse);
    config.conversion = with_snapshots(conv, probs, &names, |b| &b.include_snapshots_from);
    group::merge(&mut config);
    config
}

/// addon-operator's `beforeAll: ORDER`-style bindings the hook's kind allows, each an
/// integer like `onStartup`.
pub(crate) fn lifecycle(
    m: &Map<String, Value>,
    probs: &mut Vec<Problem>,
    kind: HookKind,
) -> Lifecycle {
    let mut out = Lifecycle::default();
    for key in kind.lifecycle_keys() {
        if let Some(v) = m.get(*key)
            && let Some(n) = Checker::new(probs, *key).as_int("", v)
        {
            out.set(key, n as f64);
        }
    }
    out
}

/// Strict top-level keys, and at least one key besides `configVersion`.
fn top_level(m: &Map<String, Value>, probs: &mut Vec<Problem>, kind: HookKind) {
    let mut c = Checker::new(probs, "");
    let allowed: Vec<&str> = TOP_KEYS
        .iter()
        .chain(kind.lifecycle_keys())
        .copied()
        .collect();
    c.strict("", m, &allowed);
    if m.len() < 2 {
        c.err(
            "",
            "config has nothing besides 'configVersion': add at least one binding \
             (onStartup, schedule, kubernetes, kubernetesValidating, kubernetesMutating, \
             kubernetesCustomResourceConversion) or settings",
        );
    }
}

/// `onStartup: ORDER`, an integer kept as f64 like flant.
pub(crate) fn on_startup(probs: &mut Vec<Problem>, v: &Value) -> Option<f64> {
    let mut c = Checker::new(probs, "onStartup");
    c.as_int("", v).map(|n| n as f64)
}

/// Parse every item of the binding list `key` (an array with at least one
/// item) with `parse_item`; each result comes with its location for messages.
pub(crate) fn each<T>(
    m: &Map<String, Value>,
    key: &str,
    probs: &mut Vec<Problem>,
    parse_item: fn(&mut Checker, &Value) -> Option<T>,
) -> Vec<(String, T)> {
    let Some(v) = m.get(key) else {
        return Vec::new();
    };
    let Some(items) = Checker::new(probs, "").as_array(key, v, 1) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = binding_at(key, i, item);
        if let Some(b) = parse_item(&mut Checker::new(probs, at.clone()), item) {
            out.push((at, b));
        }
    }
    out
}

/// Check each binding's `includeSnapshotsFrom` against the kubernetes names.
fn with_snapshots<T>(
    items: Vec<(String, T)>,
    probs: &mut Vec<Problem>,
    kube_names: &[String],
    snapshots: fn(&T) -> &Vec<String>,
) -> Vec<T> {
    let check = |(at, b): (String, T), probs: &mut Vec<Problem>| {
        group::check_snapshot_names(probs, &at, snapshots(&b), kube_names);
        b
    };
    items.into_iter().map(|item| check(item, probs)).collect()
}

/// A non-empty string field, or `None` (flant treats "" as unset).
pub(crate) fn non_empty(c: &mut Checker, m: &Map<String, Value>, key: &str) -> Option<String> {
    c.opt_str(m, "", key).filter(|s| !s.is_empty())
}

/// One `schedule` item.
fn schedule(c: &mut Checker, item: &Value) -> Option<ScheduleBinding> {
    let m = c.as_object("", item)?;
    c.strict("", m, SCHEDULE_KEYS);
    let crontab = c.req_str(m, "", "crontab");
    if let Some(crontab) = &crontab {
        check_crontab(c, crontab);
    }
    Some(ScheduleBinding {
        name: non_empty(c, m, "name").unwrap_or_else(|| "schedule".into()),
        crontab: crontab.unwrap_or_default(),
        allow_failure: c.opt_bool(m, "", "allowFailure").unwrap_or(false),
        queue: non_empty(c, m, "queue").unwrap_or_else(|| "main".into()),
        group: non_empty(c, m, "group"),
        include_snapshots_from: c
            .opt_str_list(m, "", "includeSnapshotsFrom", 1)
            .unwrap_or_default(),
    })
}

/// The crontab must pass the cron adapter the scheduler uses.
pub(crate) fn check_crontab(c: &mut Checker, crontab: &str) {
    if let Err(e) = CronSchedule::parse(crontab) {
        c.err("crontab", format!("{crontab:?} is invalid: {e}"));
    }
}

/// `settings: {executionMinInterval, executionBurst}`. Each field is checked
/// when present; flant effectively requires both, we do not.
fn settings(probs: &mut Vec<Problem>, v: &Value) -> Settings {
    let mut c = Checker::new(probs, "settings");
    let Some(m) = c.as_object("", v) else {
        return Settings::default();
    };
    c.strict("", m, &["executionMinInterval", "executionBurst"]);
    let interval = c.opt_str(m, "", "executionMinInterval").and_then(|s| {
        let parsed = crate::duration::go_duration(&s);
        parsed
            .map_err(|e| c.err("executionMinInterval", e.to_string()))
            .ok()
    });
    let burst = c.opt_int(m, "", "executionBurst").and_then(|n| {
        let parsed = u32::try_from(n);
        let msg = format!("{n} is invalid: expected an integer from 0 to {}", u32::MAX);
        parsed.map_err(|_| c.err("executionBurst", msg)).ok()
    });
    Settings {
        execution_min_interval: interval,
        execution_burst: burst,
    }
}
