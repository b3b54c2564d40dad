//! Exponential backoff with jitter, used by request retries and by the reflector's
//! reconnects; plus a tiny seedless random source for the jitter (no rand crate).
//! Each value is owned by one thread.

use std::cell::Cell;
use std::time::Duration;

/// Doubles from `base` up to `cap`; each delay is jittered to [d/2, d).
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    cap: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff whose first delay is about `base`.
    pub(crate) fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff {
            base,
            cap,
            next: base,
        }
    }

    /// The next delay, jittered; later calls grow until `cap`.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.cap);
        jitter(d)
    }

    /// Back to `base` after a success.
    pub(crate) fn reset(&mut self) {
        self.next = self.base;
    }
}

/// A random duration in [d/2, d).
pub(crate) fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    half + half.mul_f64(random_unit())
}

thread_local! {
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9e37_79b9);
    let local = 0u8;
    t ^ (&local as *const u8 as u64).rotate_left(32) | 1
}

/// A float in [0, 1) from a per-thread xorshift generator.
pub(crate) fn random_unit() -> f64 {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_cap_with_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(800), Duration::from_secs(30));
        let want = [800u64, 1600, 3200, 6400, 12800, 25600, 30000, 30000];
        for w in want {
            let d = b.next_delay().as_millis() as u64;
            assert!(d >= w / 2 && d < w.max(1), "{d} not in [{}, {w})", w / 2);
        }
        b.reset();
        assert!(b.next_delay() < Duration::from_millis(800));
    }

    #[test]
    fn random_is_spread() {
        let xs: Vec<f64> = (0..1000).map(|_| random_unit()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f64>() / 1000.0;
        assert!((0.4..0.6).contains(&mean), "{mean}");
    }
}
