//! kube-sim watch semantics over real HTTP: initial state, replay from a
//! resourceVersion, live streaming, bookmarks, sendInitialEvents, selector
//! transitions, 410 after compaction, timeouts and dropped streams.

use crate::common;

use common::{Client, brief, cm, next, next_non_bookmark};
use kube_sim::{Sim, SimOptions};
use serde_json::json;
use std::time::{Duration, Instant};

fn b(t: &str, n: &str) -> (String, String) {
    (t.to_string(), n.to_string())
}

/// RV unset: synthetic ADDED for existing objects, then live events in order.
#[test]
fn initial_state_then_live_events() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("default", "old", json!({}))).unwrap();
    let rx = c.watch("/api/v1/namespaces/default/configmaps?watch=1");
    assert_eq!(brief(&next(&rx)), b("ADDED", "old"));
    sim.create(cm("default", "new", json!({}))).unwrap();
    sim.create(cm("other", "elsewhere", json!({}))).unwrap();
    let mut o = sim.get("v1", "ConfigMap", "default", "new").unwrap();
    o["data"] = json!({"k": "changed"});
    sim.update(o).unwrap();
    sim.delete("v1", "ConfigMap", "default", "old").unwrap();
    assert_eq!(brief(&next(&rx)), b("ADDED", "new"));
    let m = next(&rx);
    assert_eq!(brief(&m), b("MODIFIED", "new"));
    assert_eq!(m["object"]["data"]["k"], "changed");
    assert_eq!(m["object"]["kind"], "ConfigMap");
    let d = next(&rx);
    assert_eq!(brief(&d), b("DELETED", "old"));
    let drv: u64 = d["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(drv.to_string(), sim.resource_version());
}

/// A watch from a list's resourceVersion replays exactly the later changes.
#[test]
fn replay_from_resource_version() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("default", "a", json!({}))).unwrap();
    let list = c.get("/api/v1/namespaces/default/configmaps").body;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    sim.create(cm("default", "b", json!({}))).unwrap();
    sim.delete("v1", "ConfigMap", "default", "a").unwrap();
    let rx = c.watch(&format!(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
    ));
    assert_eq!(brief(&next(&rx)), b("ADDED", "b"));
    assert_eq!(brief(&next(&rx)), b("DELETED", "a"));
    sim.create(cm("default", "c", json!({}))).unwrap();
    assert_eq!(brief(&next(&rx)), b("ADDED", "c"));
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "no extra events"
    );
}

/// Label-selector watches see objects entering as ADDED and leaving as DELETED.
#[test]
fn selector_transitions() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let rv = sim.resource_version();
    let rx = c.watch(&format!(
        "/api/v1/configmaps?watch=1&resourceVersion={rv}&labelSelector=app%3Dweb"
    ));
    sim.create(cm("default", "x", json!({"app": "db"})))
        .unwrap();
    let relabel = |app: &str| {
        let mut o = sim.get("v1", "ConfigMap", "default", "x").unwrap();
        o["metadata"]["labels"]["app"] = json!(app);
        sim.update(o).unwrap();
    };
    relabel("web");
    assert_eq!(brief(&next(&rx)), b("ADDED", "x"));
    let mut o = sim.get("v1", "ConfigMap", "default", "x").unwrap();
    o["data"] = json!({"n": "1"});
    sim.update(o).unwrap();
    assert_eq!(brief(&next(&rx)), b("MODIFIED", "x"));
    relabel("db");
    let gone = next(&rx);
    assert_eq!(brief(&gone), b("DELETED", "x"));
    // as from kube-apiserver's watch cache: the last state the watch could see
    assert_eq!(gone["object"]["metadata"]["labels"]["app"], "web");
    sim.delete("v1", "ConfigMap", "default", "x").unwrap();
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "delete of a non-matching object is not sent"
    );
}

/// Field-selector watches (kubectl wait style) follow one object.
#[test]
fn field_selector_watch() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let rx =
        c.watch("/api/v1/namespaces/default/configmaps?watch=1&fieldSelector=metadata.name%3Dme");
    sim.create(cm("default", "notme", json!({}))).unwrap();
    sim.create(cm("default", "me", json!({}))).unwrap();
    assert_eq!(brief(&next(&rx)), b("ADDED", "me"));
}

/// allowWatchBookmarks: idle watches get BOOKMARKs carrying the current RV.
#[test]
fn bookmarks_on_idle_watch() {
    let sim = Sim::start();
    sim.set_bookmark_interval(Duration::from_millis(200));
    let c = Client::new(&sim.url());
    let rv = sim.resource_version();
    let rx = c.watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&labelSelector=x%3Dy"));
    sim.create(cm("default", "unrelated", json!({}))).unwrap();
    let bm = next(&rx);
    assert_eq!(bm["type"], "BOOKMARK");
    assert_eq!(bm["object"]["kind"], "ConfigMap");
    assert_eq!(
        bm["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap(),
        sim.resource_version()
    );
}

/// sendInitialEvents=true: ADDED for current state, then the annotated bookmark.
#[test]
fn send_initial_events_bookmark() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("default", "a", json!({}))).unwrap();
    sim.create(cm("default", "b", json!({}))).unwrap();
    let rx = c.watch("/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
    assert_eq!(brief(&next(&rx)), b("ADDED", "a"));
    assert_eq!(brief(&next(&rx)), b("ADDED", "b"));
    let bm = next(&rx);
    assert_eq!(bm["type"], "BOOKMARK");
    assert_eq!(
        bm["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(
        bm["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap(),
        sim.resource_version()
    );
    sim.create(cm("default", "c", json!({}))).unwrap();
    assert_eq!(brief(&next_non_bookmark(&rx)), b("ADDED", "c"));
}

/// After compact(), a watch from an older RV gets an ERROR event with a 410 Expired Status.
#[test]
fn expired_after_compact() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let old = sim.resource_version();
    sim.create(cm("default", "a", json!({}))).unwrap();
    sim.compact();
    let rx = c.watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={old}"));
    let e = next(&rx);
    assert_eq!(e["type"], "ERROR");
    assert_eq!(
        (
            e["object"]["kind"].clone(),
            e["object"]["code"].clone(),
            e["object"]["reason"].clone()
        ),
        (json!("Status"), json!(410), json!("Expired"))
    );
    assert_eq!(next(&rx)["type"], "END");
    let now = sim.resource_version();
    let rx = c.watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={now}"));
    sim.create(cm("default", "b", json!({}))).unwrap();
    assert_eq!(brief(&next(&rx)), b("ADDED", "b"));
}

/// A small history_limit expires old RVs on its own.
#[test]
fn history_limit_expires_old_versions() {
    let sim = Sim::start_with(SimOptions {
        history_limit: 2,
        ..Default::default()
    })
    .unwrap();
    let c = Client::new(&sim.url());
    let old = sim.resource_version();
    for n in ["a", "b", "c"] {
        sim.create(cm("default", n, json!({}))).unwrap();
    }
    let rx = c.watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={old}"));
    assert_eq!(next(&rx)["object"]["code"], 410);
}

/// drop_watches ends every open stream; timeoutSeconds ends one cleanly.
#[test]
fn drop_watches_and_timeout() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let rv = sim.resource_version();
    let a = c.watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={rv}"));
    let b = c.watch(&format!("/api/v1/secrets?watch=1&resourceVersion={rv}"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while sim.watch_count() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    sim.drop_watches();
    assert_eq!(next(&a)["type"], "END");
    assert_eq!(next(&b)["type"], "END");
    let t = Instant::now();
    let rx = c.watch(&format!(
        "/api/v1/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    ));
    assert_eq!(next(&rx)["type"], "END");
    assert!(t.elapsed() >= Duration::from_millis(900));
}

/// Watches see custom resources and the DELETED events that deleting their CRD causes.
#[test]
fn custom_resource_watch() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.ex.io"},
        "spec": {"group": "ex.io", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]}})).unwrap();
    let rx = c.watch("/apis/ex.io/v1/things?watch=1");
    sim.create(json!({"apiVersion": "ex.io/v1", "kind": "Thing", "metadata": {"name": "t", "namespace": "default"}})).unwrap();
    let added = next(&rx);
    assert_eq!(brief(&added), b("ADDED", "t"));
    assert_eq!(added["object"]["apiVersion"], "ex.io/v1");
    sim.delete(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "",
        "things.ex.io",
    )
    .unwrap();
    assert_eq!(brief(&next(&rx)), b("DELETED", "t"));
}

/// Concurrent writers and watchers: every watcher sees every event once, in RV order.
#[test]
fn concurrent_writers_and_watchers() {
    let sim = std::sync::Arc::new(Sim::start());
    let c = Client::new(&sim.url());
    let rv = sim.resource_version();
    let watchers: Vec<_> = (0..4)
        .map(|_| c.watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={rv}")))
        .collect();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let sim = sim.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    sim.create(cm("default", &format!("w{w}-{i}"), json!({})))
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for rx in &watchers {
        let mut last = 0u64;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let e = next(rx);
            assert_eq!(e["type"], "ADDED");
            let rv: u64 = e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(rv > last, "RVs must increase: {rv} after {last}");
            last = rv;
            assert!(
                seen.insert(
                    e["object"]["metadata"]["name"]
                        .as_str()
                        .unwrap()
                        .to_string()
                )
            );
        }
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "no duplicates"
        );
    }
}

/// A client that resumes from its last seen RV after drop_watches loses and doubles nothing.
#[test]
fn resume_after_drop_loses_nothing() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let rv = sim.resource_version();
    let rx = c.watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={rv}"));
    sim.create(cm("default", "a", json!({}))).unwrap();
    let first = next(&rx);
    let last_rv = first["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    sim.drop_watches();
    assert_eq!(next(&rx)["type"], "END");
    sim.create(cm("default", "b", json!({}))).unwrap();
    sim.delete("v1", "ConfigMap", "default", "a").unwrap();
    let rx = c.watch(&format!(
        "/api/v1/configmaps?watch=1&resourceVersion={last_rv}"
    ));
    assert_eq!(brief(&next(&rx)), b("ADDED", "b"));
    assert_eq!(brief(&next(&rx)), b("DELETED", "a"));
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
}

/// Events committed just before drop_watches are still delivered before the stream ends.
#[test]
fn drop_after_burst_flushes_pending_events() {
    for _ in 0..20 {
        let sim = Sim::start();
        let c = Client::new(&sim.url());
        let rv = sim.resource_version();
        let rx = c.watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={rv}"));
        let deadline = Instant::now() + Duration::from_secs(5);
        while sim.watch_count() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        for i in 0..20 {
            sim.create(cm("default", &format!("c{i}"), json!({})))
                .unwrap();
        }
        sim.drop_watches();
        let mut added = 0;
        loop {
            let e = next(&rx);
            if e["type"] == "END" {
                break;
            }
            added += 1;
        }
        assert_eq!(added, 20, "every event committed before the drop arrives");
    }
}

/// With auto-ready, a Deployment write is followed by a controller-style status update.
#[test]
fn auto_ready_adds_status_event() {
    let sim = Sim::start();
    sim.set_auto_ready(true);
    let c = Client::new(&sim.url());
    let rv = sim.resource_version();
    let rx = c.watch(&format!(
        "/apis/apps/v1/deployments?watch=1&resourceVersion={rv}"
    ));
    let dep = common::deployment("default", "d", 2);
    assert_eq!(
        c.post("/apis/apps/v1/namespaces/default/deployments", &dep)
            .code,
        201
    );
    assert_eq!(brief(&next(&rx)), b("ADDED", "d"));
    let m = next(&rx);
    assert_eq!(brief(&m), b("MODIFIED", "d"));
    assert_eq!(m["object"]["status"]["availableReplicas"], 2);
    assert_eq!(m["object"]["status"]["observedGeneration"], 1);
    let r = c.patch(
        "/apis/apps/v1/namespaces/default/deployments/d",
        "application/merge-patch+json",
        r#"{"spec":{"replicas":3}}"#,
    );
    assert_eq!(r.code, 200);
    assert_eq!(brief(&next(&rx)), b("MODIFIED", "d"));
    let m = next(&rx);
    assert_eq!(
        (
            m["object"]["status"]["availableReplicas"].clone(),
            m["object"]["status"]["observedGeneration"].clone()
        ),
        (json!(3), json!(2))
    );
    c.patch(
        "/apis/apps/v1/namespaces/default/deployments/d",
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"x":"y"}}}"#,
    );
    assert_eq!(brief(&next(&rx)), b("MODIFIED", "d"));
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "no status write when already ready"
    );
}

/// Watch options are validated as a real server does; sendInitialEvents=false starts at "now".
#[test]
fn watch_option_rules() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("default", "old", json!({}))).unwrap();
    let bad = c.get("/api/v1/configmaps?watch=1&sendInitialEvents=true");
    assert_eq!(
        (bad.code, bad.body["reason"].clone()),
        (422, json!("Invalid"))
    );
    assert!(
        bad.body["message"]
            .as_str()
            .unwrap()
            .contains("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
    );
    assert_eq!(
        c.get("/api/v1/configmaps?watch=1&resourceVersionMatch=NotOlderThan")
            .code,
        422
    );
    assert_eq!(
        c.get("/api/v1/configmaps?sendInitialEvents=true").code,
        422,
        "forbidden on list"
    );
    let rx = c.watch(
        "/api/v1/configmaps?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
    );
    sim.create(cm("default", "new", json!({}))).unwrap();
    assert_eq!(
        brief(&next(&rx)),
        b("ADDED", "new"),
        "no initial events for the existing object"
    );
}
