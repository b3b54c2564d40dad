//! CRD conversion webhooks end to end: the CRD patch as it lands in kube-sim
//! (also for a CRD created after startup), and real ConversionReviews over HTTPS
//! converted through a multi-step chain of the hook's rules.

use crate::common;
use crate::webhook_common;

use common::hook;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use webhook_common::{Pki, curl, start};

const CRD: &str = "crontabs.stable.example.com";

/// The seed's example rules; the hook sets apiVersion to toVersion (with the
/// desired group for a bare version) and records each step in `spec.steps`.
fn conversion_hook() -> String {
    let config = format!(
        "configVersion: v1\nkubernetesCustomResourceConversion:\n- name: conversions\n  crdName: {CRD}\n  conversions:\n  - fromVersion: unstable.crontab.io/v1beta1\n    toVersion: stable.example.com/v1beta1\n  - fromVersion: stable.example.com/v1beta1\n    toVersion: stable.example.com/v1beta2\n  - fromVersion: v1beta2\n    toVersion: v1\n- name: late\n  crdName: lates.late.example.com\n  conversions:\n  - fromVersion: late.example.com/v1\n    toVersion: late.example.com/v2\n"
    );
    let body = r#"grep -q '"crash":true' "$BINDING_CONTEXT_PATH" && { echo 'crashed' >&2; exit 1; }
jq -c '.[0] as $c
  | ($c.toVersion | if contains("/") then . else ($c.review.request.desiredAPIVersion | split("/")[0]) + "/" + $c.toVersion end) as $to
  | if any($c.review.request.objects[]; .spec.fail == true) then {failedMessage: "cannot convert objects with spec.fail"}
    else {convertedObjects: [$c.review.request.objects[] | .apiVersion = $to | .spec.steps += [$c.toVersion]]} end' \
  "$BINDING_CONTEXT_PATH" > "$CONVERSION_RESPONSE_PATH""#;
    hook("c", &config, body)
}

fn crd(name: &str, group: &str, plural: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({"name": v, "served": true, "storage": i + 1 == versions.len(),
                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": "Thing", "listKind": "ThingList"},
                 "versions": versions}
    })
}

fn object(name: &str, api_version: &str) -> Value {
    json!({"apiVersion": api_version, "kind": "CronTab", "metadata": {"name": name, "namespace": "ns"}, "spec": {"steps": []}})
}

fn review(uid: &str, desired: &str, objects: &[Value]) -> String {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
           "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}})
    .to_string()
}

fn wait_conversion(sim: &kube_sim::Sim, name: &str, logs: impl Fn() -> String) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = sim
            .get(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "",
                name,
            )
            .map(|c| c["spec"]["conversion"].clone())
            .unwrap_or(Value::Null);
        if got["strategy"] == "Webhook" {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{name} not patched: {got}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Objects at three versions, one already converted: each goes through its own
/// chain (three steps, one step, none) and comes back in request order.
#[test]
fn conversion_chain_and_crd_patch() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    sim.create(crd(
        CRD,
        "stable.example.com",
        "crontabs",
        &["v1beta1", "v1beta2", "v1"],
    ))
    .expect("crd");
    let op = start(&[("convert.sh", conversion_hook())], &sim, &pki, &[]);
    let port = op.port_from_log("conversion webhook server listening");

    let ca_bundle = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(pki.path("ca.crt")).expect("ca"))
    };
    assert_eq!(
        wait_conversion(&sim, CRD, || op.logs()),
        json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"namespace": "webhooks", "name": "shell-operator-conversion-svc", "path": format!("/{CRD}")},
                             "caBundle": ca_bundle},
            "conversionReviewVersions": ["v1", "v1beta1"]}})
    );

    let objects = [
        object("a", "unstable.crontab.io/v1beta1"),
        object("b", "stable.example.com/v1"),
        object("c", "stable.example.com/v1beta2"),
    ];
    let a = curl(
        port,
        &format!("/{CRD}"),
        &review("u-1", "stable.example.com/v1", &objects),
        &pki.path("ca.crt"),
        &[],
    );
    assert_eq!(a.status, 200, "{} {}", a.body, a.stderr);
    let converted = |name: &str, steps: &[&str]| json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name, "namespace": "ns"}, "spec": {"steps": steps}});
    assert_eq!(
        a.json(),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {
        "uid": "u-1",
        "result": {"status": "Success"},
        "convertedObjects": [
            converted("a", &["stable.example.com/v1beta1", "stable.example.com/v1beta2", "v1"]),
            converted("b", &[]),
            converted("c", &["v1"]),
        ]}})
    );
    // Four hook runs: a's three steps, then c's one; each context names its rule.
    let steps: Vec<(String, String, usize)> = op
        .runs()
        .iter()
        .map(|(_, c)| {
            let c = &c[0];
            assert_eq!(
                (c["binding"].as_str(), c["type"].as_str()),
                (Some("conversions"), Some("Conversion"))
            );
            assert_eq!(c["review"]["kind"], "ConversionReview");
            assert_eq!(
                c["review"]["request"]["desiredAPIVersion"],
                "stable.example.com/v1"
            );
            let n = c["review"]["request"]["objects"]
                .as_array()
                .map_or(0, Vec::len);
            (
                c["fromVersion"].as_str().unwrap_or("").into(),
                c["toVersion"].as_str().unwrap_or("").into(),
                n,
            )
        })
        .collect();
    let s = |f: &str, t: &str| (f.to_string(), t.to_string(), 1);
    assert_eq!(
        steps,
        [
            s("unstable.crontab.io/v1beta1", "stable.example.com/v1beta1"),
            s("stable.example.com/v1beta1", "stable.example.com/v1beta2"),
            s("v1beta2", "v1"),
            s("v1beta2", "v1"),
        ]
    );

    // Failures: the hook's failedMessage, and a version no rule reaches.
    let mut bad = object("d", "stable.example.com/v1beta2");
    bad["spec"]["fail"] = true.into();
    let a = curl(
        port,
        &format!("/{CRD}"),
        &review("u-2", "stable.example.com/v1", &[bad]),
        &pki.path("ca.crt"),
        &[],
    );
    assert_eq!(
        a.json()["response"],
        json!({"uid": "u-2", "result": {"status": "Failure", "message": "cannot convert objects with spec.fail"}})
    );
    let a = curl(
        port,
        &format!("/{CRD}"),
        &review(
            "u-3",
            "stable.example.com/v1",
            &[object("e", "stable.example.com/v0")],
        ),
        &pki.path("ca.crt"),
        &[],
    );
    assert_eq!(
        a.json()["response"]["result"]["message"],
        format!(
            "no conversion path from stable.example.com/v0 to stable.example.com/v1 for {CRD} in the hooks' conversions"
        )
    );

    // A review without request.uid is refused before any hook runs.
    let no_uid = review(
        "",
        "stable.example.com/v1",
        &[object("g", "stable.example.com/v1beta2")],
    );
    let a = curl(port, &format!("/{CRD}"), &no_uid, &pki.path("ca.crt"), &[]);
    assert_eq!(
        (a.status, a.body.as_str()),
        (400, "Missing parameters: request.uid")
    );

    // A hook that exits non-zero.
    let mut crash = object("f", "stable.example.com/v1beta2");
    crash["spec"]["crash"] = true.into();
    let a = curl(
        port,
        &format!("/{CRD}"),
        &review("u-4", "stable.example.com/v1", &[crash]),
        &pki.path("ca.crt"),
        &[],
    );
    assert_eq!(
        a.json()["response"],
        json!({"uid": "u-4", "result": {"status": "Failure", "message":
            "hook 'convert.sh' (binding 'conversions', v1beta2 -> v1) failed to convert to stable.example.com/v1: exit status 1"}})
    );

    // A CRD created after startup is waited for, then patched.
    sim.create(crd(
        "lates.late.example.com",
        "late.example.com",
        "lates",
        &["v1", "v2"],
    ))
    .expect("late crd");
    let late = wait_conversion(&sim, "lates.late.example.com", || op.logs());
    assert_eq!(
        late["webhook"]["clientConfig"]["service"]["path"],
        "/lates.late.example.com"
    );
}
