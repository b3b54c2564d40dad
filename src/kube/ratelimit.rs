//! Client-side flow control: a token bucket of `burst` tokens refilled at `qps` per
//! second, as client-go's `--kube-client-qps/--kube-client-burst`. A caller takes a
//! token before each request and sleeps when the bucket is empty. Shared by every
//! thread using one client; the state is one mutex held for a few arithmetic
//! operations, never while sleeping.
//!
//! Any `f64` is safe: a rate that is not a positive finite number means no limit,
//! and a rate so small that a wait overflows `Duration` waits `Duration::MAX`
//! (`flags.rs` refuses such rates at startup, so this is only a backstop).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A blocking token bucket.
pub(crate) struct TokenBucket {
    /// Tokens per second; 0 when limiting is off (`qps` was <= 0, NaN or infinite).
    qps: f64,
    burst: f64,
    state: Mutex<State>,
}

struct State {
    /// May go negative: each waiter reserves its token before sleeping.
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket; see the module doc for rates that are not positive and finite.
    pub(crate) fn new(qps: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps: if qps.is_finite() && qps > 0.0 {
                qps
            } else {
                0.0
            },
            burst,
            state: Mutex::new(State {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Takes one token, sleeping until it is available; returns the time waited.
    pub(crate) fn acquire(&self) -> Duration {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        wait
    }

    /// Reserves a token at `now` and says how long to wait for it.
    fn reserve(&self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = now.saturating_duration_since(s.last).as_secs_f64();
        s.tokens = (s.tokens + elapsed * self.qps).min(self.burst);
        s.last = now;
        s.tokens -= 1.0;
        if s.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(-s.tokens / self.qps).unwrap_or(Duration::MAX)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_steady_rate() {
        let b = TokenBucket::new(10.0, 3);
        let t0 = Instant::now();
        // Three free tokens, then each one 100 ms apart.
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        let w = b.reserve(t0);
        assert!((w.as_secs_f64() - 0.1).abs() < 1e-6, "{w:?}");
        let w = b.reserve(t0);
        assert!((w.as_secs_f64() - 0.2).abs() < 1e-6, "{w:?}");
        // After a long idle time the bucket is full again, never fuller.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.reserve(later), Duration::ZERO);
        }
        assert!(b.reserve(later) > Duration::ZERO);
    }

    #[test]
    fn real_time_rate_over_threads() {
        let b = std::sync::Arc::new(TokenBucket::new(50.0, 5));
        let t0 = Instant::now();
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        b.acquire();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        // 40 tokens, 5 free, 35 at 50/s = 0.7 s.
        let el = t0.elapsed().as_secs_f64();
        // The upper bound is loose: a loaded CI machine delays threads.
        assert!((0.65..3.0).contains(&el), "{el}");
    }

    /// No rate panics: what cannot be a rate means no limit, and a rate too small
    /// to schedule gives the longest wait instead of overflowing `Duration`.
    #[test]
    fn any_rate_is_safe() {
        let t0 = Instant::now();
        for qps in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 0.0, 1e308] {
            let b = TokenBucket::new(qps, 1);
            for _ in 0..3 {
                assert_eq!(b.reserve(t0), Duration::ZERO, "qps {qps}");
            }
        }
        let b = TokenBucket::new(1e-30, 1);
        assert_eq!(b.reserve(t0), Duration::ZERO, "the burst token is free");
        assert_eq!(b.reserve(t0), Duration::MAX);
        assert_eq!(b.reserve(t0 + Duration::from_secs(3600)), Duration::MAX);
    }

    #[test]
    fn disabled_never_waits() {
        let b = TokenBucket::new(-1.0, 1);
        for _ in 0..1000 {
            assert_eq!(b.acquire(), Duration::ZERO);
        }
    }
}
