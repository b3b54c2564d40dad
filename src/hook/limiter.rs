//! The per-hook execution rate limit (`settings.executionMinInterval` /
//! `executionBurst`): a token bucket with one token per interval and room for
//! `burst` tokens, full at start, like Go's `rate.Limiter` that flant uses.
//!
//! Queue threads reserve a token before running a hook and wait out the returned
//! delay (while still collecting new tasks, so events pile up and get combined).

use crate::hook::config::Settings;
use std::time::{Duration, Instant};

/// A token bucket; `interval == None` means no limit.
#[derive(Debug)]
pub struct TokenBucket {
    interval: Option<Duration>,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// flant's defaults: no interval (or 0) means unlimited, burst 0 means 1.
    pub fn from_settings(settings: &Settings) -> TokenBucket {
        let interval = settings.execution_min_interval.filter(|d| !d.is_zero());
        let burst = f64::from(settings.execution_burst.unwrap_or(1).max(1));
        TokenBucket {
            interval,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// Takes a token (possibly in advance) and returns how long to wait before using it.
    pub(crate) fn reserve(&mut self, now: Instant) -> Duration {
        let Some(interval) = self.interval else {
            return Duration::ZERO;
        };
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed / interval.as_secs_f64()).min(self.burst) - 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            interval.mul_f64(-self.tokens)
        }
    }
}

impl TokenBucket {
    /// Gives back a token reserved but not used (a webhook request refused
    /// because the wait was too long), so refusals do not push later runs back.
    pub(crate) fn refund(&mut self) {
        if self.interval.is_some() {
            self.tokens = (self.tokens + 1.0).min(self.burst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(interval: u64, burst: Option<u32>) -> TokenBucket {
        TokenBucket::from_settings(&Settings {
            execution_min_interval: Some(Duration::from_secs(interval)),
            execution_burst: burst,
        })
    }

    #[test]
    fn unlimited_by_default() {
        let mut b = TokenBucket::from_settings(&Settings::default());
        let now = Instant::now();
        assert!((0..100).all(|_| b.reserve(now).is_zero()));
    }

    #[test]
    fn burst_then_one_per_interval() {
        let mut b = bucket(10, Some(3));
        let t0 = Instant::now();
        assert_eq!(
            [b.reserve(t0), b.reserve(t0), b.reserve(t0)],
            [Duration::ZERO; 3]
        );
        assert_eq!(b.reserve(t0), Duration::from_secs(10));
        assert_eq!(b.reserve(t0), Duration::from_secs(20));
        // 35 s later: tokens were -2, +3.5 → 1.5, take one → 0.5 left.
        assert_eq!(b.reserve(t0 + Duration::from_secs(35)), Duration::ZERO);
    }

    #[test]
    fn refund_gives_the_token_back() {
        let mut b = bucket(10, Some(1));
        let t0 = Instant::now();
        assert!(b.reserve(t0).is_zero());
        assert_eq!(b.reserve(t0), Duration::from_secs(10));
        b.refund();
        assert_eq!(b.reserve(t0), Duration::from_secs(10));
    }

    #[test]
    fn burst_zero_means_one() {
        let mut b = bucket(3, Some(0));
        let t0 = Instant::now();
        assert!(b.reserve(t0).is_zero());
        assert_eq!(b.reserve(t0), Duration::from_secs(3));
    }
}
