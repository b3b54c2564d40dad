//! API faults injected into kube-sim at random (seeded) moments while the driver
//! runs: dropped watch streams, compaction (the next watch from an old
//! resourceVersion gets 410 and the operator must relist), bursts of 500s and of
//! 429s (kube-sim adds `Retry-After: 1`), and slow responses. Each burst and
//! compaction also drops the watches so the operator's reconnect meets it at once.
//! Bursts are time windows (every request fails for 0.5–3 s), as an API server's
//! outage is: a burst of "the next n requests" would wait for a backed-off client
//! and meet every one of its retries. The last 6 s of the drive are always the
//! same finale (slow responses with 429s, then 500s with a compaction), so the
//! recovery figure measured after it compares across runs and seeds.

use crate::settings::Rng;
use kube_sim::Sim;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// "Every request until told otherwise", for `fail_next`.
const ALL: usize = usize::MAX;

pub struct Injector {
    rng: Rng,
    next_at: Instant,
    slow_until: Option<Instant>,
    burst_until: Option<Instant>,
    /// Faults injected, by name.
    pub counts: BTreeMap<&'static str, u64>,
    /// When the last fault was injected.
    pub last_injected: Option<Instant>,
    started: Instant,
    finale_step: u8,
}

impl Injector {
    pub fn new(rng: Rng) -> Injector {
        let now = Instant::now();
        Injector {
            rng,
            next_at: now + Duration::from_secs(2),
            slow_until: None,
            burst_until: None,
            counts: BTreeMap::new(),
            last_injected: None,
            started: now,
            finale_step: 0,
        }
    }

    /// Injects the next fault when it is due (`left`: drive time remaining); ends a
    /// slow spell when it is over.
    pub fn tick(&mut self, sim: &Sim, left: Duration) {
        let now = Instant::now();
        if left <= Duration::from_secs(6) {
            return self.finale(sim, left);
        }
        if self.slow_until.is_some_and(|t| now >= t) {
            sim.set_delay(Duration::ZERO);
            self.slow_until = None;
        }
        if self.burst_until.is_some_and(|t| now >= t) {
            sim.fail_next(0, 500);
            self.burst_until = None;
        }
        if now < self.next_at {
            return;
        }
        let fault = self.inject(sim);
        self.note(fault);
        self.next_at = now + self.rng.millis(1_500, 5_000);
    }

    fn note(&mut self, fault: String) {
        let t = self.started.elapsed().as_secs_f64();
        println!("soak: t={t:>6.1}s fault {fault}");
        self.last_injected = Some(Instant::now());
    }

    /// 6 s before the end: 300 ms responses, every request 429, watches dropped;
    /// 3 s before: every request 500, compaction, watches dropped. [`Injector::quiet`]
    /// ends both.
    fn finale(&mut self, sim: &Sim, left: Duration) {
        if self.finale_step == 0 {
            (self.slow_until, self.burst_until) = (None, None);
            sim.set_delay(Duration::from_millis(300));
            sim.fail_next(ALL, 429);
            sim.drop_watches();
            self.finale_step = 1;
            self.count(&["slow", "burst_429"]);
            self.note("finale: slow 300ms + 429s for 3s".to_string());
        } else if self.finale_step == 1 && left <= Duration::from_secs(3) {
            sim.fail_next(ALL, 500);
            sim.compact();
            sim.drop_watches();
            self.finale_step = 2;
            self.count(&["burst_500", "compact"]);
            self.note("finale: 500s for 3s + compact".to_string());
        }
    }

    fn count(&mut self, names: &[&'static str]) {
        for name in names {
            *self.counts.entry(name).or_default() += 1;
        }
    }

    fn inject(&mut self, sim: &Sim) -> String {
        let (name, detail) = match self.rng.below(6) {
            0 | 1 => {
                sim.drop_watches();
                ("drop_watches", String::new())
            }
            2 => {
                sim.compact();
                sim.drop_watches();
                ("compact", String::new())
            }
            3 | 4 => {
                let code = if self.rng.chance(50) { 500 } else { 429 };
                let window = self.rng.millis(500, 3_000);
                sim.fail_next(ALL, code);
                sim.drop_watches();
                self.burst_until = Some(Instant::now() + window);
                let name = if code == 500 {
                    "burst_500"
                } else {
                    "burst_429"
                };
                (name, format!(" for {window:?}"))
            }
            _ => {
                let delay = self.rng.millis(100, 700);
                let spell = self.rng.millis(2_000, 6_000);
                sim.set_delay(delay);
                self.slow_until = Some(Instant::now() + spell);
                ("slow", format!(" {delay:?} for {spell:?}"))
            }
        };
        *self.counts.entry(name).or_default() += 1;
        format!("{name}{detail}")
    }

    /// Ends every fault now (delay off, pending failures dropped); returns the moment.
    pub fn quiet(&mut self, sim: &Sim) -> Instant {
        sim.set_delay(Duration::ZERO);
        sim.fail_next(0, 500);
        (self.slow_until, self.burst_until) = (None, None);
        Instant::now()
    }

    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}
