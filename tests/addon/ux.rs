//! addon-operator as a flant user meets it (issue 30 items 2, 3, 4, 7): metric
//! names from the seeds and from flant's binary, helm 3 errors without the helm 4
//! plugin's noise, the ConfigMap's refusals, the debug CLI and its help.

use crate::common::{http_get, metric, run_binary};
use crate::harness::{Addon, NS, chart, rec, refs};
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const P: &str = "addon_operator_";

/// The metric table of the seeds (flant's addon-operator docs, "Addon-operator
/// metrics"), without the prefix.
const SEEDS: &[&str] = &[
    "binding_count",
    "config_values_errors_total",
    "global_hook_run_seconds",
    "global_hook_run_errors_total",
    "global_hook_run_allowed_errors_total",
    "global_hook_run_success_total",
    "global_hook_run_sys_cpu_seconds",
    "global_hook_run_user_cpu_seconds",
    "global_hook_run_max_rss_bytes",
    "module_hook_run_seconds",
    "module_hook_run_errors_total",
    "module_hook_run_allowed_errors_total",
    "module_hook_run_success_total",
    "module_hook_run_sys_cpu_seconds",
    "module_hook_run_user_cpu_seconds",
    "module_hook_run_max_rss_bytes",
    "module_discover_errors_total",
    "module_run_errors_total",
    "module_delete_errors_total",
    "module_run_seconds",
    "module_helm_seconds",
    "helm_operation_seconds",
    "convergence_seconds",
    "convergence_total",
    "tasks_queue_length",
    "task_wait_in_queue_seconds_total",
    "live_ticks",
    "kube_jq_filter_duration_seconds",
    "kube_event_duration_seconds",
];

/// What flant's binary registers (pkg/metrics/metrics.go) and we export too,
/// without the prefix: where it differs from the seeds, the counters drop `_run`
/// and the discover counter is plural.
const FLANT: &[&str] = &[
    "binding_count",
    "config_values_errors_total",
    "modules_discover_errors_total",
    "module_delete_errors_total",
    "module_run_seconds",
    "module_run_errors_total",
    "modules_helm_release_redeployed_total",
    "modules_absent_resources_total",
    "module_hook_run_seconds",
    "module_hook_run_user_cpu_seconds",
    "module_hook_run_sys_cpu_seconds",
    "module_hook_run_max_rss_bytes",
    "module_hook_allowed_errors_total",
    "module_hook_errors_total",
    "module_hook_success_total",
    "global_hook_run_seconds",
    "global_hook_run_user_cpu_seconds",
    "global_hook_run_sys_cpu_seconds",
    "global_hook_run_max_rss_bytes",
    "global_hook_allowed_errors_total",
    "global_hook_errors_total",
    "global_hook_success_total",
    "convergence_seconds",
    "convergence_total",
    "module_helm_seconds",
    "helm_operation_seconds",
    "task_wait_in_queue_seconds_total",
    "tasks_queue_length",
    "live_ticks",
];

/// Names with a series only after a failure this test does not cause (a failed
/// delete, a release found broken or an object found gone by the resource monitor).
const ONLY_ON_FAILURE: &[&str] = &[
    "module_delete_errors_total",
    "modules_helm_release_redeployed_total",
    "modules_absent_resources_total",
];

/// Metric family names of a scrape (histogram samples folded into their family).
fn families(body: &str) -> BTreeSet<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

/// Polls `/metrics` until `cond` holds.
fn wait_metrics(addon: &Addon, cond: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = addon.metrics();
        if cond(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "metrics never matched; last scrape:\n{body}\nlogs:\n{}",
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A global hook (startup, beforeAll, a kubernetes binding), module `echo` whose
/// hook fails its first beforeHelm and has an allowFailure schedule, and module
/// `flaky` whose `enabled` script fails once.
fn metrics_layout() -> Vec<(String, String)> {
    let mut files = vec![
        (
            "global-hooks/hooks/g".to_string(),
            rec(
                "g",
                r#"{"configVersion":"v1","onStartup":1,"beforeAll":1,
                    "kubernetes":[{"name":"ns","apiVersion":"v1","kind":"Namespace","jqFilter":".metadata.name"}]}"#,
                "",
            ),
        ),
        (
            "modules/values.yaml".into(),
            "echoEnabled: true\nflakyEnabled: true\n".into(),
        ),
        (
            "modules/001-echo/hooks/h".into(),
            rec(
                "echo",
                r#"{"configVersion":"v1","beforeHelm":1,
                    "schedule":[{"name":"tick","crontab":"*/1 * * * * *","allowFailure":true}]}"#,
                r#"if [ "$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")" = tick ]; then exit 1; fi
n=$(cat "$OUT_DIR/n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$OUT_DIR/n"
if [ $n = 1 ]; then echo "first run fails" >&2; exit 1; fi"#,
            ),
        ),
        (
            "modules/002-flaky/enabled".into(),
            r#"#!/bin/sh
if [ ! -e "$OUT_DIR/flaky-once" ]; then touch "$OUT_DIR/flaky-once"; exit 1; fi
echo true > "$MODULE_ENABLED_RESULT"
"#
            .into(),
        ),
    ];
    files.extend(chart("modules/001-echo", "echo", "echo"));
    files
}

/// Item 2: the seeds' names and flant's binary's names are both exported, with the
/// same values.
#[test]
fn metric_names_of_the_seeds_and_of_flant() {
    let addon = Addon::start(&refs(&metrics_layout()), None, 4);
    addon.wait_ready();
    // A watch event (the kube_event and jq filter histograms count events, not the
    // initial list).
    addon
        .sim
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ux-later"}}))
        .expect("namespace");
    // Every name of the seeds and of flant (but those that need a failure this test
    // does not cause) shows up, once the allowFailure schedule and the watch event
    // have been counted.
    let expected: Vec<String> = SEEDS
        .iter()
        .chain(FLANT)
        .filter(|n| !ONLY_ON_FAILURE.contains(n))
        .map(|n| format!("{P}{n}"))
        .collect();
    let missing = |b: &str| -> Vec<String> {
        let got = families(b);
        expected
            .iter()
            .filter(|n| !got.contains(*n))
            .cloned()
            .collect()
    };
    wait_metrics(&addon, |b| {
        missing(b).is_empty()
            && b.lines().any(|l| {
                l.starts_with(&format!("{P}module_hook_allowed_errors_total{{"))
                    && !l.ends_with(" 0")
            })
    });
    // The twins carry the same series with the same values (a scrape may fall
    // between the two increments of one run, so poll until a scrape agrees).
    let twins = [
        (
            "module_discover_errors_total",
            "modules_discover_errors_total",
        ),
        ("global_hook_run_success_total", "global_hook_success_total"),
        ("global_hook_run_errors_total", "global_hook_errors_total"),
        (
            "global_hook_run_allowed_errors_total",
            "global_hook_allowed_errors_total",
        ),
        ("module_hook_run_success_total", "module_hook_success_total"),
        ("module_hook_run_errors_total", "module_hook_errors_total"),
        (
            "module_hook_run_allowed_errors_total",
            "module_hook_allowed_errors_total",
        ),
    ];
    let series = |body: &str, name: &str| -> Vec<String> {
        let prefix = format!("{P}{name}");
        body.lines()
            .filter(|l| {
                l.strip_prefix(&prefix)
                    .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
            })
            .map(|l| l[prefix.len()..].to_string())
            .collect()
    };
    let body = wait_metrics(&addon, |b| {
        twins
            .iter()
            .all(|(seed, flant)| series(b, seed) == series(b, flant))
    });
    for (seed, _) in twins {
        assert!(!series(&body, seed).is_empty(), "{seed}:\n{body}");
    }
    assert!(
        metric(&body, &format!("{P}module_discover_errors_total")).is_some_and(|v| v >= 1.0),
        "the failed enabled script is counted under the seeds' name:\n{body}"
    );
    let hook = |name: &str, hook: &str| {
        body.lines().any(|l| {
            l.starts_with(&format!("{P}{name}{{"))
                && l.contains(&format!("hook=\"{hook}\""))
                && !l.ends_with(" 0")
        })
    };
    assert!(
        hook("module_hook_run_errors_total", "001-echo/hooks/h"),
        "{body}"
    );
    assert!(hook("global_hook_run_success_total", "g"), "{body}");
    assert!(
        metric(
            &body,
            &format!("{P}binding_count{{hook=\"g\",module=\"\"}}")
        ) == Some(3.0),
        "binding_count of g (onStartup, beforeAll, one kubernetes binding):\n{body}"
    );
}

/// A module whose chart fails to render with helm's own error.
fn failing_chart() -> Vec<(String, String)> {
    vec![
        (
            "modules/values.yaml".into(),
            "brokenEnabled: true\nechoEnabled: true\n".into(),
        ),
        (
            "modules/001-broken/Chart.yaml".into(),
            "apiVersion: v2\nname: broken\nversion: 0.0.1\n".into(),
        ),
        (
            "modules/001-broken/templates/cm.yaml".into(),
            "{{ fail \"the chart says no\" }}\n".into(),
        ),
    ]
}

/// Item 3: helm 3 gets no helm 4 plugin to choke on: its error in the log is the
/// chart's, without `failed to load plugins`, and the post-renderer still labels
/// what helm 3 installs.
#[test]
fn helm3_error_has_no_plugin_noise() {
    // echo (order 1) is installed first, then broken fails and is retried.
    let mut files = failing_chart();
    files.extend(chart("modules/000-echo", "echo", "echo"));
    let addon = Addon::start(&refs(&files), None, 3);
    let line = addon.wait_log(&["the chart says no"], Duration::from_secs(60));
    assert!(
        !line.contains("failed to load plugins") && !line.contains("plugin.yaml"),
        "helm 3's error carries the plugin noise: {line}"
    );
    assert!(
        !addon.logs().contains("failed to load plugins"),
        "{}",
        addon.logs()
    );
    let cm = addon.wait_object("ConfigMap", "echo", |o| o.is_some());
    assert_eq!(
        cm.expect("echo")["metadata"]["labels"]["heritage"],
        "addon-operator",
        "helm 3 ran the post-renderer"
    );
    assert!(!addon.logs().contains("failed to load plugins"));
}

/// Item 7: `--help` lists the addon-operator's debug commands; `module --help`
/// shows its own default socket.
#[test]
fn help_shows_addon_commands_and_socket() {
    let (code, out, err) = run_binary(&["addon-operator", "--help"], &[]);
    assert_eq!(code, 0, "{err}");
    for word in ["global ", "module ", "resource-monitor"] {
        assert!(out.contains(word), "--help lacks {word:?}:\n{out}");
    }
    let (code, out, err) = run_binary(&["addon-operator", "module", "--help"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("/var/run/addon-operator/debug.socket")
            && !out.contains("/var/run/shell-operator"),
        "module --help:\n{out}"
    );
    assert!(out.contains("addon-operator module list"), "{out}");
    // shell-operator's help stays its own.
    let (_, out, _) = run_binary(&["queue", "--help"], &[]);
    assert!(
        out.contains("/var/run/shell-operator/debug.socket"),
        "{out}"
    );
    assert!(!out.contains("addon-operator module"), "{out}");
}

/// Item 7: `module list -o text` is text, `module resource-monitor <m>` takes the
/// module, and the internal ConfigMap watch is in neither `hook list` nor metrics.
#[test]
fn debug_cli_module_commands() {
    let mut files = vec![
        (
            "modules/values.yaml".to_string(),
            "echoEnabled: true\n".to_string(),
        ),
        (
            "modules/001-echo/hooks/h".into(),
            rec("echo", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
    ];
    files.extend(chart("modules/001-echo", "echo", "echo"));
    files.extend(chart("modules/002-other", "other", "other"));
    let addon = Addon::start_with(
        &refs(&files),
        Some(json!({"echo": "a: 1\n"})),
        4,
        &[("ADDON_OPERATOR_RESOURCES_CHECK_PERIOD", "1s")],
    );
    addon.wait_ready();
    let text = addon.cli(&["module", "list", "-o", "text"]);
    assert!(
        serde_json::from_str::<serde_json::Value>(&text).is_err(),
        "-o text printed JSON: {text}"
    );
    let rows: Vec<&str> = text.lines().collect();
    assert!(
        rows.iter().any(|l| l.starts_with("Enabled modules: echo")),
        "{text}"
    );
    let row = |name: &str| {
        rows.iter()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"))
            .to_string()
    };
    assert!(row("echo").split_whitespace().next() == Some("1"), "{text}");
    assert!(
        row("other").contains("Disabled") || row("other").contains("disabled"),
        "{text}"
    );
    // JSON and YAML stay structured.
    let list: serde_json::Value =
        serde_json::from_str(&addon.cli(&["module", "list", "-o", "json"])).expect("json");
    assert_eq!(list["enabledModules"], json!(["echo"]));

    // resource-monitor with a module: only that module (after the monitor's first look).
    let deadline = Instant::now() + Duration::from_secs(30);
    let one = loop {
        let out = addon.cli(&["module", "resource-monitor", "echo", "-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        if v["echo"].is_array() || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(one, json!({"echo": [format!("{NS}/ConfigMap/echo")]}));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shell-operator"))
        .args(["addon-operator", "module", "resource-monitor", "nope"])
        .arg("--debug-unix-socket")
        .arg(addon.dir.0.join("debug.socket"))
        .output()
        .expect("cli");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("module not found: nope"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // hook list: the user's hooks only.
    let hooks = addon.cli(&["hook", "list", "-o", "json"]);
    let hooks: Vec<String> = serde_json::from_str(&hooks).expect("json");
    assert_eq!(hooks, vec!["001-echo/hooks/h".to_string()]);
    // A ConfigMap edit goes through the internal watch; no metric names it.
    addon.set_config("echo", "a: 2\n");
    addon.wait_steps(Duration::from_secs(30), |s| {
        s.iter().filter(|t| *t == "echo").count() >= 2
    });
    let body = http_get(addon.port(), "/metrics").1;
    let named: Vec<&str> = body
        .lines()
        .filter(|l| l.contains("addon-operator/configmap"))
        .collect();
    assert!(named.is_empty(), "the internal hook in metrics: {named:#?}");
}

/// Module `web` with a chart, enabled in the modules dir's values.yaml.
fn web_module() -> Vec<(String, String)> {
    let mut files = vec![(
        "modules/values.yaml".to_string(),
        "webEnabled: true\n".to_string(),
    )];
    files.extend(chart("modules/001-web", "web", "web"));
    files
}

fn main_queue_empty(addon: &Addon) -> bool {
    let v: serde_json::Value =
        serde_json::from_str(&addon.cli(&["queue", "main", "-o", "json"])).expect("json");
    v["tasksCount"] == 0
}

fn errors_total(addon: &Addon) -> f64 {
    metric(&addon.metrics(), &format!("{P}config_values_errors_total")).unwrap_or(-1.0)
}

/// Item 4: a bad section and a bad flag of a module are refused, every error in one
/// log line; the refused ConfigMap is not logged and counted again when only its
/// metadata changes. (Keys of modules that do not exist are ignored: contract.rs.)
#[test]
fn configmap_bad_keys_are_refused_all_at_once() {
    let mut files = web_module();
    files.push((
        "global-hooks/hooks/watcher".into(),
        rec(
            "watcher",
            &format!(
                r#"{{"configVersion":"v1","kubernetes":[{{"name":"cm","apiVersion":"v1","kind":"ConfigMap",
                "nameSelector":{{"matchNames":["addon-operator"]}},"namespace":{{"nameSelector":{{"matchNames":["{NS}"]}}}},
                "jqFilter":".metadata.annotations.touched"}}]}}"#
            ),
            "",
        ),
    ));
    let addon = Addon::start(&refs(&files), Some(json!({"web": "a: 1\n"})), 4);
    addon.wait_ready();
    addon.wait_object("ConfigMap", "web", |o| {
        o.is_some_and(|o| o["data"]["values"] == r#"{"a":1}"#)
    });
    // Two bad keys in one edit.
    let mut cm = addon
        .sim
        .get("v1", "ConfigMap", NS, "addon-operator")
        .expect("cm");
    cm["data"]["web"] = json!("a: [2\n");
    cm["data"]["webEnabled"] = json!("yes");
    addon.sim.update(cm).expect("update");
    let line = addon.wait_log(&["ConfigMap is invalid"], Duration::from_secs(30));
    assert!(
        line.contains("key 'web'") && line.contains("key 'webEnabled'"),
        "both keys named in one line: {line}"
    );
    assert_eq!(errors_total(&addon), 1.0);
    // Metadata only: twice.
    for n in ["1", "2"] {
        let mut cm = addon
            .sim
            .get("v1", "ConfigMap", NS, "addon-operator")
            .expect("cm");
        cm["metadata"]["annotations"] = json!({"touched": n});
        addon.sim.update(cm).expect("annotate");
        // Fence: the watcher hook saw this edit, and the main queue (where the
        // ConfigMap's own task runs beside it) is empty again.
        let deadline = Instant::now() + Duration::from_secs(30);
        let seen = format!("\"filterResult\":\"{n}\"");
        while !(addon
            .runs()
            .iter()
            .any(|(t, ctx)| t == "watcher" && ctx.to_string().contains(&seen))
            && main_queue_empty(&addon))
        {
            assert!(
                Instant::now() < deadline,
                "edit {n} not handled:\n{}",
                addon.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Then a good edit: once web has its new value, the annotations were handled.
    let mut cm = addon
        .sim
        .get("v1", "ConfigMap", NS, "addon-operator")
        .expect("cm");
    let data = cm["data"].as_object_mut().expect("data");
    data.remove("webEnabled");
    data.insert("web".into(), json!("a: 3\n"));
    addon.sim.update(cm).expect("fix");
    addon.wait_object("ConfigMap", "web", |o| {
        o.is_some_and(|o| o["data"]["values"] == r#"{"a":3}"#)
    });
    let refusals = addon
        .logs()
        .lines()
        .filter(|l| l.contains("ConfigMap is invalid"))
        .count();
    assert_eq!(refusals, 1, "logged again:\n{}", addon.logs());
    assert_eq!(errors_total(&addon), 1.0);
}

/// Item 4: at startup a module section that is not YAML stops the operator naming
/// the key, and the seeds' `<module>: "false"` disables the module.
#[test]
fn configmap_at_startup_bad_section_and_the_seeds_false_form() {
    let mut addon = Addon::start(&refs(&web_module()), Some(json!({"web": "a: [1\n"})), 4);
    let child = addon.child.as_mut().expect("child");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "still running:\n{}",
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1));
    addon.wait_log(&["key 'web'", "bad YAML"], Duration::from_secs(5));

    // The seeds' form: web is enabled by values.yaml, disabled by the ConfigMap.
    let addon = Addon::start(&refs(&web_module()), Some(json!({"web": "false"})), 4);
    addon.wait_ready();
    let list: serde_json::Value =
        serde_json::from_str(&addon.cli(&["module", "list", "-o", "json"])).expect("json");
    assert_eq!(list["enabledModules"], json!([]), "{list}");
    assert!(addon.object("v1", "ConfigMap", "web").is_none());
    // And "true" in the same place enables it again (a converge).
    addon.set_config("web", "true");
    addon.wait_object("ConfigMap", "web", |o| o.is_some());
}

/// Item 9: `scripts/dev-addon.sh` (`make dev-addon`) runs a modules directory
/// against kube-sim with the helm found on PATH (helm 3 here, not .tools' helm 4),
/// without building the binaries it is given.
#[test]
fn dev_addon_runs_my_modules_with_my_helm() {
    use crate::common::TempDir;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = TempDir::new("dev-addon");
    let root = dir.0.clone();
    let mut files = web_module();
    files.push((
        "modules/001-web/hooks/h".into(),
        rec("web", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
    ));
    crate::common::write_hooks(&root, &refs(&files));
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(crate::harness::helm_bin(3), bin.join("helm")).expect("link");
    let repo = crate::harness::repo_root();
    let kube_sim = repo.join("target/debug/kube-sim");
    let mut cmd = Command::new(repo.join("scripts/dev-addon.sh"));
    cmd.env("DEV_MODULES", root.join("modules"))
        .env("DEV_KUBECONFIG", root.join("kubeconfig"))
        .env("OPERATOR_BIN", env!("CARGO_BIN_EXE_shell-operator"))
        .env("OUT_DIR", root.join("out"))
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env_remove("HELM_BIN_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if kube_sim.is_file() {
        cmd.env("KUBE_SIM_BIN", &kube_sim);
    }
    std::fs::create_dir_all(root.join("out")).expect("mkdir");
    let mut child = cmd.spawn().expect("dev-addon.sh");
    let pid = child.id().to_string();
    let stop = |child: &mut std::process::Child| {
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = child.wait();
    };
    let lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut out = Vec::new();
    for line in lines.lines().map_while(Result::ok) {
        let ready = line.starts_with("== ready");
        out.push(line);
        if ready {
            break;
        }
    }
    let text = out.join("\n");
    let checks = (|| {
        if !text.contains("== ready") {
            return Err(format!("never ready:\n{text}"));
        }
        if text.contains("== building") {
            return Err(format!("built although given the binaries:\n{text}"));
        }
        let helm = format!("== helm: {}/helm (v3.", bin.display());
        if !text.contains(&helm) {
            return Err(format!("not the helm on PATH ({helm}):\n{text}"));
        }
        // The module's release, read with kubectl through the printed kubeconfig.
        let kubectl = repo.join(".tools/bin/kubectl");
        let got = Command::new(&kubectl)
            .args(["-n", "addons", "get", "configmap", "web", "-o", "json"])
            .env("KUBECONFIG", root.join("kubeconfig"))
            .output()
            .expect("kubectl");
        let cm: serde_json::Value = serde_json::from_slice(&got.stdout)
            .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&got.stderr)))?;
        if cm["metadata"]["labels"]["heritage"] != "addon-operator" {
            return Err(format!("not installed by the operator: {cm}"));
        }
        let runs = std::fs::read_to_string(root.join("out/runs.log")).unwrap_or_default();
        if !runs.lines().any(|l| l.starts_with("web ")) {
            return Err(format!("the module's hook did not run: {runs}"));
        }
        Ok(())
    })();
    stop(&mut child);
    if let Err(e) = checks {
        panic!("{e}");
    }
}
