//! Pacing a hook's runs while its events stream in (issue 41).
//!
//! A queue combines every event waiting for a hook into its next run, but during a
//! stream (2,000 patches a real API server delivers over a few seconds) the queue
//! finds only the few that arrived during the previous run, and the hook starts
//! again at once: 193 runs of a `sh` + `jq` hook for the 2,000 events, each paying
//! the hook's start-up, competing for the CPU with the API server that delivers
//! the stream. So one rule, decided here as a pure function of the last run and the
//! head task:
//!
//! - the head is a combinable run of the hook that ran last, that run combined
//!   two events or more (a stream, not changes one at a time), and the head was
//!   queued while that run was going on (the stream goes on): it starts no sooner than
//!   [`FACTOR`] times the last run's duration after that run ended, at most
//!   [`MAX_HOLD`] after, or once no event came for [`QUIET`]; the queue keeps
//!   taking events meanwhile, so they join the run. The hook then spends at most
//!   about a fifth of a stream running.
//! - anything else starts at once: an event that finds its hook idle (a lone
//!   change; the event → hook start latency), one queued during a run that
//!   carried a single event (changes one at a time, each arriving while the hook
//!   still handles the one before, as on a loaded machine), another hook's run, a
//!   Synchronization, a task that is not a hook run.
//!
//! The worker (`worker.rs`) asks [`Pace::hold`] before each run and tells
//! [`Pace::ran`] after it; nothing here reads a clock.

use super::{Target, Task};
use std::time::{Duration, Instant};

/// How many times the last run's duration a streaming hook waits after it.
pub(crate) const FACTOR: u32 = 4;

/// The longest wait (flant's queue waits up to 250 ms for every event).
pub(crate) const MAX_HOLD: Duration = Duration::from_millis(250);

/// A pause ends early once no event came for this long: the stream is over, so
/// its last events do not wait out the pause (on a fast server a 2,000-event
/// stream ends within a pause).
pub(crate) const QUIET: Duration = Duration::from_millis(30);

/// The last hook run of one queue.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LastRun {
    hook: usize,
    /// How many binding contexts it carried.
    contexts: usize,
    started: Instant,
    ended: Instant,
}

/// A queue's pacing state: its last hook run.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    last: Option<LastRun>,
}

impl Pace {
    /// Notes a finished run of `task` (`started` to `ended`); a task that is not a
    /// hook's run forgets the last one.
    pub(crate) fn ran(&mut self, task: &Task, started: Instant, ended: Instant) {
        self.last = match task.target {
            Target::Hook(hook) if task.can_combine() => Some(LastRun {
                hook,
                contexts: task.contexts.len(),
                started,
                ended,
            }),
            _ => None,
        };
    }

    /// How long `head` waits at `now` before it runs (the rule in the module doc).
    pub(crate) fn hold(&self, head: &Task, now: Instant) -> Duration {
        let Some(last) = self.last else {
            return Duration::ZERO;
        };
        let streaming = head.target == Target::Hook(last.hook)
            && head.can_combine()
            && last.contexts >= 2
            && head.queued_at < last.ended;
        if !streaming {
            return Duration::ZERO;
        }
        let took = last.ended.saturating_duration_since(last.started);
        let until = last.ended + (took * FACTOR).min(MAX_HOLD);
        until.saturating_duration_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::config::WatchEventType;
    use crate::hook::context::{BindingContext, BindingType, Payload};

    fn task(hook: usize, queued_at: Instant, payload: Payload) -> Task {
        let ctx = BindingContext {
            binding: "pods".into(),
            binding_type: BindingType::Kubernetes,
            group: None,
            snapshot_names: Vec::new(),
            kube_binding: Some(0),
            payload,
        };
        let mut t = Task::hook_run(hook, "h", true, false, ctx);
        t.queued_at = queued_at;
        t
    }

    fn event(hook: usize, queued_at: Instant) -> Task {
        let payload = Payload::Event {
            watch_event: WatchEventType::Modified,
            item: None,
        };
        task(hook, queued_at, payload)
    }

    /// A run that combined two events.
    fn combined(hook: usize, queued_at: Instant) -> Task {
        let mut t = event(hook, queued_at);
        let second = t.contexts[0].clone();
        t.contexts.push(second);
        t
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_event_that_finds_its_hook_idle_starts_at_once() {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        assert_eq!(pace.hold(&event(0, t0), t0), Duration::ZERO, "first run");
        pace.ran(&combined(0, t0), t0, t0 + 20 * MS);
        // Queued after the run ended: a lone change.
        let lone = event(0, t0 + 50 * MS);
        assert_eq!(pace.hold(&lone, t0 + 50 * MS), Duration::ZERO);
    }

    #[test]
    fn changes_one_at_a_time_never_wait_even_when_each_comes_during_a_run() {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        pace.ran(&event(0, t0), t0, t0 + 80 * MS);
        let next = event(0, t0 + 50 * MS);
        assert_eq!(pace.hold(&next, t0 + 80 * MS), Duration::ZERO);
    }

    #[test]
    fn an_event_queued_during_a_combined_run_waits_four_times_the_run() {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        pace.ran(&combined(0, t0), t0, t0 + 20 * MS);
        let streaming = event(0, t0 + 5 * MS);
        assert_eq!(pace.hold(&streaming, t0 + 20 * MS), 80 * MS);
        assert_eq!(pace.hold(&streaming, t0 + 70 * MS), 30 * MS);
        assert_eq!(pace.hold(&streaming, t0 + 200 * MS), Duration::ZERO);
    }

    #[test]
    fn the_wait_is_capped_and_other_hooks_and_tasks_do_not_wait() {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        pace.ran(&combined(0, t0), t0, t0 + 400 * MS);
        let during = t0 + MS;
        assert_eq!(pace.hold(&event(0, during), t0 + 400 * MS), MAX_HOLD);
        assert_eq!(pace.hold(&event(1, during), t0 + 400 * MS), Duration::ZERO);
        let mut v0 = event(0, during);
        v0.combinable = false;
        assert_eq!(pace.hold(&v0, t0 + 400 * MS), Duration::ZERO, "v0 hooks");
        let sync = task(0, during, Payload::Synchronization);
        assert_eq!(pace.hold(&sync, t0 + 400 * MS), Duration::ZERO);
        // A Synchronization run in between forgets the stream.
        pace.ran(&sync, t0 + 400 * MS, t0 + 500 * MS);
        assert_eq!(pace.hold(&event(0, during), t0 + 500 * MS), Duration::ZERO);
    }
}
