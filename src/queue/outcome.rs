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
//!
//! Every failure carries its [`Cause`] (transient, invalid input, the hook,
//! internal); the worker counts it under that label (`task_errors_total`). The
//! cause never changes which of the above happens: flant's retry rules stay.

use super::Task;
use super::cause::Cause;
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
/// `last_error` show (it names the hook or module and says what went wrong), and
/// the kind of failure it is, which the worker counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    cause: Cause,
    message: String,
}

impl TaskError {
    /// A failure of kind `cause`, told by `message`.
    pub(crate) fn new(cause: Cause, message: impl Into<String>) -> TaskError {
        TaskError {
            cause,
            message: message.into(),
        }
    }

    /// The message.
    pub(crate) fn as_str(&self) -> &str {
        &self.message
    }

    /// The kind of failure.
    pub(crate) fn cause(&self) -> Cause {
        self.cause
    }

    /// The same failure told with `context` before its message (`"<hook>
    /// FAILED: "`), keeping its cause.
    pub(crate) fn prefixed(self, context: &str) -> TaskError {
        TaskError {
            cause: self.cause,
            message: format!("{context}{}", self.message),
        }
    }
}

/// Tests script outcomes with bare texts; the operator always says the cause.
#[cfg(test)]
impl From<&str> for TaskError {
    fn from(message: &str) -> TaskError {
        TaskError::new(Cause::Internal, message)
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
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
        let failed: Result<Vec<Task>, TaskError> = Err(TaskError::new(Cause::Transient, "step"));
        assert!(matches!(
            Outcome::from_result(failed),
            Outcome::Retry(e) if e.as_str() == "step" && e.cause() == Cause::Transient
        ));
        assert!(
            matches!(Outcome::from_result::<TaskError>(Ok(Vec::new())), Outcome::Done(t) if t.is_empty())
        );
    }
}
