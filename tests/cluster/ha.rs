//! `--ha` against the real Lease API (coordination.k8s.io/v1): two replicas as
//! deploy/rbac.yaml's ServiceAccount, the Lease in the test's namespace. Exactly one
//! leader runs hooks (onStartup, a schedule, a Pod binding); after SIGKILL of the
//! leader the standby takes over within lease duration + retry period of the
//! leader's last renew and runs the hooks; after SIGTERM the leader releases the
//! Lease and the standby takes over at its next read. The Lease object in the server
//! shows the holder change and `leaseTransitions`.
//!
//! Lease 10 s, renew deadline 8 s, retry 1 s: short, yet longer than a restart of
//! kube-apiserver by another test (a few seconds), so such an outage neither makes
//! the leader give up nor delays a takeover past its bound.

use crate::common::{Operator, TempDir, hook, metric};
use crate::harness::*;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const LEASE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(1);
/// Scheduling and polling slack on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(3);
const LEASE_NAME: &str = "shell-operator-leader-election";

/// Two replicas' shared world: the namespace (Lease and pods) and the hook log.
struct Cluster {
    ns: String,
    dir: TempDir,
}

impl Cluster {
    fn new() -> Cluster {
        Cluster {
            ns: namespace_retry("ha"),
            dir: TempDir::new("cluster-ha"),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.0.join("ha.log")
    }

    /// The hooks: onStartup, a schedule every second, and a Pod binding in the
    /// namespace; each appends `<pod> <event> <unix ns>` to the shared log.
    fn hooks(&self) -> Vec<(&'static str, String)> {
        let line = |event: &str| {
            format!("echo \"$SHELL_OPERATOR_POD {event} $(date +%s%N)\" >> \"$HA_LOG\"")
        };
        let pods = format!(
            "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  namespace:\n    nameSelector:\n      matchNames: [{}]\n",
            self.ns
        );
        vec![
            (
                "startup.sh",
                hook(
                    "startup",
                    "configVersion: v1\nonStartup: 1",
                    &line("startup"),
                ),
            ),
            (
                "tick.sh",
                hook(
                    "tick",
                    "configVersion: v1\nschedule:\n- crontab: \"* * * * * *\"",
                    &line("tick"),
                ),
            ),
            ("pods.sh", hook("pods", &pods, &line("pods"))),
        ]
    }

    /// Starts replica `pod` as the ServiceAccount.
    fn replica(&self, pod: &str) -> Operator {
        let log = self.log_path().to_str().expect("utf8").to_string();
        let args = [
            "--namespace",
            &self.ns,
            "--ha",
            "--ha-lease-duration",
            "10s",
            "--ha-renew-deadline",
            "8s",
            "--ha-retry-period",
            "1s",
        ];
        operator(
            &self.hooks(),
            &cp().operator_kubeconfig(),
            &args,
            &[("SHELL_OPERATOR_POD", pod), ("HA_LOG", &log)],
        )
    }

    /// (pod, event, unix ns) of every hook line so far.
    fn lines(&self) -> Vec<(String, String, u128)> {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let mut parts = l.split(' ');
                let who = parts.next()?.to_string();
                let event = parts.next()?.to_string();
                let ns = parts.next()?.parse().ok()?;
                Some((who, event, ns))
            })
            .collect()
    }

    fn count(&self, who: &str, event: &str) -> usize {
        self.lines()
            .iter()
            .filter(|(w, e, _)| w == who && e == event)
            .count()
    }

    fn wait_count(&self, who: &str, event: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.count(who, event) < n {
            assert!(
                Instant::now() < deadline,
                "{who} {event} ×{n}: {:#?}",
                self.lines()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The Lease's spec as the server stores it.
    fn lease(&self) -> Value {
        get_retry("lease", &self.ns, LEASE_NAME)
            .map(|l| l["spec"].clone())
            .unwrap_or_else(|| panic!("no Lease {LEASE_NAME} in {}", self.ns))
    }

    /// Starts `a`, waits until it leads and has run its hooks (the Pod binding's
    /// Synchronization included), then starts `b` and waits until it stands by.
    fn leader_and_standby(&self) -> (Operator, Operator) {
        let a = self.replica("ha-a");
        a.wait_log("leadership acquired", WAIT);
        self.wait_count("ha-a", "startup", 1);
        self.wait_count("ha-a", "tick", 1);
        self.wait_count("ha-a", "pods", 1);
        let b = self.replica("ha-b");
        b.wait_log("waiting for leadership", WAIT);
        (a, b)
    }
}

/// A MicroTime of the Lease (`2026-01-02T03:04:05.123456Z`) as a Unix time.
fn micro_time(v: &Value) -> f64 {
    let text = v.as_str().unwrap_or_else(|| panic!("not a time: {v}"));
    let t = chrono::DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    t.timestamp_micros() as f64 / 1e6
}

/// Every line of `old` comes before the first line of `new`.
fn assert_no_overlap(lines: &[(String, String, u128)], old: &str, new: &str) {
    let last_old = lines.iter().filter(|l| l.0 == old).map(|l| l.2).max();
    let first_new = lines.iter().filter(|l| l.0 == new).map(|l| l.2).min();
    let (Some(last_old), Some(first_new)) = (last_old, first_new) else {
        panic!("both replicas should have run hooks: {lines:#?}");
    };
    assert!(
        last_old < first_new,
        "{old} ran after {new} began: {lines:#?}"
    );
}

/// One leader runs every hook while the standby runs none and starts no watch;
/// SIGKILL of the leader: the standby takes the Lease within lease duration + retry
/// period of the leader's last renew (not before the lease ran out), the Lease shows
/// the new holder and one more transition, and the new leader runs onStartup, the
/// schedule and the Pod binding (its Synchronization has the pod made meanwhile).
#[test]
fn one_leader_runs_hooks_and_the_standby_takes_over_after_sigkill() {
    let _api = api_shared();
    let c = Cluster::new();
    let (mut a, b) = c.leader_and_standby();
    let lease = c.lease();
    assert_eq!(lease["holderIdentity"], "ha-a", "{lease:#}");
    assert_eq!(lease["leaseDurationSeconds"], 10, "{lease:#}");
    let transitions = lease["leaseTransitions"].as_i64().unwrap_or(0);

    // The leader's watch works: a new pod reaches its Pod binding.
    let pods_before = c.count("ha-a", "pods");
    kubectl_retry(&[
        "-n",
        &c.ns,
        "run",
        "p1",
        "--image=registry.invalid/none",
        "--restart=Never",
    ]);
    c.wait_count("ha-a", "pods", pods_before + 1);
    let ticks = c.count("ha-a", "tick");
    c.wait_count("ha-a", "tick", ticks + 2);
    let lines = c.lines();
    assert!(
        lines.iter().all(|l| l.0 == "ha-a"),
        "the standby ran a hook: {lines:#?}"
    );
    assert!(
        b.runs().is_empty(),
        "the standby ran a hook: {:?}",
        b.runs()
    );
    let series = "shell_operator_ha_is_leader";
    assert_eq!(metric(&a.http_get("/metrics").1, series), Some(1.0));
    assert_eq!(metric(&b.http_get("/metrics").1, series), Some(0.0));
    assert_eq!(
        b.http_get("/ready"),
        (200, "standby: waiting for leadership\n".to_string())
    );

    a.signal(libc::SIGKILL);
    let killed = Instant::now();
    a.child.wait().expect("a is reaped");
    // Nobody renews any more: this is the dead leader's last record.
    let last = c.lease();
    assert_eq!(
        last["holderIdentity"], "ha-a",
        "taken over at once: {last:#}"
    );
    let last_renew = micro_time(&last["renewTime"]);

    b.wait_log("leadership acquired", Duration::from_secs(60));
    let took = killed.elapsed();
    assert!(took <= LEASE + RETRY + SLACK, "takeover took {took:?}");
    let lease = c.lease();
    assert_eq!(lease["holderIdentity"], "ha-b", "{lease:#}");
    assert_eq!(lease["leaseTransitions"], transitions + 1, "{lease:#}");
    let waited = micro_time(&lease["acquireTime"]) - last_renew;
    assert!(
        waited >= LEASE.as_secs_f64() - 0.2,
        "taken {waited:.2}s after the last renew, before the lease ran out"
    );
    assert!(
        waited <= (LEASE + RETRY + SLACK).as_secs_f64(),
        "taken {waited:.2}s after the last renew"
    );

    c.wait_count("ha-b", "startup", 1);
    c.wait_count("ha-b", "tick", 1);
    c.wait_count("ha-b", "pods", 1);
    let sync = contexts(&b)
        .into_iter()
        .find(|ctx| ctx["type"] == "Synchronization")
        .expect("the Pod binding's Synchronization");
    assert_eq!(
        sync["objects"][0]["object"]["metadata"]["name"], "p1",
        "{sync:#}"
    );
    assert_no_overlap(&c.lines(), "ha-a", "ha-b");
}

/// SIGTERM of the leader: it stops, releases the Lease (holder cleared) and exits 0;
/// the standby takes over at its next read, well before a lease duration.
#[test]
fn sigterm_releases_the_lease_and_the_standby_takes_over_at_once() {
    let _api = api_shared();
    let c = Cluster::new();
    let (mut a, b) = c.leader_and_standby();
    let transitions = c.lease()["leaseTransitions"].as_i64().unwrap_or(0);

    a.signal(libc::SIGTERM);
    let asked = Instant::now();
    assert_eq!(a.wait_exit(WAIT), Some(0), "{}", a.logs());
    b.wait_log("leadership acquired", Duration::from_secs(60));
    let took = asked.elapsed();
    assert!(took < LEASE, "takeover after a release took {took:?}");
    let lease = c.lease();
    assert_eq!(lease["holderIdentity"], "ha-b", "{lease:#}");
    assert_eq!(lease["leaseTransitions"], transitions + 1, "{lease:#}");
    c.wait_count("ha-b", "startup", 1);
    assert_no_overlap(&c.lines(), "ha-a", "ha-b");
}
