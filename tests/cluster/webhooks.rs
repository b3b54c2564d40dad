//! Webhooks through the real kube-apiserver: the operator registers its
//! Validating/MutatingWebhookConfiguration and a CRD's `spec.conversion`, and the
//! API server calls the operator's TLS servers for kubectl's requests, trusting
//! the caBundle the operator wrote.
//!
//! How the API server reaches a test's server: the operator registers
//! `clientConfig.service` without a port, so the API server dials port 443 of
//! what the Service resolves to; a Service of `type: ExternalName` resolves to
//! `https://<externalName>:443`. Each test gets a loopback address of its own
//! ([`control_plane::WebhookEndpoint`]), a Service `externalName: <that address>` in its namespace, and
//! an operator listening on `<that address>:443` with a certificate for
//! `<service>.<namespace>.svc` signed by the cluster CA. Configuration objects and
//! CRDs are cluster-scoped, so their names derive from the test's namespace, and
//! every admission binding selects only that namespace.

use crate::common::{Operator, hook};
use crate::harness::*;
use base64::Engine;
use serde_json::{Value, json};
use std::process::{Command, Stdio};

/// Service `service` in `ns` resolving to a loopback address of its own, and a
/// serving certificate for it (see [`control_plane::WebhookEndpoint`]).
fn endpoint(ns: &str, service: &str) -> control_plane::WebhookEndpoint {
    cp().webhook_endpoint(ns, service)
        .unwrap_or_else(|e| panic!("webhook endpoint: {e}"))
}

/// Starts the operator (as the ServiceAccount of deploy/rbac.yaml) with `args`.
fn start(hooks: &[(&str, String)], ns: &str, args: &[String]) -> Operator {
    let mut all: Vec<&str> = vec!["--namespace", ns];
    all.extend(args.iter().map(String::as_str));
    operator(hooks, &cp().operator_kubeconfig(), &all, &[])
}

/// kubectl as cluster-admin with `stdin`: (success, stdout, stderr).
fn kubectl_full(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(control_plane::kubectl_path())
        .arg("--kubeconfig")
        .arg(cp().admin_kubeconfig())
        .arg("--request-timeout=30s")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.unwrap_or_default().as_bytes())
        .expect("kubectl stdin");
    drop(pipe);
    let out = child.wait_with_output().expect("kubectl output");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// Base64 of the cluster CA file: the caBundle the operator must have written.
fn ca_bundle() -> String {
    let pem = std::fs::read(cp().ca_file()).expect("cluster CA");
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// A cluster-scoped object, if it exists.
fn cluster_object(kind: &str, name: &str) -> Option<Value> {
    let text = kubectl(&["get", kind, name, "-o", "json", "--ignore-not-found"]);
    serde_json::from_str(&text).ok()
}

/// The admission rules of both bindings (ConfigMap creation), namespace-scoped.
fn admission_binding(name: &str, ns: &str) -> String {
    format!(
        "- name: {name}\n  namespace:\n    labelSelector:\n      matchLabels:\n        \
         kubernetes.io/metadata.name: {ns}\n  rules:\n  - apiGroups: [\"\"]\n    \
         apiVersions: [\"v1\"]\n    operations: [\"CREATE\"]\n    resources: [\"configmaps\"]\n    \
         scope: Namespaced\n"
    )
}

/// A hook with a validating binding (refuses ConfigMaps with a `password` key,
/// fails for ConfigMaps named `crash`, warns otherwise) and a mutating binding
/// (adds the label `checked-by: shell-operator`).
fn admission_hook(ns: &str) -> String {
    let config = format!(
        "configVersion: v1\nkubernetesValidating:\n{}kubernetesMutating:\n{}",
        admission_binding("policy.example.com", ns),
        admission_binding("label.example.com", ns)
    );
    let body = r#"ctx="$BINDING_CONTEXT_PATH"
R="$VALIDATING_RESPONSE_PATH"
name=$(jq -r '.[0].review.request.object.metadata.name' "$ctx")
if [ "$(jq -r '.[0].type' "$ctx")" = Mutating ]; then
  patch='[{"op":"add","path":"/metadata/labels","value":{"checked-by":"shell-operator"}}]'
  jq -n --arg p "$(printf '%s' "$patch" | base64 -w0)" '{allowed: true, patch: $p}' > "$R"
elif [ "$name" = crash ]; then
  echo 'cannot decide' >&2; exit 3
elif jq -e '.[0].review.request.object.data | has("password")' "$ctx" >/dev/null 2>&1; then
  jq -n --arg m "ConfigMap $name holds a password: use a Secret" '{allowed: false, message: $m}' > "$R"
else
  jq -n --arg w "ConfigMap $name was checked" '{allowed: true, warnings: [$w]}' > "$R"
fi"#;
    hook("adm", &config, body)
}

/// Contexts of the hook's runs for real (not dry-run) requests about `name`.
fn admission_contexts(op: &Operator, name: &str) -> Vec<Value> {
    contexts(op)
        .into_iter()
        .filter(|c| {
            c["review"]["request"]["name"] == name && c["review"]["request"]["dryRun"] != true
        })
        .collect()
}

fn configmap(ns: &str, name: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {data}\n"
    )
}

#[test]
fn admission_hooks_answer_the_real_api_server_over_tls() {
    let _api = api_shared();
    let ns = cp().namespace("wh-adm");
    let ep = endpoint(&ns, "hooks-svc");
    let mut args = ep.flags("validating");
    args.extend(["--validating-webhook-configuration-name".into(), ns.clone()]);
    let op = start(&[("adm.sh", admission_hook(&ns))], &ns, &args);
    let name = format!("{ns}-hooks");

    // The configurations in the server are the operator's.
    let validating = wait_for("the ValidatingWebhookConfiguration", || {
        cluster_object("validatingwebhookconfiguration", &name)
    });
    let mutating = wait_for("the MutatingWebhookConfiguration", || {
        cluster_object("mutatingwebhookconfiguration", &name)
    });
    for (cfg, binding, path) in [
        (
            &validating,
            "policy.example.com",
            "/hooks/policy-example-com",
        ),
        (&mutating, "label.example.com", "/hooks/label-example-com"),
    ] {
        let hooks = cfg["webhooks"].as_array().expect("webhooks");
        assert_eq!(hooks.len(), 1, "{cfg:#}");
        let h = &hooks[0];
        assert_eq!(h["name"], binding);
        assert_eq!(
            h["clientConfig"]["service"],
            json!({"namespace": ns, "name": "hooks-svc", "path": path, "port": 443})
        );
        assert_eq!(h["clientConfig"]["caBundle"], ca_bundle());
        assert_eq!(
            h["rules"],
            json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["configmaps"], "scope": "Namespaced"}])
        );
        assert_eq!(
            h["namespaceSelector"],
            json!({"matchLabels": {"kubernetes.io/metadata.name": ns}})
        );
        assert_eq!(h["admissionReviewVersions"], json!(["v1", "v1beta1"]));
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
    }

    // The API server learns of new configurations and Services through informers:
    // wait until a server-side dry run goes through both hooks.
    wait_for("both hooks to be called by the API server", || {
        let (ok, out, _) = kubectl_full(
            &[
                "-n",
                &ns,
                "create",
                "configmap",
                "probe",
                "--dry-run=server",
                "-o",
                "json",
            ],
            None,
        );
        let mutated = ok
            && serde_json::from_str::<Value>(&out)
                .is_ok_and(|o| o["metadata"]["labels"]["checked-by"] == "shell-operator");
        let (ok, _, err) = kubectl_full(
            &[
                "-n",
                &ns,
                "create",
                "configmap",
                "probe",
                "--from-literal=password=x",
                "--dry-run=server",
            ],
            None,
        );
        (mutated && !ok && err.contains("holds a password")).then_some(())
    });

    // Refused by the validating hook with its message; nothing stored.
    let (ok, _, err) = kubectl_full(
        &["apply", "-f", "-"],
        Some(&configmap(&ns, "db", "{password: hunter2}")),
    );
    assert!(!ok, "a ConfigMap with a password was admitted");
    assert!(
        err.contains(
            "admission webhook \"policy.example.com\" denied the request: ConfigMap db holds a password: use a Secret"
        ),
        "kubectl's stderr: {err}"
    );
    assert!(cp().get("configmap", &ns, "db").is_none());

    // Admitted: the mutating hook's patch is in the stored object, the warning on stderr.
    let (ok, _, err) = kubectl_full(
        &["apply", "-f", "-"],
        Some(&configmap(&ns, "settings", "{color: blue}")),
    );
    assert!(ok, "{err}\n{}", op.logs());
    assert!(
        err.contains("Warning: ConfigMap settings was checked"),
        "kubectl's stderr: {err}"
    );
    let stored = cp()
        .get("configmap", &ns, "settings")
        .expect("settings stored");
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"checked-by": "shell-operator"})
    );
    assert_eq!(stored["data"], json!({"color": "blue"}));

    // What the hooks received is the API server's AdmissionReview; the mutating
    // hook ran first, and the validating hook saw its patch applied.
    let ctx = admission_contexts(&op, "settings");
    assert_eq!(ctx.len(), 2, "{ctx:#?}");
    assert_eq!(
        (&ctx[0]["type"], &ctx[0]["binding"]),
        (&json!("Mutating"), &json!("label.example.com"))
    );
    assert_eq!(
        (&ctx[1]["type"], &ctx[1]["binding"]),
        (&json!("Validating"), &json!("policy.example.com"))
    );
    for c in &ctx {
        let review = &c["review"];
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        let req = &review["request"];
        assert!(
            req["uid"].as_str().is_some_and(|u| !u.is_empty()),
            "{req:#}"
        );
        assert_eq!(
            req["kind"],
            json!({"group": "", "version": "v1", "kind": "ConfigMap"})
        );
        assert_eq!(req["operation"], "CREATE");
        assert_eq!(req["namespace"], ns);
        assert_eq!(req["userInfo"]["username"], "admin");
    }
    assert_eq!(
        ctx[0]["review"]["request"]["object"]["metadata"].get("labels"),
        None
    );
    assert_eq!(
        ctx[1]["review"]["request"]["object"]["metadata"]["labels"],
        json!({"checked-by": "shell-operator"})
    );

    // A failing hook is a denial whose message names the hook and binding.
    let (ok, _, err) = kubectl_full(&["-n", &ns, "create", "configmap", "crash"], None);
    assert!(!ok, "admitted although the hook failed");
    assert!(
        err.contains("admission webhook \"policy.example.com\" denied the request: hook 'adm.sh' (binding 'policy.example.com') failed"),
        "kubectl's stderr: {err}"
    );
    assert!(cp().get("configmap", &ns, "crash").is_none());

    // A restarted operator finds both configurations as it would write them: the
    // server's defaults (port 443, scope, selectors, reinvocationPolicy) are no
    // change, so nothing is written.
    drop(op);
    let op = start(&[("adm.sh", admission_hook(&ns))], &ns, &args);
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let line = op.wait_log(&format!("\"kind\":\"{kind}\""), WAIT);
        assert!(
            line.contains("webhook configuration is up to date"),
            "{line}\n{}",
            op.logs()
        );
    }
    assert_eq!(
        cluster_object("validatingwebhookconfiguration", &name).expect("still there")["metadata"]["resourceVersion"],
        validating["metadata"]["resourceVersion"]
    );

    // With the operator gone, failurePolicy Fail refuses: the API server says it
    // could not call the hook at the Service's address.
    drop(op);
    let (ok, _, err) = kubectl_full(&["-n", &ns, "create", "configmap", "while-down"], None);
    assert!(!ok, "admitted with no webhook server");
    assert!(
        err.contains("failed calling webhook \"label.example.com\"")
            && err.contains(&format!(
                "https://hooks-svc.{ns}.svc:443/hooks/label-example-com"
            )),
        "kubectl's stderr: {err}"
    );
    assert!(cp().get("configmap", &ns, "while-down").is_none());
}

/// Converts CronTabs both ways between v1alpha1 and v1; refuses (failedMessage)
/// a review holding a CronTab whose `spec.cron` is a string.
fn conversion_hook(group: &str) -> String {
    let config = format!(
        "configVersion: v1\nkubernetesCustomResourceConversion:\n- name: crontab-versions\n  \
         crdName: crontabs.{group}\n  conversions:\n  - fromVersion: {group}/v1alpha1\n    \
         toVersion: {group}/v1\n  - fromVersion: {group}/v1\n    toVersion: {group}/v1alpha1\n"
    );
    let body = r#"jq -c '.[0] as $c
  | ($c.review.request.objects | map(select(.spec.cron? | type == "string")) | first) as $bad
  | if $bad then {failedMessage: "CronTab \($bad.metadata.name): spec.cron is not a list"}
    else {convertedObjects: [$c.review.request.objects[]
  | .apiVersion = $c.toVersion
  | if ($c.toVersion | endswith("/v1"))
    then .spec.cronSpec = (.spec.cron | join(" ")) | del(.spec.cron)
    else .spec.cron = (.spec.cronSpec | split(" ")) | del(.spec.cronSpec) end]} end' \
  "$BINDING_CONTEXT_PATH" > "$CONVERSION_RESPONSE_PATH""#;
    hook("conv", &config, body)
}

/// The object as etcd holds it (the API server stores JSON).
fn stored_in_etcd(group: &str, ns: &str, name: &str) -> Value {
    let key = format!("/registry/{group}/crontabs/{ns}/{name}");
    let text = cp()
        .etcd()
        .get(&key)
        .unwrap_or_else(|e| panic!("etcd get {key}: {e}"))
        .unwrap_or_else(|| panic!("{key} is not in etcd"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{key} is not JSON ({e}): {text}"))
}

fn get_json(args: &[&str]) -> Value {
    let text = kubectl(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}: {text}"))
}

#[test]
fn conversion_hook_converts_stored_objects_for_the_real_api_server() {
    let _api = api_shared();
    let ns = cp().namespace("wh-conv");
    let group = format!("{ns}.example.com");
    let crd = format!("crontabs.{group}");
    apply(&control_plane::fixtures::crontab_crd(&group));
    kubectl(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{crd}"),
        "--timeout=30s",
    ]);
    // Written before any conversion is configured: stored as v1alpha1.
    apply(&format!(
        "apiVersion: {group}/v1alpha1\nkind: CronTab\nmetadata: {{name: legacy, namespace: {ns}}}\n\
         spec: {{cron: ['0', '3', '*', '*', '*'], image: backup}}\n"
    ));
    assert_eq!(
        stored_in_etcd(&group, &ns, "legacy")["apiVersion"],
        format!("{group}/v1alpha1")
    );

    let ep = endpoint(&ns, "conversion-svc");
    let op = start(
        &[("conv.sh", conversion_hook(&group))],
        &ns,
        &ep.flags("conversion"),
    );

    // The CRD's conversion is the operator's.
    let conversion = wait_for("the CRD's conversion webhook", || {
        let c = cluster_object("crd", &crd)?["spec"]["conversion"].clone();
        (c["strategy"] == "Webhook").then_some(c)
    });
    assert_eq!(
        conversion["webhook"]["clientConfig"]["service"],
        json!({"namespace": ns, "name": "conversion-svc", "path": format!("/{crd}"), "port": 443})
    );
    assert_eq!(
        conversion["webhook"]["clientConfig"]["caBundle"],
        ca_bundle()
    );
    assert_eq!(
        conversion["webhook"]["conversionReviewVersions"],
        json!(["v1", "v1beta1"])
    );

    // The stored v1alpha1 object read as v1, converted by the hook (the API server
    // switches to the webhook once its CRD handler sees the new conversion).
    let v1 = format!("crontabs.v1.{group}");
    let legacy = wait_for("legacy read back converted to v1", || {
        let (ok, out, _) = kubectl_full(&["-n", &ns, "get", &v1, "legacy", "-o", "json"], None);
        let o: Value = serde_json::from_str(&out).ok().filter(|_| ok)?;
        o["spec"].get("cronSpec").is_some().then_some(o)
    });
    assert_eq!(legacy["apiVersion"], format!("{group}/v1"));
    assert_eq!(
        legacy["spec"],
        json!({"cronSpec": "0 3 * * *", "image": "backup"})
    );

    // Written as v1: the hook converts it down to the storage version, and the
    // answer back up to v1.
    let written = cp()
        .kubectl_as(
            &cp().admin_kubeconfig(),
            &["apply", "-o", "json", "-f", "-"],
            Some(&format!(
                "apiVersion: {group}/v1\nkind: CronTab\nmetadata: {{name: modern, namespace: {ns}}}\n\
                 spec: {{cronSpec: '*/5 * * * *'}}\n"
            )),
        )
        .unwrap_or_else(|e| panic!("apply v1: {e}\n{}", op.logs()));
    let written: Value = serde_json::from_str(&written).expect("apply -o json");
    assert_eq!(written["apiVersion"], format!("{group}/v1"));
    assert_eq!(written["spec"], json!({"cronSpec": "*/5 * * * *"}));
    let in_etcd = stored_in_etcd(&group, &ns, "modern");
    assert_eq!(in_etcd["apiVersion"], format!("{group}/v1alpha1"));
    assert_eq!(
        in_etcd["spec"],
        json!({"cron": ["*/5", "*", "*", "*", "*"]})
    );
    let alpha = get_json(&[
        "-n",
        &ns,
        "get",
        &format!("crontabs.v1alpha1.{group}"),
        "modern",
        "-o",
        "json",
    ]);
    assert_eq!(alpha["spec"], json!({"cron": ["*/5", "*", "*", "*", "*"]}));

    // A list is converted too, every item to v1.
    let list = get_json(&["-n", &ns, "get", &v1, "-o", "json"]);
    let items: Vec<(&str, &Value)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap_or(""),
                &o["spec"]["cronSpec"],
            )
        })
        .collect();
    assert_eq!(
        items,
        vec![
            ("legacy", &json!("0 3 * * *")),
            ("modern", &json!("*/5 * * * *"))
        ]
    );
    for o in list["items"].as_array().expect("items") {
        assert_eq!(o["apiVersion"], format!("{group}/v1"));
    }

    // The hook got the API server's ConversionReviews, both directions.
    let ctx = contexts(&op);
    let dirs: Vec<(String, String)> = ctx
        .iter()
        .map(|c| {
            assert_eq!(c["type"], "Conversion");
            assert_eq!(c["review"]["apiVersion"], "apiextensions.k8s.io/v1");
            assert_eq!(c["review"]["kind"], "ConversionReview");
            assert_eq!(c["review"]["request"]["desiredAPIVersion"], c["toVersion"]);
            (
                c["fromVersion"].as_str().unwrap_or("").to_string(),
                c["toVersion"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let up = (format!("{group}/v1alpha1"), format!("{group}/v1"));
    let down = (format!("{group}/v1"), format!("{group}/v1alpha1"));
    assert!(dirs.contains(&up) && dirs.contains(&down), "{dirs:?}");

    // The hook's failedMessage reaches kubectl through the API server's error.
    apply(&format!(
        "apiVersion: {group}/v1alpha1\nkind: CronTab\nmetadata: {{name: broken, namespace: {ns}}}\n\
         spec: {{cron: '0 3 * * *'}}\n"
    ));
    let (ok, _, err) = kubectl_full(&["-n", &ns, "get", &v1, "broken", "-o", "json"], None);
    assert!(
        !ok,
        "a CronTab the hook refuses to convert was served as v1"
    );
    assert!(
        err.contains(&format!(
            "conversion webhook for {group}/v1alpha1, Kind=CronTab failed: CronTab broken: spec.cron is not a list"
        )),
        "kubectl's stderr: {err}"
    );

    // A restarted operator finds the CRD's conversion as it would write it (the
    // server's default port 443 is no change) and leaves the CRD alone.
    drop(op);
    let op = start(
        &[("conv.sh", conversion_hook(&group))],
        &ns,
        &ep.flags("conversion"),
    );
    let line = op.wait_log("CRD conversion", WAIT);
    assert!(
        line.contains("CRD conversion is up to date"),
        "{line}\n{}",
        op.logs()
    );
}
