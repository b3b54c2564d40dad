//! flant's documented contract kept while the engine got fast (issue 36): releases
//! deduplicated by their rendered objects (a value no template reads makes no new
//! revision, with helm 3 and 4), ConfigMap keys of modules that do not exist never
//! stop startup nor freeze later edits, an edit of a module's own section runs its
//! `enabled` script again, and a fresh module in maintenance is installed once.

use crate::harness::{Addon, NS, chart, eventually, rec, refs, rendered_values};
use serde_json::{Value, json};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// The labels of the storage Secret of `release`'s revision `revision`.
fn release_labels(addon: &Addon, release: &str, revision: u64) -> Value {
    let name = format!("sh.helm.release.v1.{release}.v{revision}");
    let secret = addon.sim.get("v1", "Secret", NS, &name);
    secret
        .map(|s| s["metadata"]["labels"].clone())
        .unwrap_or_default()
}

/// A module whose chart reads `.Values.stamp.shown` only, and a hook that patches
/// `/stamp/at` with a new value every second (a timestamp, as a status hook would).
fn stamp_module() -> Vec<(String, String)> {
    vec![
        ("modules/values.yaml".into(), "stampEnabled: true\n".into()),
        (
            "modules/001-stamp/values.yaml".into(),
            "stamp:\n  shown: a\n".into(),
        ),
        (
            "modules/001-stamp/Chart.yaml".into(),
            "apiVersion: v2\nname: stamp\nversion: 0.0.1\n".into(),
        ),
        (
            "modules/001-stamp/templates/cm.yaml".into(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stamp\ndata:\n  \
             shown: {{ .Values.stamp.shown | quote }}\n"
                .into(),
        ),
        (
            "modules/001-stamp/hooks/tick".into(),
            rec(
                "tick",
                r#"{"configVersion":"v1","schedule":[{"name":"tick","crontab":"* * * * * *"}]}"#,
                r#"echo "[{\"op\":\"add\",\"path\":\"/stamp/at\",\"value\":\"$(date +%s%N)\"}]" > "$VALUES_JSON_PATCH_PATH""#,
            ),
        ),
    ]
}

/// Seed 004, "Releases deduplication": a module run for values no template reads
/// renders the chart and stops there; helm stores no new revision. A value the
/// chart reads still upgrades.
fn a_value_no_template_reads_makes_no_new_revision(major: u32) {
    let addon = Addon::start(&refs(&stamp_module()), None, major);
    addon.wait_ready();
    assert_eq!(addon.revisions("stamp"), vec![1]);
    let ticks = |addon: &Addon| addon.steps().iter().filter(|s| *s == "tick").count();
    eventually(&addon, "three ticks after the install", || {
        ticks(&addon) >= 4
    });
    addon.wait_log(&["the rendered objects are the release's", "stamp"], LONG);
    let stopped = addon
        .logs()
        .matches("the rendered objects are the release's")
        .count();
    assert!(
        stopped >= 2,
        "{stopped} stopped upgrades; logs:\n{}",
        addon.logs()
    );
    assert_eq!(addon.revisions("stamp"), vec![1], "identical manifests");
    assert!(
        !addon.logs().contains("module run failed"),
        "a deliberate stop is no failure:\n{}",
        addon.logs()
    );

    addon.set_config("stamp", "shown: b\n");
    eventually(&addon, "the upgraded ConfigMap", || {
        addon
            .object("v1", "ConfigMap", "stamp")
            .map(|c| c["data"]["shown"].clone())
            == Some(json!("b"))
    });
    eventually(&addon, "revision 2", || {
        addon.revisions("stamp") == vec![1, 2]
    });
    // The ticks go on; the release stays at revision 2.
    let before = ticks(&addon);
    eventually(&addon, "more ticks", || ticks(&addon) >= before + 3);
    assert_eq!(addon.revisions("stamp"), vec![1, 2]);
}

#[test]
fn helm4_a_value_no_template_reads_makes_no_new_revision() {
    a_value_no_template_reads_makes_no_new_revision(4);
}

#[test]
fn helm3_a_value_no_template_reads_makes_no_new_revision() {
    a_value_no_template_reads_makes_no_new_revision(3);
}

/// flant ignores a ConfigMap section of a module that does not exist (a module
/// removed from the image): ours starts, names the key (with the likely module
/// for a typo) and counts it, and keeps applying every other edit.
#[test]
fn configmap_keys_of_unknown_modules_never_stop_startup_nor_freeze_edits() {
    let mut layout: Vec<(String, String)> =
        vec![("modules/values.yaml".into(), "web: {a: 1}\n".into())];
    layout.extend(chart("modules/001-web", "web", "web"));
    let cm = json!({"webEnabled": "true", "otherModule": "x: 1\n", "global": "g: 1\n"});
    let addon = Addon::start(&refs(&layout), Some(cm), 4);
    addon.wait_ready();
    eventually(&addon, "release web", || {
        rendered_values(&addon, "web") == Some(json!({"a": 1}))
    });
    let line = addon.wait_log(&["ConfigMap key of no module ignored", "otherModule"], LONG);
    assert!(line.contains("\"level\":\"warn\""), "{line}");
    let metric = "addon_operator_config_unknown_module_keys{key=\"otherModule\"} 1";
    assert!(addon.metrics().contains(metric), "{}", addon.metrics());

    // A typo arrives at run time: named with the module it likely meant.
    addon.set_config("wbe", "a: 3\n");
    addon.wait_log(&["'wbe' belongs to no module", "did you mean 'web'"], LONG);
    eventually(&addon, "both keys counted", || {
        let m = addon.metrics();
        m.contains("config_unknown_module_keys{key=\"wbe\"} 1") && m.contains(metric)
    });
    // Edits of the module's section and of its flag still apply.
    addon.set_config("web", "a: 2\n");
    eventually(&addon, "the module's section applied", || {
        rendered_values(&addon, "web") == Some(json!({"a": 2}))
    });
    addon.set_config("webEnabled", "false");
    eventually(&addon, "the module disabled", || {
        addon.object("v1", "ConfigMap", "web").is_none()
    });
    assert!(
        !addon.logs().contains("ConfigMap is invalid"),
        "{}",
        addon.logs()
    );
}

/// Seed 004, "Enabled script": the docs' script disables its module when
/// `param2` is `stopMePlease`; setting it in the module's own ConfigMap section
/// disables the module at once, and clearing it enables it again. Its runs are
/// measured as flant measures them (found by the generated corpus).
#[test]
fn an_edit_of_a_module_section_runs_its_enabled_script_again() {
    let script = r#"#!/bin/sh
param2=$(jq -r '.simpleModule.param2' "$VALUES_PATH")
if [ "$param2" = "stopMePlease" ]; then echo false > "$MODULE_ENABLED_RESULT"; else echo true > "$MODULE_ENABLED_RESULT"; fi
"#;
    let mut layout: Vec<(String, String)> = vec![
        (
            "modules/values.yaml".into(),
            "simpleModuleEnabled: true\n".into(),
        ),
        ("modules/001-simple-module/enabled".into(), script.into()),
    ];
    layout.extend(chart("modules/001-simple-module", "simple", "simpleModule"));
    let cm = json!({"simpleModule": "param2: go\n"});
    let addon = Addon::start(&refs(&layout), Some(cm), 4);
    addon.wait_ready();
    eventually(&addon, "installed", || {
        rendered_values(&addon, "simple") == Some(json!({"param2": "go"}))
    });
    // As flant: the script's CPU and memory, as module hook `enabled`.
    let metrics = addon.metrics();
    let series = |name: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with(&format!("addon_operator_module_hook_run_{name}{{"))
                    && l.contains("hook=\"enabled\"")
                    && l.contains("binding=\"enabled\"")
                    && l.contains("module=\"simple-module\"")
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert!(series("user_cpu_seconds_count") >= Some(1.0), "{metrics}");
    assert!(series("max_rss_bytes") > Some(0.0), "{metrics}");

    addon.set_config("simpleModule", "param2: stopMePlease\n");
    eventually(&addon, "disabled by its enabled script", || {
        addon.object("v1", "ConfigMap", "simple").is_none()
    });
    assert!(addon.revisions("simple-module").is_empty());

    addon.set_config("simpleModule", "param2: again\n");
    eventually(&addon, "enabled again", || {
        rendered_values(&addon, "simple") == Some(json!({"param2": "again"}))
    });
}

/// flant's newer releases: a module in maintenance (`NoResourceReconciliation`)
/// that has no release yet is installed once, its release labelled so; then helm
/// leaves it alone; once maintenance ends, one upgrade reconciles it and the label
/// says so.
#[test]
fn a_fresh_module_in_maintenance_is_installed_once_then_left_alone() {
    let mut layout: Vec<(String, String)> = vec![(
        "modules/values.yaml".into(),
        "kept: {a: 1}\nkeptEnabled: true\n".into(),
    )];
    layout.extend(chart("modules/001-kept", "kept", "kept"));
    let cm = json!({"keptMaintenance": "NoResourceReconciliation"});
    let addon = Addon::start(&refs(&layout), Some(cm), 4);
    addon.wait_ready();
    eventually(&addon, "installed in maintenance", || {
        rendered_values(&addon, "kept") == Some(json!({"a": 1}))
    });
    assert_eq!(addon.revisions("kept"), vec![1]);
    let label = "maintenance.deckhouse.io/no-resource-reconciliation";
    assert_eq!(release_labels(&addon, "kept", 1)[label], "true");

    // In maintenance: a changed value is not deployed, a deleted object not healed.
    addon.set_config("kept", "a: 2\n");
    addon.wait_log(&["module in maintenance", "kept"], LONG);
    addon
        .sim
        .delete("v1", "ConfigMap", NS, "kept")
        .expect("delete");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(addon.revisions("kept"), vec![1]);
    assert!(addon.object("v1", "ConfigMap", "kept").is_none());

    // Maintenance ends: one upgrade with the current values.
    addon.set_config("keptMaintenance", "");
    eventually(&addon, "reconciled", || {
        rendered_values(&addon, "kept") == Some(json!({"a": 2}))
    });
    assert_eq!(addon.revisions("kept"), vec![1, 2]);
    assert_eq!(release_labels(&addon, "kept", 2)[label], "false");
}
