//! What can go wrong when the addon engine runs helm (`helm.rs`), as one enum, so a
//! caller can tell "the release does not exist" from a failed upgrade without
//! reading error text, and every message names the helm operation and binary.
//!
//! The texts are the ones the operator logged before this type existed: tests and
//! users grep for them.

use crate::queue::Cause;
use std::fmt;

/// A helm run that did not give what was asked for.
#[derive(Debug)]
pub enum HelmError {
    /// helm could not be started, printed more than we read, ran past its time
    /// limit's grace, or was stopped by the operator's shutdown.
    Run {
        what: String,
        bin: String,
        error: std::io::Error,
    },
    /// helm ran and exited with an error; `status` says how (`exit status 1`),
    /// `stderr` is its (bounded) message.
    Failed {
        what: String,
        bin: String,
        status: String,
        stderr: String,
    },
    /// helm's output could not be read as what the operation returns (not UTF-8,
    /// not the JSON or version text expected).
    Output { what: String, detail: String },
    /// A path handed to helm is not UTF-8 (helm takes its arguments as text).
    Path(String),
}

/// What helm prints when a retry with nothing changed may well succeed: its
/// release is locked by another operation, or the API server did not answer in
/// time or at all.
const TRANSIENT_STDERR: &[&str] = &[
    "another operation (install/upgrade/rollback) is in progress",
    "context deadline exceeded",
    "timed out",
    "i/o timeout",
    "connection refused",
    "connection reset",
    "TLS handshake timeout",
    "the server is currently unable to handle the request",
    "Too Many Requests",
    "etcdserver",
];

impl HelmError {
    /// The kind of failure: a locked release or a slow or absent API server is
    /// transient; helm that cannot be started or whose output we cannot read is
    /// internal; any other failed helm run (a chart that does not render, an
    /// object the API server rejects) is for the module's author to fix.
    pub(crate) fn cause(&self) -> Cause {
        match self {
            HelmError::Run { error, .. } if error.kind() == std::io::ErrorKind::TimedOut => {
                Cause::Transient
            }
            HelmError::Run { .. } | HelmError::Output { .. } => Cause::Internal,
            HelmError::Failed { stderr, .. }
                if TRANSIENT_STDERR.iter().any(|t| stderr.contains(t)) =>
            {
                Cause::Transient
            }
            HelmError::Failed { .. } | HelmError::Path(_) => Cause::InvalidInput,
        }
    }

    /// helm 3 and 4 both say `release: not found` for a release that does not exist.
    pub fn is_release_not_found(&self) -> bool {
        matches!(self, HelmError::Failed { stderr, .. } if stderr.contains("release: not found"))
    }
}

impl fmt::Display for HelmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HelmError::Run { what, bin, error } => write!(f, "helm {what} ({bin}): {error}"),
            HelmError::Failed {
                what,
                bin,
                status,
                stderr,
            } => write!(f, "helm {what} ({bin}) failed: {status}: {stderr}"),
            HelmError::Output { what, detail } => write!(f, "helm {what}: {detail}"),
            HelmError::Path(detail) => f.write_str(detail),
        }
    }
}

impl std::error::Error for HelmError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(stderr: &str) -> HelmError {
        HelmError::Failed {
            what: "history demo".into(),
            bin: "/bin/helm".into(),
            status: "exit status 1".into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn only_a_failed_run_saying_so_is_a_missing_release() {
        assert!(failed("Error: release: not found").is_release_not_found());
        assert!(!failed("Error: timed out").is_release_not_found());
        let output = HelmError::Output {
            what: "history demo".into(),
            detail: "release: not found".into(),
        };
        assert!(!output.is_release_not_found());
    }

    #[test]
    fn a_locked_release_or_a_timeout_is_transient_a_bad_chart_is_not() {
        let locked =
            "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress";
        assert_eq!(failed(locked).cause(), Cause::Transient);
        assert_eq!(
            failed("Error: context deadline exceeded").cause(),
            Cause::Transient
        );
        let render = "Error: template: demo/templates/cm.yaml:3: unexpected EOF";
        assert_eq!(failed(render).cause(), Cause::InvalidInput);
        let spawn = HelmError::Run {
            what: "upgrade demo".into(),
            bin: "/no/helm".into(),
            error: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert_eq!(spawn.cause(), Cause::Internal);
    }

    #[test]
    fn messages_name_the_operation_and_binary() {
        assert_eq!(
            failed("Error: boom").to_string(),
            "helm history demo (/bin/helm) failed: exit status 1: Error: boom"
        );
    }
}
