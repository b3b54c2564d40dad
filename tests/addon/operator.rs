//! addon-operator end to end: the real binary, started as `addon-operator`, runs
//! global hooks and modules against kube-sim with the real helm (3 and 4), and the
//! tests check what a user sees: the order of hook runs and helm commands, the
//! values files hooks read, the objects the charts rendered, the release Secrets,
//! the ConfigMap after a config patch, and the metrics.

use crate::harness::{Addon, chart, rec};
use serde_json::{Value, json};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

fn files(list: Vec<(String, String)>) -> Vec<(String, String)> {
    list
}

fn as_refs(list: &[(String, String)]) -> Vec<(&str, String)> {
    list.iter().map(|(p, c)| (p.as_str(), c.clone())).collect()
}

/// `tag:binding` for hook runs, helm commands as they are.
fn steps_with_bindings(addon: &Addon) -> Vec<String> {
    addon
        .runs()
        .into_iter()
        .filter(|(t, _)| {
            !t.starts_with("helm:")
                || t.starts_with("helm:upgrade")
                || t.starts_with("helm:uninstall")
        })
        .map(|(t, ctx)| match ctx[0]["binding"].as_str() {
            Some(b) => format!("{t}:{b}"),
            None => t,
        })
        .collect()
}

fn startup_layout() -> Vec<(String, String)> {
    let mut f = files(vec![
        (
            "global-hooks/hooks/a-global".into(),
            rec(
                "g1",
                r#"{"configVersion":"v1","onStartup":1,"beforeAll":1}"#,
                r#"echo '[{"op":"add","path":"/global/discovered","value":"yes"}]' > "$VALUES_JSON_PATCH_PATH""#,
            ),
        ),
        (
            "global-hooks/hooks/b-global".into(),
            rec("g2", r#"{"configVersion":"v1","onStartup":2,"afterAll":1}"#, ""),
        ),
        (
            "modules/values.yaml".into(),
            "global:\n  owner: tests\nechoEnabled: true\nscriptedEnabled: true\ncmOffEnabled: true\n".into(),
        ),
        (
            "modules/001-echo/values.yaml".into(),
            "echo:\n  param: from-values-yaml\n  other: kept\n".into(),
        ),
        (
            "modules/001-echo/hooks/h".into(),
            rec(
                "echo",
                r#"{"configVersion":"v1","onStartup":1,"beforeHelm":1,"afterHelm":1}"#,
                r#"cp "$VALUES_PATH" "$OUT_DIR/echo-values.json"; cp "$CONFIG_VALUES_PATH" "$OUT_DIR/echo-config.json""#,
            ),
        ),
        (
            "modules/002-scripted/enabled".into(),
            "#!/bin/sh\necho false > \"$MODULE_ENABLED_RESULT\"\n".into(),
        ),
        (
            "modules/002-scripted/hooks/h".into(),
            rec("scripted", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
        (
            "modules/003-cm-off/hooks/h".into(),
            rec("cmoff", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
    ]);
    f.extend(chart("modules/001-echo", "echo", "echo"));
    f.extend(chart("modules/002-scripted", "scripted", "scripted"));
    f.extend(chart("modules/003-cm-off", "cm-off", "cmOff"));
    f
}

/// The seed's startup sequence, with helm `major`.
fn startup_sequence(major: u32) {
    let layout = startup_layout();
    let cm = json!({"cmOffEnabled": "false", "echo": "param: from-cm\n"});
    let addon = Addon::start(&as_refs(&layout), Some(cm), major);
    addon.wait_ready();
    let steps = steps_with_bindings(&addon);
    assert_eq!(
        steps,
        vec![
            "g1:onStartup",
            "g2:onStartup",
            "g1:beforeAll",
            "echo:onStartup",
            "echo:beforeHelm",
            "helm:upgrade:echo",
            "echo:afterHelm",
            "g2:afterAll",
        ],
        "logs:\n{}",
        addon.logs()
    );
    // What the module's hook read: merged values, enabledModules, config values.
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(addon.dir.0.join("out").join(f)).expect(f))
            .expect("json")
    };
    assert_eq!(
        read("echo-values.json"),
        json!({"global": {"owner": "tests", "discovered": "yes", "enabledModules": ["echo"]},
               "echo": {"param": "from-cm", "other": "kept"}})
    );
    assert_eq!(
        read("echo-config.json"),
        json!({"global": {}, "echo": {"param": "from-cm"}})
    );
    // What landed in the cluster: the chart's ConfigMap with the merged values.
    let cm = addon
        .object("v1", "ConfigMap", "echo")
        .expect("echo rendered");
    let values: Value =
        serde_json::from_str(cm["data"]["values"].as_str().expect("values")).expect("json");
    assert_eq!(values, json!({"param": "from-cm", "other": "kept"}));
    assert_eq!(cm["data"]["enabledModules"], "echo");
    assert_eq!(
        cm["metadata"]["labels"]["heritage"], "addon-operator",
        "post-renderer label"
    );
    assert_eq!(addon.revisions("echo"), vec![1]);
    assert!(addon.revisions("scripted").is_empty() && addon.revisions("cm-off").is_empty());
    // A first install costs one helm process: the release is read from its Secrets
    // (`--flant-checksum` would add a plain render for flant's checksum).
    let helm_for_echo: Vec<String> = addon
        .runs()
        .into_iter()
        .map(|(t, _)| t)
        .filter(|t| t.starts_with("helm:") && t.ends_with(":echo"))
        .collect();
    assert_eq!(helm_for_echo, vec!["helm:upgrade:echo"]);
    // The operator read the releases in one list for the converge and one for the
    // purge (helm's own reads of its Secrets ask by name).
    let lists = addon
        .sim
        .requests()
        .into_iter()
        .filter(|r| {
            r.starts_with("GET /api/v1/namespaces/addons/secrets?")
                && r.contains("owner%3Dhelm")
                && !r.contains("name%3D")
        })
        .count();
    assert_eq!(lists, 2, "{:#?}", addon.sim.requests());
    assert!(addon.object("v1", "ConfigMap", "scripted").is_none());

    // The debug CLI shows the same state.
    let cli = |args: &[&str]| addon.cli(args);
    let yaml = |text: String| -> Value { serde_yaml::from_str(&text).expect("yaml") };
    let list = yaml(cli(&["module", "list"]));
    assert_eq!(list["enabledModules"], json!(["echo"]));
    let echo = list["modules"]
        .as_array()
        .and_then(|l| l.iter().find(|m| m["name"] == "echo"));
    assert_eq!(echo.map(|m| &m["state"]), Some(&json!("Ready")), "{list}");
    assert_eq!(
        yaml(cli(&["global", "values"])),
        json!({"owner": "tests", "discovered": "yes"})
    );
    assert_eq!(
        yaml(cli(&["module", "config", "echo", "-g"])),
        json!({"global": {}, "echo": {"param": "from-cm"}})
    );
    assert_eq!(
        yaml(cli(&["global", "patches"])),
        json!([{"op": "add", "path": "/global/discovered", "value": "yes"}])
    );
    assert_eq!(
        yaml(cli(&["global", "list"])),
        json!({"globalHooks": ["a-global", "b-global"]})
    );
    let rendered = crate::harness::manifest_docs(&cli(&["module", "render", "echo"]));
    assert_eq!(rendered.len(), 1, "{rendered:?}");
    assert_eq!(rendered[0]["kind"], "ConfigMap");
    let values: Value =
        serde_json::from_str(rendered[0]["data"]["values"].as_str().expect("values"))
            .expect("values json");
    assert_eq!(values["param"], "from-cm", "{rendered:?}");
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_shell-operator"))
        .args([
            "addon-operator",
            "module",
            "values",
            "nope",
            "--debug-unix-socket",
        ])
        .arg(addon.dir.0.join("debug.socket"))
        .output()
        .expect("cli");
    assert!(
        String::from_utf8_lossy(&missing.stdout).contains("module not found")
            || String::from_utf8_lossy(&missing.stderr).contains("module not found")
    );
}

#[test]
fn startup_sequence_with_helm4() {
    startup_sequence(4);
}

#[test]
fn startup_sequence_with_helm3() {
    startup_sequence(3);
}

fn runtime_layout() -> Vec<(String, String)> {
    let mut f = files(vec![
        (
            "global-hooks/hooks/g".into(),
            rec(
                "g",
                r#"{"configVersion":"v1","beforeAll":1,"afterAll":1}"#,
                "",
            ),
        ),
        (
            "modules/values.yaml".into(),
            "echoEnabled: true\notherEnabled: true\nextraEnabled: false\n".into(),
        ),
        (
            "modules/001-echo/hooks/h".into(),
            rec(
                "echo",
                r#"{"configVersion":"v1","onStartup":1,"beforeHelm":1}"#,
                // onStartup stores a generated password in the ConfigMap (a config patch).
                r#"if grep -q onStartup "$BINDING_CONTEXT_PATH"; then echo '[{"op":"add","path":"/echo/password","value":"s3cret"}]' > "$CONFIG_VALUES_JSON_PATCH_PATH"; fi; cp "$CONFIG_VALUES_PATH" "$OUT_DIR/echo-config.json""#,
            ),
        ),
        (
            "modules/002-other/hooks/h".into(),
            rec("other", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
        (
            "modules/003-extra/hooks/h".into(),
            rec(
                "extra",
                r#"{"configVersion":"v1","onStartup":1,"beforeHelm":1,"afterDeleteHelm":1}"#,
                "",
            ),
        ),
    ]);
    f.extend(chart("modules/001-echo", "echo", "echo"));
    f.extend(chart("modules/002-other", "other", "other"));
    f.extend(chart("modules/003-extra", "extra", "extra"));
    f
}

/// Steps after index `from`.
fn since(addon: &Addon, from: usize) -> Vec<String> {
    steps_with_bindings(addon).split_off(from)
}

#[test]
fn configmap_changes_at_run_time() {
    let layout = runtime_layout();
    let addon = Addon::start(&as_refs(&layout), Some(json!({"global": "a: 1\n"})), 4);
    addon.wait_ready();
    // The onStartup config patch reached the ConfigMap; other keys stayed.
    let data = addon.configmap_data();
    assert_eq!(data["global"], "a: 1\n");
    let echo: Value = serde_yaml::from_str(data["echo"].as_str().expect("echo key")).expect("yaml");
    assert_eq!(echo, json!({"password": "s3cret"}));
    let config: Value = serde_json::from_str(
        &std::fs::read_to_string(addon.dir.0.join("out/echo-config.json")).expect("config"),
    )
    .expect("json");
    assert_eq!(
        config["echo"]["password"], "s3cret",
        "the next run reads the saved config"
    );

    // One module's section: only that module runs again.
    let n = steps_with_bindings(&addon).len();
    addon.set_config("other", "x: 1\n");
    addon.wait_steps(LONG, |s| {
        s.len() > n && s.iter().skip(n).any(|t| t == "helm:upgrade:other")
    });
    let after = since(&addon, n);
    assert_eq!(
        after,
        vec!["other:beforeHelm", "helm:upgrade:other"],
        "{}",
        addon.logs()
    );
    addon.wait_object("ConfigMap", "other", |o| {
        o.is_some_and(|o| o["data"]["values"] == "{\"x\":1}")
    });

    // The global section: a converge that changes nothing a chart uses stores no
    // revision. Both charts may read `global` (`global.enabledModules`), so each
    // runs `helm upgrade`, which the post-renderer stops (identical objects).
    let n = steps_with_bindings(&addon).len();
    addon.set_config("global", "a: 2\n");
    addon.wait_steps(LONG, |s| s.iter().skip(n).any(|t| t == "g"));
    let after = addon.wait_steps(LONG, |s| s.len() >= n + 6);
    assert_eq!(
        after[n..].iter().map(String::as_str).collect::<Vec<_>>(),
        vec![
            "g",
            "echo",
            "helm:upgrade:echo",
            "other",
            "helm:upgrade:other",
            "g"
        ],
        "{}",
        addon.logs()
    );
    let runs = since(&addon, n);
    assert_eq!(
        runs,
        vec![
            "g:beforeAll",
            "echo:beforeHelm",
            "helm:upgrade:echo",
            "other:beforeHelm",
            "helm:upgrade:other",
            "g:afterAll"
        ]
    );
    assert_eq!(
        addon.revisions("echo"),
        vec![1],
        "no upgrade without a change"
    );

    // Enabling a module installs its release.
    let n = steps_with_bindings(&addon).len();
    addon.set_config("extraEnabled", "true");
    addon.wait_steps(LONG, |s| {
        s.iter().skip(n).filter(|t| t.as_str() == "g").count() == 2
    });
    let runs = since(&addon, n);
    assert_eq!(
        runs,
        vec![
            "g:beforeAll",
            "echo:beforeHelm",
            "helm:upgrade:echo",
            "other:beforeHelm",
            "helm:upgrade:other",
            "extra:onStartup",
            "extra:beforeHelm",
            "helm:upgrade:extra",
            "g:afterAll",
        ],
        "enabledModules changed, so every chart's values did: {}",
        addon.logs()
    );
    addon.wait_object("ConfigMap", "extra", |o| o.is_some());

    // Disabling it uninstalls the release, then afterDeleteHelm runs.
    let n = steps_with_bindings(&addon).len();
    addon.set_config("extraEnabled", "false");
    addon.wait_steps(LONG, |s| {
        s.iter().skip(n).filter(|t| t.as_str() == "g").count() == 2
    });
    let runs = since(&addon, n);
    assert_eq!(
        &runs[..3],
        [
            "g:beforeAll",
            "helm:uninstall:extra",
            "extra:afterDeleteHelm"
        ],
        "{runs:?}"
    );
    addon.wait_object("ConfigMap", "extra", |o| o.is_none());
    assert!(
        addon.revisions("extra").is_empty(),
        "release Secrets removed"
    );

    // A bad ConfigMap changes nothing and is counted; fixing it applies.
    let n = steps_with_bindings(&addon).len();
    addon.set_config("global", "a: [1");
    addon.wait_log(&["ConfigMap is invalid", "bad YAML", "global"], LONG);
    let metric = crate::common::metric(
        &addon.metrics(),
        "addon_operator_config_values_errors_total",
    );
    assert_eq!(metric, Some(1.0));
    addon.set_config("global", "a: 3\n");
    addon.wait_steps(LONG, |s| {
        s.iter().skip(n).filter(|t| t.as_str() == "g").count() == 2
    });
    let runs = since(&addon, n);
    assert_eq!(
        runs.first().map(String::as_str),
        Some("g:beforeAll"),
        "nothing ran for the bad one: {runs:?}"
    );

    // Deleting the ConfigMap is an empty configuration: the global section changed.
    addon.wait_steps(LONG, |s| {
        s.iter().skip(n).filter(|t| t.as_str() == "g").count() == 2
    });
    let n = steps_with_bindings(&addon).len();
    addon
        .sim
        .delete("v1", "ConfigMap", crate::harness::NS, "addon-operator")
        .expect("delete");
    addon.wait_steps(LONG, |s| {
        s.iter().skip(n).filter(|t| t.as_str() == "g").count() == 2
    });
    let config: Value = serde_json::from_str(
        &std::fs::read_to_string(addon.dir.0.join("out/echo-config.json")).expect("config"),
    )
    .expect("json");
    assert_eq!(
        config,
        json!({"global": {}, "echo": {}}),
        "config values are empty"
    );
}

#[test]
fn a_values_patch_that_breaks_the_schema_changes_nothing_and_is_retried() {
    let mut layout = files(vec![
        ("modules/values.yaml".into(), "valEnabled: true\n".into()),
        (
            "modules/001-val/openapi/values.yaml".into(),
            "type: object\nproperties:\n  replicas:\n    type: integer\n".into(),
        ),
        (
            "modules/001-val/hooks/h".into(),
            rec(
                "val",
                r#"{"configVersion":"v1","beforeHelm":1}"#,
                r#"n=$(cat "$OUT_DIR/n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$OUT_DIR/n"
cp "$VALUES_PATH" "$OUT_DIR/val-values-$n.json"
if [ $n = 1 ]; then v='"many"'; else v=3; fi
echo "[{\"op\":\"add\",\"path\":\"/val/replicas\",\"value\":$v}]" > "$VALUES_JSON_PATCH_PATH""#,
            ),
        ),
    ]);
    layout.extend(chart("modules/001-val", "val", "val"));
    let addon = Addon::start(&as_refs(&layout), None, 4);
    addon.wait_ready();
    let failed = addon.wait_log(&["failed", "replicas"], LONG);
    assert!(failed.contains("values"), "{failed}");
    let second: Value = serde_json::from_str(
        &std::fs::read_to_string(addon.dir.0.join("out/val-values-2.json")).expect("2nd run"),
    )
    .expect("json");
    assert_eq!(second["val"], json!({}), "the rejected patch left no trace");
    let cm = addon
        .object("v1", "ConfigMap", "val")
        .expect("deployed after the retry");
    assert_eq!(cm["data"]["values"], "{\"replicas\":3}");
    let errors = crate::common::metric(
        &addon.metrics(),
        "addon_operator_module_run_errors_total{module=\"val\"}",
    );
    assert_eq!(errors, Some(1.0));
}

#[test]
fn a_chart_that_fails_to_render_is_retried_until_fixed() {
    let mut layout = files(vec![
        ("modules/values.yaml".into(), "fixerEnabled: true\n".into()),
        (
            "modules/001-fixer/hooks/h".into(),
            rec(
                "fixer",
                r#"{"configVersion":"v1","beforeHelm":1}"#,
                r#"n=$(cat "$OUT_DIR/n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$OUT_DIR/n"
if [ $n -ge 2 ]; then echo '[{"op":"add","path":"/fixer/ok","value":true}]' > "$VALUES_JSON_PATCH_PATH"; fi"#,
            ),
        ),
        ("modules/001-fixer/Chart.yaml".into(), "apiVersion: v2\nname: fixer\nversion: 0.0.1\n".into()),
        (
            "modules/001-fixer/templates/cm.yaml".into(),
            "{{ if not .Values.fixer.ok }}{{ fail \"chart says no\" }}{{ end }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fixer\n".into(),
        ),
    ]);
    layout.retain(|(p, _)| !p.is_empty());
    let addon = Addon::start(&as_refs(&layout), None, 4);
    let failed = addon.wait_log(&["module run failed", "chart says no"], LONG);
    assert!(failed.contains("fixer"), "{failed}");
    addon.wait_ready();
    assert!(addon.object("v1", "ConfigMap", "fixer").is_some());
    assert_eq!(addon.revisions("fixer"), vec![1]);
    // The first upgrade fails rendering (no revision is made); the retry deploys.
    let steps = steps_with_bindings(&addon);
    assert_eq!(
        steps,
        vec![
            "fixer:beforeHelm",
            "helm:upgrade:fixer",
            "fixer:beforeHelm",
            "helm:upgrade:fixer"
        ]
    );
}

/// Seed 004's two worked examples of the enabled state, plus a module enabled only by
/// the ConfigMap: the first two stay disabled, the third runs.
#[test]
fn the_seeds_enabled_state_examples() {
    let mut layout = files(vec![
        (
            "modules/values.yaml".into(),
            "global:\n  param1: 100\nnginxIngressEnabled: true\nsomeModuleEnabled: false\n".into(),
        ),
        (
            "modules/001-nginx-ingress/values.yaml".into(),
            "nginxIngressEnabled: false\n".into(),
        ),
        (
            "modules/001-nginx-ingress/hooks/h".into(),
            rec("nginx", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
        (
            "modules/002-some-module/values.yaml".into(),
            "someModule:\n  param1: \"String\"\n".into(),
        ),
        (
            "modules/002-some-module/enabled".into(),
            "#!/bin/bash\necho false > $MODULE_ENABLED_RESULT\n".into(),
        ),
        (
            "modules/002-some-module/hooks/h".into(),
            rec("some", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
        (
            "modules/003-third/hooks/h".into(),
            rec("third", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
    ]);
    layout.retain(|(p, _)| !p.is_empty());
    let cm = json!({
        "global": "param1: 200\n",
        "someModule": "param1: \"Long string\"\nparam2: \"FOO\"\n",
        "someModuleEnabled": "true",
        "thirdEnabled": "true",
    });
    let addon = Addon::start(&as_refs(&layout), Some(cm), 4);
    addon.wait_ready();
    assert_eq!(
        steps_with_bindings(&addon),
        vec!["third:beforeHelm"],
        "{}",
        addon.logs()
    );
    addon.wait_log(
        &["module disabled by its enabled script", "some-module"],
        LONG,
    );
}

/// Config values that fail their schema at startup stop the operator (exit 1), naming
/// the module, the schema and the path; nothing ran.
#[test]
fn a_configmap_failing_its_schema_at_startup_stops_the_operator() {
    let layout = files(vec![
        ("modules/values.yaml".into(), "strictEnabled: true\n".into()),
        (
            "modules/001-strict/openapi/config-values.yaml".into(),
            "type: object\nproperties:\n  replicas:\n    type: integer\n".into(),
        ),
        (
            "modules/001-strict/hooks/h".into(),
            rec("strict", r#"{"configVersion":"v1","onStartup":1}"#, ""),
        ),
    ]);
    let mut addon = Addon::start(
        &as_refs(&layout),
        Some(json!({"strict": "replicas: many\n"})),
        4,
    );
    let mut child = addon.child.take().expect("child");
    let deadline = std::time::Instant::now() + LONG;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running; logs:\n{}",
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1));
    let line = addon.wait_log(&["startup failed", "strict", "config", "replicas"], LONG);
    assert!(line.contains("many") || line.contains("integer"), "{line}");
    let hooks_ran: Vec<_> = addon
        .runs()
        .into_iter()
        .filter(|(t, _)| !t.starts_with("helm:"))
        .collect();
    assert!(hooks_ran.is_empty(), "no hook ran: {hooks_ran:?}");
}

/// helm is required only when some module has a chart: without one the operator
/// runs global hooks and chart-less modules; with one, a missing helm stops startup
/// naming the binary.
#[test]
fn helm_is_needed_only_for_charts() {
    let no_charts = files(vec![
        ("modules/values.yaml".into(), "plainEnabled: true\n".into()),
        (
            "modules/001-plain/hooks/h".into(),
            rec("plain", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
    ]);
    let missing = [("HELM_BIN_PATH", "/nonexistent/helm")];
    let addon = Addon::start_with(&as_refs(&no_charts), None, 4, &missing);
    addon.wait_ready();
    assert_eq!(steps_with_bindings(&addon), vec!["plain:beforeHelm"]);

    let mut with_chart = no_charts.clone();
    with_chart.extend(chart("modules/001-plain", "plain", "plain"));
    let mut addon = Addon::start_with(&as_refs(&with_chart), None, 4, &missing);
    let mut child = addon.child.take().expect("child");
    let deadline = std::time::Instant::now() + LONG;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "still running");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1));
    addon.wait_log(&["startup failed", "/nonexistent/helm"], LONG);
}
