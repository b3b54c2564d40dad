//! The module lifecycle end to end (issue 29): a failing module never blocks its
//! own fix nor the change of another module of its order (the next order waits
//! for it, see `parallel.rs`), disabling it takes effect at once,
//! releases of modules disabled while the operator was down are deleted at start,
//! and a binding with `waitForSynchronization: false` on its own queue does not
//! hold back the module's helm run.

use crate::harness::{Addon, NS, chart, helm_bin, rec, refs, within};
use serde_json::{Value, json};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
/// How soon a change must reach a module that is failing (the retry is 5 s away).
const AT_ONCE: Duration = Duration::from_secs(4);

/// Module `strict` whose chart refuses to render without `strict.x`.
fn strict() -> Vec<(String, String)> {
    vec![
        ("modules/001-strict/Chart.yaml".into(), "apiVersion: v2\nname: strict\nversion: 0.0.1\n".into()),
        (
            "modules/001-strict/templates/cm.yaml".into(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\ndata:\n  x: {{ required \"x is required\" .Values.strict.x | quote }}\n".into(),
        ),
    ]
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

#[test]
fn a_failing_module_gets_its_fix_at_once_and_never_delays_another_module() {
    let mut layout = strict();
    layout.push((
        "modules/values.yaml".into(),
        "strictEnabled: true\notherEnabled: true\n".into(),
    ));
    // Of strict's order: the next order would wait for strict (`parallel.rs`).
    layout.extend(chart("modules/001-other", "other", "other"));
    let addon = Addon::start(&refs(&layout), Some(json!({})), 4);
    addon.wait_log(&["module run failed", "strict", "x is required"], LONG);
    // The other module of its order runs although strict failed.
    addon.wait_object("ConfigMap", "other", |o| o.is_some());
    let failed = module_state(&addon, "strict");
    assert_eq!(failed["state"], "Failed", "{failed}");
    assert!(
        failed["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("x is required")),
        "{failed}"
    );
    assert_eq!(failed["order"], 1);
    // Another module's configuration change is not held back by the failing one.
    addon.set_config("other", "v: 2\n");
    within(&addon, "other's new values", AT_ONCE, || {
        addon.object("v1", "ConfigMap", "other").is_some_and(|o| {
            o["data"]["values"]
                .as_str()
                .is_some_and(|v| v.contains("\"v\":2"))
        })
    });
    // The fix reaches the failing module at once, not at its next retry.
    addon.set_config("strict", "x: fixed\n");
    within(&addon, "strict's release with x", AT_ONCE, || {
        addon
            .object("v1", "ConfigMap", "strict")
            .is_some_and(|o| o["data"]["x"] == "fixed")
    });
    addon.wait_ready();
    assert_eq!(module_state(&addon, "strict")["state"], "Ready");
    assert_eq!(module_state(&addon, "strict").get("lastError"), None);
}

#[test]
fn disabling_a_failing_module_takes_effect_at_once() {
    let mut layout = strict();
    layout.push((
        "modules/002-shaky/enabled".into(),
        "#!/bin/sh\necho 'cannot decide' >&2\nexit 1\n".into(),
    ));
    let addon = Addon::start(&refs(&layout), Some(json!({"strictEnabled": "true"})), 4);
    addon.wait_log(&["module run failed", "strict", "x is required"], LONG);
    // A failing module, disabled by the ConfigMap: deleted at once.
    addon.set_config("strictEnabled", "false");
    within(&addon, "strict disabled", AT_ONCE, || {
        module_state(&addon, "strict")["state"] == "Disabled"
    });
    addon.wait_ready();
    addon.wait_log(&["module delete", "strict"], LONG);
    // A module whose enabled script fails stops the converge; disabling it in the
    // ConfigMap lets the converge finish at once.
    addon.set_config("shakyEnabled", "true");
    addon.wait_log(
        &["modules discovery failed", "shaky", "cannot decide"],
        LONG,
    );
    let port = addon.port();
    let waiting = || {
        let text = crate::common::http_get(port, "/status/converge?output=json").1;
        let status: Value = serde_json::from_str(&text).expect("json");
        status["CONVERGE_WAIT_TASK"] == true
    };
    assert!(!waiting(), "the converge is stuck on the script");
    addon.set_config("shakyEnabled", "false");
    within(&addon, "converge done", AT_ONCE, waiting);
    assert_eq!(module_state(&addon, "shaky")["state"], "Disabled");
    assert!(addon.revisions("strict").is_empty());
}

/// Installs `release` from `chart` with the real helm before the operator starts.
fn install(root: &std::path::Path, release: &str, chart: &str) {
    let out = std::process::Command::new(helm_bin(4))
        .args(["upgrade", "--install", release])
        .arg(root.join(chart))
        .args(["--set-json", r#"global={"enabledModules":[]}"#])
        .args(["--namespace", NS, "--kubeconfig"])
        .arg(root.join("kubeconfig"))
        .env("HOME", root.join("home"))
        .env("XDG_CACHE_HOME", root.join("home/cache"))
        .env("XDG_CONFIG_HOME", root.join("home/config"))
        .env("XDG_DATA_HOME", root.join("home/data"))
        .output()
        .expect("helm");
    assert!(
        out.status.success(),
        "helm install {release}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn releases_of_modules_disabled_while_down_are_deleted_at_start() {
    let after_delete = r#"{"configVersion":"v1","afterDeleteHelm":1}"#;
    let mut layout: Vec<(String, String)> = vec![
        (
            "modules/values.yaml".into(),
            "staleEnabled: true\nscriptedEnabled: true\nkeptEnabled: true\n".into(),
        ),
        (
            "modules/001-stale/hooks/h".into(),
            rec("stale", after_delete, ""),
        ),
        (
            "modules/002-scripted/hooks/h".into(),
            rec("scripted", after_delete, ""),
        ),
        (
            "modules/002-scripted/enabled".into(),
            "#!/bin/sh\necho false > \"$MODULE_ENABLED_RESULT\"\n".into(),
        ),
        (
            "modules/003-kept/hooks/h".into(),
            rec("kept", after_delete, ""),
        ),
    ];
    layout.extend(chart("modules/001-stale", "stale", "stale"));
    layout.extend(chart("modules/002-scripted", "scripted", "scripted"));
    layout.extend(chart("modules/003-kept", "kept", "kept"));
    let before = |root: &std::path::Path| {
        for (release, dir) in [
            ("stale", "modules/001-stale"),
            ("scripted", "modules/002-scripted"),
            ("kept", "modules/003-kept"),
        ] {
            install(root, release, dir);
        }
    };
    // `stale` was disabled in the ConfigMap and `scripted` by its script while no
    // operator ran; `kept` stays enabled.
    let cm = json!({"staleEnabled": "false"});
    let addon = Addon::start_after(&refs(&layout), Some(cm), 4, &[], &before);
    addon.wait_ready();
    addon.wait_steps(LONG, |s| {
        s.iter().any(|t| t == "stale") && s.iter().any(|t| t == "scripted")
    });
    for release in ["stale", "scripted"] {
        within(&addon, &format!("release {release} deleted"), LONG, || {
            addon.revisions(release).is_empty()
        });
        assert!(addon.object("v1", "ConfigMap", release).is_none());
    }
    let deleted: Vec<String> = addon
        .runs()
        .into_iter()
        .filter(|(_, ctx)| ctx[0]["binding"] == "afterDeleteHelm")
        .map(|(tag, _)| tag)
        .collect();
    assert_eq!(deleted, ["scripted", "stale"], "reverse module order");
    assert!(
        !addon.revisions("kept").is_empty(),
        "an enabled module keeps its release"
    );
}

#[test]
fn a_binding_that_does_not_wait_for_synchronization_does_not_hold_back_helm() {
    let config = r#"{"configVersion":"v1","kubernetes":[{"name":"cms","kind":"ConfigMap","queue":"slow","waitForSynchronization":false,"executeHookOnEvent":[]}]}"#;
    // Its Synchronization blocks its own queue until the test says go.
    let body =
        r#"i=0; while [ ! -e "$OUT_DIR/go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"#;
    let mut layout: Vec<(String, String)> = vec![
        ("modules/values.yaml".into(), "waiterEnabled: true\n".into()),
        (
            "modules/001-waiter/hooks/h".into(),
            rec("waiter", config, body),
        ),
    ];
    layout.extend(chart("modules/001-waiter", "waiter", "waiter"));
    let addon = Addon::start(&refs(&layout), None, 4);
    addon.wait_steps(LONG, |s| s.iter().any(|t| t == "waiter"));
    within(
        &addon,
        "release while Synchronization runs",
        Duration::from_secs(30),
        || addon.object("v1", "ConfigMap", "waiter").is_some(),
    );
    addon.wait_ready();
    let runs: Vec<Value> = (addon.runs().into_iter())
        .filter(|(t, _)| t == "waiter")
        .map(|(_, ctx)| ctx)
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0][0]["type"], "Synchronization", "{runs:?}");
    assert!(!addon.dir.0.join("out/go").exists());
    std::fs::write(addon.dir.0.join("out/go"), "").expect("go");
}
