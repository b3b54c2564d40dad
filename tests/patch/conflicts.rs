//! Read-modify-write operations under concurrent writers: JQPatch and
//! CreateOrUpdate retry on 409 Conflict with a fresh GET, and give up after
//! five attempts. kube-sim delays every response, so the test thread can change
//! the object while the patcher's PUT is in flight (between its arrival, which
//! the request log shows, and its handling).

use crate::patch_common;

use patch_common::{World, cm, world};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Applies `text` on a thread while changing ConfigMap `ns1/c` whenever one of
/// the first `races` PUTs arrives. Returns the result and how many PUTs were sent.
fn race(w: &World, text: &str, races: usize) -> (Result<usize, String>, usize) {
    w.warm();
    let puts = |w: &World| {
        w.sim
            .requests()
            .iter()
            .filter(|l| l.starts_with("PUT"))
            .count()
    };
    let base = puts(w);
    w.sim.set_delay(Duration::from_millis(60));
    let result = std::thread::scope(|s| {
        let job = s.spawn(|| w.run(text, false));
        let mut seen = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !job.is_finished() && Instant::now() < deadline {
            if puts(w) - base > seen && seen < races {
                seen += 1;
                touch(w, seen);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        job.join().expect("patcher thread")
    });
    w.sim.set_delay(Duration::ZERO);
    (result, puts(w) - base)
}

/// A concurrent writer's change: label `writer=<n>`.
fn touch(w: &World, n: usize) {
    let mut obj = w.cm("ns1", "c").expect("object");
    obj["metadata"]["labels"]["writer"] = Value::from(n.to_string());
    w.sim.update(obj).expect("concurrent update");
}

/// JQPatch's first PUT conflicts; the retry re-reads and keeps both changes.
#[test]
fn jq_patch_retries_on_conflict() {
    let w = world();
    w.seed(cm("ns1", "c", json!({"a": "1"})));
    let doc = r#"{"operation": "JQPatch", "kind": "ConfigMap", "namespace": "ns1", "name": "c", "jqFilter": ".data.jq = \"yes\""}"#;
    let (res, puts) = race(&w, doc, 1);
    assert_eq!((res, puts), (Ok(1), 2));
    let got = w.cm("ns1", "c").expect("c");
    assert_eq!(
        (got["data"].clone(), got["metadata"]["labels"].clone()),
        (json!({"a": "1", "jq": "yes"}), json!({"writer": "1"}))
    );
}

/// CreateOrUpdate's PUT conflicts; the retry replaces the object anyway.
#[test]
fn create_or_update_retries_on_conflict() {
    let w = world();
    w.seed(cm("ns1", "c", json!({"a": "1"})));
    let doc = json!({"operation": "CreateOrUpdate", "object": cm("ns1", "c", json!({"a": "new"}))})
        .to_string();
    let (res, puts) = race(&w, &doc, 1);
    assert_eq!((res, puts), (Ok(1), 2));
    let got = w.cm("ns1", "c").expect("c");
    assert_eq!(
        (got["data"].clone(), got["metadata"]["labels"].clone()),
        (json!({"a": "new"}), Value::Null)
    );
}

/// A writer that wins every race: the operation fails after five attempts.
#[test]
fn gives_up_after_five_conflicts() {
    let w = world();
    w.seed(cm("ns1", "c", json!({"a": "1"})));
    let doc = r#"{"operation": "JQPatch", "kind": "ConfigMap", "namespace": "ns1", "name": "c", "jqFilter": ".data.jq = \"yes\""}"#;
    let (res, puts) = race(&w, doc, usize::MAX);
    let err = res.unwrap_err();
    assert!(err.starts_with("Filter object /ConfigMap/ns1/c: still conflicting after 5 attempts: PUT /api/v1/namespaces/ns1/configmaps/c: 409"), "{err}");
    assert!(
        err.ends_with("(another writer keeps changing the object; the hook run is retried)"),
        "{err}"
    );
    assert_eq!(puts, 5);
    assert_eq!(w.cm("ns1", "c").expect("c")["data"], json!({"a": "1"}));
}

/// CreateOrUpdate whose POST says AlreadyExists but whose GET finds nothing
/// (deleted in between) creates the object after all.
#[test]
fn create_or_update_recreates_a_vanished_object() {
    let w = world();
    w.warm();
    w.sim.fail_next(1, 409);
    let doc = json!({"operation": "CreateOrUpdate", "object": cm("ns1", "v", json!({"a": "1"}))})
        .to_string();
    assert_eq!(w.run(&doc, false), Ok(1));
    assert_eq!(
        w.cm("ns1", "v").expect("created")["data"],
        json!({"a": "1"})
    );
    let log = w.sim.requests();
    let calls: Vec<&str> = log
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    assert_eq!(calls, ["POST", "GET", "POST"]);
}
