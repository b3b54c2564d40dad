//! Drift correction (issue 38) on the real API server, with helm 3 and helm 4: a
//! chart of 20 kinds shows no drift over 10 check periods while the server defaults
//! its objects, a sidecar is added to its Deployment and the HPA controller's
//! manager scales it; a `kubectl patch` of an image is reported in `warn` mode
//! (CLI, metric, log naming the manager) and, after a restart in `correct` mode,
//! restored by one helm upgrade; a writer that fights a field is backed off; and a
//! Deployment re-created with another selector (immutable) is refused in the
//! server's dry run and never upgraded.

use crate::addon::{AddonOperator, get, releases};
use crate::common::{http_get, metric};
use crate::harness::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The `drifty` module: one object of each of 20 kinds, with forms the server
/// rewrites (quantities, `stringData`, empty values, defaulted fields).
fn drifty(ns: &str) -> Vec<(&'static str, String)> {
    let t = |name: &str| format!("modules/001-drifty/templates/{name}.yaml");
    let pod_spec = "      containers:\n      - name: app\n        image: registry.example/app:1\n        \
                    env:\n        - {name: EMPTY, value: \"\"}\n        resources:\n          \
                    requests: {cpu: 0.1, memory: 64Mi}\n          limits: {cpu: \"1\", memory: 0.125Gi}\n";
    let sel = "  selector:\n    matchLabels: {app: drifty}\n";
    let tpl =
        format!("  template:\n    metadata:\n      labels: {{app: drifty}}\n    spec:\n{pod_spec}");
    let files = vec![
        ("configmap", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: drifty\ndata:\n  key: value\n  empty: \"\"\n".to_string()),
        ("secret", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: drifty\nstringData:\n  password: s3cret\n".into()),
        ("service", "apiVersion: v1\nkind: Service\nmetadata:\n  name: drifty\nspec:\n  selector: {app: drifty}\n  ports:\n  - port: 80\n    targetPort: 8080\n".into()),
        ("deployment", format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: drifty\nspec:\n  replicas: 1\n{sel}{tpl}")),
        ("statefulset", format!("apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: drifty\nspec:\n  serviceName: drifty\n{sel}{tpl}")),
        ("daemonset", format!("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: drifty\nspec:\n{sel}{tpl}")),
        ("job", format!("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: drifty\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n{pod_spec}")),
        ("cronjob", String::from("apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: drifty\nspec:\n  schedule: \"0 0 1 1 *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: app\n            image: registry.example/app:1\n")),
        ("serviceaccount", "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: drifty\n".into()),
        ("role", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: drifty\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n".into()),
        ("rolebinding", "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: drifty\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: drifty\nsubjects:\n- kind: ServiceAccount\n  name: drifty\n".into()),
        ("clusterrole", format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {ns}-drifty\nrules:\n- nonResourceURLs: [/healthz]\n  verbs: [get]\n")),
        ("networkpolicy", "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: drifty\nspec:\n  podSelector:\n    matchLabels: {app: drifty}\n  ingress:\n  - ports:\n    - port: 8080\n".into()),
        ("pdb", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: drifty\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels: {app: drifty}\n".into()),
        ("hpa", "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: drifty\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: drifty}\n  minReplicas: 1\n  maxReplicas: 5\n  metrics:\n  - type: Resource\n    resource:\n      name: cpu\n      target: {type: Utilization, averageUtilization: 80}\n".into()),
        ("ingress", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: drifty\nspec:\n  rules:\n  - host: drifty.example\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service: {name: drifty, port: {number: 80}}\n".into()),
        ("resourcequota", "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: drifty\nspec:\n  hard: {pods: \"10\", requests.memory: 1Gi}\n".into()),
        ("limitrange", "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: drifty\nspec:\n  limits:\n  - type: Container\n    default: {memory: 128Mi}\n".into()),
        ("pvc", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: drifty\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 1Gi}\n".into()),
        ("priorityclass", format!("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: {ns}-drifty\nvalue: 1000\n")),
    ];
    let mut out = vec![
        ("modules/values.yaml", "driftyEnabled: true\n".to_string()),
        (
            "modules/001-drifty/Chart.yaml",
            "apiVersion: v2\nname: drifty\nversion: 0.1.0\n".into(),
        ),
    ];
    for (name, text) in files {
        out.push((Box::leak(t(name).into_boxed_str()), text));
    }
    out
}

fn scrape(op: &AddonOperator) -> String {
    http_get(op.port(), "/metrics").1
}

fn series(body: &str, name: &str, labels: &str) -> f64 {
    metric(body, &format!("addon_operator_{name}{{{labels}}} ")).unwrap_or(0.0)
}

/// The debug CLI's `module drift drifty`: the drifted objects.
fn drift_of(op: &AddonOperator) -> Vec<Value> {
    let out = op.cli(&["module", "drift", "drifty", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["drifty"].as_array().cloned().unwrap_or_default()
}

fn revision(major: u32, ns: &str) -> u64 {
    let rs = releases(major, ns);
    rs.first().and_then(|r| r.1.parse().ok()).unwrap_or(0)
}

fn image(ns: &str) -> String {
    let d = get("deployment", ns, "drifty").expect("Deployment drifty");
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned();
    let app = containers
        .unwrap_or_default()
        .into_iter()
        .find(|c| c["name"] == "app");
    app.and_then(|c| c["image"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn start(ns: &str, major: u32, mode: &str) -> AddonOperator {
    let files = drifty(ns);
    let env = [("ADDON_OPERATOR_DRIFT_MODE", mode)];
    let op = AddonOperator::start_with_env(ns, major, &files, &env);
    op.wait_ready();
    op
}

/// `kubectl patch <kind> drifty` (strategic merge) as field manager `manager`.
fn patch_as(ns: &str, kind: &str, manager: &str, extra: &[&str], patch: &str) {
    let manager = format!("--field-manager={manager}");
    let mut args = vec!["-n", ns, "patch", kind, "drifty", &manager, "-p", patch];
    args.extend_from_slice(extra);
    kubectl(&args);
}

fn drift_reported_then_corrected(major: u32) {
    let _api = api_shared();
    let ns = cp().namespace(&format!("drift{major}"));
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let op = start(&ns, major, "warn");
    op.wait("revision 1", || (revision(major, &ns) == 1).then_some(()));

    // What others may do: a webhook's sidecar, the HPA controller's replica count.
    let sidecar = r#"{"spec":{"template":{"spec":{"containers":[{"name":"mesh-proxy","image":"registry.example/proxy:1"}]}}}}"#;
    patch_as(&ns, "deployment", "sidecar-injector", &[], sidecar);
    let scale = r#"{"spec":{"replicas":3}}"#;
    patch_as(
        &ns,
        "deployment",
        "kube-controller-manager",
        &["--subresource=scale"],
        scale,
    );
    // Ten check periods (2 s) with no drift anywhere among the 20 kinds.
    std::thread::sleep(Duration::from_secs(20));
    assert_eq!(drift_of(&op), Vec::<Value>::new(), "{}", op.logs());
    assert!(
        !op.logs().contains("drifted from its manifest"),
        "{}",
        op.logs()
    );
    assert_eq!(revision(major, &ns), 1);

    // An edited image is reported, named with its manager, and left in warn mode.
    let edit = r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example/app:evil"}]}}}}"#;
    patch_as(&ns, "deployment", "kubectl-edit", &[], edit);
    let found = op.wait("the drift reported", || {
        Some(drift_of(&op)).filter(|d| !d.is_empty())
    });
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["object"], format!("{ns}/Deployment/drifty"));
    let field = &found[0]["fields"][0];
    assert_eq!(
        field["path"],
        "/spec/template/spec/containers/name=app/image"
    );
    assert_eq!(
        (field["want"].as_str(), field["live"].as_str()),
        (
            Some("registry.example/app:1"),
            Some("registry.example/app:evil")
        )
    );
    assert!(
        field["setBy"][0]
            .as_str()
            .unwrap_or("")
            .starts_with("kubectl-edit"),
        "{field}"
    );
    let body = scrape(&op);
    assert_eq!(
        series(
            &body,
            "module_drift_objects",
            r#"kind="Deployment",module="drifty""#
        ),
        1.0,
        "{body}"
    );
    let logs = op.logs();
    assert!(
        logs.contains("drifted from its manifest") && logs.contains("kubectl-edit"),
        "{logs}"
    );
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        image(&ns),
        "registry.example/app:evil",
        "warn mode corrects nothing"
    );
    assert_eq!(revision(major, &ns), 1);
    drop(op);

    // Restarted in correct mode: the drift made while it was away is found at
    // startup and corrected by one helm upgrade.
    let op = start(&ns, major, "correct");
    op.wait("the image restored", || {
        (image(&ns) == "registry.example/app:1").then_some(())
    });
    op.wait("no drift left", || drift_of(&op).is_empty().then_some(()));
    let after_correction = revision(major, &ns);
    assert_eq!(after_correction, 2, "one upgrade corrects it");
    let body = scrape(&op);
    assert_eq!(
        series(
            &body,
            "module_drift_corrections_total",
            r#"kind="Deployment",module="drifty""#
        ),
        1.0,
        "{body}"
    );
    assert!(get("deployment", &ns, "drifty").is_some());

    // A fighting writer: corrected, back, then backed off (10 s, 20 s, ...).
    let fight_until = Instant::now() + Duration::from_secs(25);
    let fight = r#"{"data":{"key":"fighter-value"}}"#;
    while Instant::now() < fight_until {
        patch_as(&ns, "configmap", "fighter", &[], fight);
        std::thread::sleep(Duration::from_millis(500));
    }
    let body = scrape(&op);
    let fights = series(
        &body,
        "module_drift_correction_failures_total",
        r#"kind="ConfigMap",module="drifty",reason="fighting""#,
    );
    let corrections = series(
        &body,
        "module_drift_corrections_total",
        r#"kind="ConfigMap",module="drifty""#,
    );
    assert!(fights >= 1.0, "{body}");
    assert!(
        (1.0..=4.0).contains(&corrections),
        "backed off, not one upgrade per change: {corrections}\n{body}"
    );
    let upgrades = revision(major, &ns) - after_correction;
    assert!(upgrades <= 4, "{upgrades} upgrades in 25 s of fighting");
    let logs = op.logs();
    assert!(
        logs.contains("another writer changes these fields") && logs.contains("fighter"),
        "{logs}"
    );
    // Once the fighter stops, the next try restores the field.
    op.wait("the fought field restored", || {
        let cm = get("configmap", &ns, "drifty")?;
        (cm["data"]["key"] == "value").then_some(())
    });

    // The immutable trap: re-created with another selector, the manifest's one is
    // refused in the dry run: reported, counted, and no upgrade loop.
    kubectl(&["-n", &ns, "delete", "deployment", "drifty"]);
    let other = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: drifty\n  namespace: NS\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: other}\n  template:\n    metadata:\n      labels: {app: other}\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n";
    apply(&other.replace("NS", &ns));
    op.wait("the refusal", || {
        let body = scrape(&op);
        (series(
            &body,
            "module_drift_correction_failures_total",
            r#"kind="Deployment",module="drifty",reason="refused""#,
        ) >= 1.0)
            .then_some(())
    });
    let at_refusal = revision(major, &ns);
    std::thread::sleep(Duration::from_secs(12));
    assert_eq!(
        revision(major, &ns),
        at_refusal,
        "no upgrade after the refusal"
    );
    let logs = op.logs();
    assert!(
        logs.contains("drift cannot be corrected") && logs.contains("immutable"),
        "{logs}"
    );
    let d = get("deployment", &ns, "drifty").expect("the re-created Deployment");
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "other");
}

#[test]
fn drift_reported_then_corrected_with_helm3() {
    drift_reported_then_corrected(3);
}

#[test]
fn drift_reported_then_corrected_with_helm4() {
    drift_reported_then_corrected(4);
}

/// Drift made while the operator was away, found while its first converge is
/// still on (a slow afterAll hook): corrected once the converge is done, not at
/// the next check period (10 minutes here).
#[test]
fn drift_found_during_a_converge_is_judged_when_it_ends() {
    let _api = api_shared();
    let ns = cp().namespace("drift-slow");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let mut files = drifty(&ns);
    let slow = "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"configVersion\":\"v1\",\"afterAll\":1}'; exit 0; fi\nsleep 4\n";
    files.push(("global-hooks/slow.sh", slow.to_string()));
    let env = [
        ("ADDON_OPERATOR_DRIFT_MODE", "correct"),
        ("ADDON_OPERATOR_RESOURCES_CHECK_PERIOD", "10m"),
    ];
    let op = AddonOperator::start_with_env(&ns, 3, &files, &env);
    op.wait_ready();
    op.wait("revision 1", || (revision(3, &ns) == 1).then_some(()));
    drop(op);
    let edit = r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example/app:evil"}]}}}}"#;
    patch_as(&ns, "deployment", "kubectl-edit", &[], edit);
    let op = AddonOperator::start_with_env(&ns, 3, &files, &env);
    op.wait_ready();
    op.wait("the image restored", || {
        (image(&ns) == "registry.example/app:1").then_some(())
    });
    assert_eq!(revision(3, &ns), 2, "one correcting upgrade");
}

/// A module's `drift.yaml` written while the operator runs is read by the reload:
/// an ignore rule for the drifted path clears the reported drift (helm 4).
#[test]
fn a_reloaded_drift_yaml_takes_effect() {
    let _api = api_shared();
    let ns = cp().namespace("drift-reload");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\ndata: {{}}\n"
    ));
    let op = start(&ns, 4, "warn");
    op.wait("revision 1", || (revision(4, &ns) == 1).then_some(()));
    let edit = r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example/app:evil"}]}}}}"#;
    patch_as(&ns, "deployment", "kubectl-edit", &[], edit);
    op.wait("the drift reported", || {
        Some(drift_of(&op)).filter(|d| !d.is_empty())
    });
    let rule = "ignore:\n- kind: Deployment\n  paths: [/spec/template/spec/containers/*/image]\n";
    let file = op.dir().join("modules/001-drifty/drift.yaml");
    std::fs::write(&file, rule).expect("write drift.yaml");
    op.wait("the drift cleared by the reloaded rule", || {
        drift_of(&op).is_empty().then_some(())
    });
    assert_eq!(
        image(&ns),
        "registry.example/app:evil",
        "warn mode, now ignored"
    );
    let logs = op.logs();
    assert!(logs.contains("matches its manifest again"), "{logs}");
}
