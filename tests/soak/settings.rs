//! What a soak run is told by its environment (`SOAK_SECONDS`, `SOAK_SEED`,
//! `SOAK_RELEASE`, `SOAK_OPERATOR`) and the seeded random source every random
//! choice of the run comes from, so a failing run can be replayed with its seed.

use std::path::PathBuf;
use std::time::Duration;

/// One run's settings.
pub struct Settings {
    /// Whole run, start of changes to the end of the quiet tail.
    pub total: Duration,
    /// The seed of [`Rng`], printed at the start.
    pub seed: u64,
    /// The operator binary under test.
    pub binary: PathBuf,
}

impl Settings {
    /// Reads the environment; the defaults are the 2-minute CI run on the debug binary.
    pub fn from_env() -> Settings {
        let seconds = env_u64("SOAK_SECONDS").unwrap_or(120).max(20);
        let seed = env_u64("SOAK_SEED").unwrap_or_else(time_seed);
        Settings {
            total: Duration::from_secs(seconds),
            seed,
            binary: binary(),
        }
    }

    /// The quiet tail: no faults and no changes, the hooks catch up with the
    /// server. A third of the run, at most a minute.
    pub fn tail(&self) -> Duration {
        (self.total / 3).min(Duration::from_secs(60))
    }

    /// Changes and faults run until the quiet tail.
    pub fn drive(&self) -> Duration {
        self.total - self.tail()
    }

    /// Samples before this are warm-up and do not count for flatness (25 %).
    pub fn warm_up(&self) -> Duration {
        self.total / 4
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    match text.trim().parse() {
        Ok(n) => Some(n),
        Err(e) => panic!("{name}={text:?} is not a whole number: {e}"),
    }
}

fn time_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// `SOAK_OPERATOR` if set; `target/release/shell-operator` with `SOAK_RELEASE=1`;
/// else the debug binary cargo built for this test.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SOAK_OPERATOR") {
        return PathBuf::from(path);
    }
    if std::env::var("SOAK_RELEASE").is_ok_and(|v| v == "1") {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/shell-operator");
        assert!(
            path.is_file(),
            "SOAK_RELEASE=1 but {} is missing (cargo build --release)",
            path.display()
        );
        return path;
    }
    PathBuf::from(env!("CARGO_BIN_EXE_shell-operator"))
}

/// xorshift64*: small, seeded, good enough to pick changes and faults.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A duration in `[lo, hi)` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi.saturating_sub(lo).max(1)))
    }
}
