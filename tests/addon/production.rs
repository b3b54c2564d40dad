//! addon-operator's observable surface after a scenario that exercises it: every
//! metric name of flant's list (spec §6) scraped with its labels, and every debug
//! CLI command answering in text and JSON.

use crate::harness::{Addon, NS, chart, rec};
use serde_json::Value;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

fn layout() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = vec![
        (
            "global-hooks/hooks/g".into(),
            rec(
                "g",
                r#"{"configVersion":"v1","onStartup":1,"beforeAll":1,"kubernetes":[{"name":"cms","apiVersion":"v1","kind":"ConfigMap","jqFilter":".metadata.name"}]}"#,
                "",
            ),
        ),
        ("modules/values.yaml".into(), "mEnabled: true\n".into()),
        (
            "modules/001-m/hooks/h".into(),
            rec(
                "m",
                r#"{"configVersion":"v1","beforeHelm":1,"afterDeleteHelm":1}"#,
                // afterDeleteHelm fails once: module_delete_errors_total.
                r#"if grep -q afterDeleteHelm "$BINDING_CONTEXT_PATH" && [ ! -e "$OUT_DIR/failed" ]; then touch "$OUT_DIR/failed"; exit 1; fi"#,
            ),
        ),
    ];
    files.extend(chart("modules/001-m", "m", "m"));
    files
}

#[test]
fn every_metric_name_and_debug_command_answers() {
    let files = layout();
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let env = [("ADDON_OPERATOR_RESOURCES_CHECK_PERIOD", "1s")];
    let addon = Addon::start_with(&refs, None, 4, &env);
    addon.wait_ready();

    // Every debug CLI command, in text and JSON.
    for cmd in [
        &["queue", "list"][..],
        &["queue", "main"],
        &["hook", "list"],
        &["global", "list"],
        &["global", "values"],
        &["global", "config"],
        &["global", "patches"],
        &["global", "snapshots"],
        &["module", "list"],
        &["module", "values", "m"],
        &["module", "config", "m"],
        &["module", "patches", "m"],
        &["module", "snapshots", "m"],
        &["module", "resource-monitor"],
    ] {
        let json = addon.cli(&[cmd, &["-o", "json"]].concat());
        serde_json::from_str::<Value>(&json)
            .unwrap_or_else(|e| panic!("{cmd:?} -o json: {e}: {json}"));
        let text = addon.cli(&[cmd, &["-o", "text"]].concat());
        assert!(!text.trim().is_empty(), "{cmd:?} -o text printed nothing");
    }
    let manifest = crate::harness::manifest_docs(&addon.cli(&["module", "render", "m"]));
    assert_eq!(manifest.len(), 1, "{manifest:?}");
    assert_eq!(manifest[0]["kind"], "ConfigMap", "{manifest:?}");

    // A rendered object deleted (the resource monitor), a bad ConfigMap, then the
    // module disabled (its afterDeleteHelm fails once).
    addon
        .sim
        .delete("v1", "ConfigMap", NS, "m")
        .expect("delete");
    addon.wait_object("ConfigMap", "m", |o| o.is_some());
    addon.set_config("global", "a: [1");
    addon.wait_log(&["ConfigMap is invalid"], LONG);
    addon.set_config("global", "a: 1\n");
    addon.set_config("mEnabled", "false");
    addon.wait_log(&["module delete failed, will retry"], LONG);
    addon.wait_object("ConfigMap", "m", |o| o.is_none());

    let body = addon.metrics();
    let has = |series_start: &str| body.lines().any(|l| l.starts_with(series_start));
    for name in [
        "binding_count{",
        "config_values_errors_total ",
        "modules_discover_errors_total ",
        "module_run_seconds_bucket{",
        "module_delete_errors_total{module=\"m\"}",
        "module_hook_run_seconds_bucket{",
        "module_hook_run_user_cpu_seconds_bucket{",
        "module_hook_run_sys_cpu_seconds_bucket{",
        "module_hook_run_max_rss_bytes{",
        "module_hook_success_total{",
        "module_hook_errors_total{",
        "global_hook_run_seconds_bucket{",
        "global_hook_run_max_rss_bytes{",
        "global_hook_success_total{",
        "convergence_seconds{",
        "convergence_total{",
        "module_helm_seconds_bucket{",
        "helm_operation_seconds_bucket{",
        "task_wait_in_queue_seconds_total{",
        "tasks_queue_length{queue=\"main\"}",
        "live_ticks ",
        "modules_absent_resources_total{module=\"m\",resource=\"addons/ConfigMap/m\"}",
        "kube_snapshot_objects{binding=\"cms\",hook=\"g\",kind=\"ConfigMap\",module=\"\",queue=\"main\"}",
        "kube_snapshot_bytes{",
        "kube_jq_filter_duration_seconds_bucket{",
        "kube_event_duration_seconds_bucket{",
        "kubernetes_client_request_result_total{",
        "kubernetes_client_request_latency_seconds_bucket{",
        "tasks_queue_action_duration_seconds_bucket{",
    ] {
        assert!(
            has(&format!("addon_operator_{name}")),
            "no addon_operator_{name} in\n{body}"
        );
    }
    let errors = crate::common::metric(&body, "addon_operator_config_values_errors_total ");
    assert_eq!(errors, Some(1.0));
    // modules_helm_release_redeployed_total: tests/addon/autoheal.rs.
}
