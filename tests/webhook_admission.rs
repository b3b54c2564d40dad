//! Admission webhooks end to end: the real binary against kube-sim, a test PKI
//! made with openssl, and real HTTPS requests made by curl. Assertions are on
//! the exact AdmissionReview answers, the binding contexts hooks received, the
//! configuration objects in kube-sim, and scraped metrics.

mod common;
mod webhook_common;

use common::{hook, metric};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use webhook_common::{Pki, curl, start};

const RULES: &str = "  rules:\n  - apiGroups: [\"\"]\n    apiVersions: [\"v1\"]\n    operations: [\"CREATE\"]\n    resources: [\"configmaps\"]\n    scope: Namespaced\n";

/// A validating + mutating hook whose answer depends on the binding.
fn admission_hook(validating: &[&str], mutating: &[&str]) -> String {
    let mut config = String::from("configVersion: v1\n");
    let mut list = |key: &str, names: &[&str]| {
        if names.is_empty() {
            return;
        }
        config.push_str(&format!("{key}:\n"));
        for n in names {
            config.push_str(&format!("- name: {n}\n{RULES}"));
            if n.starts_with("slow") {
                config.push_str("  timeoutSeconds: 1\n");
            }
            if n.starts_with("strict") {
                config.push_str("  failurePolicy: Fail\n  labelSelector:\n    matchLabels:\n      checked: \"yes\"\n");
            }
        }
    };
    list("kubernetesValidating", validating);
    list("kubernetesMutating", mutating);
    let body = r#"R="$VALIDATING_RESPONSE_PATH"
case "$(head -c 60 "$BINDING_CONTEXT_PATH")" in
  *'"binding":"allow.example.com"'*|*'"binding":"strict.example.com"'*) echo '{"allowed":true}' > "$R" ;;
  *'"binding":"deny.example.com"'*) echo '{"allowed":false,"message":"configmaps named bad are forbidden"}' > "$R" ;;
  *'"binding":"warn.example.com"'*) echo '{"allowed":true,"warnings":["w1","w2"]}' > "$R" ;;
  *'"binding":"invalid.example.com"'*) echo 'this is not json' > "$R" ;;
  *'"binding":"empty.example.com"'*) : ;;
  *'"binding":"fail.example.com"'*) echo 'boom' >&2; exit 3 ;;
  *'"binding":"slow.example.com"'*) sleep 5; echo '{"allowed":true}' > "$R" ;;
  *'"binding":"mutate.example.com"'*) printf '{"allowed":true,"patch":"%s"}' "$(printf '%s' '[{"op":"add","path":"/data/x","value":"y"}]' | base64 -w0)" > "$R" ;;
esac"#;
    hook("v", &config, body)
}

fn review(uid: &str) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "operation": "CREATE",
            "namespace": "default",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}}
        }
    })
    .to_string()
}

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

/// With a client CA configured, only clients with a certificate it signed get in.
#[test]
fn client_certificate_is_required_when_a_client_ca_is_set() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let client_ca = pki.arg("client-ca.crt");
    let op = start(
        &[("validate.sh", admission_hook(&["allow.example.com"], &[]))],
        &sim,
        &pki,
        &["--validating-webhook-client-ca", &client_ca],
    );
    let port = op.port_from_log("admission webhook server listening");
    let ca = pki.path("ca.crt");
    let without = curl(port, "/hooks/allow-example-com", &review("a"), &ca, &[]);
    assert_eq!(
        without.status, 0,
        "refused without a client certificate: {}",
        without.body
    );
    let (cert, key) = (pki.arg("client.crt"), pki.arg("client.key"));
    let with = curl(
        port,
        "/hooks/allow-example-com",
        &review("a"),
        &ca,
        &["--cert", &cert, "--key", &key],
    );
    assert_eq!(with.status, 200, "{}", with.stderr);
    assert_eq!(with.json()["response"]["allowed"], true);
    // A certificate from another CA is refused too.
    pki.issue("stranger", "ca", "extendedKeyUsage=clientAuth");
    let (cert, key) = (pki.arg("stranger.crt"), pki.arg("stranger.key"));
    let stranger = curl(
        port,
        "/hooks/allow-example-com",
        &review("a"),
        &ca,
        &["--cert", &cert, "--key", &key],
    );
    assert_eq!(stranger.status, 0);
}

/// cert-manager rewrites the files: new handshakes use the new certificate
/// without a restart.
#[test]
fn rotated_certificate_is_picked_up_without_restart() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let op = start(
        &[("validate.sh", admission_hook(&["allow.example.com"], &[]))],
        &sim,
        &pki,
        &[],
    );
    let port = op.port_from_log("admission webhook server listening");
    pki.ca("ca2");
    pki.issue(
        "server2",
        "ca2",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth",
    );
    let ca2 = pki.path("ca2.crt");
    assert_eq!(
        curl(port, "/healthz", "", &ca2, &["-X", "GET"]).status,
        0,
        "old cert is not trusted by ca2"
    );
    std::fs::copy(pki.path("server2.key"), pki.path("server.key")).expect("key");
    std::fs::copy(pki.path("server2.crt"), pki.path("server.crt")).expect("cert");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = curl(port, "/hooks/allow-example-com", &review("r"), &ca2, &[]);
        if a.status == 200 {
            assert_eq!(a.json()["response"]["allowed"], true);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "new certificate never served: {}",
            a.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        curl(port, "/healthz", "", &pki.path("ca.crt"), &["-X", "GET"]).status,
        0
    );
    op.wait_log("webhook certificate reloaded", Duration::from_secs(2));
}

fn configuration(sim: &kube_sim::Sim, kind: &str) -> Option<Value> {
    sim.get(
        "admissionregistration.k8s.io/v1",
        kind,
        "",
        "shell-operator-hooks-hooks",
    )
}

fn names(obj: &Value) -> Vec<String> {
    obj["webhooks"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|w| w["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The configuration objects as they land in kube-sim, then after a restart
/// with a binding removed.
#[test]
fn registration_objects_before_and_after_a_binding_is_removed() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let hooks = [(
        "validate.sh",
        admission_hook(
            &[
                "warn.example.com",
                "strict.example.com",
                "allow.example.com",
            ],
            &["mutate.example.com"],
        ),
    )];
    let mut op = start(
        &hooks,
        &sim,
        &pki,
        &["--validating-webhook-failure-policy", "Ignore"],
    );
    op.wait_log(
        "admission webhook server listening",
        Duration::from_secs(20),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while configuration(&sim, "MutatingWebhookConfiguration").is_none() {
        assert!(
            Instant::now() < deadline,
            "not registered; logs:\n{}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let v =
        configuration(&sim, "ValidatingWebhookConfiguration").expect("validating configuration");
    assert_eq!(
        names(&v),
        [
            "allow.example.com",
            "strict.example.com",
            "warn.example.com"
        ]
    );
    let ca_bundle = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(pki.path("ca.crt")).expect("ca"))
    };
    assert_eq!(
        v["webhooks"][1],
        json!({
            "name": "strict.example.com",
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"], "scope": "Namespaced"}],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 10,
            "matchPolicy": "Equivalent",
            "admissionReviewVersions": ["v1", "v1beta1"],
            "objectSelector": {"matchLabels": {"checked": "yes"}},
            "clientConfig": {
                "service": {"namespace": "webhooks", "name": "shell-operator-validating-svc", "path": "/hooks/strict-example-com"},
                "caBundle": ca_bundle
            }
        })
    );
    assert_eq!(
        v["webhooks"][0]["failurePolicy"], "Ignore",
        "the flag is the default"
    );
    let m = configuration(&sim, "MutatingWebhookConfiguration").expect("mutating configuration");
    assert_eq!(names(&m), ["mutate.example.com"]);
    assert_eq!(
        m["webhooks"][0]["clientConfig"]["service"]["path"],
        "/hooks/mutate-example-com"
    );
    let first_rv = v["metadata"]["resourceVersion"].clone();
    op.signal(libc::SIGTERM);
    assert_eq!(op.wait_exit(Duration::from_secs(10)), Some(0));

    // Same bindings again: nothing is rewritten.
    let mut again = start(
        &hooks,
        &sim,
        &pki,
        &["--validating-webhook-failure-policy", "Ignore"],
    );
    again.wait_log("ValidatingWebhookConfiguration", Duration::from_secs(20));
    again.wait_log("MutatingWebhookConfiguration", Duration::from_secs(20));
    let v = configuration(&sim, "ValidatingWebhookConfiguration").expect("validating");
    assert_eq!(v["metadata"]["resourceVersion"], first_rv, "idempotent");
    again.signal(libc::SIGTERM);
    assert_eq!(again.wait_exit(Duration::from_secs(10)), Some(0));

    // "warn" and the mutating binding are gone.
    let fewer = [(
        "validate.sh",
        admission_hook(&["strict.example.com", "allow.example.com"], &[]),
    )];
    let op = start(&fewer, &sim, &pki, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = configuration(&sim, "ValidatingWebhookConfiguration").expect("validating");
        let m = configuration(&sim, "MutatingWebhookConfiguration").expect("mutating");
        if names(&v) == ["allow.example.com", "strict.example.com"] && names(&m).is_empty() {
            assert_eq!(
                v["webhooks"][0]["failurePolicy"], "Fail",
                "default flag value"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stale entries stay: {v} {m}\n{}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The API server refuses the first call: registration is retried (after 2 s,
/// flant's first delay) and lands.
#[test]
fn registration_is_retried_when_the_api_server_refuses() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    sim.fail_next(1, 403);
    let op = start(
        &[("validate.sh", admission_hook(&["allow.example.com"], &[]))],
        &sim,
        &pki,
        &[],
    );
    let line = op.wait_log("will retry", Duration::from_secs(20));
    assert!(
        line.contains("ValidatingWebhookConfiguration") && line.contains("403"),
        "{line}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while configuration(&sim, "ValidatingWebhookConfiguration").is_none() {
        assert!(
            Instant::now() < deadline,
            "never registered:\n{}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
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
    let op = start(
        &[("patching.sh", hook("p", &config, body))],
        &sim,
        &pki,
        &[],
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
