//! The election state machine, with client-go's leader-election semantics, run on
//! its own thread (`leader-election`, spawned by `operator.rs`):
//!
//! - **acquire**: every retry period, read the Lease (and at once after losing the
//!   race to create it, a 409). A record that changed since
//!   the last look is timed with the *local* clock at that moment (never the
//!   writer's `renewTime`, so clock skew between replicas does not matter). The
//!   lease is taken when it is free (no holder: released), ours, or unchanged for
//!   its `leaseDurationSeconds`; the write carries the resourceVersion read, so of
//!   two replicas racing exactly one wins. While another holds it, the next look
//!   is at its expiry if that comes before the next retry.
//! - **renew**: every retry period, write the record again (straight from the last
//!   written object; a 409 falls back to a read). Success is timed from the start
//!   of the attempt; when none has succeeded within the renew deadline the thread
//!   reports [`Note::Lost`] and stops. Since renew deadline < lease duration, the
//!   leader stops before any other replica can see the lease expire.
//! - **release** (clean shutdown): holder cleared, `leaseDurationSeconds: 1`, as
//!   client-go's `ReleaseOnCancel`; a standby takes a released lease at its next look.
//!
//! `leaseTransitions` counts every change of holder, as client-go does.

use super::lease::{LeaseClient, Record, micro_time_now};
use crate::flags::Timings;
use crate::log;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the election thread tells the operator, in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    Acquired,
    /// Renewing failed for the whole renew deadline (or the lease was taken).
    Lost(String),
}

/// State the thread shares with the operator (readiness, metrics, the watchdog).
#[derive(Default)]
pub(crate) struct Status {
    /// Start of the last successful acquire or renew; `None` while not leading.
    renewed: Mutex<Option<Instant>>,
    /// The holder of the lease as last read ("" when free or unknown).
    holder: Mutex<String>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Status {
    /// The lease's holder as last read.
    pub(crate) fn holder(&self) -> String {
        locked(&self.holder).clone()
    }

    /// True from acquiring the lease until it is lost or released.
    pub(crate) fn leading(&self) -> bool {
        locked(&self.renewed).is_some()
    }

    /// True when leading and no renew has succeeded for `deadline`: the
    /// operator's own check, which holds even while a request hangs.
    pub(crate) fn overdue(&self, deadline: Duration) -> bool {
        locked(&self.renewed).is_some_and(|t| t.elapsed() >= deadline)
    }
}

/// The operator's side of the election: notes, shared status, and the stop that
/// makes the thread release the lease and end.
pub(crate) struct Handle {
    pub(crate) notes: Receiver<Note>,
    pub(crate) status: Arc<Status>,
    pub(crate) timings: Timings,
    stop: Sender<()>,
}

impl Handle {
    /// Asks the thread to release the lease (if held) and end; join it afterwards.
    pub(crate) fn release(self) {
        drop(self.stop);
    }
}

/// The lease client, this replica's identity and the timings.
pub(crate) struct Elector {
    pub(crate) lease: LeaseClient,
    pub(crate) identity: String,
    pub(crate) timings: Timings,
    /// 1 while this replica holds the lease, else 0.
    pub(crate) gauge: prometheus::IntGauge,
}

/// The record as last seen and when (local clock) it last changed.
struct Observed {
    record: Record,
    since: Instant,
}

/// The thread's state.
struct Machine {
    elector: Elector,
    observed: Option<Observed>,
    /// The Lease as last read or written (its resourceVersion guards the next write).
    last: Option<Value>,
    leading: bool,
    status: Arc<Status>,
}

impl Elector {
    /// The operator's handle and the thread body to spawn.
    pub(crate) fn start(self) -> (Handle, impl FnOnce() + Send + 'static) {
        let (note_tx, notes) = unbounded();
        let (stop, stop_rx) = bounded::<()>(0);
        let status = Arc::new(Status::default());
        let handle = Handle {
            notes,
            status: Arc::clone(&status),
            timings: self.timings,
            stop,
        };
        let machine = Machine {
            elector: self,
            observed: None,
            last: None,
            leading: false,
            status,
        };
        (handle, move || machine.run(&stop_rx, &note_tx))
    }
}

/// A duration in whole seconds for `leaseDurationSeconds`, rounded up (at least 1).
fn whole_seconds(d: Duration) -> i64 {
    let secs = d.as_millis().div_ceil(1000).max(1);
    i64::try_from(secs).unwrap_or(i64::MAX)
}

/// Waits `d` for the stop channel; true when stopped.
fn stopped(stop: &Receiver<()>, d: Duration) -> bool {
    !matches!(stop.recv_timeout(d), Err(RecvTimeoutError::Timeout))
}

impl Machine {
    fn run(mut self, stop: &Receiver<()>, notes: &Sender<Note>) {
        if !self.acquire(stop) {
            return;
        }
        self.elector.gauge.set(1);
        let _ = notes.send(Note::Acquired);
        let reason = self.renew(stop);
        match reason {
            None => self.release(),
            Some(why) => {
                *locked(&self.status.renewed) = None;
                self.elector.gauge.set(0);
                let _ = notes.send(Note::Lost(why));
            }
        }
    }

    /// Tries until the lease is ours (true) or stop (false).
    fn acquire(&mut self, stop: &Receiver<()>) -> bool {
        let what = self.elector.lease.describe();
        log::info(
            "waiting for leadership",
            &[("lease", &what), ("identity", &self.elector.identity)],
        );
        loop {
            let started = Instant::now();
            match self.try_acquire_or_renew() {
                Ok(true) => {
                    *locked(&self.status.renewed) = Some(started);
                    log::info(
                        "leadership acquired",
                        &[("lease", &what), ("identity", &self.elector.identity)],
                    );
                    return true;
                }
                Ok(false) => {}
                Err(e) => log::warn(
                    "leader election: cannot read or write the lease",
                    &[("error", &e)],
                ),
            }
            if stopped(stop, self.next_look()) {
                return false;
            }
        }
    }

    /// Renews until stop (`None`) or the renew deadline passes (`Some(reason)`).
    fn renew(&mut self, stop: &Receiver<()>) -> Option<String> {
        let t = self.elector.timings;
        let mut renewed = locked(&self.status.renewed).unwrap_or_else(Instant::now);
        loop {
            if stopped(stop, t.retry_period) {
                return None;
            }
            let started = Instant::now();
            match self.try_acquire_or_renew() {
                Ok(true) => {
                    renewed = started;
                    *locked(&self.status.renewed) = Some(started);
                }
                Ok(false) => return Some(format!("lease taken by {:?}", self.status.holder())),
                Err(e) => log::warn("leader election: renew failed", &[("error", &e)]),
            }
            if renewed.elapsed() >= t.renew_deadline {
                return Some(format!("no renew succeeded within {:?}", t.renew_deadline));
            }
        }
    }

    /// How long to wait before the next look while not leading: the retry period,
    /// or less when the observed holder's lease expires sooner.
    fn next_look(&self) -> Duration {
        let retry = self.elector.timings.retry_period;
        match &self.observed {
            Some(o) if !o.record.holder.is_empty() => {
                let left = self.lease_of(&o.record).saturating_sub(o.since.elapsed());
                left.clamp(Duration::from_millis(10), retry)
            }
            _ => retry,
        }
    }

    /// The record's lease duration (ours when it has none).
    fn lease_of(&self, r: &Record) -> Duration {
        match u64::try_from(r.lease_duration_secs) {
            Ok(s) if s > 0 => Duration::from_secs(s),
            _ => self.elector.timings.lease_duration,
        }
    }

    /// Remembers `lease` as the last known object; a changed record restarts its clock.
    fn observe(&mut self, lease: Value) {
        let record = Record::from_lease(&lease);
        *locked(&self.status.holder) = record.holder.clone();
        if self.observed.as_ref().is_none_or(|o| o.record != record) {
            self.observed = Some(Observed {
                record,
                since: Instant::now(),
            });
        }
        self.last = Some(lease);
    }

    /// One attempt (client-go's tryAcquireOrRenew): true when we hold the lease now.
    fn try_acquire_or_renew(&mut self) -> Result<bool, String> {
        let lease = &self.elector.lease;
        let what = lease.describe();
        if self.leading
            && let Some(current) = self.last.clone()
        {
            let record = self.next_record(&Record::from_lease(&current));
            match lease.update(&current, &record) {
                Ok(v) => return Ok(self.observe_ours(v)),
                Err(e) if e.is_conflict() => {}
                Err(e) => return Err(format!("{what}: {e}")),
            }
        }
        let Some(current) = lease.get().map_err(|e| format!("{what}: {e}"))? else {
            let record = self.next_record(&Record::default());
            return match lease.create(&record) {
                Ok(v) => Ok(self.observe_ours(v)),
                Err(e) if e.is_conflict() => {
                    // Another replica created it first: read it now, so the holder
                    // (readiness, the next look's timing) is known before the next
                    // retry, instead of "no replica holds the lock" until then.
                    if let Ok(Some(current)) = lease.get() {
                        self.observe(current);
                    }
                    Ok(false)
                }
                Err(e) => Err(format!("{what}: {e}")),
            };
        };
        self.observe(current.clone());
        let record = Record::from_lease(&current);
        let mine = record.holder == self.elector.identity;
        let since = self.observed.as_ref().map(|o| o.since.elapsed());
        let valid = since.is_some_and(|s| s < self.lease_of(&record));
        if !record.holder.is_empty() && !mine && valid {
            self.leading = false;
            return Ok(false);
        }
        let next = self.next_record(&record);
        match self.elector.lease.update(&current, &next) {
            Ok(v) => Ok(self.observe_ours(v)),
            Err(e) if e.is_conflict() => {
                self.leading = false;
                Ok(false)
            }
            Err(e) => Err(format!("{what}: {e}")),
        }
    }

    /// After a successful write: we lead.
    fn observe_ours(&mut self, lease: Value) -> bool {
        self.observe(lease);
        self.leading = true;
        true
    }

    /// The record to write over `old`: renewed now; a new holder counts a transition.
    fn next_record(&self, old: &Record) -> Record {
        let now = micro_time_now();
        let t = self.elector.timings;
        let mine = old.holder == self.elector.identity && !old.acquire_time.is_empty();
        Record {
            holder: self.elector.identity.clone(),
            lease_duration_secs: whole_seconds(t.lease_duration),
            acquire_time: if mine {
                old.acquire_time.clone()
            } else {
                now.clone()
            },
            renew_time: now,
            transitions: if mine || old.holder.is_empty() && old.acquire_time.is_empty() {
                old.transitions
            } else {
                old.transitions + 1
            },
        }
    }

    /// Clears the holder (client-go's ReleaseOnCancel) if we still lead.
    fn release(&mut self) {
        *locked(&self.status.renewed) = None;
        self.elector.gauge.set(0);
        let Some(current) = self.last.take().filter(|_| self.leading) else {
            return;
        };
        let old = Record::from_lease(&current);
        let now = micro_time_now();
        let released = Record {
            holder: String::new(),
            lease_duration_secs: 1,
            acquire_time: now.clone(),
            renew_time: now,
            transitions: old.transitions,
        };
        let what = self.elector.lease.describe();
        match self.elector.lease.update(&current, &released) {
            Ok(_) => log::info("leadership released", &[("lease", &what)]),
            Err(e) => log::warn(
                "leadership not released",
                &[("lease", &what), ("error", &e.to_string())],
            ),
        }
        self.leading = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::{Client, KubeSettings};

    fn machine(identity: &str) -> Machine {
        let settings = KubeSettings {
            server: "http://127.0.0.1:1".into(),
            ..KubeSettings::default()
        };
        let client = Client::from_config(&settings).unwrap();
        Machine {
            elector: Elector {
                lease: LeaseClient::new(client, "ns", "l"),
                identity: identity.into(),
                timings: Timings {
                    lease_duration: Duration::from_millis(2500),
                    renew_deadline: Duration::from_secs(2),
                    retry_period: Duration::from_millis(500),
                },
                gauge: prometheus::IntGauge::new("g", "g").unwrap(),
            },
            observed: None,
            last: None,
            leading: false,
            status: Arc::default(),
        }
    }

    fn record(holder: &str, acquired: &str, transitions: i64) -> Record {
        Record {
            holder: holder.into(),
            lease_duration_secs: 35,
            acquire_time: acquired.into(),
            renew_time: acquired.into(),
            transitions,
        }
    }

    #[test]
    fn transitions_count_changes_of_holder_only() {
        let m = machine("me");
        // A new Lease: no transition yet; lease 2.5 s is written as 3.
        let fresh = m.next_record(&Record::default());
        assert_eq!((fresh.transitions, fresh.lease_duration_secs), (0, 3));
        assert_eq!(fresh.holder, "me");
        // Renewing our own: same acquire time and count.
        let own = m.next_record(&record("me", "T0", 4));
        assert_eq!((own.acquire_time.as_str(), own.transitions), ("T0", 4));
        // Taking another's or a released one: a transition, a new acquire time.
        for holder in ["other", ""] {
            let taken = m.next_record(&record(holder, "T0", 4));
            assert_eq!(taken.transitions, 5, "from {holder:?}");
            assert_ne!(taken.acquire_time, "T0");
        }
    }

    #[test]
    fn a_standby_looks_again_when_the_observed_lease_expires() {
        let mut m = machine("me");
        assert_eq!(m.next_look(), Duration::from_millis(500));
        m.observed = Some(Observed {
            record: Record {
                lease_duration_secs: 1,
                ..record("other", "T0", 0)
            },
            since: Instant::now() - Duration::from_millis(900),
        });
        assert!(
            m.next_look() <= Duration::from_millis(100),
            "{:?}",
            m.next_look()
        );
    }

    /// A one-purpose API server: the Lease is missing on the first GET, a POST loses
    /// the create race (409 AlreadyExists), and later GETs show `other` holding it.
    fn lost_create_race_server() -> (String, std::thread::JoinHandle<Vec<String>>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for stream in listener.incoming().take(3) {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let mut length = 0;
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let method = line.split(' ').next().unwrap_or("").to_string();
                let gets = seen.iter().filter(|m| *m == "GET").count();
                let (code, text) = match (method.as_str(), gets) {
                    ("GET", 0) => (
                        404,
                        r#"{"kind":"Status","code":404,"reason":"NotFound"}"#.to_string(),
                    ),
                    ("POST", _) => (
                        409,
                        r#"{"kind":"Status","code":409,"reason":"AlreadyExists"}"#.to_string(),
                    ),
                    _ => (
                        200,
                        serde_json::json!({
                            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "metadata": {"name": "l", "namespace": "ns", "resourceVersion": "7"},
                            "spec": record("other", "2026-01-01T00:00:00.000000Z", 0).spec(),
                        })
                        .to_string(),
                    ),
                };
                seen.push(method);
                write!(
                    stream,
                    "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                )
                .unwrap();
            }
            seen
        });
        (url, server)
    }

    /// Issue 37: a replica that loses the race to create the Lease reads it at once,
    /// so its readiness names the holder instead of "no replica holds the lock" until
    /// its next retry (about 10 s on a real API server).
    #[test]
    fn losing_the_create_race_reads_the_lease_at_once() {
        let (url, server) = lost_create_race_server();
        let mut m = machine("me");
        let settings = KubeSettings {
            server: url,
            ..KubeSettings::default()
        };
        m.elector.lease = LeaseClient::new(Client::from_config(&settings).unwrap(), "ns", "l");
        assert_eq!(m.try_acquire_or_renew(), Ok(false));
        assert_eq!(m.status.holder(), "other");
        assert!(!m.leading);
        assert_eq!(server.join().unwrap(), ["GET", "POST", "GET"]);
    }

    #[test]
    fn timings_must_be_ordered() {
        let t = |l, r, p| Timings {
            lease_duration: Duration::from_millis(l),
            renew_deadline: Duration::from_millis(r),
            retry_period: Duration::from_millis(p),
        };
        assert!(t(3000, 2000, 500).check("x").is_ok());
        for bad in [t(2000, 2000, 500), t(3000, 500, 500), t(3000, 2000, 0)] {
            assert!(bad.check("x").is_err(), "{bad:?}");
        }
    }
}
