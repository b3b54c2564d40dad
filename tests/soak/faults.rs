//! API faults injected into kube-sim at random (seeded) moments while the driver
//! runs: dropped watch streams, compaction (the next watch from an old
//! resourceVersion gets 410 and the operator must relist), bursts of 500s and of
//! 429s (kube-sim adds `Retry-After: 1`), and slow responses. Each burst and
//! compaction also drops the watches so the operator's reconnect meets it at once.

use crate::settings::Rng;
use kube_sim::Sim;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub struct Injector {
    rng: Rng,
    next_at: Instant,
    slow_until: Option<Instant>,
    /// Faults injected, by name.
    pub counts: BTreeMap<&'static str, u64>,
    /// When the last fault was injected.
    pub last_injected: Option<Instant>,
    started: Instant,
}

impl Injector {
    pub fn new(rng: Rng) -> Injector {
        let now = Instant::now();
        Injector {
            rng,
            next_at: now + Duration::from_secs(2),
            slow_until: None,
            counts: BTreeMap::new(),
            last_injected: None,
            started: now,
        }
    }

    /// Injects the next fault when it is due; ends a slow spell when it is over.
    pub fn tick(&mut self, sim: &Sim) {
        let now = Instant::now();
        if self.slow_until.is_some_and(|t| now >= t) {
            sim.set_delay(Duration::ZERO);
            self.slow_until = None;
        }
        if now < self.next_at {
            return;
        }
        let fault = self.inject(sim);
        println!(
            "soak: t={:>6.1}s fault {fault}",
            self.started.elapsed().as_secs_f64()
        );
        self.next_at = now + self.rng.millis(1_500, 5_000);
        self.last_injected = Some(now);
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
                let n = 3 + self.rng.below(8) as usize;
                sim.fail_next(n, code);
                sim.drop_watches();
                (
                    if code == 500 {
                        "burst_500"
                    } else {
                        "burst_429"
                    },
                    format!(" x{n}"),
                )
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
        self.slow_until = None;
        Instant::now()
    }

    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}
