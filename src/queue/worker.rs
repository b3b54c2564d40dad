//! The queue thread: one per named queue. It owns its tasks in a `VecDeque`, takes
//! new ones from its channel, and runs the head task through a [`Handler`] strictly
//! one at a time. The handler's [`Outcome`] says what happens to the head: done
//! (dropped, its follow-up tasks run next), retried after flant's backoff (it stays
//! at the head, blocking the queue), failed (dropped) or stop (the operator stops).
//!
//! While it waits (backoff, rate limit, empty queue, a streaming hook's pause from
//! `pace.rs`) it keeps draining its channel, so tasks pile up behind the head and
//! get combined into one run.

use super::outcome::{Outcome, TaskError, stop_operator};
use super::pace::{self, Pace};
use super::{Task, combine_head, compact};
use crossbeam_channel::{Receiver, select};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What runs tasks; implemented by the operator (and by fakes in tests).
pub trait Handler: Send + Sync {
    /// Reserves a rate-limit token for the task's hook; returns the wait before it may run.
    fn rate_limit(&self, task: &Task) -> Duration;
    /// Runs the task and says what the queue does with it (see [`Outcome`]).
    fn handle(&self, task: &Task, queue: &str) -> Outcome;
    /// Called when queue-level compaction merged a hook's tasks.
    fn compacted(&self, _queue: &str, _hook: &str) {}
    /// Called with every failure of a task run (retried, allowed to fail or
    /// stopping the operator), before the worker acts on it: the handler counts
    /// it by its cause.
    fn failed(&self, _queue: &str, _task: &Task, _error: &TaskError) {}
    /// Called with the real duration of each low-level queue operation
    /// (`AddLast`, `GetFirst`, `RemoveFirst`, `IterateSnapshot`).
    fn queue_action(&self, _queue: &str, _action: &str, _took: Duration) {}
    /// Called with the queue's length whenever the worker publishes its view.
    fn queue_length(&self, _queue: &str, _len: usize) {}
}

/// What the debug server and metrics see of a queue.
#[derive(Debug, Clone, Default)]
pub struct QueueView {
    pub(crate) name: String,
    pub(crate) status: String,
    pub(crate) tasks: Vec<String>,
}

/// A queue's view, shared with readers.
pub type SharedView = Arc<Mutex<QueueView>>;

/// flant's retry delay after `failures` earlier failures: 5 s, then
/// 5 s + 2^(n-1) s + up to 1 s of jitter (truncated to 100 ms), capped at 32 s.
pub(crate) fn backoff(failures: u32) -> Duration {
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
    /// What [`Outcome::Stop`] does: [`stop_operator`] unless a test replaced it.
    on_stop: Box<dyn Fn(&TaskError) + Send>,
    /// The retry delay after n earlier failures: [`backoff`] (tests shorten it).
    backoff: fn(u32) -> Duration,
    /// The last hook run, for pacing a hook whose events stream in (`pace.rs`).
    pace: Pace,
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
            on_stop: Box::new(stop_operator),
            backoff,
            pace: Pace::default(),
        }
    }

    #[cfg(test)]
    /// Replaces what [`Outcome::Stop`] does (tests observe it instead of a signal).
    pub(crate) fn on_stop(mut self, action: impl Fn(&TaskError) + Send + 'static) -> Worker {
        self.on_stop = Box::new(action);
        self
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
        if !self.hold_while_streaming() {
            return false;
        }
        combine_head(&mut self.tasks);
        self.publish("run first task");
        let Some(head) = self.tasks.front() else {
            return true;
        };
        let run_started = Instant::now();
        let outcome = self.handler.handle(head, &self.name);
        self.pace.ran(head, run_started, Instant::now());
        if let Outcome::Retry(e) | Outcome::Fail(e) | Outcome::Stop(e) = &outcome {
            self.handler.failed(&self.name, head, e);
        }
        match outcome {
            Outcome::Done(next) => {
                self.pop_head();
                for t in next.into_iter().rev() {
                    self.tasks.push_front(t);
                }
                true
            }
            Outcome::Fail(_) => {
                self.pop_head();
                true
            }
            Outcome::Retry(error) => self.retry_head(error),
            Outcome::Stop(error) => {
                self.stop_operator(&error);
                false
            }
        }
    }

    /// Lets the events of a stream gather behind the head before the hook runs
    /// again (`pace.rs`); false when the queue was stopped meanwhile.
    fn hold_while_streaming(&mut self) -> bool {
        let Some(head) = self.tasks.front() else {
            return true;
        };
        let hold = self.pace.hold(head, Instant::now());
        if hold.is_zero() {
            return true;
        }
        self.publish(&format!("waiting {}ms for more events", hold.as_millis()));
        let deadline = Instant::now() + hold;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            select! {
                recv(self.incoming) -> t => match t {
                    Ok(t) => self.push(t),
                    Err(_) => return true,
                },
                recv(self.stop) -> _ => return false,
                // No event for QUIET: the stream is over, run now.
                default(left.min(pace::QUIET)) => return true,
            }
        }
    }

    fn pop_head(&mut self) {
        let started = Instant::now();
        self.tasks.pop_front();
        self.handler
            .queue_action(&self.name, "RemoveFirst", started.elapsed());
    }

    /// Keeps the head, notes the failure and waits out the backoff.
    fn retry_head(&mut self, error: TaskError) -> bool {
        let delay = match self.tasks.front_mut() {
            Some(head) => {
                let d = (self.backoff)(head.failures);
                head.failures += 1;
                head.last_error = Some(error.to_string());
                head.queued_at = Instant::now();
                d
            }
            None => return true,
        };
        self.publish(&format!("sleep after fail for {:.1}s", delay.as_secs_f64()));
        self.wait(delay)
    }

    /// Ends this queue and, unless the operator is already stopping, stops it.
    fn stop_operator(&mut self, error: &TaskError) {
        let stopping = matches!(
            self.stop.try_recv(),
            Ok(()) | Err(crossbeam_channel::TryRecvError::Disconnected)
        );
        if stopping {
            return;
        }
        let task = self
            .tasks
            .front()
            .map(|t| t.describe(&self.name))
            .unwrap_or_default();
        crate::log::error(
            "task failed and cannot be retried: stopping the operator",
            &[
                ("queue", &self.name),
                ("task", &task),
                ("error", error.as_str()),
            ],
        );
        self.publish("stopped");
        (self.on_stop)(error);
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

    use crate::queue::Cause;

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
    /// A handler whose answer for each task name is scripted per attempt
    /// (`script(name, attempt)`), reporting every run on a channel.
    struct Scripted {
        script: fn(&str, u32) -> Outcome,
        runs: crossbeam_channel::Sender<String>,
        /// Every failure the worker reports: `task:cause:message`.
        failures: crossbeam_channel::Sender<String>,
        /// Dropped while a task runs, when the test simulates a shutdown.
        stop_during_run: Mutex<Option<crossbeam_channel::Sender<()>>>,
    }

    impl Handler for Scripted {
        fn rate_limit(&self, _: &Task) -> Duration {
            Duration::ZERO
        }
        fn handle(&self, task: &Task, _: &str) -> Outcome {
            let _ = self.runs.send(task.hook_name.clone());
            if let Ok(mut stop) = self.stop_during_run.lock() {
                stop.take();
            }
            (self.script)(&task.hook_name, task.failures)
        }
        fn failed(&self, _: &str, task: &Task, error: &TaskError) {
            let reported = format!("{}:{}:{error}", task.hook_name, error.cause());
            let _ = self.failures.send(reported);
        }
    }

    fn task(name: &str) -> Task {
        Task::enable(super::super::TaskKind::EnableScheduleBindings, 0, name)
    }

    struct Run {
        runs: crossbeam_channel::Receiver<String>,
        failures: crossbeam_channel::Receiver<String>,
        stops: crossbeam_channel::Receiver<String>,
        stop_tx: Option<crossbeam_channel::Sender<()>>,
        view: SharedView,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    /// Starts a worker over `tasks` (queued before it starts) with a 10 ms backoff.
    fn start(script: fn(&str, u32) -> Outcome, tasks: &[&str], shutdown_in_run: bool) -> Run {
        let (runs_tx, runs) = crossbeam_channel::unbounded();
        let (failures_tx, failures) = crossbeam_channel::unbounded();
        let (stops_tx, stops) = crossbeam_channel::unbounded();
        let (task_tx, task_rx) = crossbeam_channel::unbounded();
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(0);
        let handler = Arc::new(Scripted {
            script,
            runs: runs_tx,
            failures: failures_tx,
            stop_during_run: Mutex::new(shutdown_in_run.then(|| stop_tx.clone())),
        });
        for t in tasks {
            task_tx.send(task(t)).expect("queued");
        }
        let view = SharedView::default();
        let mut worker = Worker::new("q", task_rx, stop_rx, handler, view.clone())
            .on_stop(move |e| drop(stops_tx.send(e.to_string())));
        worker.backoff = |_| Duration::from_millis(10);
        // Dropped before the worker starts when the handler's clone is the last
        // sender (else the run could end before this drop: a race under load).
        let stop_tx = (!shutdown_in_run).then_some(stop_tx);
        let thread = std::thread::spawn(move || {
            let _keep_open = task_tx;
            worker.run()
        });
        Run {
            runs,
            failures,
            stops,
            stop_tx,
            view,
            thread: Some(thread),
        }
    }

    impl Run {
        /// The next `n` runs, in order (each within 5 s).
        fn next_runs(&self, n: usize) -> Vec<String> {
            (0..n)
                .map(|_| {
                    self.runs
                        .recv_timeout(Duration::from_secs(5))
                        .expect("a run")
                })
                .collect()
        }

        /// True when the worker thread ends within 5 s.
        fn ends(&mut self) -> bool {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                    return self.thread.take().is_some_and(|t| t.join().is_ok());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            false
        }
    }

    impl Drop for Run {
        fn drop(&mut self) {
            self.stop_tx.take();
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    #[test]
    fn done_runs_the_returned_tasks_before_the_rest() {
        let run = start(
            |name, _| match name {
                "a" => Outcome::Done(vec![task("a1"), task("a2")]),
                _ => Outcome::done(),
            },
            &["a", "b"],
            false,
        );
        assert_eq!(run.next_runs(4), ["a", "a1", "a2", "b"]);
        assert!(
            run.runs.recv_timeout(Duration::from_millis(100)).is_err(),
            "each ran once"
        );
        assert!(run.stops.is_empty());
        assert!(run.failures.is_empty(), "no failure reported");
    }

    #[test]
    fn retry_keeps_the_head_and_blocks_the_queue_until_it_succeeds() {
        let run = start(
            |name, attempt| match (name, attempt) {
                ("a", 0 | 1) => Outcome::Retry(format!("a failed ({attempt})").as_str().into()),
                _ => Outcome::done(),
            },
            &["a", "b"],
            false,
        );
        assert_eq!(run.next_runs(4), ["a", "a", "a", "b"]);
        assert!(run.stops.is_empty());
        let failures: Vec<String> = run.failures.try_iter().collect();
        assert_eq!(
            failures,
            ["a:internal:a failed (0)", "a:internal:a failed (1)"],
            "each failed attempt reported once, with its cause"
        );
    }

    #[test]
    fn each_failure_is_reported_with_the_cause_it_carries() {
        let run = start(
            |name, _| match name {
                "a" => Outcome::Fail(TaskError::new(Cause::Hook, "exit status 1")),
                "b" => Outcome::Retry(TaskError::new(Cause::Transient, "timeout")),
                _ => Outcome::done(),
            },
            &["a", "b"],
            false,
        );
        assert_eq!(run.next_runs(3), ["a", "b", "b"]);
        let first_two: Vec<String> = (0..2)
            .map(|_| {
                run.failures
                    .recv_timeout(Duration::from_secs(5))
                    .expect("reported")
            })
            .collect();
        assert_eq!(first_two, ["a:hook:exit status 1", "b:transient:timeout"]);
    }

    #[test]
    fn retry_records_the_failure_on_the_head() {
        let mut run = start(|_, _| Outcome::Retry("always".into()), &["a", "b"], false);
        run.next_runs(1);
        run.stop_tx.take();
        assert!(run.ends());
        let view = run.view.lock().expect("view");
        assert_eq!(view.tasks.len(), 2, "{:?}", view.tasks);
        assert!(
            view.tasks[0].contains(":failures ") && view.tasks[0].ends_with(":always"),
            "{:?}",
            view.tasks
        );
    }

    #[test]
    fn fail_drops_the_head_without_retrying_it() {
        let run = start(
            |name, _| match name {
                "a" => Outcome::Fail("allowed to fail".into()),
                _ => Outcome::done(),
            },
            &["a", "b"],
            false,
        );
        assert_eq!(run.next_runs(2), ["a", "b"]);
        assert!(
            run.runs.recv_timeout(Duration::from_millis(100)).is_err(),
            "a not retried"
        );
        assert!(run.stops.is_empty());
    }

    #[test]
    fn stop_ends_the_queue_and_stops_the_operator() {
        let mut run = start(
            |name, _| match name {
                "a" => Outcome::Stop("broken".into()),
                _ => Outcome::done(),
            },
            &["a", "b"],
            false,
        );
        assert_eq!(run.next_runs(1), ["a"]);
        assert!(run.ends(), "the queue thread ended");
        assert_eq!(run.stops.try_recv().ok().as_deref(), Some("broken"));
        assert_eq!(
            run.failures.try_recv().ok().as_deref(),
            Some("a:internal:broken")
        );
        assert!(run.runs.try_recv().is_err(), "b never ran");
        assert_eq!(run.view.lock().expect("view").status, "stopped");
    }

    #[test]
    fn stop_while_shutting_down_only_ends_the_queue() {
        let mut run = start(|_, _| Outcome::Stop("scheduler gone".into()), &["a"], true);
        assert_eq!(run.next_runs(1), ["a"]);
        assert!(run.ends());
        assert!(run.stops.try_recv().is_err(), "no second stop request");
    }
}
