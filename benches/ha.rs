//! `make bench` (HA, issue 13): takeover time and the Lease's API cost, measured
//! with real shell-operator replicas (`--ha`) against an in-process kube-sim that
//! tells clients apart by their kubeconfig token.
//!
//! 1. Takeover after SIGKILL and after SIGTERM of the leader: from the signal to
//!    the standby's first onStartup hook line, median (and min/max) of `--rounds`
//!    (10), with lease 3 s / renew deadline 2 s / retry 0.5 s (a fresh Lease name
//!    per round). The signal comes 1.5 s after the standby started, plus 0-450 ms
//!    spread over the rounds, so it falls anywhere in the standby's read cycle.
//! 2. API requests per minute of an idle leader and an idle standby with the
//!    default settings (35 s / 30 s / 10 s), counted by kube-sim over `--idle-secs`
//!    (60). Nothing else in these replicas talks to the API.
//!
//! Usage: `cargo bench --bench ha -- [--operator <binary>] [--rounds N] [--idle-secs S]`
//! (default operator: `target/release/shell-operator`).

mod common;

use kube_sim::Sim;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

const SHORT: [&str; 6] = [
    "--ha-lease-duration",
    "3s",
    "--ha-renew-deadline",
    "2s",
    "--ha-retry-period",
    "500ms",
];

struct Bench {
    operator: PathBuf,
    work: PathBuf,
    sim: Sim,
}

/// One replica: its process and its stdout lines.
struct Replica {
    child: Child,
    lines: Receiver<String>,
}

impl Replica {
    fn wait_line(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100))
                && l.contains(needle)
            {
                return;
            }
        }
        panic!("no log line with {needle:?}");
    }

    fn stop(mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Bench {
    fn replica(&self, name: &str, lease: &str, timings: &[&str]) -> Replica {
        let dir = self.work.join(format!("{lease}-{name}"));
        let hooks = dir.join("hooks");
        common::write_exec(
            &hooks.join("startup.sh"),
            "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"configVersion\":\"v1\",\"onStartup\":1}'; exit 0; fi\n\
             echo \"$SHELL_OPERATOR_POD\" >> \"$HA_LOG\"\n",
        );
        let kubeconfig = dir.join("kubeconfig");
        self.sim
            .write_kubeconfig_for(&kubeconfig, name)
            .expect("kubeconfig");
        let mut child = Command::new(&self.operator)
            .arg("start")
            .arg("--hooks-dir")
            .arg(&hooks)
            .arg("--tmp-dir")
            .arg(dir.join("tmp"))
            .arg("--debug-unix-socket")
            .arg(dir.join("debug.socket"))
            .arg("--kube-config")
            .arg(&kubeconfig)
            .args(["--listen-port", "0", "--namespace", "default", "--ha"])
            .args(["--ha-lease-name", lease])
            .args(timings)
            .env("LOG_TYPE", "json")
            .env("SHELL_OPERATOR_POD", name)
            .env("HA_LOG", self.work.join(format!("{lease}.log")))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the operator");
        let (tx, lines) = std::sync::mpsc::channel();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Replica { child, lines }
    }

    /// Leader `a`, standby `b`; `signal` to `a`; the time until `b`'s hook ran.
    fn takeover(&self, round: usize, signal: i32) -> Duration {
        let lease = format!("bench-{signal}-{round}");
        let log = self.work.join(format!("{lease}.log"));
        let a = self.replica("a", &lease, &SHORT);
        a.wait_line("leadership acquired");
        let b = self.replica("b", &lease, &SHORT);
        b.wait_line("waiting for leadership");
        // The standby has watched a few renews; the offsets spread the signal over
        // one retry period of the standby's reads.
        std::thread::sleep(Duration::from_millis(1500 + 50 * (round as u64 % 10)));
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(a.child.id() as i32, signal) };
        let sent = Instant::now();
        while !has_line(&log, "b") {
            assert!(sent.elapsed() < Duration::from_secs(30), "no takeover");
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = sent.elapsed();
        a.stop();
        b.stop();
        took
    }

    /// Requests per minute of an idle leader and an idle standby (default timings).
    fn idle_rates(&self, secs: u64) -> (f64, f64) {
        let a = self.replica("idle-a", "bench-idle", &[]);
        a.wait_line("leadership acquired");
        let b = self.replica("idle-b", "bench-idle", &[]);
        b.wait_line("waiting for leadership");
        let (a0, b0) = (
            self.sim.client_requests("idle-a"),
            self.sim.client_requests("idle-b"),
        );
        std::thread::sleep(Duration::from_secs(secs));
        let per_min = |n: usize| n as f64 * 60.0 / secs as f64;
        let rates = (
            per_min(self.sim.client_requests("idle-a") - a0),
            per_min(self.sim.client_requests("idle-b") - b0),
        );
        a.stop();
        b.stop();
        rates
    }
}

fn has_line(log: &Path, who: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|t| t.lines().any(|l| l == who))
}

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let ms = |d: Duration| d.as_millis();
    println!(
        "  {name:<28}: median {:>5} ms  (min {} ms, max {} ms, n={})",
        ms(v[v.len() / 2]),
        ms(v[0]),
        ms(v[v.len() - 1]),
        v.len()
    );
}

fn main() {
    let operator = common::arg_value("--operator").map_or_else(
        || PathBuf::from("target/release/shell-operator"),
        PathBuf::from,
    );
    let rounds: usize = common::arg_value("--rounds").map_or(10, |r| r.parse().unwrap_or(10));
    let idle: u64 = common::arg_value("--idle-secs").map_or(60, |r| r.parse().unwrap_or(60));
    let work = std::env::temp_dir().join(format!("so-ha-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");
    let bench = Bench {
        operator,
        work: work.clone(),
        sim: Sim::start(),
    };
    println!(
        "takeover, lease 3 s / renew deadline 2 s / retry 0.5 s (signal → standby's onStartup hook):"
    );
    let kill: Vec<Duration> = (0..rounds)
        .map(|r| bench.takeover(r, libc::SIGKILL))
        .collect();
    summary("after SIGKILL of the leader", kill);
    let term: Vec<Duration> = (0..rounds)
        .map(|r| bench.takeover(r, libc::SIGTERM))
        .collect();
    summary("after SIGTERM of the leader", term);
    let (leader, standby) = bench.idle_rates(idle);
    println!(
        "API requests per minute, idle, lease 35 s / renew deadline 30 s / retry 10 s ({idle} s):"
    );
    println!("  leader  : {leader:.1}");
    println!("  standby : {standby:.1}");
    let _ = std::fs::remove_dir_all(&work);
}
