//! addon-operator's own metrics under flant's names, scraped from the real binary:
//! `global_hook_*` and `module_hook_*` (with `module` and `activation`),
//! `binding_count`, the module run and helm histograms, the converge counters and
//! `task_wait_in_queue_seconds_total{module,…}`; shell-operator's `hook_run_*`
//! names must not appear.

use crate::common::metric;
use crate::harness::{Addon, chart, rec};
use shell_operator::flags::Program;
use shell_operator::metric_reference::every_family;
use std::time::{Duration, Instant};

const P: &str = "addon_operator_";

/// One global hook (onStartup, beforeAll) and module `echo` whose hook
/// (beforeHelm, afterHelm) fails its first run.
fn layout() -> Vec<(String, String)> {
    let mut files = vec![
        (
            "global-hooks/hooks/g".to_string(),
            rec(
                "g",
                r#"{"configVersion":"v1","onStartup":1,"beforeAll":1}"#,
                r#"echo '{"name":"global_custom","action":"set","value":3}' >> "$METRICS_PATH""#,
            ),
        ),
        ("modules/values.yaml".into(), "echoEnabled: true\n".into()),
        (
            "modules/001-echo/hooks/h".into(),
            rec(
                "echo",
                r#"{"configVersion":"v1","beforeHelm":1,"afterHelm":1}"#,
                r#"n=$(cat "$OUT_DIR/n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$OUT_DIR/n"
if [ $n = 1 ]; then echo "first run fails" >&2; exit 1; fi
echo '{"name":"echo_custom","action":"set","value":7,"labels":{"k":"v"}}' >> "$METRICS_PATH""#,
            ),
        ),
    ];
    files.extend(chart("modules/001-echo", "echo", "echo"));
    files
}

/// `{k="v",…}` of the label pairs (given in Prometheus' sorted order).
fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{{{}}}", inner.join(","))
}

fn global(binding: &str) -> String {
    labels(&[
        ("activation", "OperatorStartup"),
        ("binding", binding),
        ("hook", "g"),
        ("queue", "main"),
    ])
}

fn module(binding: &str) -> String {
    labels(&[
        ("activation", "OperatorStartup"),
        ("binding", binding),
        ("hook", "001-echo/hooks/h"),
        ("module", "echo"),
        ("queue", "main"),
    ])
}

#[test]
fn hooks_modules_helm_and_converges_are_measured_under_flants_names() {
    let files = layout();
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let addon = Addon::start(&refs, None, 4);
    addon.wait_ready();
    let body = addon.metrics();
    let expect = |series: String, value: f64| {
        assert_eq!(
            metric(&body, &format!("{P}{series} ")),
            Some(value),
            "{P}{series} in\n{body}\nlogs:\n{}",
            addon.logs()
        );
    };
    // Global hooks: one success per binding, no errors.
    for binding in ["onStartup", "beforeAll"] {
        expect(format!("global_hook_success_total{}", global(binding)), 1.0);
        expect(format!("global_hook_errors_total{}", global(binding)), 0.0);
        expect(
            format!("global_hook_allowed_errors_total{}", global(binding)),
            0.0,
        );
        expect(
            format!("global_hook_run_seconds_count{}", global(binding)),
            1.0,
        );
        expect(
            format!("global_hook_run_user_cpu_seconds_count{}", global(binding)),
            1.0,
        );
    }
    // The module hook's first beforeHelm run failed, the retry succeeded.
    expect(
        format!("module_hook_errors_total{}", module("beforeHelm")),
        1.0,
    );
    expect(
        format!("module_hook_success_total{}", module("beforeHelm")),
        1.0,
    );
    expect(
        format!("module_hook_run_seconds_count{}", module("beforeHelm")),
        2.0,
    );
    expect(
        format!("module_hook_success_total{}", module("afterHelm")),
        1.0,
    );
    expect(
        format!("module_hook_errors_total{}", module("afterHelm")),
        0.0,
    );
    // Bindings counted at startup; the global hook's module is "".
    expect(
        format!("binding_count{}", labels(&[("hook", "g"), ("module", "")])),
        2.0,
    );
    expect(
        format!(
            "binding_count{}",
            labels(&[("hook", "001-echo/hooks/h"), ("module", "echo")])
        ),
        2.0,
    );
    // Module runs: the startup one, the failed one, the good one; helm once.
    let run = labels(&[("activation", "OperatorStartup"), ("module", "echo")]);
    expect(format!("module_run_seconds_count{run}"), 3.0);
    expect(
        format!("module_run_errors_total{}", labels(&[("module", "echo")])),
        1.0,
    );
    expect(format!("module_helm_seconds_count{run}"), 1.0);
    // The failed run is counted by its cause: its hook's exit, on the main queue.
    let by_cause = |cause: &str, task: &str| {
        let l = labels(&[("cause", cause), ("queue", "main"), ("task", task)]);
        format!("task_errors_total{l}")
    };
    expect(by_cause("hook", "ModuleRun"), 1.0);
    for (cause, task) in [("transient", "ModuleRun"), ("hook", "HookRun")] {
        let series = format!("{P}{} ", by_cause(cause, task));
        assert_eq!(metric(&body, &series), None, "{series} in\n{body}");
    }
    // A first install: the release check and the upgrade; no template (see engine.rs).
    let op = |op: &str| {
        let l = labels(&[
            ("activation", "OperatorStartup"),
            ("module", "echo"),
            ("operation", op),
        ]);
        format!("{P}helm_operation_seconds_count{l} ")
    };
    for name in ["check-upgrade", "upgrade"] {
        assert_eq!(metric(&body, &op(name)), Some(1.0), "{name} in\n{body}");
    }
    assert_eq!(
        metric(&body, &op("template")),
        None,
        "no render before a first install"
    );
    // Hooks' own metrics: `hook` label, and `module` for module hooks.
    let hooks = crate::common::http_get(addon.port(), "/metrics/hooks").1;
    let custom = r#"echo_custom{hook="001-echo/hooks/h",k="v",module="echo"} "#;
    assert_eq!(metric(&hooks, custom), Some(7.0), "{hooks}");
    assert_eq!(
        metric(&hooks, r#"global_custom{hook="g"} "#),
        Some(3.0),
        "{hooks}"
    );
    let startup = labels(&[("activation", "OperatorStartup")]);
    expect(format!("convergence_total{startup}"), 1.0);
    let took = metric(&body, &format!("{P}convergence_seconds{startup} "));
    assert!(
        took.is_some_and(|s| s > 0.0),
        "convergence_seconds: {took:?}"
    );
    let waited = labels(&[
        ("binding", "onStartup"),
        ("hook", "g"),
        ("module", ""),
        ("queue", "main"),
    ]);
    let wait = metric(
        &body,
        &format!("{P}task_wait_in_queue_seconds_total{waited} "),
    );
    assert!(
        wait.is_some_and(|s| s >= 0.0),
        "task wait: {wait:?}\n{body}"
    );
    // shell-operator's names are not used.
    assert!(!body.contains(&format!("{P}hook_run_")), "{body}");
    assert!(
        !body.contains("task_wait_in_queue_seconds_total{binding=\"onStartup\",hook=\"g\",queue"),
        "no module-less wait series: {body}"
    );

    // A changed global section converges again, under its own activation.
    addon.set_config("global", "a: 1\n");
    let changed = labels(&[("activation", "KubeConfigChanged")]);
    let body = wait_metric(&addon, &format!("{P}convergence_seconds{changed} "));
    let series = format!("{P}convergence_total{changed} ");
    assert_eq!(metric(&body, &series), Some(1.0), "{series} in\n{body}");
    let again = |binding: &str| global(binding).replace("OperatorStartup", "KubeConfigChanged");
    let series = format!("{P}global_hook_success_total{} ", again("beforeAll"));
    assert_eq!(metric(&body, &series), Some(1.0), "{series} in\n{body}");
    let series = format!(
        "{P}module_hook_success_total{} ",
        module("afterHelm").replace("OperatorStartup", "KubeConfigChanged")
    );
    assert_eq!(metric(&body, &series), Some(1.0), "{series} in\n{body}");
    let series = format!("{P}global_hook_success_total{} ", global("onStartup"));
    assert_eq!(metric(&body, &series), Some(1.0), "onStartup ran once");
}

/// Scrapes until `series` is there (`convergence_seconds` of an activation is
/// added when that converge is done, after its hooks and helm ran).
fn wait_metric(addon: &Addon, series: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = addon.metrics();
        if metric(&body, series).is_some() {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "no {series}:\n{body}\nlogs:\n{}",
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The families a real addon-operator serves (global and module hooks, a helm
/// release, the ConfigMap watch) are all in the list `docs/reference.md` is
/// checked against (`tests/operator/reference.rs`), with the same type: that list
/// (`metric_reference::every_family`) cannot lack a registration the startup makes.
#[test]
fn every_served_family_is_in_the_reference_list() {
    let files = layout();
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let addon = Addon::start(&refs, None, 4);
    addon.wait_ready();
    let listed: std::collections::BTreeMap<String, String> = every_family(Program::Addon, P)
        .expect("registration")
        .into_iter()
        .map(|f| (f.name, f.kind.to_string()))
        .collect();
    let body = wait_metric(
        &addon,
        &format!("{P}convergence_total{{activation=\"OperatorStartup\"}} "),
    );
    let served: Vec<(&str, &str)> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        // The operator's own families; the hooks' metrics follow them on
        // `/metrics` and may not use the prefix.
        .filter(|(n, _)| n.starts_with(P) || n.starts_with("d8_telemetry_"))
        .collect();
    for base in [
        "module_hook_run_seconds",
        "kubernetes_client_request_result_total",
    ] {
        let name = format!("{P}{base}");
        assert!(
            served.iter().any(|(n, _)| *n == name),
            "{name} not served:\n{body}"
        );
    }
    for (name, kind) in served {
        assert_eq!(
            listed.get(name).map(String::as_str),
            Some(kind),
            "{name} ({kind}) is served but every_family does not list it as such"
        );
    }
}

/// A hook's failures are counted by cause (`task_errors_total{cause}`): global
/// hook `a` writes a config values patch whose ConfigMap write keeps conflicting
/// (five 409s: transient), global hook `b` writes a values patch that is no
/// patch on its first run (invalid input). Both are retried as before and then
/// succeed.
#[test]
fn hook_failures_are_counted_by_cause() {
    let a = rec(
        "a",
        r#"{"configVersion":"v1","onStartup":1}"#,
        r#"echo '[{"op":"add","path":"/global/a","value":1}]' > "$CONFIG_VALUES_JSON_PATCH_PATH""#,
    );
    let b = rec(
        "b",
        r#"{"configVersion":"v1","onStartup":2}"#,
        r#"[ -f "$OUT_DIR/b-ran" ] || { touch "$OUT_DIR/b-ran"; echo '{"op":"explode"}' > "$VALUES_JSON_PATCH_PATH"; }"#,
    );
    let files = [("global-hooks/hooks/a", a), ("global-hooks/hooks/b", b)];
    let sim = std::sync::Arc::new(kube_sim::Sim::start());
    sim.create(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": crate::harness::NS}}))
        .expect("namespace");
    sim.create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "addon-operator", "namespace": crate::harness::NS}, "data": {}}))
        .expect("configmap");
    let path = format!(
        "PUT /api/v1/namespaces/{}/configmaps/addon-operator",
        crate::harness::NS
    );
    sim.fail_matching(&path, 5, 409);
    let addon = Addon::replica(sim, &files, &[], &[]);
    let series = |cause: &str| {
        let l = labels(&[("cause", cause), ("queue", "main"), ("task", "HookRun")]);
        format!("{P}task_errors_total{l} ")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let body = addon.metrics();
        let both = ["transient", "invalid_input"].map(|c| metric(&body, &series(c)));
        if both.iter().all(Option::is_some) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let logs = addon.logs();
    assert_eq!(
        metric(&body, &series("transient")),
        Some(1.0),
        "{body}\n{logs}"
    );
    assert_eq!(
        metric(&body, &series("invalid_input")),
        Some(1.0),
        "{body}\n{logs}"
    );
    assert_eq!(metric(&body, &series("hook")), None, "{body}");
    addon.wait_log(&["still conflicting after 5 tries"], Duration::from_secs(5));
    addon.wait_log(
        &["bad $VALUES_JSON_PATCH_PATH file"],
        Duration::from_secs(5),
    );
}
