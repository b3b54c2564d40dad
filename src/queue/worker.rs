//! The queue thread: one per named queue. It owns its tasks in a `VecDeque`, takes
//! new ones from its channel, and runs the head task through a [`Handler`] strictly
//! one at a time. A failed task stays at the head and is retried after flant's
//! backoff, blocking the queue, unless the handler reported it as allowed to fail.
//!
//! While it waits (backoff, rate limit, empty queue) it keeps draining its channel,
//! so tasks pile up behind the head and get combined into one run.

use super::{Task, combine_head, compact};
use crossbeam_channel::{Receiver, select};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What runs tasks; implemented by the operator (and by fakes in tests).
pub trait Handler: Send + Sync {
    /// Reserves a rate-limit token for the task's hook; returns the wait before it may run.
    fn rate_limit(&self, task: &Task) -> Duration;
    /// Runs the task. `Ok` carries tasks to run next, before anything else queued
    /// (an Enable task's Synchronization tasks). `Err` is a failure to retry;
    /// allowed failures return `Ok`.
    fn handle(&self, task: &Task, queue: &str) -> Result<Vec<Task>, String>;
    /// Called when queue-level compaction merged a hook's tasks.
    fn compacted(&self, _queue: &str, _hook: &str) {}
    /// Called with the real duration of each low-level queue operation
    /// (`AddLast`, `GetFirst`, `RemoveFirst`, `IterateSnapshot`).
    fn queue_action(&self, _queue: &str, _action: &str, _took: Duration) {}
    /// Called with the queue's length whenever the worker publishes its view.
    fn queue_length(&self, _queue: &str, _len: usize) {}
}

/// What the debug server and metrics see of a queue.
#[derive(Debug, Clone, Default)]
pub struct QueueView {
    pub name: String,
    pub status: String,
    pub tasks: Vec<String>,
}

/// A queue's view, shared with readers.
pub type SharedView = Arc<Mutex<QueueView>>;

/// flant's retry delay after `failures` earlier failures: 5 s, then
/// 5 s + 2^(n-1) s + up to 1 s of jitter (truncated to 100 ms), capped at 32 s.
pub fn backoff(failures: u32) -> Duration {
    const CAP: Duration = Duration::from_secs(32);
    match failures {
        0 => Duration::from_secs(5),
        1..=5 => {
            let jitter_ms = u64::from(jitter_below(1000)) / 100 * 100;
            let d = Duration::from_secs(5 + (1u64 << (failures - 1)))
                + Duration::from_millis(jitter_ms);
            d.min(CAP)
        }
        _ => CAP,
    }
}

fn jitter_below(limit: u32) -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut x = u64::from(nanos) ^ (u64::from(std::process::id()) << 32) ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (x % u64::from(limit)) as u32
}

/// The state of one queue thread.
pub struct Worker {
    name: String,
    incoming: Receiver<Task>,
    stop: Receiver<()>,
    handler: Arc<dyn Handler>,
    view: SharedView,
    tasks: VecDeque<Task>,
}

impl Worker {
    /// Creates the worker; `stop` ends it when its sender is dropped.
    pub fn new(
        name: &str,
        incoming: Receiver<Task>,
        stop: Receiver<()>,
        handler: Arc<dyn Handler>,
        view: SharedView,
    ) -> Worker {
        Worker {
            name: name.to_string(),
            incoming,
            stop,
            handler,
            view,
            tasks: VecDeque::new(),
        }
    }

    /// The thread body: runs tasks until stopped.
    pub fn run(mut self) {
        loop {
            self.drain();
            self.publish("");
            if self.tasks.is_empty() {
                select! {
                    recv(self.incoming) -> t => match t { Ok(t) => self.push(t), Err(_) => return },
                    recv(self.stop) -> _ => return,
                }
                continue;
            }
            if !self.run_head() {
                return;
            }
        }
    }

    fn push(&mut self, task: Task) {
        crate::latency_trace::mark(crate::latency_trace::Stage::Queued);
        let started = Instant::now();
        self.tasks.push_back(task);
        let compacted = compact(&mut self.tasks);
        self.handler
            .queue_action(&self.name, "AddLast", started.elapsed());
        for hook in compacted {
            self.handler.compacted(&self.name, &hook);
        }
    }

    fn drain(&mut self) {
        while let Ok(t) = self.incoming.try_recv() {
            self.push(t);
        }
    }

    /// Runs the head task once; returns false when the queue was stopped.
    fn run_head(&mut self) -> bool {
        let started = Instant::now();
        let head = self.tasks.front();
        self.handler
            .queue_action(&self.name, "GetFirst", started.elapsed());
        let Some(head) = head else {
            return true;
        };
        let delay = self.handler.rate_limit(head);
        if !delay.is_zero() {
            self.publish(&format!("waiting for rate limit {}ms", delay.as_millis()));
            if !self.wait(delay) {
                return false;
            }
        }
        combine_head(&mut self.tasks);
        self.publish("run first task");
        let Some(head) = self.tasks.front() else {
            return true;
        };
        match self.handler.handle(head, &self.name) {
            Ok(head_tasks) => {
                let started = Instant::now();
                self.tasks.pop_front();
                self.handler
                    .queue_action(&self.name, "RemoveFirst", started.elapsed());
                for t in head_tasks.into_iter().rev() {
                    self.tasks.push_front(t);
                }
                true
            }
            Err(message) => {
                let delay = match self.tasks.front_mut() {
                    Some(head) => {
                        let d = backoff(head.failures);
                        head.failures += 1;
                        head.last_error = Some(message);
                        head.queued_at = Instant::now();
                        d
                    }
                    None => return true,
                };
                self.publish(&format!("sleep after fail for {:.1}s", delay.as_secs_f64()));
                self.wait(delay)
            }
        }
    }

    /// Sleeps for `d` while taking new tasks; false if stopped meanwhile.
    fn wait(&mut self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            select! {
                recv(self.incoming) -> t => match t {
                    Ok(t) => self.push(t),
                    // No producers left: just sleep out the wait, still honouring stop.
                    Err(_) => return self.stop.recv_timeout(left).is_err_and(|e| e.is_timeout()),
                },
                recv(self.stop) -> _ => return false,
                default(left) => return true,
            }
        }
    }

    fn publish(&self, status: &str) {
        let started = Instant::now();
        let tasks = self.tasks.iter().map(|t| t.describe(&self.name)).collect();
        self.handler
            .queue_action(&self.name, "IterateSnapshot", started.elapsed());
        self.handler.queue_length(&self.name, self.tasks.len());
        let mut view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        view.name.clone_from(&self.name);
        view.status = status.to_string();
        view.tasks = tasks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_follows_flant() {
        assert_eq!(backoff(0), Duration::from_secs(5));
        for (n, base) in [(1, 6), (2, 7), (3, 9), (4, 13), (5, 21)] {
            let d = backoff(n);
            assert!(
                d >= Duration::from_secs(base) && d < Duration::from_secs(base + 1),
                "n={n}: {d:?}"
            );
            assert_eq!(d.subsec_millis() % 100, 0, "truncated to 100ms");
        }
        assert_eq!(backoff(6), Duration::from_secs(32));
        assert_eq!(backoff(60), Duration::from_secs(32));
    }
}
