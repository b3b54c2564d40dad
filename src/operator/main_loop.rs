//! The main thread's loop in the run step: ticks (metrics, the debug socket's
//! expiry) until a stop signal or, with `--ha`, a lost Lease.

use crate::leader;
use crate::metrics::Metrics;
use crate::queue::worker::SharedView;
use crossbeam_channel::{Receiver, select, tick};
use std::time::Duration;

/// Why the main loop ended.
pub(super) enum End {
    Signal(i32),
    /// The Lease was lost (or not renewed within the renew deadline).
    Lost(String),
}

/// The main thread's loop until a stop signal or a lost Lease: every second
/// `expire` (the debug socket's temporary parameters), queue lengths every 5 s, live
/// ticks every 10 s; with `--ha` the election's notes, and every 100 ms the renew
/// deadline (checked here too, so a renew hanging on the API cannot delay it).
pub(super) fn tick_until_end(
    metrics: &Metrics,
    views: &[SharedView],
    signals: &Receiver<i32>,
    expire: &dyn Fn(),
    election: Option<&leader::Handle>,
) -> End {
    let ticker = tick(Duration::from_secs(1));
    let notes = election.map_or_else(crossbeam_channel::never, |h| h.notes.clone());
    let watchdog = election.map_or_else(crossbeam_channel::never, |_| {
        tick(Duration::from_millis(100))
    });
    let mut ticks = 0u64;
    metrics.live_ticks.inc();
    update_queue_lengths(metrics, views);
    loop {
        select! {
            recv(signals) -> sig => return End::Signal(sig.unwrap_or(0)),
            recv(notes) -> note => return End::Lost(match note {
                Ok(leader::Note::Lost(why)) => why,
                Ok(other) => format!("unexpected election note {other:?}"),
                Err(_) => "the election thread ended".into(),
            }),
            recv(watchdog) -> _ => {
                if let Some(h) = election.filter(|h| h.status.overdue(h.timings.renew_deadline)) {
                    let deadline = h.timings.renew_deadline;
                    return End::Lost(format!("no renew succeeded within {deadline:?}"));
                }
            }
            recv(ticker) -> _ => {
                ticks += 1;
                expire();
                if ticks % 5 == 0 {
                    update_queue_lengths(metrics, views);
                }
                if ticks % 10 == 0 {
                    metrics.live_ticks.inc();
                }
            }
        }
    }
}

pub(super) fn update_queue_lengths(metrics: &Metrics, views: &[SharedView]) {
    for view in views {
        let v = view.lock().unwrap_or_else(|p| p.into_inner());
        metrics
            .tasks_queue_length
            .with_label_values(&[v.name.as_str()])
            .set(v.tasks.len() as f64);
    }
}
