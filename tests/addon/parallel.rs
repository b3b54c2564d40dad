//! Modules of one order run side by side (issue 28): each module's beforeHelm hook
//! and the global beforeAll/afterAll hooks write their start and end times
//! (`date +%s%N`) to `$OUT_DIR/times.log`, and the tests judge the intervals: the
//! modules of one order overlap, a module of the next order starts only after every
//! one of the previous order ended, beforeAll ends before any module starts and
//! afterAll starts after every module ended; `--module-run-parallelism 1` runs them
//! one after the other. A failing module holds back the next order while its
//! siblings install their releases, until its fix arrives through the ConfigMap.

use crate::harness::{Addon, chart, rec, refs};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(90);

/// A hook with `config` that records its start and end as `tag` around a sleep.
fn timed(tag: &str, config: &str, sleep: &str) -> String {
    let body = format!(
        "echo \"start {tag} $(date +%s%N)\" >> \"$OUT_DIR/times.log\"\nsleep {sleep}\n\
         echo \"end {tag} $(date +%s%N)\" >> \"$OUT_DIR/times.log\""
    );
    rec(tag, config, &body)
}

/// Modules `(dir, name)` (enabled, each a chart and a timed beforeHelm hook), and
/// global beforeAll and afterAll hooks, timed too.
fn layout(modules: &[(&str, &str)]) -> Vec<(String, String)> {
    let enabled: String = modules
        .iter()
        .map(|(_, name)| format!("{name}Enabled: true\n"))
        .collect();
    let mut files = vec![
        ("modules/values.yaml".to_string(), enabled),
        (
            "global-hooks/before".into(),
            timed(
                "beforeAll",
                r#"{"configVersion":"v1","beforeAll":1}"#,
                "0.2",
            ),
        ),
        (
            "global-hooks/after".into(),
            timed("afterAll", r#"{"configVersion":"v1","afterAll":1}"#, "0"),
        ),
    ];
    for (dir, name) in modules {
        let config = r#"{"configVersion":"v1","beforeHelm":1}"#;
        files.push((
            format!("modules/{dir}/hooks/before-helm"),
            timed(name, config, "1"),
        ));
        files.extend(chart(&format!("modules/{dir}"), name, name));
    }
    files
}

/// Every `(start, end)` interval recorded per tag, in the order they began.
fn intervals(addon: &Addon) -> BTreeMap<String, Vec<(u128, u128)>> {
    let text = std::fs::read_to_string(addon.dir.0.join("out/times.log")).unwrap_or_default();
    let mut open: BTreeMap<String, u128> = BTreeMap::new();
    let mut done: BTreeMap<String, Vec<(u128, u128)>> = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(what), Some(tag), Some(at)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let at: u128 = at.parse().expect("nanoseconds");
        match what {
            "start" => {
                open.insert(tag.to_string(), at);
            }
            _ => {
                let start = open.remove(tag).expect("a start before its end");
                done.entry(tag.to_string()).or_default().push((start, at));
            }
        }
    }
    done
}

/// Waits until every tag in `tags` has a finished interval; the first of each.
fn first_runs(addon: &Addon, tags: &[&str]) -> BTreeMap<String, (u128, u128)> {
    let deadline = Instant::now() + LONG;
    loop {
        let all = intervals(addon);
        if tags.iter().all(|t| all.contains_key(*t)) {
            return tags.iter().map(|t| (t.to_string(), all[*t][0])).collect();
        }
        assert!(
            Instant::now() < deadline,
            "runs of {tags:?} not all recorded: {all:?}\nlogs:\n{}",
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const FIRST: [(&str, &str); 3] = [
    ("001-alpha", "alpha"),
    ("001-bravo", "bravo"),
    ("001-charlie", "charlie"),
];

fn side_by_side(major: u32) {
    let mut modules = FIRST.to_vec();
    modules.push(("002-delta", "delta"));
    let mut files = layout(&modules);
    // alpha and bravo start up with onStartup and a kubernetes binding each: their
    // Synchronization runs inside the parallel run, before their beforeHelm.
    let watch = r#"{"configVersion":"v1","onStartup":1,"kubernetes":[{"name":"cms","apiVersion":"v1","kind":"ConfigMap","nameSelector":{"matchNames":["absent"]}}]}"#;
    for m in ["alpha", "bravo"] {
        let tag = format!("{m}-watch");
        files.push((format!("modules/001-{m}/hooks/watch"), rec(&tag, watch, "")));
    }
    let env = [("ADDON_OPERATOR_MODULE_RUN_PARALLELISM", "3")];
    let addon = Addon::start_with(&refs(&files), Some(json!({})), major, &env);
    addon.wait_ready();
    let runs = first_runs(
        &addon,
        &[
            "beforeAll",
            "alpha",
            "bravo",
            "charlie",
            "delta",
            "afterAll",
        ],
    );
    let order1 = ["alpha", "bravo", "charlie"].map(|m| runs[m]);
    let latest_start = order1.iter().map(|r| r.0).max().expect("runs");
    let earliest_end = order1.iter().map(|r| r.1).min().expect("runs");
    let latest_end = order1.iter().map(|r| r.1).max().expect("runs");
    assert!(
        latest_start < earliest_end,
        "the three modules of order 1 ran at once: {runs:?}"
    );
    assert!(
        runs["delta"].0 >= latest_end,
        "delta (order 2) started before order 1 ended: {runs:?}"
    );
    assert!(
        runs["beforeAll"].1 <= order1.iter().map(|r| r.0).min().expect("runs"),
        "beforeAll ended before any module started: {runs:?}"
    );
    assert!(
        runs["afterAll"].0 >= runs["delta"].1,
        "afterAll started after every module: {runs:?}"
    );
    for m in ["alpha", "bravo", "charlie", "delta"] {
        let cm = addon.object("v1", "ConfigMap", m).expect("released");
        assert_eq!(cm["data"]["enabledModules"], "alpha,bravo,charlie,delta");
        let line =
            format!("module_run_seconds_count{{activation=\"OperatorStartup\",module=\"{m}\"}}");
        assert!(addon.metrics().contains(&line), "{line} not scraped");
    }
    addon.wait_log(&["parallel module run", "alpha,bravo,charlie"], LONG);
    let runs = addon.runs();
    for m in ["alpha", "bravo"] {
        let tag = format!("{m}-watch");
        // onStartup's context is `{"binding":"onStartup"}`, a Synchronization's has a type.
        let kinds: Vec<&str> = (runs.iter())
            .filter(|(t, _)| *t == tag)
            .filter_map(|(_, ctx)| ctx[0]["type"].as_str().or(ctx[0]["binding"].as_str()))
            .collect();
        assert_eq!(kinds, ["onStartup", "Synchronization"], "{m}");
        assert_eq!(
            kinds,
            [&json!("onStartup"), &json!("Synchronization")],
            "{m}"
        );
        let sync = runs.iter().rposition(|(t, _)| *t == tag);
        let before_helm = runs.iter().position(|(t, _)| t == m);
        assert!(sync < before_helm, "{m}: Synchronization before beforeHelm");
    }
}

#[test]
fn modules_of_one_order_run_at_once_and_the_next_order_after_them_helm4() {
    side_by_side(4);
}

#[test]
fn modules_of_one_order_run_at_once_and_the_next_order_after_them_helm3() {
    side_by_side(3);
}

#[test]
fn parallelism_1_runs_modules_of_one_order_one_after_the_other() {
    let env = [("ADDON_OPERATOR_MODULE_RUN_PARALLELISM", "1")];
    let addon = Addon::start_with(&refs(&layout(&FIRST)), Some(json!({})), 4, &env);
    addon.wait_ready();
    let runs = first_runs(&addon, &["alpha", "bravo", "charlie"]);
    assert!(
        runs["alpha"].1 <= runs["bravo"].0 && runs["bravo"].1 <= runs["charlie"].0,
        "one after the other, by name: {runs:?}"
    );
    let logs = addon.logs();
    assert!(!logs.contains("parallel module run"), "{logs}");
}

fn module_state(addon: &Addon, name: &str) -> Value {
    let list: Value =
        serde_json::from_str(&addon.cli(&["module", "list", "-o", "json"])).expect("json");
    let modules = list["modules"].as_array().cloned().unwrap_or_default();
    modules
        .into_iter()
        .find(|m| m["name"] == name)
        .unwrap_or(Value::Null)
}

fn held_back(major: u32) {
    let mut files = layout(&[
        ("001-alpha", "alpha"),
        ("001-bravo", "bravo"),
        ("002-delta", "delta"),
    ]);
    files.push((
        "modules/values.yaml".into(),
        "alphaEnabled: true\nbravoEnabled: true\nstrictEnabled: true\ndeltaEnabled: true\n".into(),
    ));
    // strict (order 1) refuses to render without strict.x.
    files.push((
        "modules/001-strict/Chart.yaml".into(),
        "apiVersion: v2\nname: strict\nversion: 0.0.1\n".into(),
    ));
    files.push((
        "modules/001-strict/templates/cm.yaml".into(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\ndata:\n  x: {{ required \"x is required\" .Values.strict.x | quote }}\n".into(),
    ));
    let env = [("ADDON_OPERATOR_MODULE_RUN_PARALLELISM", "4")];
    let addon = Addon::start_with(&refs(&files), Some(json!({})), major, &env);
    // strict's siblings converge: their releases exist.
    for m in ["alpha", "bravo"] {
        addon.wait_object("ConfigMap", m, |o| o.is_some());
    }
    // strict failed twice (its retry came 5 s later), and delta still waits.
    let deadline = Instant::now() + LONG;
    let failures = || {
        let logs = addon.logs();
        let failed = |l: &&str| l.contains("module run failed") && l.contains("x is required");
        logs.lines().filter(failed).count()
    };
    while failures() < 2 {
        assert!(
            Instant::now() < deadline,
            "no retry; logs:\n{}",
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(module_state(&addon, "strict")["state"], "Failed");
    assert_eq!(module_state(&addon, "delta")["state"], "Queued");
    assert!(!intervals(&addon).contains_key("delta"), "delta's hook ran");
    assert!(addon.revisions("delta").is_empty(), "delta was released");
    // The fix lets the next order go on.
    addon.set_config("strict", "x: fixed\n");
    addon.wait_object("ConfigMap", "delta", |o| o.is_some());
    addon.wait_ready();
    let steps = addon.steps();
    let last_strict = steps.iter().rposition(|s| s == "helm:upgrade:strict");
    let delta = steps.iter().position(|s| s == "delta");
    assert!(
        last_strict.is_some() && delta > last_strict,
        "delta ran after strict's release: {steps:#?}"
    );
    let strict = addon.object("v1", "ConfigMap", "strict").expect("strict");
    assert_eq!(strict["data"]["x"], "fixed");
}

#[test]
fn a_failing_module_holds_back_the_next_order_but_not_its_siblings_helm4() {
    held_back(4);
}

#[test]
fn a_failing_module_holds_back_the_next_order_but_not_its_siblings_helm3() {
    held_back(3);
}

#[test]
fn a_failed_synchronization_in_a_parallel_run_goes_back_to_the_main_queue() {
    let mut files = layout(&[
        ("001-alpha", "alpha"),
        ("001-bravo", "bravo"),
        ("002-delta", "delta"),
    ]);
    // alpha's Synchronization fails twice, then succeeds: the main queue retries it
    // (at once, then after its backoff), then alpha's run goes on, then delta's.
    let watch = r#"{"configVersion":"v1","kubernetes":[{"name":"cms","apiVersion":"v1","kind":"ConfigMap","nameSelector":{"matchNames":["absent"]}}]}"#;
    let body = "n=$(cat \"$OUT_DIR/sync-count\" 2>/dev/null || echo 0)\n\
                echo $((n + 1)) > \"$OUT_DIR/sync-count\"\n[ \"$n\" -ge 2 ]";
    files.push((
        "modules/001-alpha/hooks/watch".into(),
        rec("alpha-sync", watch, body),
    ));
    let env = [("ADDON_OPERATOR_MODULE_RUN_PARALLELISM", "2")];
    let addon = Addon::start_with(&refs(&files), Some(json!({})), 4, &env);
    addon.wait_ready();
    for m in ["alpha", "bravo", "delta"] {
        addon.wait_object("ConfigMap", m, |o| o.is_some());
    }
    let steps = addon.steps();
    let syncs = steps.iter().filter(|s| *s == "alpha-sync").count();
    assert_eq!(syncs, 3, "two failures, one success: {steps:#?}");
    let last_sync = steps.iter().rposition(|s| s == "alpha-sync");
    let alpha = steps.iter().position(|s| s == "alpha");
    let alpha_helm = steps.iter().position(|s| s == "helm:upgrade:alpha");
    let delta = steps.iter().position(|s| s == "delta");
    assert!(last_sync < alpha && alpha < alpha_helm, "{steps:#?}");
    assert!(
        alpha_helm < delta,
        "delta after alpha's release: {steps:#?}"
    );
    let bravo_helm = steps.iter().position(|s| s == "helm:upgrade:bravo");
    assert!(
        bravo_helm < last_sync,
        "bravo did not wait for alpha: {steps:#?}"
    );
}
