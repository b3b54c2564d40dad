//! addon-operator hardening (issue 27 items 4–6, issue 30 item 8): the files helm
//! and `enabled` scripts get, the resource monitor with one module's CRD gone,
//! modules that could never install, and what successful `enabled` scripts and helm
//! write to stderr.

use crate::harness::{Addon, NS, chart, helm_bin, refs, repo_root};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

/// Waits until `path` has a line for which `cond` holds; every line.
fn wait_file(addon: &Addon, path: &Path, cond: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + LONG;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().any(&cond) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{}: {text}\nlogs:\n{}",
            path.display(),
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every file an `enabled` script and helm get is a regular 0600 file in the
/// operator's tmp dir (issue 27 item 4), removed after the run.
#[test]
fn enabled_scripts_and_helm_get_hardened_files() {
    let real_helm = helm_bin(4);
    let mut files = chart("modules/001-files", "files", "files");
    files.push(("modules/values.yaml".into(), "filesEnabled: true\n".into()));
    files.push((
        "modules/001-files/enabled".into(),
        r#"#!/bin/sh
for v in CONFIG_VALUES_PATH VALUES_PATH MODULE_ENABLED_RESULT MODULE_ENABLED_REASON; do
  eval p=\$$v
  kind=other; if [ -f "$p" ] && [ ! -L "$p" ]; then kind=file; fi
  echo "$v $(stat -c %a "$p") $kind $(dirname "$p")" >> "$OUT_DIR/enabled-files"
done
echo true > "$MODULE_ENABLED_RESULT"
"#
        .into(),
    ));
    // helm, recording the mode and place of its values file.
    files.push((
        "helm-stat".into(),
        format!(
            r#"#!/bin/sh
prev=""
for a in "$@"; do
  if [ "$prev" = "--values" ]; then
    kind=other; if [ -f "$a" ] && [ ! -L "$a" ]; then kind=file; fi
    echo "$1 $(stat -c %a "$a") $kind $(dirname "$a")" >> "$OUT_DIR/helm-files"
  fi
  prev="$a"
done
exec '{}' "$@"
"#,
            real_helm.display()
        ),
    ));
    let env = [("HELM_BIN_PATH", "./helm-stat")];
    let addon = Addon::start_with(&refs(&files), None, 4, &env);
    addon.wait_ready();
    addon.wait_object("ConfigMap", "files", |o| o.is_some());
    let tmp = addon.dir.0.join("tmp").display().to_string();
    let out = addon.dir.0.join("out");

    let enabled = wait_file(&addon, &out.join("enabled-files"), |l| {
        l.starts_with("MODULE_ENABLED_REASON")
    });
    let seen: Vec<&str> = enabled.lines().take(4).collect();
    assert_eq!(
        seen,
        [
            format!("CONFIG_VALUES_PATH 600 file {tmp}"),
            format!("VALUES_PATH 600 file {tmp}"),
            format!("MODULE_ENABLED_RESULT 600 file {tmp}"),
            format!("MODULE_ENABLED_REASON 600 file {tmp}"),
        ],
        "{enabled}"
    );
    let helm = wait_file(&addon, &out.join("helm-files"), |l| {
        l.starts_with("upgrade")
    });
    for line in helm.lines() {
        let verb = line.split(' ').next().unwrap_or("");
        assert_eq!(line, format!("{verb} 600 file {tmp}"), "{helm}");
    }

    // Nothing is left behind in the tmp dir but what the operator keeps there.
    let deadline = Instant::now() + LONG;
    loop {
        let left: Vec<String> = std::fs::read_dir(addon.dir.0.join("tmp"))
            .expect("ls tmp")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".module-"))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left in tmp: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// flant's documented example `enabled` script works (`$MODULE_ENABLED_REASON` is
/// set, its reason logged), and the stderr of a successful `enabled` script and of a
/// successful helm is logged at debug level with the module's name (issue 30 item 8).
#[test]
fn enabled_reason_and_successful_stderr_reach_the_log() {
    let mut files = chart("modules/001-files", "files", "files");
    files.push((
        "modules/values.yaml".into(),
        "filesEnabled: true\nsimpleModuleEnabled: true\nsimpleModule:\n  param2: stopMePlease\n"
            .into(),
    ));
    files.push((
        "modules/001-files/enabled".into(),
        "#!/bin/sh\necho enabled-stderr-marker >&2\necho true > \"$MODULE_ENABLED_RESULT\"\n"
            .into(),
    ));
    // flant's documented example (docs/src/LIFECYCLE.md), unchanged.
    files.push((
        "modules/002-simple-module/enabled".into(),
        r#"#!/usr/bin/env bash

param2=$(jq -r '.simpleModule.param2' $VALUES_PATH)

if [[ $param2 == "stopMePlease" ]] ; then
  echo "false" > $MODULE_ENABLED_RESULT
  echo "Module disabled: param2 == stopMePlease" > "$MODULE_ENABLED_REASON"
else
  echo "true" > $MODULE_ENABLED_RESULT
fi
"#
        .into(),
    ));
    files.push((
        "helm-stderr".into(),
        format!(
            "#!/bin/sh\necho \"helm-stderr-marker $1\" >&2\nexec '{}' \"$@\"\n",
            helm_bin(4).display()
        ),
    ));
    let env = [("HELM_BIN_PATH", "./helm-stderr"), ("LOG_LEVEL", "debug")];
    let addon = Addon::start_with(&refs(&files), None, 4, &env);
    addon.wait_ready();
    addon.wait_object("ConfigMap", "files", |o| o.is_some());
    // flant's example disabled its module and said why.
    let line = addon.wait_log(&["module disabled by its enabled script"], LONG);
    let v: Value = serde_json::from_str(&line).expect("json log");
    assert_eq!(v["module"], "simple-module", "{line}");
    assert_eq!(
        v["reason"], "Module disabled: param2 == stopMePlease",
        "{line}"
    );

    let line = addon.wait_log(&["enabled-stderr-marker"], LONG);
    let v: Value = serde_json::from_str(&line).expect("json log");
    assert_eq!(
        (&v["level"], &v["module"], &v["msg"]),
        (
            &json!("debug"),
            &json!("files"),
            &json!("enabled-stderr-marker")
        ),
        "{line}"
    );
    let line = addon.wait_log(&["helm-stderr-marker upgrade"], LONG);
    let v: Value = serde_json::from_str(&line).expect("json log");
    assert_eq!(
        (&v["level"], &v["module"]),
        (&json!("debug"), &json!("files")),
        "{line}"
    );
}

/// A module whose custom resource's CRD is deleted is reported by the resource
/// monitor (log and metric naming it and the kind), and another module's deleted
/// ConfigMap still comes back.
#[test]
fn a_deleted_crd_of_one_module_does_not_stop_healing_the_others() {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.harden.example.com"},
        "spec": {"group": "harden.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let files = vec![
        (
            "modules/values.yaml".to_string(),
            "widgetsEnabled: true\nhealEnabled: true\n".to_string(),
        ),
        (
            "modules/001-widgets/Chart.yaml".into(),
            "apiVersion: v2\nname: widgets\nversion: 0.0.1\n".into(),
        ),
        (
            "modules/001-widgets/templates/w.yaml".into(),
            "apiVersion: harden.example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec: {}\n"
                .into(),
        ),
        (
            "modules/002-heal/Chart.yaml".into(),
            "apiVersion: v2\nname: heal\nversion: 0.0.1\n".into(),
        ),
        (
            "modules/002-heal/templates/cm.yaml".into(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: heal-cm\ndata:\n  a: b\n".into(),
        ),
    ];
    let period = [("ADDON_OPERATOR_RESOURCES_CHECK_PERIOD", "1s")];
    // kube-sim is per test: the CRD name is ours alone. Created before the
    // operator starts, with kubectl (the harness makes the sim inside).
    let create_crd = |root: &Path| {
        let file = root.join("crd.json");
        std::fs::write(&file, crd.to_string()).expect("write crd");
        let out = std::process::Command::new(repo_root().join(".tools/bin/kubectl"))
            .arg("--kubeconfig")
            .arg(root.join("kubeconfig"))
            .args(["create", "-f"])
            .arg(&file)
            .output()
            .expect("kubectl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let addon = Addon::start_after(&refs(&files), None, 4, &period, &create_crd);
    addon.wait_ready();
    addon.wait_object("ConfigMap", "heal-cm", |o| o.is_some());
    let deadline = Instant::now() + LONG;
    while addon
        .sim
        .get("harden.example.com/v1", "Widget", NS, "w1")
        .is_none()
    {
        assert!(Instant::now() < deadline, "no widget\n{}", addon.logs());
        std::thread::sleep(Duration::from_millis(50));
    }

    addon
        .sim
        .delete(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "",
            "widgets.harden.example.com",
        )
        .expect("delete crd");
    let line = addon.wait_log(&["resource monitor cannot list", "\"widgets\""], LONG);
    let v: Value = serde_json::from_str(&line).expect("json log");
    assert_eq!(
        (&v["module"], &v["kind"]),
        (&json!("widgets"), &json!("Widget")),
        "{line}"
    );

    addon
        .sim
        .delete("v1", "ConfigMap", NS, "heal-cm")
        .expect("delete cm");
    addon.wait_object("ConfigMap", "heal-cm", |o| o.is_some());
    let series = r#"addon_operator_modules_absent_resources_total{module="heal",resource="addons/ConfigMap/heal-cm"} "#;
    assert_eq!(crate::common::metric(&addon.metrics(), series), Some(1.0));
    let series =
        r#"addon_operator_modules_resource_check_errors_total{kind="Widget",module="widgets"} "#;
    let errors = crate::common::metric(&addon.metrics(), series);
    assert!(
        errors.is_some_and(|n| n >= 1.0),
        "{errors:?}\n{}",
        addon.metrics()
    );
    // Only the module of the missing kind is reported.
    assert!(
        !addon
            .logs()
            .lines()
            .any(|l| l.contains("resource monitor cannot list") && l.contains("\"heal\"")),
        "{}",
        addon.logs()
    );
}

/// A module with `templates/` and no `Chart.yaml` is installed with flant's
/// generated chart metadata (name: the module, version 0.2.0), both helms.
#[test]
fn a_module_without_chart_yaml_gets_flants_generated_chart() {
    for major in [4, 3] {
        let files = vec![
            ("modules/values.yaml".to_string(), "bareEnabled: true\n".to_string()),
            (
                "modules/001-bare/templates/cm.yaml".into(),
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bare\ndata:\n  a: {{ .Chart.Name }}-{{ .Chart.Version }}\n"
                    .into(),
            ),
            ("modules/001-bare/hooks/.keep".into(), String::new()),
        ];
        let addon = Addon::start(&refs(&files), None, major);
        addon.wait_ready();
        let cm = addon
            .wait_object("ConfigMap", "bare", |o| o.is_some())
            .expect("cm");
        assert_eq!(cm["data"]["a"], "bare-0.2.0", "helm {major}");
        assert_eq!(addon.revisions("bare"), vec![1], "helm {major}");
        assert!(
            !addon.dir.0.join("modules/001-bare/Chart.yaml").exists(),
            "the module dir is left as it was"
        );
    }
}

/// Module names that cannot be release names stop the operator at startup (exit 1)
/// with the module directory and the rule.
#[test]
fn a_module_name_that_cannot_be_a_release_name_stops_startup() {
    let long = format!("{}-x", "a".repeat(52));
    for (dir, rule) in [
        (
            format!("001-{long}"),
            "at most 53 characters long, it has 54",
        ),
        ("002-caf\u{e9}".to_string(), "it must be a DNS-1123 label"),
    ] {
        let files = vec![(format!("modules/{dir}/values.yaml"), String::new())];
        let mut addon = Addon::start(&refs(&files), None, 4);
        let child = addon.child.as_mut().expect("child");
        let deadline = Instant::now() + LONG;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "still running\n{}", addon.logs());
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(status.code(), Some(1), "{}", addon.logs());
        let line = addon.wait_log(&["cannot be a Helm release name"], LONG);
        assert!(line.contains(&format!("/modules/{dir}'")), "{line}");
        assert!(line.contains(rule), "{line}");
    }
}
