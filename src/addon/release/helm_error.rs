//! What can go wrong when the addon engine runs helm (`helm.rs`), as one enum, so a
//! caller can tell "the release does not exist" from a failed upgrade without
//! reading error text, and every message names the helm operation and binary.
//!
//! The texts are the ones the operator logged before this type existed: tests and
//! users grep for them.

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

impl HelmError {
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

/// The engine's module runs still pass errors on as text (they end in a log line
/// and a retry); `?` converts at that boundary.
impl From<HelmError> for String {
    fn from(e: HelmError) -> String {
        e.to_string()
    }
}

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
    fn messages_name_the_operation_and_binary() {
        assert_eq!(
            failed("Error: boom").to_string(),
            "helm history demo (/bin/helm) failed: exit status 1: Error: boom"
        );
    }
}
