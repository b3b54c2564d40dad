//! Discovery against kube-sim: every spelling of a kind resolves, with and without
//! apiVersion; a CRD created after the cache was filled is found by refreshing;
//! an unknown kind names the hook and binding.

use crate::kube_client_common;

use kube_client_common::*;
use kube_sim::Sim;
use serde_json::json;
use shell_operator::kube::{KubeError, Resource};

fn res(group: &str, version: &str, resource: &str, kind: &str, namespaced: bool) -> Resource {
    Resource {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        kind: kind.into(),
        namespaced,
    }
}

#[test]
fn every_spelling_of_a_kind_resolves() {
    let sim = Sim::start();
    let c = client_for(&sim);
    let deploy = res("apps", "v1", "deployments", "Deployment", true);
    for kind in [
        "Deployment",
        "deployment",
        "DEPLOYMENT",
        "deployments",
        "Deployments",
        "deploy",
        "DePloy",
    ] {
        for av in ["", "apps/v1"] {
            assert_eq!(c.resolve(av, kind, "test").unwrap(), deploy, "{av} {kind}");
        }
    }
    let cm = res("", "v1", "configmaps", "ConfigMap", true);
    for kind in ["ConfigMap", "configmap", "configmaps", "cm", "CM"] {
        assert_eq!(c.resolve("", kind, "test").unwrap(), cm, "{kind}");
        assert_eq!(c.resolve("v1", kind, "test").unwrap(), cm, "{kind}");
    }
    let ns = res("", "v1", "namespaces", "Namespace", false);
    for kind in ["Namespace", "namespaces", "ns"] {
        assert_eq!(c.resolve("", kind, "test").unwrap(), ns, "{kind}");
    }
    assert_eq!(
        c.resolve("", "ds", "test").unwrap(),
        res("apps", "v1", "daemonsets", "DaemonSet", true)
    );
    assert_eq!(
        c.resolve("batch/v1", "cronjob", "test").unwrap(),
        res("batch", "v1", "cronjobs", "CronJob", true)
    );
    // Discovery is cached: resolving many spellings cost a handful of requests.
    let disc = sim
        .requests()
        .iter()
        .filter(|r| r.starts_with("GET /api"))
        .count();
    assert!(disc <= 8, "{:#?}", sim.requests());
}

#[test]
fn crd_created_after_start_is_found_by_refresh() {
    let sim = Sim::start();
    let c = client_for(&sim);
    c.resolve("", "ConfigMap", "warm the cache").unwrap();
    sim.create(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
                 "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
                 "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    let want = res("stable.example.com", "v1", "crontabs", "CronTab", true);
    for kind in ["CronTab", "crontab", "crontabs", "ct", "CT"] {
        assert_eq!(c.resolve("", kind, "test").unwrap(), want, "{kind}");
    }
    let beta = c
        .resolve("stable.example.com/v1beta1", "CronTab", "test")
        .unwrap();
    assert_eq!(beta.version, "v1beta1");
    assert_eq!(
        beta.collection_path(Some("ns1")),
        "/apis/stable.example.com/v1beta1/namespaces/ns1/crontabs"
    );
}

#[test]
fn unknown_kind_names_hook_and_binding() {
    let sim = Sim::start();
    let c = client_for(&sim);
    let before = sim.requests().len();
    let e = c
        .resolve("", "Widget", "hook 002-hook.sh, binding widgets")
        .unwrap_err();
    assert!(matches!(e, KubeError::UnknownKind { .. }));
    let msg = e.to_string();
    assert!(
        msg.starts_with("hook 002-hook.sh, binding widgets: "),
        "{msg}"
    );
    assert!(
        msg.contains("kind 'Widget'") && msg.contains("CRD"),
        "{msg}"
    );
    // The miss refreshed discovery once: /apis was fetched twice.
    let apis = sim.requests()[before..]
        .iter()
        .filter(|r| r.starts_with("GET /apis") && !r.starts_with("GET /apis/"))
        .count();
    assert_eq!(apis, 2, "{:#?}", sim.requests());
    let e = c
        .resolve("apps/v1", "Widget", "hook h, binding b")
        .unwrap_err()
        .to_string();
    assert!(e.contains("apiVersion 'apps/v1'"), "{e}");
    // A group-version the server does not serve is a miss too, not a crash.
    assert!(c.resolve("nope.example.com/v9", "Thing", "x").is_err());
}
