//! addon-operator HA end to end: two replicas (flant's `ADDON_OPERATOR_HA`,
//! `ADDON_OPERATOR_POD`, the pod IP as listen address) on one kube-sim with a chart
//! module. The leader converges and installs the release; the standby runs no hook
//! and no helm, and its `/readyz` answers flant's "waiting" text after asking the
//! leader's; after a SIGKILL of the leader the standby takes over, converges, and
//! does not `helm upgrade` the release whose checksum has not changed.

use crate::harness::{Addon, chart, rec};
use kube_sim::Sim;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (the replicas listen on it at .1 and .2, so the
/// standby finds the leader at the leader's pod IP and its own port, as in flant).
fn free_port() -> u16 {
    crate::common::listen_port()
}

fn get(host: &str, port: u16, path: &str) -> (u16, String) {
    crate::common::http_get_from(host, port, path)
}

fn files() -> Vec<(String, String)> {
    let mut f = vec![
        (
            "modules/values.yaml".to_string(),
            "echoEnabled: true\n".to_string(),
        ),
        (
            "modules/001-echo/hooks/h".to_string(),
            rec("echo", r#"{"configVersion":"v1","beforeHelm":1}"#, ""),
        ),
    ];
    f.extend(chart("modules/001-echo", "echo", "echo"));
    f
}

fn replica(sim: &Arc<Sim>, pod: &str, ip: &str, port: &str) -> Addon {
    let f = files();
    let refs: Vec<(&str, String)> = f.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let env = [
        ("ADDON_OPERATOR_HA", "true"),
        ("ADDON_OPERATOR_POD", pod),
        ("ADDON_OPERATOR_HA_LEASE_DURATION", "3s"),
        ("ADDON_OPERATOR_HA_RENEW_DEADLINE", "2s"),
        ("ADDON_OPERATOR_HA_RETRY_PERIOD", "500ms"),
    ];
    let args = [
        "--prometheus-listen-address",
        ip,
        "--prometheus-listen-port",
        port,
    ];
    Addon::replica(Arc::clone(sim), &refs, &env, &args)
}

fn upgrades(a: &Addon) -> usize {
    a.steps()
        .iter()
        .filter(|s| s.starts_with("helm:upgrade"))
        .count()
}

/// The takeover with modules: the new leader's first converge does not reinstall
/// the unchanged release.
#[test]
fn takeover_does_not_reinstall_unchanged_releases() {
    let sim = Arc::new(Sim::start());
    sim.create(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": crate::harness::NS}}),
    )
    .expect("namespace");
    let port = free_port();
    let p = port.to_string();
    let mut a = replica(&sim, "a", "127.0.0.1", &p);
    a.wait_ready();
    assert_eq!(upgrades(&a), 1, "{:?}", a.steps());
    assert_eq!(a.revisions("echo"), vec![1]);
    let b = replica(&sim, "b", "127.0.0.2", &p);
    b.wait_log(&["waiting for leadership"], Duration::from_secs(30));
    let lease = sim
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            crate::harness::NS,
            "addon-operator-leader-election",
        )
        .expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "a.127-0-0-1.addons.pod");
    // The standby knows the holder after its first read of the Lease, which may come
    // just after its "waiting" line: until then it answers 500 (no holder known).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (code, text) = loop {
        let answer = get("127.0.0.2", port, "/readyz");
        if answer.0 == 200 || std::time::Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        (code, text.as_str()),
        (
            200,
            "HA mode is enabled and waiting for acquiring the lock.\n"
        )
    );
    let metrics = get("127.0.0.2", port, "/metrics").1;
    assert!(
        metrics.contains("addon_operator_ha_is_leader 0"),
        "{metrics}"
    );
    assert!(b.steps().is_empty(), "the standby acted: {:?}", b.steps());

    let mut child = a.child.take().expect("a runs");
    child.kill().expect("SIGKILL a");
    let killed = Instant::now();
    child.wait().expect("a reaped");
    b.wait_log(&["leadership acquired"], Duration::from_secs(10));
    let took = killed.elapsed();
    assert!(
        took <= Duration::from_millis(3800),
        "takeover took {took:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while get("127.0.0.2", port, "/readyz").0 != 200
        || !get("127.0.0.2", port, "/readyz")
            .1
            .contains("converge done")
    {
        assert!(
            Instant::now() < deadline,
            "b not ready; logs:\n{}",
            b.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let steps = b.steps();
    assert!(steps.contains(&"echo".to_string()), "{steps:?}");
    assert_eq!(upgrades(&b), 0, "b reinstalled: {steps:?}");
    assert_eq!(b.revisions("echo"), vec![1]);
}
