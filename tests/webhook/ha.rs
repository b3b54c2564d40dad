//! Webhooks with `--ha`: a standby's admission server answers requests (the
//! Service may route to any replica), but only the leader registers the webhook
//! configuration: it appears once the standby gets the Lease.

use crate::webhook_common;

use serde_json::json;
use std::time::{Duration, Instant};
use webhook_common::{Pki, admission_hook, curl, review, start};

const LEASE: &str = "shell-operator-leader-election";

fn configuration(sim: &kube_sim::Sim) -> Option<serde_json::Value> {
    sim.get(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "",
        "shell-operator-hooks-hooks",
    )
}

#[test]
fn standby_serves_admission_and_registers_only_once_leading() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    // Another replica holds the Lease (an hour long, so it stays held until released).
    let lease = sim
        .create(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": "webhooks"},
            "spec": {"holderIdentity": "other", "leaseDurationSeconds": 3600,
                     "acquireTime": "2026-01-01T00:00:00.000000Z",
                     "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0}
        }))
        .expect("lease");
    let ha = [
        "--ha",
        "--ha-lease-duration",
        "3s",
        "--ha-renew-deadline",
        "2s",
        "--ha-retry-period",
        "200ms",
    ];
    let hooks = [("validate.sh", admission_hook(&["deny.example.com"], &[]))];
    let op = start(&hooks, &sim, &pki, &ha);
    op.wait_log("waiting for leadership", Duration::from_secs(20));
    let port = op.port_from_log("admission webhook server listening");
    let ca = pki.path("ca.crt");
    let a = curl(port, "/hooks/deny-example-com", &review("u1"), &ca, &[]);
    assert_eq!(a.status, 200, "{} {}", a.body, a.stderr);
    assert!(a.body.contains(r#""allowed":false"#), "{}", a.body);
    // The standby answered and has read the held Lease three times since: it is
    // waiting in its spawn step, and has registered nothing.
    let reads = || {
        sim.requests()
            .iter()
            .filter(|r| {
                r.starts_with("GET /apis/coordination.k8s.io/v1/namespaces/webhooks/leases/")
            })
            .count()
    };
    let seen = reads();
    let deadline = Instant::now() + Duration::from_secs(10);
    while reads() < seen + 3 {
        assert!(
            Instant::now() < deadline,
            "the standby stopped reading the Lease"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(configuration(&sim).is_none(), "a standby registered");

    // The holder releases; the standby takes over and registers.
    let mut released = lease;
    released["spec"]["holderIdentity"] = json!("");
    released["spec"]["leaseDurationSeconds"] = json!(1);
    sim.update(released).expect("release");
    op.wait_log("leadership acquired", Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(20);
    while configuration(&sim).is_none() {
        assert!(Instant::now() < deadline, "not registered:\n{}", op.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}
