//! Watches the operator process from outside through /proc: every 2 s its RSS
//! (VmRSS), open file descriptors (/proc/PID/fd) and threads (/proc/PID/task);
//! (also split in RssAnon and RssFile); every 0.5 s its children, to learn the hooks' process groups (checked to be
//! gone after the operator exits) and to catch zombies it does not reap.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One resource sample.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at: Duration,
    /// VmRSS: anonymous + file-backed + shared memory pages.
    pub rss_kb: u64,
    /// RssAnon: heap, stacks — what a leak grows.
    pub anon_kb: u64,
    /// RssFile: mapped files, mostly the binary's code as it is paged in.
    pub file_kb: u64,
    pub fds: u64,
    pub threads: u64,
}

/// What the sampler has gathered.
#[derive(Default)]
pub struct Observed {
    pub samples: Vec<Sample>,
    /// Process groups of the operator's children (the hooks' groups).
    pub child_groups: BTreeSet<i32>,
    /// Zombie children seen in three scans in a row (over a second unreaped).
    pub lasting_zombies: BTreeSet<i32>,
}

pub struct Sampler {
    stop: Arc<AtomicBool>,
    pub observed: Arc<Mutex<Observed>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    pub fn spawn(pid: i32, started: Instant) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let observed = Arc::new(Mutex::new(Observed::default()));
        let (flag, sink) = (Arc::clone(&stop), Arc::clone(&observed));
        let thread = std::thread::spawn(move || run(pid, started, &flag, &sink));
        Sampler {
            stop,
            observed,
            thread: Some(thread),
        }
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(pid: i32, started: Instant, stop: &AtomicBool, sink: &Mutex<Observed>) {
    let mut zombie_streak: BTreeMap<i32, u32> = BTreeMap::new();
    let mut scans = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let children = children_of(pid);
        let mut seen = sink.lock().expect("sampler lock");
        seen.child_groups.extend(children.iter().map(|c| c.pgid));
        zombie_streak.retain(|p, _| children.iter().any(|c| c.pid == *p && c.state == 'Z'));
        for c in children.iter().filter(|c| c.state == 'Z') {
            let streak = zombie_streak.entry(c.pid).or_default();
            *streak += 1;
            if *streak >= 3 {
                seen.lasting_zombies.insert(c.pid);
            }
        }
        if scans % 4 == 0 {
            if let Some(s) = sample(pid, started.elapsed()) {
                seen.samples.push(s);
            }
        }
        drop(seen);
        scans += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// RSS, fds and threads of `pid` now; None once it is gone.
pub fn sample(pid: i32, at: Duration) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some(Sample {
        at,
        rss_kb: field("VmRSS:")?,
        anon_kb: field("RssAnon:")?,
        file_kb: field("RssFile:")?,
        fds: count_entries(&format!("/proc/{pid}/fd")),
        threads: count_entries(&format!("/proc/{pid}/task")),
    })
}

fn count_entries(dir: &str) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| d.count() as u64)
}

/// A process as /proc/PID/stat shows it.
#[derive(Debug, Clone, Copy)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub state: char,
}

/// Every process on the machine.
pub fn all_processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| stat(Path::new(&format!("/proc/{pid}/stat")), pid))
        .collect()
}

fn children_of(pid: i32) -> Vec<Proc> {
    all_processes()
        .into_iter()
        .filter(|p| p.ppid == pid)
        .collect()
}

/// Parses `pid (comm) state ppid pgrp ...`; comm may hold spaces and parens.
fn stat(path: &Path, pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(path).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        pgid,
        state,
    })
}

/// The median of `values` (sorted copy; lower middle for an even count).
pub fn median(values: &[u64]) -> u64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// Samples after warm-up, split in thirds: (median of the first, of the last).
pub fn thirds_medians(samples: &[Sample], pick: impl Fn(&Sample) -> u64) -> (u64, u64) {
    let values: Vec<u64> = samples.iter().map(pick).collect();
    let third = (values.len() / 3).max(1);
    let first = median(&values[..third.min(values.len())]);
    let last = median(&values[values.len().saturating_sub(third)..]);
    (first, last)
}

/// max − min of one measure over `samples`.
pub fn spread(samples: &[Sample], pick: impl Fn(&Sample) -> u64) -> (u64, u64) {
    let values = samples.iter().map(pick);
    let (min, max) = values.fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
    (min, max)
}
