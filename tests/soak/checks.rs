//! The end of a soak: stops the operator with SIGTERM, prints the figures (changes,
//! faults, recovery time, RSS/fds/threads, webhook answers, schedule runs), and
//! asserts the outcome: the ledger against the driver's record, flat resources
//! after warm-up, answered reviews, a running schedule, exit 0 and no process left.

use crate::admission::Tally;
use crate::driver::{Driver, server_state};
use crate::faults::Injector;
use crate::hooks::KINDS;
use crate::launch::Running;
use crate::ledger::KindLedger;
use crate::procs::{self, Observed, Sample};
use crate::settings::Settings;
use std::path::Path;
use std::time::{Duration, Instant};

/// RSS may move this much (percent) between the first and last third after warm-up.
const RSS_PERCENT: u64 = 5;
/// fds and threads may spread this much after warm-up: up to 4 hooks running at once
/// (each with a stdout and a stderr pipe and a reader thread), a handful of
/// admission connections and their handler threads (curl opens one per review), and
/// the watch and request connections that faults make the client reopen.
const FD_SPREAD: u64 = 24;
const THREAD_SPREAD: u64 = 24;

/// SIGTERM, then the exit code (None: still running after 30 s, then killed).
pub fn stop(op: &mut Running) -> Option<i32> {
    op.signal(libc::SIGTERM);
    match op.wait_exit(Duration::from_secs(30)) {
        Some(code) => code,
        None => {
            let _ = op.child.kill();
            None
        }
    }
}

pub struct Report<'a> {
    pub settings: &'a Settings,
    pub driver: &'a Driver<'a>,
    pub ledgers: &'a [KindLedger; 2],
    pub faults: &'a Injector,
    pub sim: &'a kube_sim::Sim,
    pub recovery: Option<Duration>,
    pub quiet_at: Instant,
    pub run_time: Duration,
    pub observed: &'a Observed,
    pub tally: &'a Tally,
    pub ticks: String,
}

impl Report<'_> {
    /// Samples after warm-up.
    fn steady(&self) -> Vec<Sample> {
        let warm = self.settings.warm_up();
        self.observed
            .samples
            .iter()
            .copied()
            .filter(|s| s.at >= warm)
            .collect()
    }

    /// Driver updates the hooks never saw, all coalesced by relists after a 410.
    fn coalesced(&self) -> u64 {
        (0..2)
            .map(|k| {
                let record = &self.driver.records[k];
                record
                    .history
                    .iter()
                    .map(|(name, (last, _))| {
                        let seen = self.ledgers[k]
                            .objects
                            .get(name)
                            .map_or(0, |s| s.counters.len() as u64);
                        (last + 1).saturating_sub(seen)
                    })
                    .sum::<u64>()
            })
            .sum()
    }

    pub fn print(&self) {
        let d = self.driver;
        let secs = self.settings.drive().as_secs_f64();
        println!(
            "soak: ran {:.0} s (driving {secs:.0} s); changes {} ({:.0}/s): creates {}, updates {}, deletes {}",
            self.run_time.as_secs_f64(),
            d.total(),
            d.total() as f64 / secs,
            d.records.iter().map(|r| r.creates).sum::<u64>(),
            d.records.iter().map(|r| r.updates).sum::<u64>(),
            d.records.iter().map(|r| r.deletes).sum::<u64>(),
        );
        println!(
            "soak: faults {} {:?}",
            self.faults.total(),
            self.faults.counts
        );
        let since_injection = self
            .faults
            .last_injected
            .map(|t| self.quiet_at.duration_since(t));
        println!(
            "soak: recovery: hooks matched the server {:?} after the faults were cleared ({:?} before that the last fault was injected)",
            self.recovery, since_injection
        );
        for (k, l) in self.ledgers.iter().enumerate() {
            println!(
                "soak: {}: hook runs {}, contexts {}, objects seen {}, problems {}",
                KINDS[k].0,
                l.runs,
                l.contexts,
                l.objects.len(),
                l.problems.len()
            );
        }
        println!(
            "soak: updates coalesced by 410 relists: {}",
            self.coalesced()
        );
        self.print_resources();
        let mut lat = self.tally.latencies_ms.clone();
        lat.sort_unstable();
        let pct = |p: usize| {
            lat.get((lat.len() * p / 100).min(lat.len().saturating_sub(1)))
                .copied()
        };
        println!(
            "soak: admission reviews {} (failed {}), latency p50 {:?} ms p99 {:?} ms (curl process included)",
            self.tally.answered,
            self.tally.failures.len(),
            pct(50),
            pct(99)
        );
        println!("soak: schedule runs {}", self.ticks.lines().count());
    }

    fn print_resources(&self) {
        let all = &self.observed.samples;
        let steady = self.steady();
        let (first, last) = (all.first(), all.last());
        println!(
            "soak: samples {} ({} after warm-up); first {first:?}; last {last:?}",
            all.len(),
            steady.len()
        );
        let (rss0, rss1) = procs::thirds_medians(&steady, |s| s.rss_kb);
        println!(
            "soak: RSS median first third {rss0} kB, last third {rss1} kB ({:+.1} %)",
            (rss1 as f64 - rss0 as f64) * 100.0 / rss0.max(1) as f64
        );
        let (anon0, anon1) = procs::thirds_medians(&steady, |s| s.anon_kb);
        println!("soak: RssAnon median first third {anon0} kB, last third {anon1} kB");
        println!(
            "soak: after warm-up, by sixths (medians, kB): {}",
            timeline(&steady)
        );
        println!(
            "soak: fds min..max {:?}, threads min..max {:?} (after warm-up)",
            procs::spread(&steady, |s| s.fds),
            procs::spread(&steady, |s| s.threads)
        );
    }

    /// What differs between the hooks' view and kube-sim, briefly.
    pub fn diff(&self) -> String {
        let mut out = String::new();
        for (k, (kind, _)) in KINDS.iter().enumerate() {
            let server = server_state(self.sim, k);
            let view = &self.ledgers[k].view;
            let missing: Vec<_> = server
                .iter()
                .filter(|(n, c)| view.get(*n) != Some(c))
                .take(10)
                .collect();
            let extra: Vec<_> = view
                .iter()
                .filter(|(n, _)| !server.contains_key(*n))
                .take(10)
                .collect();
            out.push_str(&format!(
                "{}: server has {}, hooks have {}; differing on the server side {missing:?}; only in the hooks {extra:?}\n",
                kind,
                server.len(),
                view.len()
            ));
        }
        out
    }

    pub fn assert_all(&self, code: Option<i32>, hooks_dir: &Path) {
        self.assert_ledger();
        self.assert_flat();
        assert!(
            self.tally.answered >= 10 && self.tally.failures.is_empty(),
            "admission answers {}, failures: {:#?}",
            self.tally.answered,
            self.tally.failures
        );
        self.assert_schedule();
        assert_eq!(code, Some(0), "exit code on SIGTERM");
        self.assert_nothing_left(hooks_dir);
    }

    /// Every create and delete exactly once; updates only skipped when a 410 was injected.
    fn assert_ledger(&self) {
        for (k, (kind, _)) in KINDS.iter().enumerate() {
            let l = &self.ledgers[k];
            assert!(
                l.problems.is_empty(),
                "{}: {} problems, first: {:#?}",
                kind,
                l.problems.len(),
                &l.problems[..l.problems.len().min(20)]
            );
            for (name, (_, deleted)) in &self.driver.records[k].history {
                let seen = l.objects.get(name);
                let (appeared, deletes) = seen.map_or((0, 0), |s| (s.appearances, s.deletes));
                assert_eq!(appeared, 1, "{} {name}: appearances", kind);
                assert_eq!(
                    deletes,
                    u32::from(*deleted),
                    "{} {name}: Deleted events",
                    kind
                );
            }
        }
        let compactions = self.faults.counts.get("compact").copied().unwrap_or(0);
        assert!(
            self.coalesced() == 0 || compactions > 0,
            "updates went missing with no 410 injected"
        );
    }

    fn assert_flat(&self) {
        let steady = self.steady();
        assert!(
            steady.len() >= 6,
            "too few samples after warm-up: {}",
            steady.len()
        );
        let (rss0, rss1) = procs::thirds_medians(&steady, |s| s.rss_kb);
        assert!(
            rss1.abs_diff(rss0) * 100 <= rss0 * RSS_PERCENT,
            "RSS moved from {rss0} kB to {rss1} kB (more than {RSS_PERCENT} %)"
        );
        let (f0, f1) = procs::spread(&steady, |s| s.fds);
        assert!(f1 - f0 <= FD_SPREAD, "fds spread {f0}..{f1}");
        let (t0, t1) = procs::spread(&steady, |s| s.threads);
        assert!(t1 - t0 <= THREAD_SPREAD, "threads spread {t0}..{t1}");
    }

    /// At least one run per two seconds, and runs until the end.
    fn assert_schedule(&self) {
        let runs = self.ticks.lines().count() as u64;
        let secs = self.run_time.as_secs();
        assert!(runs * 2 >= secs, "schedule ran {runs} times in {secs} s");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last: u64 = self
            .ticks
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0);
        assert!(
            now.saturating_sub(last) <= 40,
            "the last schedule run was {} s ago",
            now - last
        );
    }

    /// No zombie left unreaped during the run; after the exit no process of the
    /// hooks' groups and none running a hook remains (10 s of grace). A hook's
    /// child killed together with its shell is re-parented to PID 1 and is a zombie
    /// until PID 1 reaps it; this machine's PID 1 does that late, so such dead
    /// processes are reported, not failed.
    fn assert_nothing_left(&self, hooks_dir: &Path) {
        assert!(
            self.observed.lasting_zombies.is_empty(),
            "unreaped zombies: {:?}",
            self.observed.lasting_zombies
        );
        assert!(
            !self.observed.child_groups.is_empty(),
            "the sampler saw no hook process at all"
        );
        let mut left = self.hook_group_processes();
        let deadline = Instant::now() + Duration::from_secs(10);
        while left.iter().any(|p| !dead_under_init(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            left = self.hook_group_processes();
        }
        let (dead, live): (Vec<_>, Vec<_>) = left.into_iter().partition(dead_under_init);
        if !dead.is_empty() {
            println!("soak: zombies of hook children waiting for PID 1 to reap them: {dead:?}");
        }
        assert!(
            live.is_empty(),
            "processes of the hooks' groups outlived the operator: {live:?}"
        );
        assert_eq!(
            crate::common::processes_mentioning(hooks_dir),
            0,
            "hook processes left"
        );
    }

    fn hook_group_processes(&self) -> Vec<procs::Proc> {
        // SAFETY: getpgrp(2) has no preconditions.
        let own_group = unsafe { libc::getpgrp() };
        procs::all_processes()
            .into_iter()
            .filter(|p| p.pgid != own_group && self.observed.child_groups.contains(&p.pgid))
            .collect()
    }
}

/// `t=…s rss/anon/file` for each sixth of `samples`.
fn timeline(samples: &[Sample]) -> String {
    let size = samples.len().div_ceil(6).max(1);
    samples
        .chunks(size)
        .map(|part| {
            let m = |f: fn(&Sample) -> u64| procs::median(&part.iter().map(f).collect::<Vec<_>>());
            format!(
                "t={:.0}s {}/{}/{}",
                part[0].at.as_secs_f64(),
                m(|s| s.rss_kb),
                m(|s| s.anon_kb),
                m(|s| s.file_kb)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn dead_under_init(p: &procs::Proc) -> bool {
    p.state == 'Z' && p.ppid == 1
}
