//! `examples/webhooks` end to end: the real binary on the example hooks against
//! kube-sim seeded with the example CRD, with the example request bodies sent by
//! curl. Keeps the example and its README honest.

use crate::webhook_common;

use base64::Engine;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use webhook_common::{Pki, curl, start};

fn example(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/webhooks")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn webhook_example_answers_and_registers() {
    let pki = Pki::make();
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/webhooks/seed");
    let sim = kube_sim::Sim::start_with(kube_sim::SimOptions {
        seed_dir: Some(seed),
        ..Default::default()
    })
    .expect("kube-sim");
    let hooks = [
        ("configmap-policy.sh", example("hooks/configmap-policy.sh")),
        (
            "crontab-conversion.sh",
            example("hooks/crontab-conversion.sh"),
        ),
    ];
    let op = start(&hooks, &sim, &pki, &[]);
    let admission = op.port_from_log("admission webhook server listening");
    let conversion = op.port_from_log("conversion webhook server listening");
    let ca = pki.path("ca.crt");

    let policy = "/hooks/configmap-policy-example-com";
    let a = curl(
        admission,
        policy,
        &example("requests/configmap-with-password.json"),
        &ca,
        &[],
    );
    assert_eq!(
        a.json()["response"],
        json!({"uid": "7c5e0b4e-1", "allowed": false,
               "status": {"code": 403, "message": "ConfigMap db holds a password: use a Secret"}})
    );
    let a = curl(
        admission,
        policy,
        &example("requests/configmap-plain.json"),
        &ca,
        &[],
    );
    assert_eq!(
        a.json()["response"],
        json!({"uid": "7c5e0b4e-2", "allowed": true, "warnings": ["ConfigMap settings has no labels"]})
    );
    let label = "/hooks/configmap-label-example-com";
    let a = curl(
        admission,
        label,
        &example("requests/configmap-plain.json"),
        &ca,
        &[],
    );
    let patch = a.json()["response"]["patch"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let patch: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("base64"),
    )
    .expect("json patch");
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/labels", "value": {"checked-by": "shell-operator"}}])
    );

    let c = curl(
        conversion,
        "/crontabs.stable.example.com",
        &example("requests/crontab-conversion.json"),
        &ca,
        &[],
    );
    assert_eq!(
        c.json()["response"],
        json!({"uid": "42f90c87-87f5-4686-8109-eba065c7fa6e", "result": {"status": "Success"},
               "convertedObjects": [{"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                   "metadata": {"name": "crontab-v1alpha1", "namespace": "example-210"},
                   "spec": {"cronSpec": "* * * * */5", "imageName": ["repo.example.com/my-awesome-cron-image:v1"]}}]})
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let crd = sim.get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "",
            "crontabs.stable.example.com",
        );
        let cfg = sim.get(
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            "",
            "shell-operator-hooks-hooks",
        );
        if crd.is_some_and(|c| c["spec"]["conversion"]["strategy"] == "Webhook") && cfg.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "not registered:\n{}", op.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}
