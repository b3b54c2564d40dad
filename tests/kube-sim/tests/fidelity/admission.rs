//! Fidelity of kube-sim's admission and conversion webhooks (issue 14): the
//! real kubectl 1.35 against kube-sim, which calls the tiny independent webhook
//! server of `hook_server` over TLS. Checked: denial messages and warnings as
//! kubectl prints them, mutations in the stored object, failurePolicy with the
//! server down, timeoutSeconds, dry run vs sideEffects, selectors (over HTTP), the
//! AdmissionReview fields the Kubernetes docs list, and CRD objects read and
//! written across versions (get, list, watch) through a conversion webhook.

use crate::common::{self, Client, Run, cm, run, temp_dir, tool};
use crate::hook_server::{HookServer, admission_answer};
use base64::Engine;
use kube_sim::Sim;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A Sim, a kubeconfig and a cache dir for kubectl.
struct Env {
    sim: Sim,
    dir: common::TempDir,
    kubectl: PathBuf,
}

impl Env {
    fn new(name: &str) -> Env {
        let sim = Sim::start();
        let dir = temp_dir(name);
        sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
        Env {
            sim,
            dir,
            kubectl: tool("kubectl", "KUBECTL"),
        }
    }

    fn kubectl(&self, args: &[&str]) -> Run {
        self.kubectl_timed(args, 30)
    }

    fn ok(&self, args: &[&str]) -> Run {
        let r = self.kubectl(args);
        assert!(r.ok, "kubectl {args:?}: {}\n{}", r.stdout, r.stderr);
        r
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    /// Service `hooks` in namespace `test` (port 443 → 8443) whose Endpoints point at `port`.
    fn service(&self, port: u16) {
        self.sim
            .create(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "hooks", "namespace": "test"},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}))
            .unwrap();
        self.sim
            .create(json!({"apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": "hooks", "namespace": "test"},
                "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]}))
            .unwrap();
    }

    /// Creates or replaces a webhook configuration of `kind` named `name`.
    fn configure(&self, kind: &str, name: &str, webhooks: Value) {
        let obj = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                         "metadata": {"name": name}, "webhooks": webhooks});
        let _ = self
            .sim
            .delete("admissionregistration.k8s.io/v1", kind, "", name);
        self.sim.create(obj).unwrap();
    }
}

fn service_config(h: &HookServer, path: &str) -> Value {
    json!({"service": {"name": "hooks", "namespace": "test", "path": path, "port": 443}, "caBundle": h.ca_bundle})
}

fn url_config(h: &HookServer, port: u16, path: &str) -> Value {
    json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": h.ca_bundle})
}

fn webhook(name: &str, cc: Value, operations: Value, extra: Value) -> Value {
    let mut w = json!({"name": name, "clientConfig": cc, "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": operations,
                   "resources": ["configmaps"], "scope": "*"}]});
    if let (Some(m), Some(e)) = (w.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    w
}

/// Mutating adds a label; validating refuses a `password` key and warns otherwise.
fn policy(path: &str, review: &Value) -> Value {
    let obj = &review["request"]["object"];
    match path {
        p if p.starts_with("/mutate") => {
            let patch = json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]);
            let b64 = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            admission_answer(review, json!({"patch": b64, "patchType": "JSONPatch"}))
        }
        p if p.starts_with("/warn") => {
            admission_answer(review, json!({"warnings": ["first webhook warns"]}))
        }
        _ if obj["data"]["password"].is_string() => admission_answer(
            review,
            json!({"allowed": false, "status": {"code": 403, "message": "no passwords in ConfigMaps"}}),
        ),
        _ => admission_answer(review, json!({"warnings": ["configmap looks fine"]})),
    }
}

fn reviews(h: &HookServer, prefix: &str) -> Vec<Value> {
    h.received()
        .into_iter()
        .filter(|(p, _)| p.starts_with(prefix))
        .map(|(_, v)| v)
        .collect()
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: NAME\n  labels: {app: demo}\ndata:\n  DATA\n";

/// kubectl apply: a denial prints the webhook's message, the mutation is stored, the
/// warning is printed; the AdmissionReviews carry the fields the docs list, for
/// CREATE (mutating, then validating on the mutated object), UPDATE and DELETE.
#[test]
fn kubectl_apply_is_admitted_by_webhooks() {
    let e = Env::new("adm-apply");
    let h = HookServer::start("apply", policy);
    e.service(h.port);
    let ops = json!(["CREATE", "UPDATE", "DELETE"]);
    e.configure(
        "MutatingWebhookConfiguration",
        "m",
        json!([webhook(
            "label.test.io",
            url_config(&h, h.port, "/mutate"),
            json!(["CREATE"]),
            json!({})
        )]),
    );
    e.configure(
        "ValidatingWebhookConfiguration",
        "v",
        json!([webhook(
            "policy.test.io",
            service_config(&h, "/validate"),
            ops,
            json!({})
        )]),
    );

    let bad = e.file(
        "bad.yaml",
        &CM.replace("NAME", "bad")
            .replace("DATA", "password: hunter2"),
    );
    let r = e.kubectl(&["apply", "-f", &bad]);
    assert!(!r.ok, "denied create must fail: {}", r.stdout);
    assert!(
        r.stderr.contains(
            "admission webhook \"policy.test.io\" denied the request: no passwords in ConfigMaps"
        ),
        "{}",
        r.stderr
    );
    assert!(e.sim.get("v1", "ConfigMap", "default", "bad").is_none());

    let good = e.file(
        "good.yaml",
        &CM.replace("NAME", "good").replace("DATA", "color: blue"),
    );
    let r = e.ok(&["apply", "-f", &good]);
    assert!(
        r.stderr.contains("Warning: configmap looks fine"),
        "{}",
        r.stderr
    );
    let stored = e
        .sim
        .get("v1", "ConfigMap", "default", "good")
        .expect("stored");
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"app": "demo", "mutated": "yes"})
    );

    let m = reviews(&h, "/mutate").pop().expect("mutating review");
    assert_eq!(m["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(m["kind"], "AdmissionReview");
    let q = &m["request"];
    assert!(q["uid"].as_str().is_some_and(|u| u.len() >= 32), "uid {q}");
    let gvk = json!({"group": "", "version": "v1", "kind": "ConfigMap"});
    let gvr = json!({"group": "", "version": "v1", "resource": "configmaps"});
    assert_eq!((&q["kind"], &q["requestKind"]), (&gvk, &gvk));
    assert_eq!((&q["resource"], &q["requestResource"]), (&gvr, &gvr));
    assert!(q.get("subResource").is_none());
    assert_eq!(
        (&q["name"], &q["namespace"], &q["operation"]),
        (&json!("good"), &json!("default"), &json!("CREATE"))
    );
    assert!(
        q["userInfo"]["username"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert_eq!(q["object"]["data"], json!({"color": "blue"}));
    assert_eq!(q["object"]["metadata"]["labels"], json!({"app": "demo"}));
    assert_eq!(q["oldObject"], Value::Null);
    assert_eq!(q["dryRun"], false);
    assert_eq!(q["options"]["kind"], "CreateOptions");
    assert_eq!(q["options"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(q["options"]["fieldManager"], "kubectl-client-side-apply");

    let v = reviews(&h, "/validate").pop().expect("validating review");
    assert_eq!(
        v["request"]["object"]["metadata"]["labels"]["mutated"], "yes",
        "validating sees the mutation"
    );
    assert_ne!(v["request"]["uid"], q["uid"]);
    assert_eq!(
        v["request"]["object"]["metadata"]["uid"], stored["metadata"]["uid"],
        "validating webhooks see the object as stored"
    );

    let changed = e.file(
        "good2.yaml",
        &CM.replace("NAME", "good").replace("DATA", "color: red"),
    );
    e.ok(&["apply", "-f", &changed]);
    let u = reviews(&h, "/validate").pop().unwrap();
    let u = &u["request"];
    assert_eq!(
        (&u["operation"], &u["options"]["kind"]),
        (&json!("UPDATE"), &json!("PatchOptions"))
    );
    assert_eq!(
        (
            &u["object"]["data"]["color"],
            &u["oldObject"]["data"]["color"]
        ),
        (&json!("red"), &json!("blue"))
    );
    assert_eq!(
        reviews(&h, "/mutate").len(),
        2,
        "bad and good; the rule names CREATE only"
    );

    e.ok(&["delete", "configmap", "good"]);
    let d = reviews(&h, "/validate").pop().unwrap();
    let d = &d["request"];
    assert_eq!(
        (&d["operation"], &d["object"]),
        (&json!("DELETE"), &Value::Null)
    );
    assert_eq!(
        (&d["oldObject"]["metadata"]["name"], &d["options"]["kind"]),
        (&json!("good"), &json!("DeleteOptions"))
    );
}

fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// failurePolicy with the webhook down (Fail denies with kube-apiserver's
/// message, Ignore admits) and timeoutSeconds (a 3 s webhook with a 1 s timeout).
#[test]
fn failure_policy_and_timeout() {
    let e = Env::new("adm-fail");
    let h = HookServer::start("slow", |_, review| {
        std::thread::sleep(Duration::from_secs(3));
        admission_answer(review, json!({}))
    });
    let down = url_config(&h, closed_port(), "/x");
    let set = |policy: &str, cc: &Value| {
        let extra = json!({"failurePolicy": policy, "timeoutSeconds": 1});
        e.configure(
            "ValidatingWebhookConfiguration",
            "v",
            json!([webhook(
                "gate.test.io",
                cc.clone(),
                json!(["CREATE"]),
                extra
            )]),
        );
    };
    set("Fail", &down);
    let r = e.kubectl(&["create", "configmap", "a"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("Internal error occurred: failed calling webhook \"gate.test.io\": failed to call webhook: Post \"https://127.0.0.1:"), "{}", r.stderr);
    set("Ignore", &down);
    e.ok(&["create", "configmap", "a"]);

    let slow = url_config(&h, h.port, "/slow");
    set("Fail", &slow);
    let t = Instant::now();
    let r = e.kubectl(&["create", "configmap", "b"]);
    assert!(
        !r.ok && r.stderr.contains("context deadline exceeded"),
        "{}",
        r.stderr
    );
    assert!(
        t.elapsed() < Duration::from_millis(2800),
        "timeout not honoured: {:?}",
        t.elapsed()
    );
    set("Ignore", &slow);
    let t = Instant::now();
    e.ok(&["create", "configmap", "b"]);
    assert!(
        t.elapsed() < Duration::from_millis(2800),
        "{:?}",
        t.elapsed()
    );
    assert!(e.sim.get("v1", "ConfigMap", "default", "b").is_some());
}

/// Server-side dry run: refused for a webhook with side effects, sent with
/// `dryRun: true` to one with none; nothing is stored either way.
#[test]
fn dry_run_and_side_effects() {
    let e = Env::new("adm-dry");
    let h = HookServer::start("dry", policy);
    let cc = url_config(&h, h.port, "/validate");
    let set = |effects: &str| {
        e.configure(
            "ValidatingWebhookConfiguration",
            "v",
            json!([webhook(
                "dry.test.io",
                cc.clone(),
                json!(["CREATE"]),
                json!({"sideEffects": effects})
            )]),
        );
    };
    set("Some");
    let r = e.kubectl(&["create", "configmap", "x", "--dry-run=server"]);
    assert!(
        !r.ok
            && r.stderr
                .contains("admission webhook \"dry.test.io\" does not support dry run"),
        "{}",
        r.stderr
    );
    set("NoneOnDryRun");
    e.ok(&["create", "configmap", "x", "--dry-run=server"]);
    let q = reviews(&h, "/validate").pop().expect("review");
    assert_eq!(q["request"]["dryRun"], true);
    assert_eq!(q["request"]["options"]["dryRun"], json!(["All"]));
    assert!(e.sim.get("v1", "ConfigMap", "default", "x").is_none());
}

/// namespaceSelector (the Namespace's labels), objectSelector (the object's
/// labels) and the configuration kinds themselves being exempt.
#[test]
fn selectors_choose_the_webhooks() {
    let e = Env::new("adm-sel");
    let h = HookServer::start("sel", policy);
    let c = Client::new(&e.sim.url());
    for (ns, labels) in [("team-a", json!({"team": "a"})), ("team-b", json!({}))] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}});
        assert_eq!(c.post("/api/v1/namespaces", &obj).code, 201);
    }
    let by_ns = json!({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}});
    let by_obj = json!({"objectSelector": {"matchLabels": {"checked": "yes"}}});
    e.configure(
        "ValidatingWebhookConfiguration",
        "v",
        json!([
            webhook(
                "ns.test.io",
                url_config(&h, h.port, "/validate/ns"),
                json!(["*"]),
                by_ns
            ),
            webhook(
                "obj.test.io",
                url_config(&h, h.port, "/validate/obj"),
                json!(["*"]),
                by_obj
            ),
        ]),
    );
    for (ns, name, labels) in [
        ("team-a", "a1", json!({})),
        ("team-b", "b1", json!({})),
        ("team-b", "b2", json!({"checked": "yes"})),
    ] {
        let a = c.post(
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            &cm(ns, name, labels),
        );
        assert_eq!(a.code, 201, "{:?}", a.body);
    }
    let got: Vec<(String, String)> = h
        .received()
        .into_iter()
        .map(|(p, r)| (p, r["request"]["name"].as_str().unwrap_or("").to_string()))
        .collect();
    assert_eq!(
        got,
        [
            ("/validate/ns?timeout=10s".to_string(), "a1".to_string()),
            ("/validate/obj?timeout=10s".into(), "b2".into())
        ]
    );
    let denied = c.post("/api/v1/namespaces/team-a/configmaps", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {"password": "x"}}));
    assert_eq!(
        (denied.code, &denied.body["status"]),
        (403, &json!("Failure"))
    );

    // deletecollection admits each object: only b2 matches the objectSelector.
    let before = h.received().len();
    assert_eq!(c.delete("/api/v1/namespaces/team-b/configmaps").code, 200);
    let after: Vec<(String, Value)> = h.received().split_off(before);
    assert_eq!(after.len(), 1, "{after:?}");
    let q = &after[0].1["request"];
    assert_eq!(
        (
            &q["operation"],
            &q["name"],
            &q["oldObject"]["metadata"]["name"]
        ),
        (&json!("DELETE"), &json!("b2"), &json!("b2"))
    );
    assert!(e.sim.list("v1", "ConfigMap", "team-b").is_empty());
}

/// Warnings from an earlier webhook reach kubectl even when a later one denies.
#[test]
fn warnings_before_a_denial_are_printed() {
    let e = Env::new("adm-warn");
    let h = HookServer::start("warn", policy);
    e.configure(
        "ValidatingWebhookConfiguration",
        "v",
        json!([
            webhook(
                "a-warn.test.io",
                url_config(&h, h.port, "/warn"),
                json!(["CREATE"]),
                json!({})
            ),
            webhook(
                "b-policy.test.io",
                url_config(&h, h.port, "/validate"),
                json!(["CREATE"]),
                json!({})
            ),
        ]),
    );
    let r = e.kubectl(&["create", "configmap", "p", "--from-literal=password=x"]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains("Warning: first webhook warns"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(
            "admission webhook \"b-policy.test.io\" denied the request: no passwords in ConfigMaps"
        ),
        "{}",
        r.stderr
    );
}

const CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "crontabs.stable.example.com"},
 "spec": {"group": "stable.example.com", "scope": "Namespaced",
  "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList"},
  "versions": [
   {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
   {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
  "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": CC}}}}"#;

/// v1 keeps the schedule in `spec.cron`, v2 in `spec.schedule`; "broken" fails.
fn convert(path: &str, review: &Value) -> Value {
    if path.starts_with("/validate") {
        return admission_answer(review, json!({}));
    }
    let q = &review["request"];
    let to = q["desiredAPIVersion"].as_str().unwrap_or("").to_string();
    let objs = q["objects"].as_array().cloned().unwrap_or_default();
    let uid = q["uid"].clone();
    if objs.iter().any(|o| o["metadata"]["name"] == "broken") {
        return json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Failure", "message": "cannot convert broken"}}});
    }
    let converted: Vec<Value> = objs
        .into_iter()
        .map(|mut o| {
            let spec = o["spec"]
                .as_object_mut()
                .map(std::mem::take)
                .unwrap_or_default();
            let when = spec
                .get("cron")
                .or(spec.get("schedule"))
                .cloned()
                .unwrap_or(Value::Null);
            let field = if to.ends_with("/v2") {
                "schedule"
            } else {
                "cron"
            };
            o["spec"] = json!({ field: when });
            o["apiVersion"] = json!(to);
            o
        })
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": converted}})
}

/// A CronTab written as v2 is stored as v1 and read back (get, list, watch) as v2
/// through the conversion webhook; a failing conversion gives kube-apiserver's
/// error; an admission rule for v1 only still sees a v2 request (matchPolicy
/// Equivalent) with the object converted to v1.
#[test]
fn kubectl_reads_and_writes_across_versions_through_conversion() {
    let e = Env::new("adm-conv");
    let h = HookServer::start("conv", convert);
    e.service(h.port);
    let crd: Value =
        serde_json::from_str(&CRD.replace("CC", &service_config(&h, "/convert").to_string()))
            .unwrap();
    e.sim.create(crd).unwrap();
    let mut rule = webhook(
        "crontabs.test.io",
        url_config(&h, h.port, "/validate"),
        json!(["CREATE"]),
        json!({}),
    );
    rule["rules"][0] = json!({"apiGroups": ["stable.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["crontabs"]});
    e.configure("ValidatingWebhookConfiguration", "v", json!([rule]));

    let f = e.file("c.yaml", "apiVersion: stable.example.com/v2\nkind: CronTab\nmetadata: {name: c1}\nspec: {schedule: '*/5 * * * *'}\n");
    e.ok(&["apply", "-f", &f]);
    let stored = e.sim.list("stable.example.com/v1", "CronTab", "default");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["apiVersion"], "stable.example.com/v1");
    assert_eq!(stored[0]["spec"], json!({"cron": "*/5 * * * *"}));
    let v = reviews(&h, "/validate").pop().expect("admission review");
    assert_eq!(v["request"]["kind"]["version"], "v1");
    assert_eq!(v["request"]["requestKind"]["version"], "v2");
    assert_eq!(
        v["request"]["object"]["spec"],
        json!({"cron": "*/5 * * * *"})
    );

    let got: Value = serde_json::from_str(
        &e.ok(&["get", "crontabs.v2.stable.example.com", "c1", "-o", "json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(
        (&got["apiVersion"], &got["spec"]),
        (
            &json!("stable.example.com/v2"),
            &json!({"schedule": "*/5 * * * *"})
        )
    );
    let list: Value = serde_json::from_str(
        &e.ok(&["get", "crontabs.v2.stable.example.com", "-o", "json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(list["items"][0]["spec"], json!({"schedule": "*/5 * * * *"}));
    let review = reviews(&h, "/convert").pop().unwrap();
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(
        review["request"]["desiredAPIVersion"],
        "stable.example.com/v2"
    );

    e.ok(&[
        "patch",
        "crontabs.v2.stable.example.com",
        "c1",
        "--type=merge",
        "-p",
        r#"{"spec":{"schedule":"1 * * * *"}}"#,
    ]);
    let stored = e
        .sim
        .get("stable.example.com/v1", "CronTab", "default", "c1")
        .unwrap();
    assert_eq!(
        stored["spec"],
        json!({"cron": "1 * * * *"}),
        "a v2 patch lands on the v2 form"
    );

    let sim_url = e.sim.url();
    let bump = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let c = Client::new(&sim_url);
        let p = c.patch(
            "/apis/stable.example.com/v1/namespaces/default/crontabs/c1",
            "application/merge-patch+json",
            r#"{"spec":{"cron":"0 * * * *"}}"#,
        );
        assert_eq!(p.code, 200, "{:?}", p.body);
    });
    let w = e.kubectl_timed(
        &[
            "get",
            "crontabs.v2.stable.example.com",
            "c1",
            "-w",
            "-o",
            "jsonpath={.spec.schedule}{\"\\n\"}",
        ],
        4,
    );
    bump.join().unwrap();
    e.sim.set_bookmark_interval(Duration::from_millis(20));
    let rx = Client::new(&e.sim.url()).watch(
        "/apis/stable.example.com/v2/namespaces/default/crontabs?watch=true&allowWatchBookmarks=true",
    );
    let added = common::next(&rx);
    assert_eq!(added["object"]["spec"], json!({"schedule": "0 * * * *"}));
    let bookmark = common::next(&rx);
    assert_eq!(bookmark["object"]["apiVersion"], "stable.example.com/v2");
    let converted_names: Vec<Value> = reviews(&h, "/convert")
        .iter()
        .flat_map(|r| {
            r["request"]["objects"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    assert!(
        converted_names.iter().all(|n| n == "c1"),
        "only objects are converted, never bookmarks: {converted_names:?}"
    );
    assert!(
        w.stdout.lines().any(|l| l == "0 * * * *"),
        "watch output: {:?} {}",
        w.stdout,
        w.stderr
    );

    e.sim
        .create(json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "broken", "namespace": "default"}, "spec": {"cron": "x"}}))
        .unwrap();
    let r = e.kubectl(&["get", "crontabs.v2.stable.example.com", "broken"]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains("Error from server: conversion webhook for stable.example.com/v1, Kind=CronTab failed: cannot convert broken"),
        "{}",
        r.stderr
    );
}

impl Env {
    /// kubectl killed after `secs` (for `get -w`), output so far.
    fn kubectl_timed(&self, args: &[&str], secs: u64) -> Run {
        let cache = format!("--cache-dir={}", self.dir.join("cache").display());
        let mut all = vec![cache.as_str()];
        all.extend_from_slice(args);
        let env = [
            (
                "KUBECONFIG",
                self.dir.join("kubeconfig").display().to_string(),
            ),
            ("HOME", self.dir.display().to_string()),
        ];
        run(&self.kubectl, &all, &env, secs)
    }
}

/// A Service reached through an EndpointSlice (no Endpoints object), and the
/// certificate checked against `<service>.<namespace>.svc`: the same server
/// behind a Service whose name the certificate lacks fails TLS verification.
#[test]
fn service_routing_through_endpoint_slices_and_name_verification() {
    let e = Env::new("adm-slice");
    let h = HookServer::start("slice", policy);
    let c = Client::new(&e.sim.url());
    for name in ["hooks", "other"] {
        e.sim
            .create(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": "test"},
                "spec": {"ports": [{"name": "https", "port": 8443, "targetPort": 9999}]}}))
            .unwrap();
        e.sim
            .create(
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": format!("{name}-x1"), "namespace": "test",
                             "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
                "ports": [{"name": "https", "port": h.port}]}),
            )
            .unwrap();
    }
    let cc = |svc: &str| json!({"service": {"name": svc, "namespace": "test", "path": "/validate", "port": 8443}, "caBundle": h.ca_bundle});
    e.configure(
        "ValidatingWebhookConfiguration",
        "v",
        json!([webhook(
            "slice.test.io",
            cc("hooks"),
            json!(["CREATE"]),
            json!({})
        )]),
    );
    let a = c.post("/api/v1/namespaces/default/configmaps", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {"password": "x"}}));
    assert_eq!(a.code, 403, "{:?}", a.body);
    assert_eq!(
        a.body["message"],
        "admission webhook \"slice.test.io\" denied the request: no passwords in ConfigMaps"
    );

    e.configure(
        "ValidatingWebhookConfiguration",
        "v",
        json!([webhook(
            "other.test.io",
            cc("other"),
            json!(["CREATE"]),
            json!({})
        )]),
    );
    let a = c.post(
        "/api/v1/namespaces/default/configmaps",
        &cm("default", "q", json!({})),
    );
    assert_eq!(
        (a.code, &a.body["reason"]),
        (500, &json!("InternalError")),
        "{:?}",
        a.body
    );
    let msg = a.body["message"].as_str().unwrap_or("");
    assert!(msg.starts_with("Internal error occurred: failed calling webhook \"other.test.io\": failed to call webhook: Post \"https://other.test.svc:8443/validate?timeout=10s\": "), "{msg}");
    assert!(msg.contains("certificate"), "a name mismatch: {msg}");
    assert_eq!(
        h.received().len(),
        1,
        "the mismatched server never got a request"
    );
}

/// A rule naming `deployments/scale`: `kubectl scale` reaches the webhook with
/// autoscaling/v1 Scale objects; a denial stops it, an allowed scale lands, and
/// other updates of the Deployment do not match.
#[test]
fn scale_subresource_is_admitted() {
    let e = Env::new("adm-scale");
    let h = HookServer::start("scale", |_, review| {
        let replicas = review["request"]["object"]["spec"]["replicas"]
            .as_i64()
            .unwrap_or(0);
        match replicas {
            r if r > 5 => admission_answer(
                review,
                json!({"allowed": false, "status": {"message": "at most 5 replicas"}}),
            ),
            _ => admission_answer(review, json!({})),
        }
    });
    let mut w = webhook(
        "scale.test.io",
        url_config(&h, h.port, "/scale"),
        json!(["UPDATE"]),
        json!({}),
    );
    w["rules"][0] = json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments/scale"]});
    e.configure("ValidatingWebhookConfiguration", "v", json!([w]));
    e.sim
        .create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
        .unwrap();
    let r = e.kubectl(&["scale", "deployment", "web", "--replicas=9"]);
    assert!(!r.ok);
    assert!(
        r.stderr
            .contains("admission webhook \"scale.test.io\" denied the request: at most 5 replicas"),
        "{}",
        r.stderr
    );
    e.ok(&["scale", "deployment", "web", "--replicas=3"]);
    let stored = e
        .sim
        .get("apps/v1", "Deployment", "default", "web")
        .unwrap();
    assert_eq!(stored["spec"]["replicas"], 3);
    let q = reviews(&h, "/scale").pop().unwrap()["request"].clone();
    assert_eq!(
        q["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        q["resource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(
        (&q["subResource"], &q["requestSubResource"]),
        (&json!("scale"), &json!("scale"))
    );
    assert_eq!(
        (&q["object"]["kind"], &q["object"]["spec"]["replicas"]),
        (&json!("Scale"), &json!(3))
    );
    assert_eq!(q["oldObject"]["spec"]["replicas"], 1);
    let seen = h.received().len();
    e.ok(&["label", "deployment", "web", "tier=front"]);
    assert_eq!(
        h.received().len(),
        seen,
        "the main resource does not match deployments/scale"
    );
}

/// A webhook that matches everything and is down (failurePolicy Fail) blocks
/// ConfigMaps but never the configuration kinds, so it can still be removed.
#[test]
fn configuration_kinds_are_never_admitted() {
    let e = Env::new("adm-exempt");
    let h = HookServer::start("exempt", policy);
    let mut w = webhook(
        "all.test.io",
        url_config(&h, closed_port(), "/x"),
        json!(["*"]),
        json!({}),
    );
    w["rules"][0] =
        json!({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]});
    e.configure("ValidatingWebhookConfiguration", "all", json!([w]));
    let r = e.kubectl(&["create", "configmap", "blocked"]);
    assert!(
        !r.ok && r.stderr.contains("failed calling webhook \"all.test.io\""),
        "{}",
        r.stderr
    );
    e.ok(&["create", "-f", &e.file("m.json", r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"}, "webhooks": []}"#)]);
    e.ok(&["delete", "validatingwebhookconfiguration", "all"]);
    e.ok(&["create", "configmap", "free"]);
}
