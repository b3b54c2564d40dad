//! Why a task failed, as a kind rather than a text: the label a failure is
//! counted under (`task_errors_total{cause}`), so an operator of the operator can
//! tell a flaky API server from a broken hook or a bad values patch on a
//! dashboard, without reading log lines.
//!
//! The cause only labels: whether a failed task is retried, dropped or stops
//! the operator is decided by [`Outcome`](super::Outcome) as flant decides it
//! (a hook's `allowFailure`, the task kind). The errors that know their cause
//! say it (`addon::Error::cause`, the runner's hook-run errors); this file holds
//! the kinds and the one rule shared by every caller: how a Kubernetes client
//! error is classified.

use crate::kube::KubeError;

/// The kind of a task's failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cause {
    /// It may well succeed when run again with nothing changed: the API server
    /// or the network failed or timed out, a write lost a race, helm found its
    /// release locked by another operation.
    Transient,
    /// Something a user must fix: values or config that break a schema or
    /// cannot be applied, a bad patch, metrics or response file from a hook, a
    /// chart that does not render, an object the API server rejects, missing
    /// RBAC.
    InvalidInput,
    /// The hook itself failed: it could not be started (not executable, its
    /// interpreter missing), exited with an error status, was killed, or left an
    /// output file that cannot be read (a directory, over the size cap).
    Hook,
    /// The operator's own side: its temporary files, a thread it needs, a task
    /// it has no code for, an answer it cannot decode.
    Internal,
}

impl Cause {
    /// Every cause, in the order the reference lists them.
    pub const ALL: [Cause; 4] = [
        Cause::Transient,
        Cause::InvalidInput,
        Cause::Hook,
        Cause::Internal,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Transient => "transient",
            Cause::InvalidInput => "invalid_input",
            Cause::Hook => "hook",
            Cause::Internal => "internal",
        }
    }

    /// The cause of a failed Kubernetes call: no answer, a timeout, a
    /// throttle, a conflict or a server error is transient; an answer the
    /// client cannot decode is internal; anything else (a rejected object,
    /// forbidden, not found, an unknown kind, a bad kubeconfig or selector) is
    /// for a user to fix.
    pub(crate) fn of_kube(error: &KubeError) -> Cause {
        match error {
            KubeError::Transport { .. } | KubeError::Exec { .. } => Cause::Transient,
            KubeError::Api { code, .. } if transient_status(*code) => Cause::Transient,
            KubeError::Decode { .. } => Cause::Internal,
            _ => Cause::InvalidInput,
        }
    }
}

impl Cause {
    /// The cause of a hook run the executor could not complete: a timed-out or
    /// interrupted wait is transient, the operator's own disk or memory running
    /// out is internal, anything else is the hook's (see [`Cause::Hook`]).
    pub(crate) fn of_run(error: &std::io::Error) -> Cause {
        use std::io::ErrorKind::*;
        match error.kind() {
            TimedOut | Interrupted | WouldBlock => Cause::Transient,
            StorageFull | OutOfMemory | QuotaExceeded | ReadOnlyFilesystem => Cause::Internal,
            _ => Cause::Hook,
        }
    }
}

/// 408 Request Timeout, 409 Conflict, 429 Too Many Requests and every 5xx.
fn transient_status(code: u16) -> bool {
    matches!(code, 408 | 409 | 429) || code >= 500
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> KubeError {
        KubeError::Api {
            verb: "PATCH",
            path: "/api/v1/namespaces/d/configmaps/c".into(),
            code,
            reason: String::new(),
            message: String::new(),
            retry_after: None,
        }
    }

    #[test]
    fn kube_errors_are_transient_only_when_a_retry_can_help() {
        for code in [408, 409, 429, 500, 503, 504] {
            assert_eq!(Cause::of_kube(&api(code)), Cause::Transient, "{code}");
        }
        for code in [400, 403, 404, 422] {
            assert_eq!(Cause::of_kube(&api(code)), Cause::InvalidInput, "{code}");
        }
        let transport = KubeError::Transport {
            verb: "GET",
            path: "/api".into(),
            message: "connection refused".into(),
        };
        assert_eq!(Cause::of_kube(&transport), Cause::Transient);
        let decode = KubeError::Decode {
            what: "list".into(),
            message: "eof".into(),
        };
        assert_eq!(Cause::of_kube(&decode), Cause::Internal);
    }

    #[test]
    fn a_hook_that_cannot_run_is_the_hooks_failure_a_full_disk_is_not() {
        let io = |kind| std::io::Error::from(kind);
        assert_eq!(
            Cause::of_run(&io(std::io::ErrorKind::PermissionDenied)),
            Cause::Hook
        );
        assert_eq!(
            Cause::of_run(&io(std::io::ErrorKind::IsADirectory)),
            Cause::Hook
        );
        assert_eq!(
            Cause::of_run(&io(std::io::ErrorKind::StorageFull)),
            Cause::Internal
        );
        assert_eq!(
            Cause::of_run(&io(std::io::ErrorKind::TimedOut)),
            Cause::Transient
        );
    }

    #[test]
    fn label_values_are_distinct() {
        let labels: std::collections::BTreeSet<&str> =
            Cause::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(labels.len(), Cause::ALL.len());
    }
}
