//! Admission webhooks end to end: the real binary against kube-sim, a test PKI
//! made with openssl, and real HTTPS requests made by curl. Assertions are on
//! the exact AdmissionReview answers, the binding contexts hooks received,
//! objects in kube-sim and scraped metrics.

use crate::common;
use crate::webhook_common;

use common::{hook, metric};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use webhook_common::{Pki, RULES, admission_hook, curl, review, start};

const ALL: &[&str] = &[
    "allow.example.com",
    "deny.example.com",
    "warn.example.com",
    "invalid.example.com",
    "empty.example.com",
    "fail.example.com",
    "slow.example.com",
    "strict.example.com",
];

/// Every outcome of a hook's answer, as the exact AdmissionReview JSON.
#[test]
fn admission_answers_for_every_hook_outcome() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let op = start(
        &[("validate.sh", admission_hook(ALL, &["mutate.example.com"]))],
        &sim,
        &pki,
        &[],
    );
    let port = op.port_from_log("admission webhook server listening");
    let ca = pki.path("ca.crt");
    let ask = |binding: &str| {
        let path = format!("/hooks/{}", binding.replace('.', "-"));
        let a = curl(port, &path, &review(&format!("uid-{binding}")), &ca, &[]);
        assert_eq!(a.status, 200, "{binding}: {} {}", a.body, a.stderr);
        a.body
    };
    assert_eq!(
        ask("allow.example.com"),
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"allowed":true,"uid":"uid-allow.example.com"}}"#
    );
    assert_eq!(
        ask("deny.example.com"),
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"allowed":false,"status":{"code":403,"message":"configmaps named bad are forbidden"},"uid":"uid-deny.example.com"}}"#
    );
    assert_eq!(
        ask("warn.example.com"),
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"allowed":true,"uid":"uid-warn.example.com","warnings":["w1","w2"]}}"#
    );
    // base64 of [{"op":"add","path":"/data/x","value":"y"}]
    assert_eq!(
        ask("mutate.example.com"),
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"allowed":true,"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL2RhdGEveCIsInZhbHVlIjoieSJ9XQ==","patchType":"JSONPatch","uid":"uid-mutate.example.com"}}"#
    );
    let denial = |binding: &str, message: &str| {
        let body: Value = serde_json::from_str(&ask(binding)).expect("json");
        assert_eq!(
            body["response"],
            json!({"uid": format!("uid-{binding}"), "allowed": false, "status": {"code": 500, "message": message}}),
            "{binding}"
        );
    };
    denial(
        "invalid.example.com",
        "hook 'validate.sh' (binding 'invalid.example.com') wrote no usable response: the response file $VALIDATING_RESPONSE_PATH is not valid: expected ident at line 1 column 2",
    );
    denial(
        "empty.example.com",
        "hook 'validate.sh' (binding 'empty.example.com') wrote no usable response: the response file $VALIDATING_RESPONSE_PATH is empty",
    );
    denial(
        "fail.example.com",
        "hook 'validate.sh' (binding 'fail.example.com') failed: exit status 3",
    );
    let t0 = Instant::now();
    denial(
        "slow.example.com",
        "hook 'validate.sh' (binding 'slow.example.com') failed: timed out after 1s and was killed",
    );
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "the timeout cut the hook short"
    );
    let log = op.wait_log("admission webhook hook failed", Duration::from_secs(5));
    assert!(log.contains("validate.sh"), "{log}");

    // The hook saw the whole review, with apiVersion and kind, in a Validating context.
    let runs = op.runs();
    let allow = runs
        .iter()
        .find(|(_, c)| c[0]["binding"] == "allow.example.com")
        .expect("allow run");
    assert_eq!(
        allow.1,
        json!([{"binding": "allow.example.com", "type": "Validating",
                "review": serde_json::from_str::<Value>(&review("uid-allow.example.com")).expect("review")}])
    );
    let mutate = runs
        .iter()
        .find(|(_, c)| c[0]["binding"] == "mutate.example.com")
        .expect("mutate run");
    assert_eq!(mutate.1[0]["type"], "Mutating");

    // Metrics by binding and result.
    let (_, text) = op.http_get("/metrics");
    let count = |binding: &str, result: &str| {
        metric(
            &text,
            &format!(
                "shell_operator_webhook_requests_total{{binding=\"{binding}\",result=\"{result}\",webhook=\"admission\"}}"
            ),
        )
    };
    assert_eq!(count("deny.example.com", "denied"), Some(1.0), "{text}");
    assert_eq!(count("allow.example.com", "allowed"), Some(1.0));
    assert_eq!(count("fail.example.com", "error"), Some(1.0));
    assert!(
        text.contains("shell_operator_webhook_request_seconds_bucket"),
        "{text}"
    );
}

/// Bad requests are refused with flant's texts; /healthz answers.
#[test]
fn bad_requests_and_healthz() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let op = start(
        &[("validate.sh", admission_hook(&["allow.example.com"], &[]))],
        &sim,
        &pki,
        &[],
    );
    let port = op.port_from_log("admission webhook server listening");
    let ca = pki.path("ca.crt");
    let a = curl(port, "/hooks/allow-example-com", "{nope", &ca, &[]);
    assert_eq!((a.status, a.body.as_str()), (400, "Invalid JSON payload"));
    let a = curl(
        port,
        "/hooks/allow-example-com",
        r#"{"kind":"AdmissionReview"}"#,
        &ca,
        &[],
    );
    assert_eq!(
        (a.status, a.body.as_str()),
        (400, "Missing parameters: request")
    );
    // A review without request.uid cannot be answered (the API server matches by uid).
    for body in [
        r#"{"kind":"AdmissionReview","request":{"operation":"CREATE"}}"#,
        r#"{"kind":"AdmissionReview","request":{"uid":""}}"#,
        r#"{"kind":"AdmissionReview","request":{"uid":7}}"#,
    ] {
        let a = curl(port, "/hooks/allow-example-com", body, &ca, &[]);
        assert_eq!(
            (a.status, a.body.as_str()),
            (400, "Missing parameters: request.uid"),
            "{body}"
        );
    }
    let a = curl(port, "/hooks/unknown", &review("x"), &ca, &[]);
    assert_eq!(
        (a.status, a.body.as_str()),
        (404, "no hook found for 'hooks' 'unknown'")
    );
    let a = curl(
        port,
        "/hooks/allow-example-com",
        "{}",
        &ca,
        &["-H", "Content-Type: text/plain"],
    );
    assert_eq!(a.status, 415);
    let a = curl(port, "/healthz", "", &ca, &["-X", "GET"]);
    assert_eq!((a.status, a.body.as_str()), (200, "ok\n"));
    // A v1beta1 review is answered as v1beta1.
    let old = review("b1").replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1");
    let a = curl(port, "/hooks/allow-example-com", &old, &ca, &[]);
    assert_eq!(
        a.body,
        r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"allowed":true,"uid":"b1"}}"#
    );
}

/// `includeSnapshotsFrom` in an admission binding: the context carries the
/// monitors' current snapshot of that kubernetes binding.
#[test]
fn admission_context_carries_snapshots() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    sim.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}))
        .ok();
    sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "policy", "namespace": "default"}, "data": {"deny": "bad"}}))
        .expect("configmap");
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: policies\n  kind: ConfigMap\n  executeHookOnEvent: []\n  executeHookOnSynchronization: false\n  jqFilter: .data\nkubernetesValidating:\n- name: allow.example.com\n  includeSnapshotsFrom: [policies]\n{RULES}"
    );
    let op = start(
        &[(
            "snap.sh",
            hook(
                "s",
                &config,
                "echo '{\"allowed\":true}' > \"$VALIDATING_RESPONSE_PATH\"",
            ),
        )],
        &sim,
        &pki,
        &[],
    );
    let port = op.port_from_log("admission webhook server listening");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = curl(
            port,
            "/hooks/allow-example-com",
            &review("s"),
            &pki.path("ca.crt"),
            &[],
        );
        assert_eq!(a.status, 200, "{}", a.stderr);
        let runs = op.runs();
        let last = &runs.last().expect("a run").1[0];
        let snap = &last["snapshots"]["policies"];
        if snap.as_array().is_some_and(|l| !l.is_empty()) {
            assert_eq!(snap[0]["filterResult"], json!({"deny": "bad"}));
            assert_eq!(snap[0]["object"]["metadata"]["name"], "policy");
            break;
        }
        assert_eq!(
            snap,
            &json!([]),
            "the key is there before the monitor synced"
        );
        assert!(
            Instant::now() < deadline,
            "snapshot never arrived:\n{}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The hook's `settings.executionMinInterval` applies to webhook runs too: a
/// request that would wait past the binding's timeout is denied at once.
#[test]
fn rate_limit_applies_to_webhook_runs() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let config = format!(
        "configVersion: v1\nsettings:\n  executionMinInterval: 30s\n  executionBurst: 1\nkubernetesValidating:\n- name: allow.example.com\n  timeoutSeconds: 2\n{RULES}"
    );
    let body = "echo '{\"allowed\":true}' > \"$VALIDATING_RESPONSE_PATH\"";
    let op = start(&[("limited.sh", hook("l", &config, body))], &sim, &pki, &[]);
    let port = op.port_from_log("admission webhook server listening");
    let ca = pki.path("ca.crt");
    let first = curl(port, "/hooks/allow-example-com", &review("1"), &ca, &[]);
    assert_eq!(first.json()["response"]["allowed"], true);
    let second = curl(port, "/hooks/allow-example-com", &review("2"), &ca, &[]);
    let status = &second.json()["response"]["status"];
    assert_eq!(status["code"], 500);
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("hook 'limited.sh' (binding 'allow.example.com') failed: rate limited by settings.executionMinInterval"),
        "{message}"
    );
    assert_eq!(
        op.runs().len(),
        1,
        "the second request did not run the hook"
    );
}

/// A webhook run's `$KUBERNETES_PATCH_PATH` is applied like a queued run's.
#[test]
fn webhook_runs_apply_object_patches() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let config =
        format!("configVersion: v1\nkubernetesValidating:\n- name: allow.example.com\n{RULES}");
    let body = r#"cat > "$KUBERNETES_PATCH_PATH" <<'PATCHEOF'
{"operation":"CreateIfNotExists","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"seen","namespace":"default"},"data":{"by":"webhook"}}}
PATCHEOF
echo '{"allowed":true}' > "$VALIDATING_RESPONSE_PATH""#;
    // kube-sim now calls registered webhooks like kube-apiserver: the hook's own
    // ConfigMap create matches its binding, and no Service routes to the operator
    // here, so that call fails; Ignore lets the create through (Fail would refuse it).
    let op = start(
        &[("patching.sh", hook("p", &config, body))],
        &sim,
        &pki,
        &["--validating-webhook-failure-policy", "Ignore"],
    );
    let port = op.port_from_log("admission webhook server listening");
    let a = curl(
        port,
        "/hooks/allow-example-com",
        &review("p"),
        &pki.path("ca.crt"),
        &[],
    );
    assert_eq!(a.json()["response"]["allowed"], true, "{}", op.logs());
    let cm = sim
        .get("v1", "ConfigMap", "default", "seen")
        .expect("configmap created");
    assert_eq!(cm["data"], json!({"by": "webhook"}));
}

/// Startup stops with exit code 1 and a message naming the flag or the bindings.
#[test]
fn startup_fails_clearly_on_bad_certificates_and_colliding_paths() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let hooks = [("validate.sh", admission_hook(&["allow.example.com"], &[]))];
    let missing = pki.arg("missing.crt");
    let mut op = start(&hooks, &sim, &pki, &["--validating-webhook-ca", &missing]);
    assert_eq!(op.wait_exit(Duration::from_secs(20)), Some(1));
    let line = op.wait_log("startup failed", Duration::from_secs(1));
    assert!(
        line.contains("--validating-webhook-ca") && line.contains("missing.crt"),
        "{line}"
    );

    let mut op = start(
        &hooks,
        &sim,
        &pki,
        &["--validating-webhook-server-key", &pki.arg("client.key")],
    );
    assert_eq!(op.wait_exit(Duration::from_secs(20)), Some(1));
    let line = op.wait_log("startup failed", Duration::from_secs(1));
    assert!(line.contains("is not the key of"), "{line}");

    let colliding = [
        ("a.sh", admission_hook(&["allow.example.com"], &[])),
        ("b.sh", admission_hook(&[], &["allow.example.com"])),
    ];
    let mut op = start(&colliding, &sim, &pki, &[]);
    assert_eq!(op.wait_exit(Duration::from_secs(20)), Some(1));
    let line = op.wait_log("startup failed", Duration::from_secs(1));
    assert!(
        line.contains("webhook path /hooks/allow-example-com is used by hook 'a.sh' binding 'allow.example.com' and by hook 'b.sh' binding 'allow.example.com'"),
        "{line}"
    );
}
