//! addon-operator against the real API server, each test with helm 3.17 and helm
//! 4.1 (which applies server-side): a module's release installed, upgraded by a
//! ConfigMap change, healed after kubectl deletes one of its objects, and removed when
//! the module is disabled; a value no template reads making no revision; a chart full of YAML 1.1 forms stored exactly as helm
//! means it without our post-renderer; and the post-renderer's output read by the
//! real kubectl as it reads the input.
//!
//! Each test runs the operator (cluster-admin) in a namespace of its own; releases,
//! objects and the operator's ConfigMap live there. Each holds `api_shared()`.

use crate::common::{TempDir, helm_bin, http_get, run_helm, write_hooks};
use crate::harness::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a release may take to appear, change or go (helm against a busy server).
const LONG: Duration = Duration::from_secs(120);

/// helm `major` as cluster-admin in `ns` (no post-renderer); stdout, or panics.
fn helm(major: u32, ns: &str, args: &[&str]) -> String {
    run_helm(&helm_bin(major), &cp().admin_kubeconfig(), ns, args)
}

/// `helm list` of deployed, failed and pending releases in `ns` (helm 4 has no
/// `--all`): (name, revision, status) of each.
pub(crate) fn releases(major: u32, ns: &str) -> Vec<(String, String, String)> {
    let args = ["list", "--deployed", "--failed", "--pending", "-o", "json"];
    let list: Value = serde_json::from_str(&helm(major, ns, &args)).expect("helm list json");
    list.as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    let s = |k: &str| match &r[k] {
                        Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    (s("name"), s("revision"), s("status"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The addon-operator binary, started on a modules dir in namespace `ns`.
pub(crate) struct AddonOperator {
    child: Child,
    dir: TempDir,
    logs: Arc<Mutex<Vec<String>>>,
}

impl AddonOperator {
    /// Writes `files` (relative: `modules/...`), then runs `addon-operator start` with
    /// helm `major` as cluster-admin; resources are checked every 2 s.
    fn start(ns: &str, major: u32, files: &[(&str, String)]) -> AddonOperator {
        Self::start_with_env(ns, major, files, &[])
    }

    /// [`AddonOperator::start`] with extra environment variables.
    pub(crate) fn start_with_env(
        ns: &str,
        major: u32,
        files: &[(&str, String)],
        env: &[(&str, &str)],
    ) -> AddonOperator {
        Self::start_with(ns, major, files, env, &[])
    }

    /// [`AddonOperator::start`] with extra environment variables and flags.
    fn start_with(
        ns: &str,
        major: u32,
        files: &[(&str, String)],
        env: &[(&str, &str)],
        args: &[String],
    ) -> AddonOperator {
        let dir = TempDir::new("addon-cluster");
        write_hooks(&dir.0, files);
        for d in ["modules", "global-hooks", "home"] {
            std::fs::create_dir_all(dir.0.join(d)).expect("mkdir");
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_shell-operator"))
            .args(["addon-operator", "start", "--namespace", ns])
            .args(["--prometheus-listen-address", "127.0.0.1"])
            .args(["--prometheus-listen-port", "0"])
            .args([
                "--modules-dir",
                "modules",
                "--global-hooks-dir",
                "global-hooks",
            ])
            .arg("--kube-config")
            .arg(cp().admin_kubeconfig())
            .arg("--tmp-dir")
            .arg(dir.0.join("tmp"))
            .arg("--debug-unix-socket")
            .arg(dir.0.join("debug.socket"))
            .current_dir(&dir.0)
            .env("HELM_BIN_PATH", helm_bin(major))
            .env("HOME", dir.0.join("home"))
            .env("LOG_TYPE", "json")
            .env("ADDON_OPERATOR_RESOURCES_CHECK_PERIOD", "2s")
            .envs(env.iter().copied())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start addon-operator");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let pipes: [Option<Box<dyn std::io::Read + Send>>; 2] = [
            child.stdout.take().map(|p| Box::new(p) as _),
            child.stderr.take().map(|p| Box::new(p) as _),
        ];
        for pipe in pipes.into_iter().flatten() {
            let lines = Arc::clone(&logs);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    lines.lock().expect("lock").push(line);
                }
            });
        }
        AddonOperator { child, dir, logs }
    }

    pub(crate) fn logs(&self) -> String {
        self.logs.lock().expect("lock").join("\n")
    }

    /// Polls `f` until it returns `Some`; panics with `what` and the logs after [`LONG`].
    pub(crate) fn wait<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + LONG;
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; operator logs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until `/ready` answers 200 (the first converge is done).
    pub(crate) fn wait_ready(&self) {
        let port = self.port();
        self.wait("/ready", || {
            (http_get(port, "/ready").0 == 200).then_some(())
        });
    }

    /// The port of the operator's HTTP server (metrics, readiness).
    pub(crate) fn port(&self) -> u16 {
        self.wait("the HTTP server", || {
            let logs = self.logs.lock().expect("lock").clone();
            logs.iter()
                .filter(|l| l.contains("HTTP server listening"))
                .find_map(|l| serde_json::from_str::<Value>(l).ok())
                .and_then(|v| {
                    v["address"]
                        .as_str()?
                        .rsplit(':')
                        .next()?
                        .parse::<u16>()
                        .ok()
                })
        })
    }

    /// The operator's working directory (`modules/`, `global-hooks/` under it).
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir.0
    }

    /// A debug command (`addon-operator <args>`) over the operator's socket: stdout.
    pub(crate) fn cli(&self, args: &[&str]) -> String {
        crate::common::addon_cli(&self.dir.0.join("debug.socket"), args)
    }
}

impl Drop for AddonOperator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

/// The object as stored, or `None` when it does not exist.
pub(crate) fn get(kind: &str, ns: &str, name: &str) -> Option<Value> {
    cp().get(kind, ns, name)
}

/// The `echo` module: a ConfigMap, a Deployment and a Service from its values.
fn echo_module() -> Vec<(&'static str, String)> {
    vec![
        ("modules/values.yaml", "echoEnabled: true\n".into()),
        (
            "modules/001-echo/values.yaml",
            "echo:\n  greeting: hello\n  replicas: 1\n".into(),
        ),
        (
            "modules/001-echo/Chart.yaml",
            "apiVersion: v2\nname: echo\nversion: 0.1.0\n".into(),
        ),
        (
            "modules/001-echo/templates/configmap.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: echo-config\ndata:\n  \
             greeting: {{ .Values.echo.greeting | quote }}\n"
                .into(),
        ),
        (
            "modules/001-echo/templates/deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: echo\nspec:\n  \
             replicas: {{ .Values.echo.replicas }}\n  selector:\n    matchLabels: {app: echo}\n  \
             template:\n    metadata:\n      labels: {app: echo}\n    spec:\n      containers:\n      \
             - name: echo\n        image: registry.example/echo:1\n        env:\n        \
             - name: GREETING\n          value: {{ .Values.echo.greeting | quote }}\n"
                .into(),
        ),
        (
            "modules/001-echo/templates/service.yaml",
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: echo\nspec:\n  selector: {app: echo}\n  \
             ports:\n  - port: 80\n    targetPort: 8080\n"
                .into(),
        ),
    ]
}

/// Install, upgrade through the operator's ConfigMap, auto-heal of an object deleted
/// with kubectl, disable: each step checked on the objects the API server holds and
/// on `helm list` / `helm get values`.
fn module_lifecycle(major: u32) {
    // First, so it is dropped last: no API server restart while the operator runs.
    let _api = api_shared();
    let ns = cp().namespace(&format!("addon-life{major}"));
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let op = AddonOperator::start(&ns, major, &echo_module());
    op.wait_ready();

    // Installed: every object carries the heritage label; revision 1 is deployed.
    let cm = op.wait("ConfigMap echo-config", || {
        get("configmap", &ns, "echo-config")
    });
    assert_eq!(cm["data"], json!({"greeting": "hello"}));
    let deploy = get("deployment", &ns, "echo").expect("Deployment echo");
    assert_eq!(deploy["spec"]["replicas"], 1);
    let env = &deploy["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env, &json!([{"name": "GREETING", "value": "hello"}]));
    let svc = get("service", &ns, "echo").expect("Service echo");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    for obj in [&cm, &deploy, &svc] {
        assert_eq!(
            obj["metadata"]["labels"]["heritage"], "addon-operator",
            "{obj}"
        );
        assert_eq!(
            obj["metadata"]["annotations"]["meta.helm.sh/release-name"],
            "echo"
        );
    }
    assert_eq!(
        releases(major, &ns),
        vec![("echo".into(), "1".into(), "deployed".into())]
    );
    let values: Value =
        serde_json::from_str(&helm(major, &ns, &["get", "values", "echo", "-o", "json"]))
            .expect("values json");
    assert_eq!(values["echo"], json!({"greeting": "hello", "replicas": 1}));

    // A value the chart uses, changed in the operator's ConfigMap: one upgrade.
    patch_addon_config(
        &ns,
        r#"{"data":{"echo":"greeting: from-configmap\nreplicas: 3\n"}}"#,
    );
    op.wait("the upgraded ConfigMap", || {
        get("configmap", &ns, "echo-config").filter(|c| c["data"]["greeting"] == "from-configmap")
    });
    let deploy = get("deployment", &ns, "echo").expect("Deployment echo");
    assert_eq!(deploy["spec"]["replicas"], 3);
    let env = &deploy["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(
        env,
        &json!([{"name": "GREETING", "value": "from-configmap"}])
    );
    op.wait("revision 2 deployed", || {
        (releases(major, &ns) == vec![("echo".into(), "2".into(), "deployed".into())]).then_some(())
    });
    let values: Value =
        serde_json::from_str(&helm(major, &ns, &["get", "values", "echo", "-o", "json"]))
            .expect("values json");
    assert_eq!(
        values["echo"],
        json!({"greeting": "from-configmap", "replicas": 3})
    );

    // Auto-heal: objects deleted with kubectl come back, as the chart renders them.
    let old_uid = svc["metadata"]["uid"].clone();
    kubectl(&["-n", &ns, "delete", "service", "echo"]);
    kubectl(&["-n", &ns, "delete", "configmap", "echo-config"]);
    let svc = op.wait("Service echo back", || {
        get("service", &ns, "echo").filter(|s| s["metadata"]["uid"] != old_uid)
    });
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["metadata"]["labels"]["heritage"], "addon-operator");
    let cm = op.wait("ConfigMap echo-config back", || {
        get("configmap", &ns, "echo-config")
    });
    assert_eq!(cm["data"], json!({"greeting": "from-configmap"}));

    // Disabled: the release is uninstalled and its objects deleted.
    patch_addon_config(&ns, r#"{"data":{"echoEnabled":"false"}}"#);
    op.wait("the release gone", || {
        releases(major, &ns).is_empty().then_some(())
    });
    for (kind, name) in [
        ("configmap", "echo-config"),
        ("deployment", "echo"),
        ("service", "echo"),
    ] {
        op.wait(&format!("{kind} {name} deleted"), || {
            get(kind, &ns, name).is_none().then_some(())
        });
    }
    let secrets = kubectl(&[
        "-n",
        &ns,
        "get",
        "secrets",
        "-l",
        "owner=helm",
        "-o",
        "name",
    ]);
    assert_eq!(secrets.trim(), "", "no release storage left");
}

/// Seed 004, "Releases deduplication", on the real API server: a module hook that
/// records a new value no template reads every second makes no new revision
/// (helm renders, our post-renderer stops it); a value the chart reads does.
fn identical_manifests_make_no_revision(major: u32) {
    let _api = api_shared();
    let ns = cp().namespace(&format!("addon-dedup{major}"));
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let mut files = echo_module();
    files.push((
        "modules/001-echo/hooks/stamp",
        "#!/bin/sh\nif [ \"$1\" = --config ]; then\n\
         echo '{\"configVersion\":\"v1\",\"schedule\":[{\"name\":\"s\",\"crontab\":\"* * * * * *\"}]}'\n\
         exit 0\nfi\n\
         echo \"[{\\\"op\\\":\\\"add\\\",\\\"path\\\":\\\"/echo/stampedAt\\\",\\\"value\\\":\\\"$(date +%s%N)\\\"}]\" > \"$VALUES_JSON_PATCH_PATH\"\n"
            .into(),
    ));
    let op = AddonOperator::start(&ns, major, &files);
    op.wait_ready();
    let one = vec![("echo".into(), "1".into(), "deployed".into())];
    op.wait("revision 1", || (releases(major, &ns) == one).then_some(()));
    op.wait("three stopped upgrades", || {
        let stopped = op
            .logs()
            .matches("the rendered objects are the release's")
            .count();
        (stopped >= 3).then_some(())
    });
    assert_eq!(releases(major, &ns), one, "identical manifests");
    let history = helm(major, &ns, &["history", "echo", "-o", "json"]);
    let history: Value = serde_json::from_str(&history).expect("history json");
    assert_eq!(history.as_array().map(Vec::len), Some(1), "{history}");
    assert!(!op.logs().contains("module run failed"), "{}", op.logs());

    patch_addon_config(&ns, r#"{"data":{"echo":"greeting: changed\n"}}"#);
    op.wait("the changed ConfigMap", || {
        get("configmap", &ns, "echo-config").filter(|c| c["data"]["greeting"] == "changed")
    });
    let two = vec![("echo".into(), "2".into(), "deployed".into())];
    op.wait("revision 2", || (releases(major, &ns) == two).then_some(()));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(releases(major, &ns), two, "the stamps go on, no revision");
}

#[test]
fn identical_manifests_make_no_revision_with_helm3() {
    identical_manifests_make_no_revision(3);
}

#[test]
fn identical_manifests_make_no_revision_with_helm4() {
    identical_manifests_make_no_revision(4);
}

/// A release a killed helm left behind, recovered by the next module run:
/// `uninstalling` (addon-operator#496: an uninstall interrupted, then the module
/// enabled again; helm refuses every upgrade, "has no deployed releases") is
/// installed afresh, taking over the objects that are left and creating the ones
/// already deleted; `pending-install`, `pending-upgrade` and `pending-rollback` on top
/// of the deployed revision ("another operation is in progress") are dropped and
/// the release upgraded. The states are written as helm writes them (a record that
/// is not gzipped, which helm reads) with the operator stopped.
fn an_interrupted_helm_is_recovered(major: u32, status: &str) {
    use base64::Engine;
    let _api = api_shared();
    let tag = status.replace("pending-", "p");
    let ns = cp().namespace(&format!("addon-{tag}{major}"));
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let op = AddonOperator::start(&ns, major, &echo_module());
    op.wait_ready();
    let one = vec![("echo".into(), "1".into(), "deployed".into())];
    op.wait("revision 1", || (releases(major, &ns) == one).then_some(()));
    let manifest = helm(major, &ns, &["get", "manifest", "echo"]);
    drop(op);

    let version = if status == "uninstalling" { 1 } else { 2 };
    let record = json!({
        "name": "echo", "namespace": ns, "version": version, "manifest": manifest,
        "config": {}, "info": {"status": status, "description": "interrupted"},
        "chart": {"metadata": {"apiVersion": "v2", "name": "echo", "version": "0.1.0"}},
    });
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let data = b64(b64(record.to_string().as_bytes()).as_bytes());
    let secret = format!("sh.helm.release.v1.echo.v{version}");
    if version == 1 {
        kubectl(&["-n", &ns, "delete", "secret", &secret]);
    }
    apply(&format!(
        "apiVersion: v1\nkind: Secret\ntype: helm.sh/release.v1\nmetadata:\n  name: {secret}\n  \
         namespace: {ns}\n  labels: {{owner: helm, name: echo, status: {status}, version: \"{version}\"}}\n\
         data:\n  release: {data}\n"
    ));
    kubectl(&["-n", &ns, "delete", "service", "echo"]);
    let stuck = helm(major, &ns, &["history", "echo", "-o", "json"]);
    assert!(stuck.contains(status), "{stuck}");

    let op = AddonOperator::start(&ns, major, &echo_module());
    op.wait_ready();
    let want = vec![("echo".into(), version.to_string(), "deployed".into())];
    op.wait("the release deployed", || {
        (releases(major, &ns) == want).then_some(())
    });
    let svc = op.wait("Service echo back", || get("service", &ns, "echo"));
    assert_eq!(svc["metadata"]["labels"]["heritage"], "addon-operator");
    assert!(get("deployment", &ns, "echo").is_some(), "kept");
    let logged = match status {
        "uninstalling" => "left uninstalling by an interrupted helm",
        _ => "left pending by an interrupted helm",
    };
    assert!(op.logs().contains(logged), "{logged}:\n{}", op.logs());
}

#[test]
fn an_interrupted_helm_is_recovered_with_helm3() {
    for status in [
        "uninstalling",
        "pending-install",
        "pending-upgrade",
        "pending-rollback",
    ] {
        an_interrupted_helm_is_recovered(3, status);
    }
}

#[test]
fn an_interrupted_helm_is_recovered_with_helm4() {
    for status in [
        "uninstalling",
        "pending-install",
        "pending-upgrade",
        "pending-rollback",
    ] {
        an_interrupted_helm_is_recovered(4, status);
    }
}

/// The names of the entries of the ValidatingWebhookConfiguration `name`.
fn validating_entries(name: &str) -> Vec<String> {
    let text = kubectl(&[
        "get",
        "validatingwebhookconfiguration",
        name,
        "-o",
        "json",
        "--ignore-not-found",
    ]);
    let obj: Value = serde_json::from_str(&text).unwrap_or_default();
    let entries = obj["webhooks"].as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .filter_map(|e| e["name"].as_str().map(String::from))
        .collect()
}

/// A hook with one validating binding `name` (failurePolicy Fail) on ConfigMaps
/// of `ns` labelled `guarded: "yes"`, allowing everything.
fn validating_hook(name: &str, ns: &str) -> String {
    format!(
        "#!/bin/sh\nif [ \"$1\" = --config ]; then cat <<'EOF'\nconfigVersion: v1\n\
         kubernetesValidating:\n- name: {name}\n  failurePolicy: Fail\n  labelSelector:\n    \
         matchLabels: {{guarded: \"yes\"}}\n  namespace:\n    labelSelector:\n      matchLabels:\n        \
         kubernetes.io/metadata.name: {ns}\n  rules:\n  - apiGroups: [\"\"]\n    apiVersions: [\"v1\"]\n    \
         operations: [\"CREATE\"]\n    resources: [\"configmaps\"]\n    scope: Namespaced\nEOF\nexit 0\nfi\n\
         echo '{{\"allowed\": true}}' > \"$VALIDATING_RESPONSE_PATH\"\n"
    )
}

/// addon-operator#174: a module's admission webhooks follow the module. A disabled
/// module's entries (failurePolicy Fail) are not in the API server; enabling it
/// registers them before its helm run; disabling removes them. A global hook's
/// entry stays throughout.
#[test]
fn module_webhooks_follow_their_module() {
    let _api = api_shared();
    let ns = cp().namespace("addon-wh");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let ep = cp()
        .webhook_endpoint(&ns, "hooks-svc")
        .unwrap_or_else(|e| panic!("webhook endpoint: {e}"));
    let mut args = ep.flags("validating");
    args.extend(["--validating-webhook-configuration-name".into(), ns.clone()]);
    let mut files = echo_module();
    files[0] = ("modules/values.yaml", "echoEnabled: false\n".into());
    files.push((
        "modules/001-echo/hooks/guard",
        validating_hook("module.example.com", &ns),
    ));
    files.push((
        "global-hooks/guard",
        validating_hook("global.example.com", &ns),
    ));
    let op = AddonOperator::start_with(&ns, 4, &files, &[], &args);
    op.wait_ready();
    let name = format!("{ns}-hooks");
    assert_eq!(validating_entries(&name), ["global.example.com"]);

    patch_addon_config(&ns, r#"{"data":{"echoEnabled":"true"}}"#);
    op.wait("the module's entry registered", || {
        (validating_entries(&name) == ["global.example.com", "module.example.com"]).then_some(())
    });
    op.wait("the release", || get("configmap", &ns, "echo-config"));
    let logs = op.logs();
    let registered = logs
        .find("webhook configuration updated")
        .expect("registered");
    let upgraded = logs.find("\"msg\":\"helm upgrade\"").expect("helm upgrade");
    assert!(registered < upgraded, "registered before helm:\n{logs}");

    patch_addon_config(&ns, r#"{"data":{"echoEnabled":"false"}}"#);
    op.wait("the module's entry removed", || {
        (validating_entries(&name) == ["global.example.com"]).then_some(())
    });
    op.wait("the release gone", || {
        releases(4, &ns).is_empty().then_some(())
    });
    kubectl(&[
        "delete",
        "validatingwebhookconfiguration",
        &name,
        "--ignore-not-found",
    ]);
}

/// A module hook's conversion webhook is set on the module's CRD by the module's
/// run, after its `crds/` are installed and before helm runs, so custom resources
/// the chart creates already go through it.
#[test]
fn a_module_crd_gets_its_conversion_before_the_helm_run() {
    let _api = api_shared();
    let ns = cp().namespace("addon-conv");
    let group = format!("{ns}.example.com");
    let crd = format!("crontabs.{group}");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let ep = cp()
        .webhook_endpoint(&ns, "conv-svc")
        .unwrap_or_else(|e| panic!("webhook endpoint: {e}"));
    let args = ep.flags("conversion");
    let config = format!(
        "configVersion: v1\nkubernetesCustomResourceConversion:\n- name: versions\n  \
         crdName: {crd}\n  conversions:\n  - fromVersion: {group}/v1alpha1\n    toVersion: {group}/v1\n"
    );
    let hook = format!(
        "#!/bin/sh\nif [ \"$1\" = --config ]; then cat <<'EOF'\n{config}EOF\nexit 0\nfi\n\
         echo '{{\"failedMessage\": \"not in this test\"}}' > \"$CONVERSION_RESPONSE_PATH\"\n"
    );
    let mut files = echo_module();
    files.push(("modules/001-echo/hooks/conv", hook));
    files.push((
        "modules/001-echo/crds/crontab.yaml",
        control_plane::fixtures::crontab_crd(&group),
    ));
    let op = AddonOperator::start_with(&ns, 4, &files, &[], &args);
    op.wait_ready();
    let stored: Value =
        serde_json::from_str(&kubectl(&["get", "crd", &crd, "-o", "json"])).expect("crd json");
    assert_eq!(
        stored["spec"]["conversion"]["strategy"], "Webhook",
        "{stored:#}"
    );
    let logs = op.logs();
    let upgraded = logs.find("\"msg\":\"helm upgrade\"").expect("helm upgrade");
    let configured = ["CRD conversion configured", "CRD conversion is up to date"]
        .iter()
        .filter_map(|m| logs.find(m))
        .min()
        .expect("conversion logged");
    assert!(configured < upgraded, "conversion before helm:\n{logs}");
    kubectl(&["delete", "crd", &crd, "--ignore-not-found", "--wait=false"]);
}

/// Merge-patches the addon-operator's ConfigMap in `ns` with `patch` (JSON).
pub(crate) fn patch_addon_config(ns: &str, patch: &str) {
    kubectl(&[
        "-n",
        ns,
        "patch",
        "configmap",
        "addon-operator",
        "--type=merge",
        "-p",
        patch,
    ]);
}
#[test]
fn module_install_upgrade_heal_disable_with_helm3() {
    module_lifecycle(3);
}

#[test]
fn module_install_upgrade_heal_disable_with_helm4() {
    module_lifecycle(4);
}

/// A chart whose manifests lean on YAML 1.1: quoted words that are booleans when
/// plain, octal and hex numbers, `~`, a big integer, timestamps, `y`/`on` keys,
/// anchors, aliases and merges, a multi-document stream with comments, empty
/// documents and end markers.
fn edge_chart(dir: &str) -> Vec<(String, String)> {
    let stream = r#"# a comment before the first document
---
# a document with only a comment
---

---
apiVersion: v1
kind: ConfigMap
metadata:
  name: edge-words
  annotations:
    quoted-on: "on"
    quoted-off: 'off'
    quoted-yes: "yes"
    quoted-no: 'no'
    quoted-y: "Y"
    quoted-octal: "0644"
    quoted-null: "~"
    quoted-float: "1e3"
    <<: {merged: "true", merged-too: "0x1F"}
data:
  quoted-on: "on"
  quoted-off: "off"
  quoted-yes: 'yes'
  quoted-no: "NO"
  "y": a quoted key y
  on: a plain key on (the key "true")
  'off': a quoted key off
  n: a plain key n (the key "false")
  sexagesimal: 190:20:30
  timestamp: 2001-12-14t21:59:43.10-05:00
  quoted-timestamp: "2001-12-14 21:59:43.10"
  date: 2002-12-14
  big: "12345678901234567890123"
  block: |
    on: off
    yes: 0644
  folded: >-
    off
    yes
  anchored: &shared "the same text"
  aliased: *shared
  tilde: "~"
  hex-words: 0x1F and more
...
--- # a comment after the marker
apiVersion: v1
kind: Secret
metadata:
  name: edge
stringData:
  password: "no"
  flag: 'off'
  mode: "0400"
---
---
"#;
    let deployment = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: edge
  labels: &labels
    app: edge
    tier: "on"
  annotations:
    "yes": "no"
    octal-text: "0755"
spec:
  replicas: 0x2
  revisionHistoryLimit: 1_0
  progressDeadlineSeconds: 0o1130
  minReadySeconds: 07
  strategy: ~
  selector:
    matchLabels: *labels
  template:
    metadata:
      labels: *labels
      annotations:
        <<: {checksum: "0644", restarted: "2024-01-01T00:00:00Z"}
    spec:
      terminationGracePeriodSeconds: 9007199254740993
      nodeSelector: ~
      containers:
      - name: app
        image: registry.example/edge:1
        command: ["sh", "-c", "echo on"]
        args: ["yes", 'no', "~", "0644"]
        ports:
        - name: "on"
          containerPort: 0x1F90
        env:
        - name: FLAG
          value: "off"
        - name: WHEN
          value: 2001-12-14
        volumeMounts:
        - {name: secret, mountPath: /s}
        - {name: config, mountPath: /c}
      volumes:
      - name: secret
        secret:
          secretName: edge
          defaultMode: 0644
          items:
          - {key: password, path: p, mode: 0400}
      - name: config
        configMap:
          name: edge-words
          defaultMode: 0o755
"#;
    let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: edge\nspec:\n  selector: {app: edge}\n  \
                   ports:\n  - name: \"on\"\n    port: 0x50\n    targetPort: \"on\"\n";
    vec![
        (
            format!("{dir}/Chart.yaml"),
            "apiVersion: v2\nname: edge\nversion: 0.1.0\n".into(),
        ),
        (format!("{dir}/templates/stream.yaml"), stream.into()),
        (
            format!("{dir}/templates/deployment.yaml"),
            deployment.into(),
        ),
        (format!("{dir}/templates/service.yaml"), service.into()),
    ]
}

/// An object as stored, without what legitimately differs between two installs of
/// the same release in two namespaces: identity, timestamps, managedFields, the
/// namespace annotation, a Service's allocated cluster IP, and our own `heritage`
/// label.
fn comparable(mut obj: Value) -> Value {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    let meta = obj["metadata"].as_object_mut().expect("metadata");
    for k in [
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        meta.remove(k);
    }
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        a.remove("meta.helm.sh/release-namespace");
    }
    if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        l.remove("heritage");
        if l.is_empty() {
            meta.remove("labels");
        }
    }
    obj
}

/// The YAML 1.1 chart through the operator (and so through our post-renderer) is
/// stored exactly as the same chart installed by the same helm without any
/// post-renderer.
///
/// The comparison: a bare `helm install edge <chart>` of the same chart directory,
/// by the same helm binary (so the same YAML reader, client-side or server-side
/// apply, and field manager), into a second namespace of the same API server. Both
/// sides are read back with `kubectl get -o json`, so the server's defaulting and
/// conversions apply equally; [`comparable`] drops only what must differ between two
/// namespaces (identity, timestamps, managedFields, the release-namespace annotation,
/// the allocated cluster IP) and the label the post-renderer exists to add. Whole objects are then equal, and
/// the values the YAML 1.1 forms stand for are asserted on as well, so an install
/// that got them wrong on both sides cannot pass.
fn yaml_1_1_chart_matches_a_bare_install(major: u32) {
    // First, so it is dropped last: no API server restart while the operator runs.
    let _api = api_shared();
    let ns = cp().namespace(&format!("addon-edge{major}"));
    let bare_ns = cp().namespace(&format!("addon-edge{major}-bare"));
    let mut files = edge_chart("modules/002-edge");
    files.push(("modules/values.yaml".into(), "edgeEnabled: true\n".into()));
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let op = AddonOperator::start(&ns, major, &refs);
    let chart = op.dir.0.join("modules/002-edge");
    helm(
        major,
        &bare_ns,
        &["install", "edge", chart.to_str().expect("utf8")],
    );

    let objects = [
        ("configmap", "edge-words"),
        ("secret", "edge"),
        ("deployment", "edge"),
        ("service", "edge"),
    ];
    for (kind, name) in objects {
        let ours = op.wait(&format!("{kind} {name} from the operator"), || {
            get(kind, &ns, name)
        });
        assert_eq!(
            ours["metadata"]["labels"]["heritage"], "addon-operator",
            "{kind} {name}"
        );
        let bare = get(kind, &bare_ns, name).unwrap_or_else(|| panic!("bare {kind} {name}"));
        assert_eq!(comparable(ours), comparable(bare), "{kind} {name}");
    }
    assert_eq!(
        releases(major, &ns),
        vec![("edge".into(), "1".into(), "deployed".into())]
    );

    // What the forms mean, on the operator's objects.
    let words = get("configmap", &ns, "edge-words").expect("edge-words");
    let data = &words["data"];
    for (k, v) in [
        ("quoted-on", "on"),
        ("quoted-off", "off"),
        ("quoted-yes", "yes"),
        ("quoted-no", "NO"),
        ("y", "a quoted key y"),
        ("true", "a plain key on (the key \"true\")"),
        ("off", "a quoted key off"),
        ("false", "a plain key n (the key \"false\")"),
        ("sexagesimal", "190:20:30"),
        ("timestamp", "2001-12-14t21:59:43.10-05:00"),
        ("quoted-timestamp", "2001-12-14 21:59:43.10"),
        ("date", "2002-12-14"),
        ("big", "12345678901234567890123"),
        ("block", "on: off\nyes: 0644\n"),
        ("folded", "off yes"),
        ("anchored", "the same text"),
        ("aliased", "the same text"),
        ("tilde", "~"),
        ("hex-words", "0x1F and more"),
    ] {
        assert_eq!(data[k], v, "data.{k}");
    }
    let notes = &words["metadata"]["annotations"];
    for (k, v) in [
        ("quoted-on", "on"),
        ("quoted-off", "off"),
        ("quoted-yes", "yes"),
        ("quoted-no", "no"),
        ("quoted-y", "Y"),
        ("quoted-octal", "0644"),
        ("quoted-null", "~"),
        ("quoted-float", "1e3"),
        ("merged", "true"),
        ("merged-too", "0x1F"),
    ] {
        assert_eq!(notes[k], v, "annotation {k}");
    }
    let secret = get("secret", &ns, "edge").expect("secret");
    assert_eq!(secret["data"]["password"], "bm8=", "\"no\" base64");
    assert_eq!(secret["data"]["flag"], "b2Zm", "'off' base64");
    let d = get("deployment", &ns, "edge").expect("deployment");
    assert_eq!(
        d["metadata"]["labels"],
        json!({"app": "edge", "tier": "on", "heritage": "addon-operator",
               "app.kubernetes.io/managed-by": "Helm"})
    );
    assert_eq!(d["metadata"]["annotations"]["yes"], "no");
    let spec = &d["spec"];
    assert_eq!(
        (
            &spec["replicas"],
            &spec["revisionHistoryLimit"],
            &spec["progressDeadlineSeconds"],
            &spec["minReadySeconds"]
        ),
        (&json!(2), &json!(10), &json!(600), &json!(7))
    );
    assert_eq!(
        spec["selector"]["matchLabels"],
        json!({"app": "edge", "tier": "on"})
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(
        spec["template"]["metadata"]["labels"],
        json!({"app": "edge", "tier": "on"})
    );
    assert_eq!(
        spec["template"]["metadata"]["annotations"]["checksum"],
        "0644"
    );
    assert_eq!(
        pod["terminationGracePeriodSeconds"],
        json!(9007199254740993u64)
    );
    let c = &pod["containers"][0];
    assert_eq!(c["args"], json!(["yes", "no", "~", "0644"]));
    assert_eq!(
        c["ports"][0],
        json!({"name": "on", "containerPort": 8080, "protocol": "TCP"})
    );
    assert_eq!(
        c["env"],
        json!([{"name": "FLAG", "value": "off"}, {"name": "WHEN", "value": "2001-12-14"}])
    );
    let volumes = &pod["volumes"];
    assert_eq!(volumes[0]["secret"]["defaultMode"], 420, "0644");
    assert_eq!(volumes[0]["secret"]["items"][0]["mode"], 256, "0400");
    assert_eq!(volumes[1]["configMap"]["defaultMode"], 493, "0o755");
    assert!(pod.get("nodeSelector").is_none() && spec.get("strategy").is_some());
    let svc = get("service", &ns, "edge").expect("service");
    assert_eq!(
        svc["spec"]["ports"][0],
        json!({"name": "on", "port": 80, "protocol": "TCP", "targetPort": "on"})
    );
}

#[test]
fn yaml_1_1_chart_is_stored_as_without_post_renderer_with_helm3() {
    yaml_1_1_chart_matches_a_bare_install(3);
}

#[test]
fn yaml_1_1_chart_is_stored_as_without_post_renderer_with_helm4() {
    yaml_1_1_chart_matches_a_bare_install(4);
}

/// Every YAML 1.1 form helm's reader gives a meaning to, in one stream.
const FORMS: &str = r##"# Source: forms/templates/a.yaml
---
# nothing here
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: forms
  labels: {tier: "on", plain: yes-but-not-a-bool}
  annotations:
    <<: [{a: "0644"}, {a: "never", b: 'off'}]
data:
  "y": "y"
  on: "on"
  OFF: 'OFF'
  0644: "0644"
  1.5: "1.5"
  1e6: "1e6"
  -0.0: "-0.0"
  .inf: ".inf"
  2001-12-14: date key
  tab: "a\tb"
  escapes: "\x7f \u0085 \u2028 \u2029 \ufeff \e \_ \N \L \P é 😀"
  folded-quoted: "one
    two

    three"
  folded-plain: one
    two
  literal-keep: |+
    kept

  literal-strip: |-
    stripped
  folded-block: >
    a
    b

    c
forms:
  booleans: [y, Y, yes, Yes, YES, on, On, ON, true, True, TRUE, n, N, no, No, NO, off, Off, OFF, false, False, FALSE]
  quoted: ["y", 'yes', "on", 'off', "no", "true", "~", "null", "0644", "0x1F", "1e3", ".inf", "2001-12-14"]
  not-booleans: [yEs, oN, nO, tRUE, onn]
  nulls: [~, null, Null, NULL, !!null '']
  empty:
  ints: [0644, 0755, 0o17, 0O17, 0x1F, 0X1f, -0x1F, 0b101, -0b101, +12, -12, 1_000, 1__0, 0, -0, 00, 9223372036854775807, -9223372036854775808, 9007199254740993]
  beyond-int64: [9223372036854775808, 18446744073709551615, 0xFFFFFFFFFFFFFFFF, 18446744073709551616, 12345678901234567890123, +9223372036854775808, -9223372036854775809]
  floats: [08, 09.5, 1.5, 1e3, 1E3, 1.e3, 1., .5, +.5, -.5, 1_000.5, .5_5, -1.5e-3, 1e21, 1e-7, 0.1, 3.141592653589793238, -0.0, 6.02e+23]
  strings: [0x, 0xG, 0b102, _1, .5_, ._5, 1e400, 1e, ., 1.2.3, 1-2, +, 0x1p-2, "1,000", 190:20:30, -1:30, Infinity, NaN, inf, .info, ~x, y!, "#not a comment"]
  timestamps: [2001-12-14t21:59:43.10-05:00, 2001-12-14T21:59:43Z, 2001-12-14 21:59:43.10, 2002-12-14, 2002-1-4, 2002-13-01]
  tags: [!!str 0644, !!str yes, !!int "0644", !!int '0x1F', !!bool "yes", !!float 1, !!float "2.5", !!binary aGVsbG8=, !!timestamp 2001-12-14, ! 0644, !custom yes, !<tag:example.com,2000:x> 12]
  binary: !!binary |
    aGVs
    bG8=
  anchors:
    base: &base {a: on, b: 0644}
    copy: *base
    scalar: &s off
    scalars: [*s, *s]
    merged:
      <<: *base
      c: 3
    merged-after:
      a: 1
      <<: *base
    merged-list:
      <<: [{x: 1}, {x: 2, y: 2}]
    explicit-merge:
      !!merge <<: {z: yes}
    quoted-merge-key:
      '<<': not a merge
  keys:
    y: 1
    n: 2
    on: 3
    Off: 4
    0644: 5
    0x10: 6
    1.5: 7
    0.1: 8
    1e6: 9
    1234567.0: 10
    0.00001: 11
    .inf: 12
    -.inf: 13
    .nan: 14
    1.00000001: 15
    2001-12-14: 16
    ? |
      block key
    : 17
...
--- # the last document
apiVersion: v1
kind: ConfigMap
metadata: {name: forms-2}
data: {a: "off", b: "yes"}
list: [a, [b, [c, {d: [on]}]]]
---
"##;

/// The post-renderer's output, read by the real kubectl (sigs.k8s.io/yaml over
/// go-yaml v2: helm's own reader), means what its input means, for every YAML 1.1
/// form above: `kubectl apply --dry-run=client -o json` of both, as kubectl would
/// send them, are equal but for the `heritage` label (and kubectl's
/// last-applied-configuration annotation, which copies it).
#[test]
fn post_renderer_output_means_to_kubectl_what_its_input_means() {
    // First, so it is dropped last: no API server restart while the operator runs.
    let _api = api_shared();
    let ns = cp().namespace("addon-forms");
    let mut child = Command::new(env!("CARGO_BIN_EXE_shell-operator"))
        .arg("post-renderer")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("post-renderer");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(FORMS.as_bytes()).expect("write manifest");
    }
    let out = child.wait_with_output().expect("post-renderer output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "post-renderer: {stderr}");
    let rendered = String::from_utf8(out.stdout).expect("utf8");
    assert!(rendered.starts_with("---\n{"), "{rendered}");

    let read = |text: &str| -> Value {
        let args = [
            "apply",
            "--dry-run=client",
            "--validate=false",
            "-o",
            "json",
            "-n",
            &ns,
            "-f",
            "-",
        ];
        let json = cp()
            .kubectl_as(&cp().admin_kubeconfig(), &args, Some(text))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut list: Value = serde_json::from_str(&json).expect("kubectl json");
        for item in list["items"].as_array_mut().expect("items") {
            let meta = item["metadata"].as_object_mut().expect("metadata");
            if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                a.remove("kubectl.kubernetes.io/last-applied-configuration");
                if a.is_empty() {
                    meta.remove("annotations");
                }
            }
            if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
                assert_eq!(l.remove("heritage").unwrap_or_default(), "addon-operator");
            }
        }
        list
    };
    let with_label = |text: &str| {
        text.replace("labels: {tier", "labels: {heritage: addon-operator, tier")
            .replace(
                "metadata: {name: forms-2}",
                "metadata: {name: forms-2, labels: {heritage: addon-operator}}",
            )
    };
    let before = read(&with_label(FORMS));
    let after = read(&rendered);
    assert_eq!(after, before);

    // Spot checks that the comparison saw the forms mean something.
    let forms = &before["items"][0]["forms"];
    assert_eq!(forms["booleans"].as_array().map(Vec::len), Some(22));
    assert!(
        forms["booleans"]
            .as_array()
            .is_some_and(|b| b[..11].iter().all(|v| v == true))
    );
    assert_eq!(forms["ints"][0], 420);
    assert_eq!(forms["quoted"][3], "off");
    assert_eq!(forms["strings"][14], "190:20:30");
    assert_eq!(forms["keys"]["true"], 3, "on: is the key \"true\"");
    assert_eq!(forms["keys"][".nan"], 14);
    assert_eq!(
        forms["anchors"]["merged"],
        json!({"a": true, "b": 420, "c": 3})
    );
    assert_eq!(before["items"][0]["data"]["420"], "0644");
    assert_eq!(before["items"][1]["data"], json!({"a": "off", "b": "yes"}));
}

/// A CRD document: `plural`.`group`, kind `kind`, one served version `v1` whose spec
/// has the string properties `fields`.
pub(crate) fn crd_yaml(
    group: &str,
    plural: &str,
    kind: &str,
    fields: &[&str],
    meta: &str,
) -> String {
    let props: String = fields
        .iter()
        .map(|f| format!("                {f}: {{type: string}}\n"))
        .collect();
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  \
         name: {plural}.{group}\n{meta}spec:\n  group: {group}\n  names:\n    kind: {kind}\n    \
         plural: {plural}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    \
         storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        \
         properties:\n          spec:\n            type: object\n            properties:\n{props}"
    )
}

/// Issue 30 item 5: a module's `crds/` is installed before its release, with
/// `ADDON_OPERATOR_CRD_EXTRA_LABELS` written on each CRD and the files named by
/// `ADDON_OPERATOR_CRD_FILTER_PREFIXES` left out; an existing CRD is updated (its
/// schema replaced, its own labels and annotations kept). The chart holds custom
/// resources of both CRDs: the real server creates them only once the CRDs are
/// Established, and its schema prunes a field the old CRD did not have.
fn module_crds_installed_before_release(major: u32) {
    let _api = api_shared();
    let ns = cp().namespace(&format!("addon-crds{major}"));
    let group = format!("{ns}.crd.test");
    // An older Gadget CRD is already there, labelled by someone else.
    apply(&crd_yaml(
        &group,
        "gadgets",
        "Gadget",
        &["size"],
        "  labels: {owner: someone}\n  annotations: {note: keep}\n",
    ));
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let files = vec![
        ("modules/values.yaml", "toysEnabled: true\n".to_string()),
        (
            "modules/001-toys/Chart.yaml",
            "apiVersion: v2\nname: toys\nversion: 0.1.0\n".to_string(),
        ),
        (
            "modules/001-toys/crds/widgets.yaml",
            format!(
                "# two CRDs in one file\n---\n{}---\n{}",
                crd_yaml(
                    &group,
                    "widgets",
                    "Widget",
                    &["color"],
                    "  labels: {app: toys}\n"
                ),
                crd_yaml(&group, "gadgets", "Gadget", &["size", "shape"], "")
            ),
        ),
        (
            "modules/001-toys/crds/doc-example.yaml",
            crd_yaml(&group, "examples", "Example", &[], ""),
        ),
        (
            "modules/001-toys/crds/skip-me.yaml",
            crd_yaml(&group, "skipped", "Skipped", &[], ""),
        ),
        (
            "modules/001-toys/templates/toys.yaml",
            format!(
                "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  color: red\n\
                 ---\napiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  \
                 size: big\n  shape: round\n"
            ),
        ),
    ];
    let op = AddonOperator::start_with_env(
        &ns,
        major,
        &files,
        &[
            ("ADDON_OPERATOR_CRD_EXTRA_LABELS", "team=core"),
            ("ADDON_OPERATOR_CRD_FILTER_PREFIXES", "doc-,skip-"),
        ],
    );
    op.wait_ready();

    let widget = op.wait("Widget w1", || get(&format!("widgets.{group}"), &ns, "w1"));
    assert_eq!(widget["spec"], json!({"color": "red"}));
    assert_eq!(widget["metadata"]["labels"]["heritage"], "addon-operator");
    let gadget = get(&format!("gadgets.{group}"), &ns, "g1").expect("Gadget g1");
    assert_eq!(
        gadget["spec"],
        json!({"size": "big", "shape": "round"}),
        "the updated schema keeps `shape`"
    );

    let crd = |name: &str| get("crd", "", &format!("{name}.{group}"));
    let widgets = crd("widgets").expect("CRD widgets");
    assert_eq!(
        widgets["metadata"]["labels"],
        json!({"app": "toys", "heritage": "addon-operator", "team": "core"})
    );
    let established = widgets["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    assert!(established, "{widgets}");
    let gadgets = crd("gadgets").expect("CRD gadgets");
    assert_eq!(
        gadgets["metadata"]["labels"],
        json!({"owner": "someone", "heritage": "addon-operator", "team": "core"})
    );
    assert_eq!(gadgets["metadata"]["annotations"]["note"], "keep");
    let props = &gadgets["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"];
    assert_eq!(
        props,
        &json!({"size": {"type": "string"}, "shape": {"type": "string"}})
    );
    assert!(crd("examples").is_none(), "doc- files are filtered");
    assert!(crd("skipped").is_none(), "skip- files are filtered");
    assert!(op.logs().contains("module CRDs installed"), "{}", op.logs());
    for name in ["widgets", "gadgets"] {
        kubectl(&["delete", "crd", &format!("{name}.{group}"), "--wait=false"]);
    }
}

#[test]
fn module_crds_installed_before_release_with_helm3() {
    module_crds_installed_before_release(3);
}

#[test]
fn module_crds_installed_before_release_with_helm4() {
    module_crds_installed_before_release(4);
}

#[path = "module_settings.rs"]
mod module_settings;
