//! Per-client faults and optimistic concurrency as leader election needs them: a
//! paused client's requests hang while others are served, a cut client sees its
//! connections fail until restored, and a PUT with a stale resourceVersion is a
//! 409 Conflict for Leases as for every kind.

use crate::common::Client;
use kube_sim::Sim;
use serde_json::{Value, json};
use std::time::Duration;

/// A GET as `client` (its bearer token): `Ok(status)` or the transport error.
fn get_as(sim: &Sim, client: &str, path: &str) -> Result<u16, String> {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();
    agent
        .get(format!("{}{path}", sim.url()))
        .header("Authorization", format!("Bearer {client}"))
        .call()
        .map(|r| r.status().as_u16())
        .map_err(|e| e.to_string())
}

/// A paused client's request waits while another client is served, and is
/// answered once resumed.
#[test]
fn paused_client_hangs_until_resumed() {
    let sim = std::sync::Arc::new(Sim::start());
    sim.pause_client("a");
    let (tx, rx) = std::sync::mpsc::channel();
    let s = std::sync::Arc::clone(&sim);
    std::thread::spawn(move || {
        let _ = tx.send(get_as(&s, "a", "/api/v1/namespaces/default"));
    });
    // Served after a's request was sent: a's answer, had it come, would be first.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(get_as(&sim, "b", "/api/v1/namespaces/default"), Ok(200));
    assert!(rx.try_recv().is_err(), "a was answered while paused");
    sim.resume_client("a");
    let answer = rx.recv_timeout(Duration::from_secs(5)).expect("a answered");
    assert_eq!(answer, Ok(200));
}

/// A cut client's requests fail at the transport (and its open watch ends); other
/// clients are served; after restore it is served again.
#[test]
fn cut_client_fails_until_restored() {
    let sim = Sim::start();
    assert_eq!(get_as(&sim, "a", "/api/v1/namespaces"), Ok(200));
    let c = Client::new(&sim.url());
    let watch = c.watch("/api/v1/namespaces/default/configmaps?watch=true");
    sim.cut_client("");
    // The watch (no token: client "") ends; its channel closes.
    let ended = (0..50).any(|_| {
        matches!(
            watch.recv_timeout(Duration::from_millis(100)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        )
    });
    assert!(ended, "the cut client's watch still streams");
    sim.restore_client("");
    sim.cut_client("a");
    assert!(get_as(&sim, "a", "/api/v1/namespaces").is_err());
    assert_eq!(get_as(&sim, "b", "/api/v1/namespaces"), Ok(200));
    sim.restore_client("a");
    assert_eq!(get_as(&sim, "a", "/api/v1/namespaces"), Ok(200));
    // Served requests only: the two answered GETs of a, the one of b.
    assert_eq!(sim.client_requests("a"), 2);
    assert_eq!(sim.client_requests("b"), 1);
}

/// PUT with a stale resourceVersion: 409 for a Lease and a ConfigMap; with the
/// current one: 200 and a new resourceVersion.
#[test]
fn stale_resource_version_put_conflicts() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let cases = [
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "x"}, "spec": {"holderIdentity": "a"}}),
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "x"}, "data": {"k": "a"}}),
        ),
    ];
    for (path, obj) in cases {
        let created = c.post(path, &obj);
        assert_eq!(created.code, 201, "{path}: {:?}", created.body);
        let mut first: Value = created.body.clone();
        first["metadata"]["labels"] = json!({"v": "1"});
        let ok = c.put(&format!("{path}/x"), &first);
        assert_eq!(ok.code, 200, "{path}: {:?}", ok.body);
        assert_ne!(
            ok.body["metadata"]["resourceVersion"],
            created.body["metadata"]["resourceVersion"]
        );
        first["metadata"]["labels"] = json!({"v": "2"});
        let stale = c.put(&format!("{path}/x"), &first);
        assert_eq!(stale.code, 409, "{path}: {:?}", stale.body);
        assert_eq!(stale.body["reason"], "Conflict");
    }
}
