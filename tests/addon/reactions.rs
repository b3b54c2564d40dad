//! addon-operator's reactions: global and module hooks' kubernetes bindings
//! (Synchronization, snapshots in lifecycle contexts, values changed by events),
//! dynamic enabling from a global hook, `global.enabledModules` in an enabled script,
//! and the purge of releases that belong to no module.

use crate::harness::{Addon, NS, chart, helm_bin, rec, repo_root};
use serde_json::{Value, json};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

fn tagged(addon: &Addon, tag: &str) -> Vec<Value> {
    addon
        .runs()
        .into_iter()
        .filter(|(t, _)| t == tag)
        .map(|(_, c)| c)
        .collect()
}

#[test]
fn hooks_react_to_kubernetes_events_and_dynamic_enabling() {
    let mut layout: Vec<(String, String)> = vec![
        (
            "global-hooks/hooks/g".into(),
            rec(
                "g",
                r#"{"configVersion":"v1","beforeAll":1,"kubernetes":[{"name":"cms","apiVersion":"v1","kind":"ConfigMap","labelSelector":{"matchLabels":{"watch":"global"}},"jqFilter":".data.v"}]}"#,
                // beforeAll turns the dynamic module on; events publish the value seen.
                r#"if grep -q '"binding":"beforeAll"' "$BINDING_CONTEXT_PATH"; then
  echo '[{"op":"add","path":"/dynEnabled","value":true}]' > "$VALUES_JSON_PATCH_PATH"
elif grep -q '"type":"Event"' "$BINDING_CONTEXT_PATH"; then
  v=$(sed 's/.*"filterResult":"\([^"]*\)".*/\1/' "$BINDING_CONTEXT_PATH")
  echo "[{\"op\":\"add\",\"path\":\"/global/seen\",\"value\":\"$v\"}]" > "$VALUES_JSON_PATCH_PATH"
fi"#,
            ),
        ),
        ("modules/values.yaml".into(), "mkEnabled: true\nscriptedEnabled: true\n".into()),
        (
            "modules/001-mk/hooks/h".into(),
            rec(
                "mk",
                r#"{"configVersion":"v1","beforeHelm":1,"kubernetes":[{"name":"pods","apiVersion":"v1","kind":"Pod","namespace":{"nameSelector":{"matchNames":["addons"]}},"jqFilter":".metadata.name"}]}"#,
                r#"if grep -q '"type":"Event"' "$BINDING_CONTEXT_PATH"; then
  echo '[{"op":"add","path":"/mk/podEvent","value":true}]' > "$VALUES_JSON_PATCH_PATH"
fi"#,
            ),
        ),
        (
            "modules/002-dyn/hooks/h".into(),
            rec("dyn", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
        (
            "modules/003-scripted/enabled".into(),
            "#!/bin/sh\ncp \"$VALUES_PATH\" \"$OUT_DIR/scripted-values.json\"\necho true > \"$MODULE_ENABLED_RESULT\"\n".into(),
        ),
    ];
    layout.extend(chart("modules/001-mk", "mk", "mk"));
    let files: Vec<(&str, String)> = layout
        .iter()
        .map(|(p, c)| (p.as_str(), c.clone()))
        .collect();
    let addon = Addon::start(&files, None, 4);
    addon.sim.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p1", "namespace": NS}, "spec": {"containers": [{"name": "c", "image": "x"}]}}))
        .expect("pod");
    addon.wait_ready();

    // Global hook: Synchronization first (no converge from it), then beforeAll.
    let g = tagged(&addon, "g");
    assert_eq!(g[0][0]["type"], "Synchronization", "{g:?}");
    assert_eq!(g[1][0]["binding"], "beforeAll");
    // The module hook: Synchronization of its binding, then beforeHelm with the snapshot.
    let mk = tagged(&addon, "mk");
    assert_eq!(mk[0][0]["type"], "Synchronization", "{mk:?}");
    assert_eq!(mk[1][0]["binding"], "beforeHelm");
    let snapshot = &mk[1][0]["snapshots"]["pods"];
    assert_eq!(snapshot[0]["filterResult"], "p1", "{mk:?}");
    // Dynamic enabling from the global hook; enabledModules of preceding modules.
    assert_eq!(
        tagged(&addon, "dyn").len(),
        1,
        "dyn enabled by the global hook"
    );
    let scripted: Value = serde_json::from_str(
        &std::fs::read_to_string(addon.dir.0.join("out/scripted-values.json")).expect("script ran"),
    )
    .expect("json");
    assert_eq!(scripted["global"]["enabledModules"], json!(["mk", "dyn"]));
    // The debug CLI shows the bindings' snapshots.
    let module: Value =
        serde_json::from_str(&addon.cli(&["module", "snapshots", "mk", "-o", "json"]))
            .expect("json");
    assert_eq!(
        module["001-mk/hooks/h"]["pods"]["snapshot"][0]["filterResult"], "p1",
        "{module}"
    );
    let global: Value =
        serde_json::from_str(&addon.cli(&["global", "snapshots", "-o", "json"])).expect("json");
    assert_eq!(global["g"]["cms"]["snapshot"], json!([]), "{global}");

    // A module hook's event changes its module's values: the module runs again.
    let before_helm = |a: &Addon| {
        tagged(a, "mk")
            .iter()
            .filter(|c| c[0]["binding"] == "beforeHelm")
            .count()
    };
    addon.sim.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p2", "namespace": NS}, "spec": {"containers": [{"name": "c", "image": "x"}]}}))
        .expect("pod");
    addon.wait_log(
        &["module run", "Kubernetes-Change-ModuleValues", "mk"],
        LONG,
    );
    addon.wait_steps(LONG, |_| before_helm(&addon) == 2);
    let cm = addon.wait_object("ConfigMap", "mk", |o| {
        o.is_some_and(|o| {
            o["data"]["values"]
                .as_str()
                .unwrap_or("")
                .contains("podEvent")
        })
    });
    assert!(cm.is_some());

    // A global hook's event changes global values: a converge.
    let before_all = |a: &Addon| {
        tagged(a, "g")
            .iter()
            .filter(|c| c[0]["binding"] == "beforeAll")
            .count()
    };
    addon.sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "w", "namespace": NS, "labels": {"watch": "global"}}, "data": {"v": "hello"}}))
        .expect("cm");
    addon.wait_log(
        &["converge modules", "Kubernetes-Change-GlobalValues"],
        LONG,
    );
    addon.wait_steps(LONG, |_| before_all(&addon) == 2);

    // The kube_* metrics carry the module ("" for global hooks).
    let body = addon.metrics();
    let series = |labels: &str| {
        crate::common::metric(
            &body,
            &format!("addon_operator_kube_snapshot_objects{{{labels}}} "),
        )
    };
    let mk = r#"binding="pods",hook="001-mk/hooks/h",kind="Pod",module="mk",queue="main""#;
    assert_eq!(series(mk), Some(2.0), "{body}");
    assert_eq!(
        series(r#"binding="cms",hook="g",kind="ConfigMap",module="",queue="main""#),
        Some(1.0),
        "{body}"
    );
}

#[test]
fn releases_of_no_module_are_purged_after_the_first_converge() {
    let mut layout: Vec<(String, String)> =
        vec![("modules/values.yaml".into(), "keptEnabled: true\n".into())];
    layout.extend(chart("modules/001-kept", "kept", "kept"));
    let files: Vec<(&str, String)> = layout
        .iter()
        .map(|(p, c)| (p.as_str(), c.clone()))
        .collect();
    let install = |root: &std::path::Path| {
        let chart = repo_root().join("tests/addon/charts/greeter");
        for release in ["stranger", "keeper"] {
            let out = std::process::Command::new(helm_bin(4))
                .args(["upgrade", "--install", release])
                .arg(&chart)
                .args(["--namespace", NS, "--kubeconfig"])
                .arg(root.join("kubeconfig"))
                .env("HOME", root.join("home"))
                .output()
                .expect("helm");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let addon = Addon::start_after(
        &files,
        None,
        4,
        &[("HELM_IGNORE_RELEASE", "keeper")],
        &install,
    );
    addon.wait_ready();
    addon.wait_steps(LONG, |s| s.iter().any(|t| t == "helm:uninstall:stranger"));
    let deadline = std::time::Instant::now() + LONG;
    while !addon.revisions("stranger").is_empty() {
        assert!(std::time::Instant::now() < deadline, "stranger not purged");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        addon.revisions("keeper"),
        vec![1],
        "HELM_IGNORE_RELEASE is never purged"
    );
    assert_eq!(addon.revisions("kept"), vec![1]);
    assert!(
        !addon
            .steps()
            .iter()
            .any(|t| t == "helm:uninstall:kept" || t == "helm:uninstall:keeper")
    );
}

/// A disabled module's kubernetes bindings stop; enabled again, they start over
/// with a Synchronization that lists what appeared meanwhile.
#[test]
fn a_module_disabled_and_enabled_again_synchronizes_anew() {
    let layout: Vec<(String, String)> = vec![
        (
            "global-hooks/hooks/g".into(),
            rec("g", r#"{"configVersion":"v1","afterAll":1}"#, ""),
        ),
        ("modules/values.yaml".into(), "kwEnabled: true\n".into()),
        (
            "modules/001-kw/hooks/h".into(),
            rec(
                "kw",
                r#"{"configVersion":"v1","kubernetes":[{"name":"cms","apiVersion":"v1","kind":"ConfigMap","labelSelector":{"matchLabels":{"watch":"kw"}},"jqFilter":".metadata.name"}]}"#,
                "",
            ),
        ),
    ];
    let files: Vec<(&str, String)> = layout
        .iter()
        .map(|(p, c)| (p.as_str(), c.clone()))
        .collect();
    let addon = Addon::start(&files, None, 4);
    addon.wait_ready();
    let kw = tagged(&addon, "kw");
    assert_eq!(kw.len(), 1);
    assert_eq!(kw[0][0]["type"], "Synchronization");
    assert_eq!(kw[0][0]["objects"], json!([]));
    let after_all = |a: &Addon| tagged(a, "g").len();

    addon.set_config("kwEnabled", "false");
    addon.wait_steps(LONG, |_| after_all(&addon) == 2);
    addon
        .sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "while-off", "namespace": NS, "labels": {"watch": "kw"}}}))
        .expect("cm");
    // A fence: the next converge runs after the event would have been handled.
    addon.set_config("global", "fence: 1\n");
    addon.wait_steps(LONG, |_| after_all(&addon) == 3);
    assert_eq!(tagged(&addon, "kw").len(), 1, "no run while disabled");

    addon.set_config("kwEnabled", "true");
    addon.wait_steps(LONG, |_| after_all(&addon) == 4);
    let kw = tagged(&addon, "kw");
    assert_eq!(kw.len(), 2, "{kw:?}");
    assert_eq!(kw[1][0]["type"], "Synchronization");
    assert_eq!(kw[1][0]["objects"][0]["filterResult"], "while-off");
}

/// An `enabled` script that writes anything but true/false fails the computation,
/// naming the module and what it wrote; nothing runs until it is fixed, then the
/// retry converges.
#[test]
fn a_bad_enabled_script_blocks_the_converge_until_fixed() {
    let mut layout: Vec<(String, String)> = vec![
        ("modules/values.yaml".into(), "shakyEnabled: true\n".into()),
        (
            "modules/001-shaky/enabled".into(),
            "#!/bin/sh\necho maybe > \"$MODULE_ENABLED_RESULT\"\n".into(),
        ),
        (
            "modules/001-shaky/hooks/h".into(),
            rec("shaky", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
    ];
    layout.extend(chart("modules/001-shaky", "shaky", "shaky"));
    let files: Vec<(&str, String)> = layout
        .iter()
        .map(|(p, c)| (p.as_str(), c.clone()))
        .collect();
    let addon = Addon::start(&files, None, 4);
    let line = addon.wait_log(&["modules discovery failed", "shaky", "maybe"], LONG);
    assert!(line.contains("true or false"), "{line}");
    let errors = crate::common::metric(
        &addon.metrics(),
        "addon_operator_modules_discover_errors_total",
    );
    assert!(errors.is_some_and(|n| n >= 1.0), "{errors:?}");
    let port = addon.port();
    assert_eq!(
        crate::common::http_get(port, "/readyz"),
        (500, "Startup converge in progress\n".to_string()),
        "not ready while it fails"
    );
    let status = crate::common::http_get(port, "/status/converge").1;
    assert!(
        status.starts_with("STARTUP_CONVERGE_IN_PROGRESS: "),
        "{status}"
    );
    assert!(addon.steps().is_empty(), "nothing ran: {:?}", addon.steps());
    std::fs::write(
        addon.dir.0.join("modules/001-shaky/enabled"),
        "#!/bin/sh\necho true > \"$MODULE_ENABLED_RESULT\"\n",
    )
    .expect("fix the script");
    addon.wait_ready();
    assert_eq!(
        crate::common::http_get(port, "/readyz"),
        (200, "Startup converge done.\n".to_string())
    );
    let status = crate::common::http_get(port, "/status/converge?output=json").1;
    let status: Value = serde_json::from_str(&status).expect("json");
    assert_eq!(status["STARTUP_CONVERGE_DONE"], true);
    assert_eq!(status["CONVERGE_WAIT_TASK"], true, "{status}");
    assert_eq!(tagged(&addon, "shaky").len(), 1);
    assert_eq!(addon.revisions("shaky"), vec![1]);
}

/// A release left `pending-install` by a helm killed mid-install (the operator
/// restarted during an upgrade) is recovered: the pending revision is removed and
/// the module's release is installed, instead of failing forever.
#[test]
fn a_release_left_pending_by_a_killed_helm_is_recovered() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: stuck\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: stuck}\n  template:\n    metadata:\n      labels: {app: stuck}\n    spec:\n      containers:\n      - name: c\n        image: example\n";
    let layout: Vec<(String, String)> = vec![
        ("modules/values.yaml".into(), "stuckEnabled: true\n".into()),
        (
            "modules/001-stuck/Chart.yaml".into(),
            "apiVersion: v2\nname: stuck\nversion: 0.0.1\n".into(),
        ),
        (
            "modules/001-stuck/templates/deploy.yaml".into(),
            deployment.into(),
        ),
    ];
    let files: Vec<(&str, String)> = layout
        .iter()
        .map(|(p, c)| (p.as_str(), c.clone()))
        .collect();
    let interrupt = |root: &std::path::Path| {
        // kube-sim never makes the Deployment ready, so `--wait` holds helm after it
        // stored the pending-install revision; kill it there.
        let mut helm = std::process::Command::new(helm_bin(4))
            .args(["upgrade", "--install", "stuck"])
            .arg(root.join("modules/001-stuck"))
            .args([
                "--namespace",
                NS,
                "--wait",
                "--timeout",
                "120s",
                "--kubeconfig",
            ])
            .arg(root.join("kubeconfig"))
            .env("HOME", root.join("home"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("helm");
        let kubeconfig = root.join("kubeconfig");
        let deadline = std::time::Instant::now() + LONG;
        loop {
            let out = std::process::Command::new(repo_root().join(".tools/bin/kubectl"))
                .args([
                    "get",
                    "secrets",
                    "-n",
                    NS,
                    "-l",
                    "owner=helm,status=pending-install",
                    "-o",
                    "name",
                ])
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .output()
                .expect("kubectl");
            if String::from_utf8_lossy(&out.stdout).contains("sh.helm.release.v1.stuck.v1") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "helm never stored a pending revision"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = helm.kill();
        let _ = helm.wait();
    };
    let addon = Addon::start_after(&files, None, 4, &[], &interrupt);
    addon.wait_ready();
    addon.wait_log(&["left pending by an interrupted helm", "stuck"], LONG);
    assert_eq!(
        addon.revisions("stuck"),
        vec![1],
        "a fresh install replaced the pending one"
    );
    let secret = addon
        .sim
        .get("v1", "Secret", NS, "sh.helm.release.v1.stuck.v1")
        .expect("release");
    assert_eq!(secret["metadata"]["labels"]["status"], "deployed");
}

/// An `enabled` script that puts a FIFO in place of `$MODULE_ENABLED_RESULT` fails
/// the computation with an error naming the file; it used to hang the converge
/// for good (the result was opened blocking).
#[test]
fn a_fifo_as_enabled_result_fails_instead_of_hanging() {
    let mut layout: Vec<(String, String)> = vec![
        ("modules/values.yaml".into(), "fifoEnabled: true\n".into()),
        (
            "modules/001-fifo/enabled".into(),
            "#!/bin/sh\nrm \"$MODULE_ENABLED_RESULT\" && mkfifo \"$MODULE_ENABLED_RESULT\"\n"
                .into(),
        ),
    ];
    layout.extend(chart("modules/001-fifo", "fifo", "fifo"));
    let files: Vec<(&str, String)> = layout
        .iter()
        .map(|(p, c)| (p.as_str(), c.clone()))
        .collect();
    let addon = Addon::start(&files, None, 4);
    let line = addon.wait_log(
        &["modules discovery failed", "fifo", "MODULE_ENABLED_RESULT"],
        LONG,
    );
    assert!(line.contains("not a regular file"), "{line}");
}
