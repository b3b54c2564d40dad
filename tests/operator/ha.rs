//! HA end to end: two real shell-operator replicas with `--ha` against one
//! kube-sim, each with its own kubeconfig token so kube-sim can pause or cut one.
//! Hooks append `<replica> <event> <unix ns>` to one shared file, so tests see who
//! ran what and when: only the leader runs hooks, a takeover (SIGKILL, API cut,
//! SIGTERM) starts the new leader's hooks, and every line of the old leader comes
//! before the first line of the new one (no overlap); a leader whose requests hang
//! gives up by its own clock. Lease 3 s, renew deadline 2 s, retry 0.5 s.

use crate::common::{self, Operator, TempDir, hook, metric, processes_mentioning};
use kube_sim::Sim;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const LEASE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(500);
const WAIT: Duration = Duration::from_secs(15);

/// An onStartup hook and a schedule hook (every second, 0.3 s long), both logging
/// to `$HA_LOG` as `$SHELL_OPERATOR_POD <event> <ns>`.
fn hooks() -> Vec<(&'static str, String)> {
    let line =
        |event: &str| format!("echo \"$SHELL_OPERATOR_POD {event} $(date +%s%N)\" >> \"$HA_LOG\"");
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
                &format!("{}\nsleep 0.3\n{}", line("start"), line("end")),
            ),
        ),
    ]
}

/// The cluster and the shared hook log.
struct Cluster {
    sim: Sim,
    dir: TempDir,
}

impl Cluster {
    fn new() -> Cluster {
        Cluster {
            sim: Sim::start(),
            dir: TempDir::new("ha"),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.0.join("ha.log")
    }

    /// Starts replica `name` (its pod name and its kube-sim client name).
    fn replica(&self, name: &str) -> Operator {
        let kubeconfig = self.dir.0.join(format!("kubeconfig-{name}"));
        self.sim
            .write_kubeconfig_for(&kubeconfig, name)
            .expect("kubeconfig");
        let kc = kubeconfig.to_str().expect("utf8").to_string();
        let log = self.log_path().to_str().expect("utf8").to_string();
        let args = [
            "--kube-config",
            &kc,
            "--namespace",
            "default",
            "--ha",
            "--ha-lease-duration",
            "3s",
            "--ha-renew-deadline",
            "2s",
            "--ha-retry-period",
            "500ms",
        ];
        Operator::start(
            &hooks(),
            &args,
            &[("SHELL_OPERATOR_POD", name), ("HA_LOG", &log)],
        )
    }

    /// (replica, event, ns) of every hook line so far.
    fn lines(&self) -> Vec<(String, String, u128)> {
        read_lines(&self.log_path())
    }

    fn wait_lines(&self, what: &str, cond: impl Fn(&[(String, String, u128)]) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !cond(&self.lines()) {
            assert!(Instant::now() < deadline, "{what}: {:#?}", self.lines());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn holder(&self) -> String {
        let lease = lease(&self.sim).expect("lease");
        lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn lease_spec(&self) -> serde_json::Value {
        lease(&self.sim)
            .map(|l| l["spec"].clone())
            .unwrap_or_default()
    }
}

/// The shell-operator's Lease as kube-sim stores it.
fn lease(sim: &Sim) -> Option<serde_json::Value> {
    sim.get(
        "coordination.k8s.io/v1",
        "Lease",
        "default",
        "shell-operator-leader-election",
    )
}

fn read_lines(path: &Path) -> Vec<(String, String, u128)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
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

fn count(lines: &[(String, String, u128)], who: &str, event: &str) -> usize {
    lines
        .iter()
        .filter(|(w, e, _)| w == who && e == event)
        .count()
}

/// Every line of `old` comes before the first line of `new`: their hook runs
/// never overlapped.
fn assert_no_overlap(lines: &[(String, String, u128)], old: &str, new: &str) {
    let last_old = lines.iter().filter(|l| l.0 == old).map(|l| l.2).max();
    let first_new = lines.iter().filter(|l| l.0 == new).map(|l| l.2).min();
    let (Some(last_old), Some(first_new)) = (last_old, first_new) else {
        panic!("both replicas should have run hooks: {lines:#?}");
    };
    assert!(
        last_old < first_new,
        "{old}'s last hook line is after {new}'s first: {lines:#?}"
    );
}

/// Starts `a`, waits until it leads and has ticked, then starts `b` and waits
/// until `b` says it is waiting.
fn leader_and_standby(c: &Cluster) -> (Operator, Operator) {
    let a = c.replica("a");
    a.wait_log("leadership acquired", WAIT);
    c.wait_lines("a ticks", |l| count(l, "a", "end") >= 1);
    let b = c.replica("b");
    b.wait_log("waiting for leadership", WAIT);
    (a, b)
}

/// Two replicas: only the leader runs onStartup and schedule hooks; the standby's
/// log and metrics say it waits, and its /ready says it is a standby.
#[test]
fn only_the_leader_runs_hooks() {
    let c = Cluster::new();
    let (a, b) = leader_and_standby(&c);
    // The standby has been up through two more of the leader's ticks.
    let seen = count(&c.lines(), "a", "end");
    c.wait_lines("a ticks twice more", |l| count(l, "a", "end") >= seen + 2);
    let lines = c.lines();
    assert_eq!(count(&lines, "a", "startup"), 1, "{lines:#?}");
    assert!(lines.iter().all(|l| l.0 == "a"), "b ran a hook: {lines:#?}");
    assert_eq!(c.holder(), "a");
    let series = "shell_operator_ha_is_leader";
    assert_eq!(metric(&a.http_get("/metrics").1, series), Some(1.0));
    assert_eq!(metric(&b.http_get("/metrics").1, series), Some(0.0));
    assert_eq!(b.http_get("/healthz").0, 200);
    let (code, text) = b.http_get("/ready");
    assert_eq!(
        (code, text.as_str()),
        (200, "standby: waiting for leadership\n")
    );
}

/// SIGKILL of the leader: the standby takes over within lease duration + retry
/// period (plus polling slack) and runs its hooks; no overlap.
#[test]
fn sigkill_takeover_within_lease_and_retry() {
    let c = Cluster::new();
    let (mut a, b) = leader_and_standby(&c);
    a.signal(libc::SIGKILL);
    let killed = Instant::now();
    // Killed by a signal: no exit code, so wait for the process itself.
    a.child.wait().expect("a is reaped");
    b.wait_log("leadership acquired", WAIT);
    let took = killed.elapsed();
    assert!(
        took <= LEASE + RETRY + Duration::from_millis(300),
        "takeover took {took:?}"
    );
    c.wait_lines("b starts and ticks", |l| {
        count(l, "b", "startup") == 1 && count(l, "b", "end") >= 1
    });
    assert_no_overlap(&c.lines(), "a", "b");
    assert_eq!(c.holder(), "b");
}

/// The leader's API access is cut: it stops acting and exits 0 before its lease
/// can expire for the standby (renew deadline < lease duration), its hooks are
/// gone, and the standby takes over; no overlap.
#[test]
fn api_cut_leader_exits_before_standby_takes_over() {
    let c = Cluster::new();
    let (mut a, b) = leader_and_standby(&c);
    c.sim.cut_client("a");
    let code = a.wait_exit(WAIT);
    let exited_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    assert_eq!(code, Some(0), "logs:\n{}", a.logs());
    assert!(a.logs().contains("leadership lost"), "{}", a.logs());
    assert_eq!(processes_mentioning(&a.dir.0.join("hooks")), 0);
    b.wait_log("leadership acquired", WAIT);
    c.wait_lines("b starts", |l| count(l, "b", "startup") == 1);
    let first_b = c
        .lines()
        .iter()
        .filter(|l| l.0 == "b")
        .map(|l| l.2)
        .min()
        .expect("b line");
    assert!(first_b > exited_ns, "b ran a hook before a had exited");
    assert_no_overlap(&c.lines(), "a", "b");
}

/// The leader's requests hang (kube-sim pauses its client): its renew never
/// returns, yet it gives up at the renew deadline by its own clock and exits 0,
/// and the standby then takes over; no overlap.
#[test]
fn hanging_api_leader_gives_up_at_the_renew_deadline() {
    let c = Cluster::new();
    let (mut a, b) = leader_and_standby(&c);
    c.sim.pause_client("a");
    let paused = Instant::now();
    assert_eq!(a.wait_exit(WAIT), Some(0), "logs:\n{}", a.logs());
    let took = paused.elapsed();
    // Renew deadline (2 s) from the last renew, which came at most a retry before.
    assert!(
        took <= Duration::from_millis(2800),
        "gave up after {took:?}"
    );
    assert!(
        a.logs().contains("no renew succeeded within 2s"),
        "{}",
        a.logs()
    );
    b.wait_log("leadership acquired", WAIT);
    c.wait_lines("b starts", |l| count(l, "b", "startup") == 1);
    assert_no_overlap(&c.lines(), "a", "b");
    c.sim.resume_client("a");
}

/// Clock skew: a holder whose clock is decades behind (its `renewTime` in 2000)
/// keeps the lease as long as it renews, because the standby times changes with
/// its own clock; once it stops, the standby takes over one lease duration after
/// the last change it saw.
#[test]
fn skewed_holder_keeps_the_lease_while_it_renews() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let c = Cluster::new();
    let stamp = |n: usize| format!("2000-01-01T00:{:02}:{:02}.000000Z", n / 60, n % 60);
    c.sim
        .create(serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "shell-operator-leader-election", "namespace": "default"},
            "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 3,
                     "acquireTime": stamp(0), "renewTime": stamp(0), "leaseTransitions": 0}
        }))
        .expect("lease");
    let (stop, renews) = (AtomicBool::new(false), AtomicUsize::new(0));
    let a = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(300));
                let n = renews.fetch_add(1, Ordering::SeqCst) + 1;
                let mut lease = lease(&c.sim).expect("lease");
                lease["spec"]["renewTime"] = serde_json::json!(stamp(n));
                c.sim.update(lease).expect("ghost renews");
            }
        });
        let a = c.replica("a");
        a.wait_log("waiting for leadership", WAIT);
        // Renewed over more than one lease duration (12 × 0.3 s = 3.6 s > 3 s).
        let from = renews.load(Ordering::SeqCst);
        while renews.load(Ordering::SeqCst) < from + 12 {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(c.holder(), "ghost");
        assert!(!a.logs().contains("leadership acquired"), "{}", a.logs());
        stop.store(true, Ordering::SeqCst);
        a
    });
    let stopped = Instant::now();
    a.wait_log("leadership acquired", WAIT);
    let took = stopped.elapsed();
    assert!(
        took >= LEASE - RETRY && took <= LEASE + RETRY * 2,
        "took over {took:?} after the holder stopped"
    );
    c.wait_lines("a starts", |l| count(l, "a", "startup") == 1);
    assert_eq!(c.lease_spec()["leaseTransitions"], 1);
}

/// SIGTERM: the leader releases the lease (holder cleared) and the standby takes
/// over well under the lease duration; the lease counts one transition.
#[test]
fn sigterm_releases_for_a_fast_takeover() {
    let c = Cluster::new();
    let (mut a, b) = leader_and_standby(&c);
    a.signal(libc::SIGTERM);
    let stopped = Instant::now();
    assert_eq!(a.wait_exit(WAIT), Some(0));
    assert!(a.logs().contains("leadership released"), "{}", a.logs());
    b.wait_log("leadership acquired", WAIT);
    let took = stopped.elapsed();
    assert!(took < LEASE / 2, "takeover after SIGTERM took {took:?}");
    c.wait_lines("b starts", |l| count(l, "b", "startup") == 1);
    assert_no_overlap(&c.lines(), "a", "b");
    let spec = c.lease_spec();
    assert_eq!(spec["holderIdentity"], "b");
    assert_eq!(spec["leaseTransitions"], 1, "{spec}");
}

/// SIGTERM to a standby: it exits 0 at once, having run no hook, and leaves the
/// holder's Lease alone.
#[test]
fn sigterm_while_waiting_exits_0_without_acting() {
    let c = Cluster::new();
    let (a, mut b) = leader_and_standby(&c);
    b.signal(libc::SIGTERM);
    let sent = Instant::now();
    assert_eq!(b.wait_exit(WAIT), Some(0), "{}", b.logs());
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    assert!(c.lines().iter().all(|l| l.0 == "a"), "{:#?}", c.lines());
    assert_eq!(c.holder(), "a");
    assert!(!b.logs().contains("leadership released"), "{}", b.logs());
    drop(a);
}

/// Timings out of order (renew deadline above lease duration) stop startup with
/// exit 1 and a message naming them.
#[test]
fn timings_out_of_order_exit_1() {
    let dir = TempDir::new("ha-timings");
    let hooks = dir.0.join("hooks");
    std::fs::create_dir_all(&hooks).expect("hooks dir");
    let (code, out, err) = common::run_binary(
        &[
            "start",
            "--ha",
            "--ha-lease-duration",
            "2s",
            "--ha-renew-deadline",
            "3s",
            "--hooks-dir",
            hooks.to_str().expect("utf8"),
            "--listen-port",
            "0",
            "--debug-unix-socket",
            dir.0.join("debug.socket").to_str().expect("utf8"),
        ],
        &[
            ("SHELL_OPERATOR_POD", "x"),
            ("KUBE_SERVER", "http://127.0.0.1:1"),
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("need lease duration (2s) > renew deadline (3s)"),
        "{out}{err}"
    );
}
