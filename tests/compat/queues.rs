//! Queues and combining through both operators: named queues (`queue:` on a
//! kubernetes and a schedule binding), many changes while a slow hook runs (the
//! events pile up and are combined into one run's binding contexts), `group`
//! (combined group contexts collapse to the last one per group) and
//! executeHookOnEvent with a subset of events.
//!
//! Where a run's batch ends depends on timing, in flant's operator as in ours, so the
//! comparison is normalised: per hook, the multiset of events seen (binding, type,
//! watchEvent, object name, filterResult), the Synchronization contexts exactly, the
//! last group context (the snapshot after the scripted change settled), and the
//! (hook, binding, queue) label sets of the run metrics.

use crate::common::{Operator, http_get};
use crate::oracle::{Pair, by_tag, differences, recorder};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The burst's size: ConfigMaps created, then changed, then deleted at once.
const BURST: usize = 30;

fn hooks(ns: &str) -> Vec<(&'static str, String)> {
    let in_ns = format!("namespace:\n    nameSelector:\n      matchNames: [{ns}]");
    let slow = "sleep 0.3\n";
    vec![
        (
            "burst.sh",
            recorder(
                "burst",
                &format!(
                    "configVersion: v1\nkubernetes:\n\
                     - name: burst\n  kind: ConfigMap\n  {in_ns}\n  labelSelector:\n    matchLabels: {{burst: \"yes\"}}\n  jqFilter: .data\n\
                     - name: mods\n  kind: Secret\n  {in_ns}\n  jqFilter: .data\n  executeHookOnEvent: [Modified]\n"
                ),
            ) + slow,
        ),
        (
            "grouped.sh",
            recorder(
                "grouped",
                &format!(
                    "configVersion: v1\nkubernetes:\n\
                     - name: g-a\n  kind: ConfigMap\n  {in_ns}\n  labelSelector:\n    matchLabels: {{burst: \"yes\"}}\n  jqFilter: .data\n  group: g\n  queue: group-q\n\
                     - name: g-b\n  kind: Secret\n  {in_ns}\n  jqFilter: .metadata.name\n  group: g\n  queue: group-q\n"
                ),
            ) + slow,
        ),
        (
            "queued.sh",
            recorder(
                "queued",
                &format!(
                    "configVersion: v1\nkubernetes:\n\
                     - name: side\n  kind: ConfigMap\n  {in_ns}\n  labelSelector:\n    matchLabels: {{side: \"yes\"}}\n  jqFilter: .data\n  queue: side-q\n\
                     schedule:\n- name: tick\n  crontab: \"*/2 * * * * *\"\n  queue: sched-q\n"
                ),
            ),
        ),
    ]
}

/// A List of ConfigMaps `c0..c{BURST}` (label burst) and `side0..1` (label side),
/// each with `data.v = v`.
fn configmaps(ns: &str, v: u32) -> String {
    let mut items: Vec<String> = (0..BURST)
        .map(|i| format!("- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}, namespace: {ns}, labels: {{burst: \"yes\"}}}}, data: {{v: \"{v}\"}}}}"))
        .collect();
    items.extend((0..2).map(|i| format!("- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: side{i}, namespace: {ns}, labels: {{side: \"yes\"}}}}, data: {{v: \"{v}\"}}}}")));
    format!("apiVersion: v1\nkind: List\nitems:\n{}\n", items.join("\n"))
}

/// Secrets `s0..s4` with `data.k = value` (base64).
fn secrets(ns: &str, value: &str) -> String {
    let items: Vec<String> = (0..5)
        .map(|i| format!("- {{apiVersion: v1, kind: Secret, metadata: {{name: s{i}, namespace: {ns}}}, data: {{k: \"{value}\"}}}}"))
        .collect();
    format!("apiVersion: v1\nkind: List\nitems:\n{}\n", items.join("\n"))
}

/// Per hook tag: the Synchronization contexts as they are, and one line per event
/// context (binding, type, watchEvent, object name, filterResult), sorted: the
/// multiset of what the hook saw, whatever the batches.
fn events(op: &Operator) -> BTreeMap<String, BTreeSet<String>> {
    by_tag(op)
        .into_iter()
        .filter(|(tag, _)| tag != "grouped")
        .map(|(tag, ctxs)| {
            let mut lines: Vec<String> = ctxs
                .iter()
                .filter(|c| c["type"] != "Schedule" || c["binding"] != "tick")
                .map(|c| match c["type"].as_str() {
                    Some("Event") => format!(
                        "{} {} {} {} {}",
                        c["binding"],
                        c["type"],
                        c["watchEvent"],
                        c["object"]["metadata"]["name"],
                        c["filterResult"]
                    ),
                    _ => c.to_string(),
                })
                .collect();
            lines.sort();
            // A multiset as a set: each line with how many times it came.
            let mut counted = BTreeSet::new();
            for chunk in lines.chunk_by(|a, b| a == b) {
                counted.insert(format!("{} ×{}", chunk[0], chunk.len()));
            }
            (tag, counted)
        })
        .collect()
}

/// The largest number of binding contexts one run of `tag` received.
fn largest_batch(op: &Operator, tag: &str) -> usize {
    op.runs()
        .iter()
        .filter(|(t, _)| t == tag)
        .map(|(_, c)| c.as_array().map_or(0, Vec::len))
        .max()
        .unwrap_or(0)
}

/// The last context the grouped hook received, and whether every one was a Group
/// context of group `g`.
fn last_group_context(op: &Operator) -> (Option<Value>, bool) {
    let all = by_tag(op).remove("grouped").unwrap_or_default();
    let all_group = all
        .iter()
        .all(|c| c["type"] == "Group" && c["groupName"] == "g");
    (all.last().cloned(), all_group)
}

/// The (hook, binding, queue) labels of the hook-run metric.
fn run_labels(port: u16) -> BTreeSet<String> {
    let page = http_get(port, "/metrics").1;
    page.lines()
        .filter(|l| l.starts_with("shell_operator_hook_run_seconds_count{"))
        .map(|l| {
            let labels = l.split(['{', '}']).nth(1).unwrap_or("");
            let mut kept: Vec<&str> = labels
                .split(',')
                .filter(|kv| {
                    ["hook=", "binding=", "queue="]
                        .iter()
                        .any(|k| kv.starts_with(k))
                })
                .collect();
            kept.sort();
            kept.join(",")
        })
        .collect()
}

/// Waits until neither operator's hooks ran for 2 s, the schedule's ticks aside.
fn settle(pair: &Pair) {
    let count = |op: &Operator| {
        op.runs()
            .iter()
            .filter(|(_, c)| c[0]["binding"] != "tick")
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut last = (count(&pair.flant), count(&pair.ours));
    let mut since = std::time::Instant::now();
    while since.elapsed() < Duration::from_secs(2) {
        assert!(
            std::time::Instant::now() < deadline,
            "hooks never settled: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
        let now = (count(&pair.flant), count(&pair.ours));
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        }
    }
}

#[test]
fn combined_runs_named_queues_and_groups_see_the_same_events() {
    let cp = control_plane::shared();
    let ns = cp.namespace("compat-queues");
    let kubeconfig = cp.admin_kubeconfig();
    let pair = Pair::start(
        &hooks(&ns),
        &["--kube-config", kubeconfig.to_str().expect("utf8")],
    );
    pair.wait_both("\"Synchronization\"");
    settle(&pair);

    let mut report = Vec::new();
    let steps = [
        configmaps(&ns, 1),
        secrets(&ns, "YQ=="),
        configmaps(&ns, 2),
        secrets(&ns, "Yg=="),
    ];
    for (i, step) in steps.iter().enumerate() {
        cp.apply(step).unwrap_or_else(|e| panic!("{e}"));
        settle(&pair);
        let (f, o) = (
            last_group_context(&pair.flant),
            last_group_context(&pair.ours),
        );
        assert!(f.1 && o.1, "every grouped context is a Group context");
        if f.0 != o.0 {
            report.push(format!(
                "the last group context after step {i}:\n  flant: {:?}\n  ours:  {:?}",
                f.0, o.0
            ));
        }
    }
    cp.kubectl(&["-n", &ns, "delete", "configmaps", "-l", "burst=yes"])
        .unwrap_or_else(|e| panic!("{e}"));
    settle(&pair);

    let (flant, ours) = (events(&pair.flant), events(&pair.ours));
    let created = |m: &BTreeMap<String, BTreeSet<String>>| {
        m.get("burst").map_or(0, |v| {
            v.iter()
                .filter(|l| l.starts_with("\"burst\" \"Event\" \"Added\""))
                .count()
        })
    };
    assert_eq!(
        created(&flant),
        BURST,
        "flant's hook saw every creation: {flant:#?}"
    );
    for (who, op) in [("flant", &pair.flant), ("ours", &pair.ours)] {
        assert!(
            largest_batch(op, "burst") > 1,
            "{who}: the burst was combined into fewer runs: {:?}",
            op.runs()
        );
    }
    report.extend(differences("events", &flant, &ours));
    let labels = BTreeMap::from([
        ("flant".to_string(), run_labels(pair.flant_port)),
        ("ours".to_string(), run_labels(pair.ours.port())),
    ]);
    assert!(
        labels["flant"]
            .iter()
            .any(|l| l.contains("queue=\"side-q\"")),
        "flant ran the side binding in its queue: {labels:?}"
    );
    if labels["flant"] != labels["ours"] {
        report.push(format!("hook run metric labels: {labels:#?}"));
    }
    assert!(
        report.is_empty(),
        "{} difference(s) between flant's shell-operator and ours:\n{}",
        report.len(),
        report.join("\n")
    );
}
