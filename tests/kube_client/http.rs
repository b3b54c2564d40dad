//! The HTTP layer and object calls against kube-sim: retries on 500 and 429
//! (honouring Retry-After), no retry of non-idempotent calls on 5xx, QPS limiting
//! measured over time, request metrics, and create/get/replace/delete/patch
//! (merge, JSON, strategic, apply) on objects and the status/scale subresources.

use crate::kube_client_common;

use kube_client_common::*;
use kube_sim::Sim;
use serde_json::json;
use shell_operator::kube::{KubeSettings, Patch, PatchParams, Propagation};
use std::time::{Duration, Instant};

#[test]
fn get_retries_on_500_and_succeeds() {
    let sim = Sim::start();
    sim.create(cm("default", "a", "1", &[])).unwrap();
    let c = client_for(&sim);
    let r = c.resolve("v1", "ConfigMap", "t").unwrap();
    let api = c.api(&r, Some("default"));
    let before = sim.request_count();
    sim.fail_next(3, 500);
    assert_eq!(api.get("a").unwrap()["data"]["v"], "1");
    assert_eq!(
        sim.request_count() - before,
        4,
        "three failures then success"
    );
    assert_eq!(
        c.metrics()
            .requests
            .with_label_values(&["GET", "500"])
            .get(),
        3
    );
    assert_eq!(
        c.metrics()
            .requests
            .with_label_values(&["GET", "200"])
            .get(),
        2
    );
    // More failures than retries: the last Status comes back.
    sim.fail_next(20, 503);
    let e = api.get("a").unwrap_err();
    assert_eq!(e.status_code(), Some(503), "{e}");
    sim.fail_next(0, 503);
}

#[test]
fn create_is_not_retried_on_500_but_is_on_429_with_retry_after() {
    let sim = Sim::start();
    let c = client_for(&sim);
    let r = c.resolve("v1", "ConfigMap", "t").unwrap();
    let api = c.api(&r, Some("default"));
    sim.fail_next(1, 500);
    let before = sim.request_count();
    assert_eq!(
        api.create(&cm("default", "x", "1", &[]))
            .unwrap_err()
            .status_code(),
        Some(500)
    );
    assert_eq!(sim.request_count() - before, 1);
    assert!(sim.get("v1", "ConfigMap", "default", "x").is_none());

    // 429 carries Retry-After: 1; the client waits that long (not its own 20 ms).
    let c = client_with(&sim, &unlimited()).with_retry(Default::default());
    let api = c.api(&r, Some("default"));
    sim.fail_next(2, 429);
    let t0 = Instant::now();
    api.create(&cm("default", "x", "1", &[])).unwrap();
    let el = t0.elapsed();
    assert!(el >= Duration::from_millis(1900), "{el:?}");
    assert!(sim.get("v1", "ConfigMap", "default", "x").is_some());
}

/// With qps 10 and burst 3, four threads making requests for 1.5 s get no more than
/// burst + qps × elapsed through; and without a limit far more go through.
#[test]
fn qps_limit_caps_request_rate() {
    let sim = Sim::start();
    sim.create(cm("default", "a", "1", &[])).unwrap();
    let limited = client_with(
        &sim,
        &KubeSettings {
            qps: 10.0,
            burst: 3,
            ..unlimited()
        },
    );
    let r = limited.resolve("v1", "ConfigMap", "t").unwrap();
    let run = |c: &shell_operator::kube::Client| {
        let before = sim.request_count();
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    while t0.elapsed() < Duration::from_millis(1500) {
                        c.api(&r, Some("default")).get("a").unwrap();
                    }
                });
            }
        });
        (sim.request_count() - before, t0.elapsed().as_secs_f64())
    };
    let (n, secs) = run(&limited);
    let cap = 3.0 + 10.0 * secs + 1.0;
    assert!(
        (n as f64) <= cap,
        "{n} requests in {secs:.2}s, cap {cap:.1}"
    );
    assert!(
        (n as f64) >= 10.0 * 1.4,
        "{n} requests in {secs:.2}s: limiter too strict"
    );
    let waited = limited.metrics().rate_limiter.get_sample_count();
    assert!(waited as usize >= n);
    let (free, _) = run(&client_for(&sim));
    assert!(free > 2 * n, "unlimited {free} vs limited {n}");
}

#[test]
fn object_calls_and_patches() {
    let sim = Sim::start();
    let c = client_for(&sim);
    let cmr = c.resolve("", "cm", "t").unwrap();
    let api = c.api(&cmr, Some("ns1"));
    let created = api.create(&cm("ns1", "obj", "1", &[("a", "b")])).unwrap();
    assert_eq!(created["metadata"]["namespace"], "ns1");
    let e = api.create(&cm("ns1", "obj", "1", &[])).unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(e.to_string().contains("already exists"), "{e}");

    let mut got = api.get("obj").unwrap();
    got["data"]["v"] = json!("2");
    api.replace("obj", &got).unwrap();
    // A stale resourceVersion is a 409 with the server's message.
    got["data"]["v"] = json!("3");
    assert!(api.replace("obj", &got).unwrap_err().is_conflict());

    api.patch(
        "obj",
        &Patch::Merge(json!({"data": {"m": "merge"}})),
        &PatchParams::default(),
    )
    .unwrap();
    api.patch(
        "obj",
        &Patch::Json(json!([{"op": "add", "path": "/data/j", "value": "json"}])),
        &PatchParams::default(),
    )
    .unwrap();
    api.patch(
        "obj",
        &Patch::Strategic(json!({"data": {"s": "strategic"}})),
        &PatchParams::default(),
    )
    .unwrap();
    let applied = api
        .patch(
            "obj",
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "obj", "namespace": "ns1"}, "data": {"ap": "apply"}})),
            &PatchParams { field_manager: Some("tests".into()), force: true, ..Default::default() },
        )
        .unwrap();
    assert_eq!(applied["data"]["ap"], "apply");
    let stored = sim.get("v1", "ConfigMap", "ns1", "obj").unwrap();
    for (k, v) in [
        ("v", "2"),
        ("m", "merge"),
        ("j", "json"),
        ("s", "strategic"),
        ("ap", "apply"),
    ] {
        assert_eq!(stored["data"][k], v, "{k}: {stored}");
    }
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.contains("fieldManager=tests") && r.contains("force=true")),
        "{:#?}",
        sim.requests()
    );

    api.delete("obj", Some(Propagation::Foreground)).unwrap();
    assert!(sim.get("v1", "ConfigMap", "ns1", "obj").is_none());
    let e = api.get("obj").unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(e.to_string().contains("not found"), "{e}");
    assert!(api.delete("obj", None).unwrap_err().is_not_found());

    // Namespaced without a namespace is refused locally.
    assert!(c.api(&cmr, None).get("obj").is_err());
}

#[test]
fn cluster_scoped_and_subresources() {
    let sim = Sim::start();
    let c = client_for(&sim);
    let ns = c.resolve("", "Namespace", "t").unwrap();
    // The namespace argument is ignored for cluster-scoped resources.
    let api = c.api(&ns, Some("ignored"));
    api.create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
        .unwrap();
    assert_eq!(api.get("team").unwrap()["metadata"]["name"], "team");
    assert!(sim.get("v1", "Namespace", "", "team").is_some());

    let d = c.resolve("apps/v1", "Deployment", "t").unwrap();
    let api = c.api(&d, Some("team"));
    api.create(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
        .unwrap();
    api.patch_subresource(
        "status",
        "web",
        &Patch::Merge(json!({"status": {"readyReplicas": 1}})),
        &PatchParams::default(),
    )
    .unwrap();
    assert_eq!(
        sim.get("apps/v1", "Deployment", "team", "web").unwrap()["status"]["readyReplicas"],
        1
    );
    let mut st = api.get_subresource("status", "web").unwrap();
    st["status"]["observedGeneration"] = json!(7);
    api.replace_subresource("status", "web", &st).unwrap();
    assert_eq!(
        sim.get("apps/v1", "Deployment", "team", "web").unwrap()["status"]["observedGeneration"],
        7
    );
    api.patch_subresource(
        "scale",
        "web",
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
        &PatchParams::default(),
    )
    .unwrap();
    assert_eq!(
        api.get_subresource("scale", "web").unwrap()["spec"]["replicas"],
        4
    );
    assert_eq!(
        sim.get("apps/v1", "Deployment", "team", "web").unwrap()["spec"]["replicas"],
        4
    );
    api.delete("web", Some(Propagation::Background)).unwrap();
}
