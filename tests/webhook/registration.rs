//! Registration of the admission webhooks: the Validating and Mutating
//! WebhookConfiguration objects as they land in kube-sim, across restarts with
//! changed hooks, and retries when the API server refuses.

use crate::common;
use crate::webhook_common;

use common::hook;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use webhook_common::{Pki, admission_hook, start};

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
    // The onStartup hook tells when startup is over (signals are handled from then on).
    let hooks = [
        (
            "validate.sh",
            admission_hook(
                &[
                    "warn.example.com",
                    "strict.example.com",
                    "allow.example.com",
                ],
                &["mutate.example.com"],
            ),
        ),
        (
            "startup.sh",
            hook("s", "configVersion: v1\nonStartup: 1", ""),
        ),
    ];
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
    op.wait_log("startup finished", Duration::from_secs(20));
    op.signal(libc::SIGTERM);
    assert_eq!(
        op.wait_exit(Duration::from_secs(10)),
        Some(0),
        "{}",
        op.logs()
    );

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
    again.wait_log("startup finished", Duration::from_secs(20));
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
