//! ModuleSettings objects (`--module-settings-resources`, docs/module-settings.md)
//! against the real API server, with helm 4: the operator installs the CRD and
//! answers its own validating webhook, so `kubectl apply` refuses a bad setting
//! with its JSON path; a good object converges its module and its status says so;
//! a failing module's status carries helm's error; a hook's config patch lands in
//! the object; a module added by a reload has its objects checked against its
//! schema; the export moves the settings from the ConfigMap into objects and
//! back with no new helm revision either way.
//!
//! The objects are cluster-scoped and named after modules, so one test runs the
//! whole story with one operator (no other test turns the feature on); it removes
//! its webhook configuration and the CRD at the end.

use super::*;

const CRD: &str = "modulesettings.addon-operator-rs.io";

/// The echo module with a config schema and a hook that writes a config patch
/// when ConfigMap `trigger` appears; the `fail` module, whose chart cannot render
/// without `fail.message`.
fn files(ns: &str) -> Vec<(&'static str, String)> {
    let mut files = echo_module();
    files[0] = (
        "modules/values.yaml",
        "echoEnabled: true\nfailEnabled: false\n".into(),
    );
    files.push((
        "modules/001-echo/openapi/config-values.yaml",
        "type: object\nadditionalProperties: false\nproperties:\n  greeting:\n    type: string\n  \
         replicas:\n    type: integer\n    minimum: 1\n"
            .into(),
    ));
    files.push((
        "modules/001-echo/hooks/patch",
        format!(
            "#!/bin/sh\nif [ \"$1\" = --config ]; then cat <<'EOF'\nconfigVersion: v1\nkubernetes:\n\
             - name: trigger\n  apiVersion: v1\n  kind: ConfigMap\n  nameSelector: {{matchNames: [trigger]}}\n  \
             namespace: {{nameSelector: {{matchNames: [{ns}]}}}}\nEOF\nexit 0\nfi\n\
             if grep -q '\"Event\"' \"$BINDING_CONTEXT_PATH\"; then\n  \
             echo '[{{\"op\":\"add\",\"path\":\"/echo/greeting\",\"value\":\"patched\"}}]' \
             > \"$CONFIG_VALUES_JSON_PATCH_PATH\"\nfi\n"
        ),
    ));
    files.push(("modules/002-fail/values.yaml", "fail: {}\n".into()));
    files.push((
        "modules/002-fail/Chart.yaml",
        "apiVersion: v2\nname: fail\nversion: 0.1.0\n".into(),
    ));
    files.push((
        "modules/002-fail/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fail\ndata:\n  \
         m: {{ required \"fail.message is required\" .Values.fail.message | quote }}\n"
            .into(),
    ));
    files
}

fn settings(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: addon-operator-rs.io/v1alpha1\nkind: ModuleSettings\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

/// The object `name`, if it exists.
fn object(name: &str) -> Option<Value> {
    let text = kubectl(&[
        "get",
        "modulesettings",
        name,
        "-o",
        "json",
        "--ignore-not-found",
    ]);
    serde_json::from_str(&text).ok()
}

/// The number of revisions of release `name` in `ns` (helm 4).
fn revisions(ns: &str, name: &str) -> usize {
    let text = helm(4, ns, &["history", name, "-o", "json"]);
    let list: Value = serde_json::from_str(&text).expect("history json");
    list.as_array().map_or(0, Vec::len)
}

/// The operator's log lines that contain `needle`.
fn count(op: &AddonOperator, needle: &str) -> usize {
    op.logs().matches(needle).count()
}

/// `addon-operator module settings export <to>` against the operator's socket.
fn export(op: &AddonOperator, to: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_shell-operator"))
        .args(["addon-operator", "module", "settings", "export", to])
        .arg("--debug-unix-socket")
        .arg(op.dir.0.join("debug.socket"))
        .output()
        .expect("run the debug CLI");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "export {to}: {text}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        op.logs()
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("export output {text:?}: {e}"))
}

/// After an export: once the operator has read what it wrote (its log says the
/// configuration changed), release `echo` keeps `before` revisions and no module
/// runs, for 5 s.
fn no_new_revision(op: &AddonOperator, ns: &str, before: usize, changes: usize, runs: usize) {
    op.wait("the operator to read the export", || {
        (count(op, "\"msg\":\"ConfigMap changed\"") > changes).then_some(())
    });
    for _ in 0..25 {
        assert_eq!(revisions(ns, "echo"), before, "{}", op.logs());
        assert_eq!(count(op, "\"msg\":\"module run\""), runs, "{}", op.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn condition(status: &Value, kind: &str) -> Value {
    let all = status["conditions"].as_array().cloned().unwrap_or_default();
    all.into_iter()
        .find(|c| c["type"] == kind)
        .unwrap_or_default()
}

#[test]
fn module_settings_resources_on_the_real_api_server() {
    let _api = api_shared();
    let ns = cp().namespace("addon-ms");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\n\
         data:\n  echo: |\n    greeting: from-cm\n"
    ));
    let ep = cp()
        .webhook_endpoint(&ns, "settings-svc")
        .unwrap_or_else(|e| panic!("webhook endpoint: {e}"));
    let mut args = ep.flags("validating");
    args.extend(["--validating-webhook-configuration-name".into(), ns.clone()]);
    args.push("--module-settings-resources".into());
    let op = AddonOperator::start_with(&ns, 4, &files(&ns), &[], &args);
    op.wait_ready();
    let greeting = || get("configmap", &ns, "echo-config").map(|c| c["data"]["greeting"].clone());
    op.wait("echo from the ConfigMap", || {
        (greeting()? == "from-cm").then_some(())
    });

    // A bad value is refused by kubectl apply, with its path; nothing is stored.
    let bad = settings("echo", "  settings:\n    replicas: 0\n    typo: 1\n");
    let err = cp().apply(&bad).expect_err("refused by the webhook");
    for needle in [
        "modulesettings.addon-operator-rs.io",
        "spec.settings.replicas",
        "spec.settings.typo: forbidden property",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(object("echo").is_none());
    let err = cp()
        .apply(&settings("ecko", "  settings: {}\n"))
        .expect_err("no such module");
    assert!(err.contains("no module named 'ecko'"), "{err}");

    // The export to objects: same configuration, no run, no revision.
    let before = revisions(&ns, "echo");
    let changes = count(&op, "\"msg\":\"ConfigMap changed\"");
    let runs = count(&op, "\"msg\":\"module run\"");
    let out = export(&op, "resources");
    assert_eq!(out["created"], json!(["global", "echo", "fail"]), "{out}");
    assert_eq!(
        object("echo").expect("echo")["spec"],
        json!({"settings": {"greeting": "from-cm"}})
    );
    let cm = get("configmap", &ns, "addon-operator").expect("configmap");
    assert!(cm["data"].get("echo").is_none(), "{cm}");
    no_new_revision(&op, &ns, before, changes, runs);

    // A good object converges its module, and its status says so.
    cp().apply(&settings(
        "echo",
        "  settings:\n    greeting: from-resource\n    replicas: 2\n",
    ))
    .unwrap_or_else(|e| panic!("good object: {e}"));
    op.wait("echo from the object", || {
        (greeting()? == "from-resource").then_some(())
    });
    let status = op.wait("echo's status Ready", || {
        let obj = object("echo")?;
        let s = obj["status"].clone();
        let seen = s["observedGeneration"] == obj["metadata"]["generation"];
        (seen && s["state"] == "Ready").then_some(s)
    });
    assert_eq!(
        status["revision"],
        json!(revisions(&ns, "echo")),
        "{status}"
    );
    assert_eq!(condition(&status, "Ready")["status"], "True", "{status}");
    assert_eq!(condition(&status, "Error")["status"], "False", "{status}");
    assert_eq!(status["enabled"], true);
    assert!(status["lastConvergeTime"].is_string(), "{status}");
    assert_eq!(
        status["valuesChecksum"].as_str().map(str::len),
        Some(32),
        "{status}"
    );
    let table = kubectl(&["get", "modulesettings"]);
    let head = table.lines().next().unwrap_or_default();
    for column in ["NAME", "ENABLED", "STATE", "REVISION", "CONVERGED", "ERROR"] {
        assert!(head.contains(column), "{column}: {table}");
    }
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("echo ") && l.contains("Ready")),
        "{table}"
    );
    let err = cp()
        .apply(&settings("echo", "  settings:\n    replicas: two\n"))
        .expect_err("an update is checked too");
    assert!(err.contains("spec.settings.replicas"), "{err}");

    // A hook's config patch lands in the object, not in the ConfigMap.
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: trigger\n  namespace: {ns}\n"
    ));
    op.wait("the patch in the object", || {
        let spec = object("echo")?["spec"].clone();
        (spec == json!({"settings": {"greeting": "patched", "replicas": 2}})).then_some(())
    });
    op.wait("echo from the patch", || {
        (greeting()? == "patched").then_some(())
    });
    let cm = get("configmap", &ns, "addon-operator").expect("configmap");
    assert!(cm["data"].get("echo").is_none(), "{cm}");

    // A restart reads the objects with the ConfigMap before the first converge:
    // the release stays as it is.
    let before = revisions(&ns, "echo");
    drop(op);
    let op = AddonOperator::start_with(&ns, 4, &files(&ns), &[], &args);
    op.wait_ready();
    assert_eq!(revisions(&ns, "echo"), before, "{}", op.logs());
    assert_eq!(greeting(), Some(json!("patched")));
    op.wait("global's status after the converge", || {
        (object("global")?["status"]["state"] == "Ready").then_some(())
    });

    // The precedence rule: the ConfigMap's echo key is set aside for the object.
    patch_addon_config(&ns, r#"{"data":{"echo":"greeting: ignored\n"}}"#);
    op.wait("the key set aside", || {
        op.logs()
            .contains("takes precedence over its ConfigMap keys")
            .then_some(())
    });
    for _ in 0..10 {
        assert_eq!(greeting(), Some(json!("patched")));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(revisions(&ns, "echo"), before, "{}", op.logs());

    // A failing module's status carries helm's error.
    cp().apply(&settings("fail", "  enabled: true\n"))
        .unwrap_or_else(|e| panic!("fail on: {e}"));
    let status = op.wait("fail's status Failed", || {
        let s = object("fail")?["status"].clone();
        (s["state"] == "Failed").then_some(s)
    });
    let error = condition(&status, "Error");
    assert_eq!(error["status"], "True", "{status}");
    assert_eq!(error["reason"], "HelmFailed", "{status}");
    let last = status["lastError"].as_str().unwrap_or_default();
    assert!(last.contains("fail.message is required"), "{status}");
    assert_eq!(condition(&status, "Ready")["status"], "False", "{status}");
    cp().apply(&settings("fail", "  enabled: false\n"))
        .unwrap_or_else(|e| panic!("fail off: {e}"));
    op.wait("fail's status Disabled", || {
        (object("fail")?["status"]["state"] == "Disabled").then_some(())
    });

    // A module added by a reload: the webhook checks its objects against its
    // schema at once (without the reload, `no module named 'toys'`).
    let schema = "type: object\nproperties:\n  size:\n    type: integer\n    minimum: 1\n";
    let toys = op.dir().join("modules/003-toys/openapi");
    std::fs::create_dir_all(&toys).expect("mkdir toys");
    std::fs::write(toys.join("config-values.yaml"), schema).expect("write schema");
    op.wait("the reload that adds toys", || {
        let logs = op.logs();
        (logs.contains("modules reloaded") && logs.contains("\"added\":\"toys\"")).then_some(())
    });
    let err = cp()
        .apply(&settings("toys", "  settings:\n    size: 0\n"))
        .expect_err("checked against the added module's schema");
    assert!(err.contains("spec.settings.size"), "{err}");
    assert!(object("toys").is_none());

    // The export back: same configuration, no run, no revision.
    let before = revisions(&ns, "echo");
    let changes = count(&op, "\"msg\":\"ConfigMap changed\"");
    let runs = count(&op, "\"msg\":\"module run\"");
    let out = export(&op, "configmap");
    assert_eq!(out["deleted"], json!(["echo", "fail", "global"]), "{out}");
    assert!(object("echo").is_none());
    let cm = get("configmap", &ns, "addon-operator").expect("configmap");
    assert_eq!(
        cm["data"]["echo"], "greeting: patched\nreplicas: 2\n",
        "{cm}"
    );
    assert_eq!(cm["data"]["failEnabled"], "false", "{cm}");
    no_new_revision(&op, &ns, before, changes, runs);
    assert_eq!(greeting(), Some(json!("patched")));

    drop(op);
    kubectl(&[
        "delete",
        "validatingwebhookconfiguration",
        &format!("{ns}-hooks"),
        "--ignore-not-found",
    ]);
    kubectl(&["delete", "crd", CRD, "--ignore-not-found", "--wait=false"]);
}
