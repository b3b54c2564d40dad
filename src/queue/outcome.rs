//! What a queue handler says about the task it ran, and so what the queue thread
//! ([`worker`](super::worker)) does next: drop it and go on, run it again after
//! the backoff, drop it although it failed, or stop the operator. The handlers
//! (shell-operator's runner, addon-operator's engine) decide; the worker only acts.
//!
//! Which failure is which, decided here and nowhere else:
//! - a hook run that failed: [`Outcome::Fail`] when its binding has
//!   `allowFailure: true` (v0 and v1 alike: only schedule and kubernetes bindings
//!   can set it), else [`Outcome::Retry`] ([`Outcome::hook_failed`]);
//! - any other task (enabling bindings, addon-operator's converge, module run,
//!   delete): [`Outcome::Retry`] ([`Outcome::from_result`]);
//! - a task the operator can never run because its own state is broken (a thread it
//!   needs is gone, a task reached a handler that has no code for it):
//!   [`Outcome::Stop`]. Retrying those would block the queue forever.

use super::Task;
use std::fmt;
use std::sync::OnceLock;

/// How a task ended.
#[derive(Debug)]
pub enum Outcome {
    /// It succeeded: the head leaves the queue and these tasks run next, before
    /// anything else queued (an Enable task's Synchronization runs).
    Done(Vec<Task>),
    /// It failed and may succeed later: the head stays and runs again after
    /// flant's backoff ([`backoff`](super::worker::backoff)), blocking its queue.
    Retry(TaskError),
    /// It failed and must not block the queue (`allowFailure: true`): the head
    /// leaves the queue. The handler has counted and logged the failure.
    Fail(TaskError),
    /// It failed and no retry can help: the worker logs it and stops the operator,
    /// which then exits 1.
    Stop(TaskError),
}

impl Outcome {
    /// Done, with nothing to run next.
    pub(crate) fn done() -> Outcome {
        Outcome::Done(Vec::new())
    }

    /// A failed hook run: dropped when its binding allows failure, else retried.
    pub(crate) fn hook_failed(allow_failure: bool, error: impl Into<TaskError>) -> Outcome {
        match allow_failure {
            true => Outcome::Fail(error.into()),
            false => Outcome::Retry(error.into()),
        }
    }

    /// A step that either succeeded with tasks to run next or failed and is retried.
    pub(crate) fn from_result<E: Into<TaskError>>(result: Result<Vec<Task>, E>) -> Outcome {
        match result {
            Ok(tasks) => Outcome::Done(tasks),
            Err(e) => Outcome::Retry(e.into()),
        }
    }
}

/// Why a task failed: the message the log, the debug queue view and the task's
/// `last_error` show. It names the hook (or module) and says what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError(String);

impl TaskError {
    /// The message.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for TaskError {
    fn from(message: String) -> TaskError {
        TaskError(message)
    }
}

impl From<&str> for TaskError {
    fn from(message: &str) -> TaskError {
        TaskError(message.to_string())
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TaskError {}

static STOPPED_BY: OnceLock<String> = OnceLock::new();

/// What a queue thread does on [`Outcome::Stop`] (unless a test replaced it): keeps
/// the reason for [`stopped_by`] and asks the operator to shut down as SIGTERM does
/// (running hooks get the grace period; the process then exits 1).
pub(crate) fn stop_operator(error: &TaskError) {
    let _ = STOPPED_BY.set(error.to_string());
    if let Err(e) = signal_hook::low_level::raise(signal_hook::consts::SIGTERM) {
        crate::log::error(
            "cannot signal the operator to stop",
            &[("error", &e.to_string())],
        );
    }
}

/// The failure that stopped the operator, if a queue stopped it.
pub(crate) fn stopped_by() -> Option<&'static str> {
    STOPPED_BY.get().map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_failure_decides_fail_or_retry() {
        assert!(matches!(Outcome::hook_failed(true, "x"), Outcome::Fail(e) if e.as_str() == "x"));
        assert!(matches!(Outcome::hook_failed(false, "x"), Outcome::Retry(e) if e.as_str() == "x"));
        let failed: Result<Vec<Task>, String> = Err("step".into());
        assert!(matches!(Outcome::from_result(failed), Outcome::Retry(e) if e.as_str() == "step"));
        assert!(
            matches!(Outcome::from_result::<String>(Ok(Vec::new())), Outcome::Done(t) if t.is_empty())
        );
    }
}
