//! What can go wrong when the engine asks about a release without running helm:
//! reading helm's storage Secrets, labelling one, listing or reading the objects
//! of a release's manifest, reading a manifest. Built on the queue thread of the
//! module run (and on the resource monitor's and drift watcher's threads, which
//! log it). The texts are the ones logged before this type existed.

use super::helm_error::HelmError;
use crate::kube::KubeError;
use crate::queue::Cause;
use std::fmt;

/// A question about a release that could not be answered.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReleaseError {
    /// A Kubernetes call failed; `context` says what it was for (empty when
    /// the client's own message says it).
    Kube {
        context: String,
        error: Box<KubeError>,
    },
    /// A manifest document (`at`: `manifest document 2 items[0]`) is not YAML,
    /// or not an object with an apiVersion, kind and name.
    Manifest { at: String, problem: String },
    /// helm failed to answer (`helm get manifest`).
    Helm(HelmError),
    /// The release's stored record could not be read.
    Record(String),
}

impl ReleaseError {
    /// A Kubernetes error, with what it was for.
    pub(crate) fn kube(context: impl Into<String>, error: KubeError) -> ReleaseError {
        ReleaseError::Kube {
            context: context.into(),
            error: Box::new(error),
        }
    }

    /// The same error, with `prefix` before what a Kubernetes call was for.
    pub(crate) fn within(self, prefix: &str) -> ReleaseError {
        match self {
            ReleaseError::Kube { context, error } => ReleaseError::Kube {
                context: format!("{prefix}: {context}"),
                error,
            },
            other => other,
        }
    }

    /// The kind of failure: a Kubernetes call's as it says, a bad manifest is
    /// invalid input, helm's as helm's, an unreadable record internal.
    pub(crate) fn cause(&self) -> Cause {
        match self {
            ReleaseError::Kube { error, .. } => Cause::of_kube(error),
            ReleaseError::Manifest { .. } => Cause::InvalidInput,
            ReleaseError::Helm(e) => e.cause(),
            ReleaseError::Record(_) => Cause::Internal,
        }
    }
}

impl fmt::Display for ReleaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReleaseError::Kube { context, error } if context.is_empty() => error.fmt(f),
            ReleaseError::Kube { context, error } => write!(f, "{context}: {error}"),
            ReleaseError::Manifest { at, problem } => write!(f, "{at}: {problem}"),
            ReleaseError::Helm(e) => e.fmt(f),
            ReleaseError::Record(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ReleaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReleaseError::Kube { error, .. } => Some(&**error),
            ReleaseError::Helm(e) => Some(e),
            _ => None,
        }
    }
}

impl From<HelmError> for ReleaseError {
    fn from(e: HelmError) -> ReleaseError {
        ReleaseError::Helm(e)
    }
}
