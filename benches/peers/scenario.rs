//! One trial of `make bench-peers`: a server holding 10k pods (benches/peers/cluster.rs),
//! one contender started against it, and the figures: time until every pod was seen, RSS idle
//! after that, latency of 50 label updates 50 ms apart, a burst of 2,000 patches,
//! and, over the whole scenario, peak RSS and CPU (utime+stime).

use crate::cluster::Cluster;
use crate::contender::{self, Contender, Programs};
use crate::seen::{Seen, now_ns};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

pub const UPDATES: usize = 50;
pub const BURST: usize = 2_000;
const BURST_THREADS: usize = 4;

/// What one trial measured (times in ms, memory in MB, CPU in s).
pub struct Figures {
    pub ready_ms: f64,
    pub idle_mb: f64,
    pub peak_mb: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub burst_ms: f64,
    /// Hook runs (distinct start stamps) that handed the burst's pods over; for
    /// kopf and the floor, one per event.
    pub burst_runs: f64,
    /// CPU of the process and its waited children during the burst (s).
    pub burst_cpu_s: f64,
    pub cpu_s: f64,
    pub cpu_children_s: f64,
}

/// Runs the scenario once for `who` against `sim`; `work` gets the files.
pub fn trial(
    who: Contender,
    programs: &Programs,
    sim: &Cluster,
    work: &Path,
) -> Result<Figures, String> {
    let out = work.join("out");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(work.join("trace"));
    let mut seen = Seen::new(out.clone());
    let started = now_ns();
    let mut child = contender::start(who, programs, sim, work, &out)?;
    let result = measure(&mut seen, sim, &child, started, &work.join("trace"));
    let _ = child.kill();
    let _ = child.wait();
    result.map_err(|e| format!("{}: {e}", who.label()))
}

fn measure(
    seen: &mut Seen,
    sim: &Cluster,
    child: &Child,
    started: u128,
    trace: &Path,
) -> Result<Figures, String> {
    let all: Vec<(String, u128)> = (0..sim.pods).map(|i| (pod_name(i), started)).collect();
    let ready = wait_all(
        seen,
        &all,
        child,
        Duration::from_secs(600),
        "the initial pods",
    )?;
    std::thread::sleep(Duration::from_secs(2));
    let idle = proc_status(child, "VmRSS:");
    let pairs = updates(seen, sim, child)?;
    if let Some(stages) = crate::trace::breakdown(trace, &pairs) {
        eprintln!("  where event -> exec goes, {stages}");
    }
    let mut lat: Vec<f64> = pairs.iter().map(|(s, h)| ms(h - s)).collect();
    lat.sort_by(f64::total_cmp);
    let cpu_before = cpu_seconds(child, true);
    let (burst, burst_runs) = burst(seen, sim, child)?;
    let burst_cpu_s = cpu_seconds(child, true) - cpu_before;
    Ok(Figures {
        ready_ms: ms(max(&ready) - started),
        idle_mb: idle,
        peak_mb: proc_status(child, "VmHWM:"),
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
        burst_ms: burst,
        burst_runs,
        burst_cpu_s,
        cpu_s: cpu_seconds(child, false),
        cpu_children_s: cpu_seconds(child, true),
    })
}

pub fn pod_name(i: usize) -> String {
    format!("pod-{i:05}")
}

/// Labels pods 0..50, one every 50 ms; for each, when its request was sent and
/// when it was seen (unix ns).
fn updates(seen: &mut Seen, sim: &Cluster, child: &Child) -> Result<Vec<(u128, u128)>, String> {
    let mut wanted = Vec::new();
    for i in 0..UPDATES {
        let sent = now_ns();
        sim.patch_label(i, &format!("u{i}"))?;
        wanted.push((pod_name(i), sent));
        std::thread::sleep(Duration::from_millis(50));
    }
    let at = wait_all(
        seen,
        &wanted,
        child,
        Duration::from_secs(60),
        "the 50 updates",
    )?;
    Ok(at.iter().zip(&wanted).map(|(t, (_, s))| (*s, *t)).collect())
}

/// Patches pods 1000..3000 from a few threads at once; ms from the first request
/// until the last of them was seen, and how many hook runs saw them.
fn burst(seen: &mut Seen, sim: &Cluster, child: &Child) -> Result<(f64, f64), String> {
    let start = now_ns();
    let per = BURST / BURST_THREADS;
    let sent: Result<(), String> = std::thread::scope(|s| {
        let senders: Vec<_> = (0..BURST_THREADS)
            .map(|k| {
                s.spawn(move || {
                    (1000 + k * per..1000 + (k + 1) * per)
                        .try_for_each(|i| sim.patch_label(i, "burst"))
                })
            })
            .collect();
        senders
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| "burst sender panicked".to_string())?)
    });
    sent?;
    let wanted: Vec<(String, u128)> = (1000..1000 + BURST).map(|i| (pod_name(i), start)).collect();
    let at = wait_all(seen, &wanted, child, Duration::from_secs(120), "the burst")?;
    Ok((ms(max(&at) - start), seen.stamps_since(start) as f64))
}

/// Polls the out file until every wanted name was seen after its time.
fn wait_all(
    seen: &mut Seen,
    wanted: &[(String, u128)],
    child: &Child,
    limit: Duration,
    what: &str,
) -> Result<Vec<u128>, String> {
    let deadline = Instant::now() + limit;
    loop {
        seen.refresh();
        if let Some(at) = seen.all_after(wanted) {
            return Ok(at);
        }
        if Instant::now() > deadline {
            return Err(format!("{what} not all seen within {limit:?}"));
        }
        if !std::fs::exists(format!("/proc/{}", child.id())).unwrap_or(false) {
            return Err(format!("the process exited while waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `/proc/<pid>/status` field in MB (the file gives kB).
fn proc_status(child: &Child, field: &str) -> f64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    kb * 1024.0 / 1e6
}

/// utime+stime of the process itself in seconds; with `children`, plus
/// cutime+cstime (the children it has waited for: our hooks, with their jq).
pub fn cpu_seconds(child: &Child, children: bool) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    // Fields after the `(comm)`: state is the 1st, utime..cstime the 12th..15th.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let field = |n: usize| -> f64 {
        after
            .split_whitespace()
            .nth(n)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let own = field(11) + field(12);
    let waited = if children { field(13) + field(14) } else { 0.0 };
    (own + waited) / clock_ticks()
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 if that fails).
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn ms(ns: u128) -> f64 {
    ns as f64 / 1e6
}

fn max(times: &[u128]) -> u128 {
    times.iter().copied().max().unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}
