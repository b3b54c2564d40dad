//! Why the operator could not start: the bind step (signals, directories,
//! hooks, listeners, Kubernetes clients, metrics, addon-operator's modules and
//! ConfigMap) or the spawn step (a thread). Any of them ends the process with
//! exit code 1 before a hook has run, with this message logged. Parts that still
//! tell their failure as text (the listeners, webhooks, leader election) come as
//! [`StartError::Part`], their message unchanged.

use crate::addon::BindError;
use crate::hook::LoadError;
use crate::kube::KubeError;
use std::fmt;
use std::path::PathBuf;

/// A failed step of the startup.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum StartError {
    /// A signal handler could not be installed (`signal` when it was one).
    Signals {
        signal: Option<i32>,
        error: std::io::Error,
    },
    /// A directory the operator needs (`what`: `hooks dir`, `tmp dir`).
    Dir {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// shell-operator's hooks could not be loaded.
    Hooks(LoadError),
    /// A Kubernetes client (`what`) could not be made.
    Client {
        what: &'static str,
        error: Box<KubeError>,
    },
    /// Metrics (`what`) could not be registered.
    Metrics { what: &'static str, error: String },
    /// addon-operator's bind step failed.
    Addon(BindError),
    /// A part that reports its failure as text (its message).
    Part(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Signals {
                signal: Some(sig),
                error,
            } => write!(f, "cannot handle signal {sig}: {error}"),
            StartError::Signals {
                signal: None,
                error,
            } => {
                write!(f, "cannot handle signals: {error}")
            }
            StartError::Dir { what, path, error } => {
                write!(f, "{what} '{}': {error}", path.display())
            }
            StartError::Hooks(e) => e.fmt(f),
            StartError::Client { what, error } => write!(f, "{what}: {error}"),
            StartError::Metrics { what, error } => write!(f, "{what}: {error}"),
            StartError::Addon(e) => e.fmt(f),
            StartError::Part(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for StartError {}

impl From<String> for StartError {
    fn from(text: String) -> StartError {
        StartError::Part(text)
    }
}

impl From<&str> for StartError {
    fn from(text: &str) -> StartError {
        StartError::Part(text.to_string())
    }
}

impl From<BindError> for StartError {
    fn from(e: BindError) -> StartError {
        StartError::Addon(e)
    }
}

impl From<LoadError> for StartError {
    fn from(e: LoadError) -> StartError {
        StartError::Hooks(e)
    }
}
