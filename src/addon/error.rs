//! The one error of addon-operator's tasks: what a module run, a module delete,
//! a converge step and a hook's values files and patches fail with. It wraps the
//! typed errors of the parts they call (helm, the ConfigMap, the values store,
//! ModuleSettings, the Kubernetes client, a hook run) and says, for the queue,
//! what kind of failure it is ([`Error::cause`]), which the failure is counted
//! under (`task_errors_total{cause}`).
//!
//! `Display` is the wrapped error's own message, word for word, with the
//! context the step adds before it (`check helm values: `): log lines, the
//! module's settings status and the tests read those texts. `source()` gives
//! the wrapped error. Built on the queue thread that ran the step.
//!
//! Some parts still tell their failures as text (the release storage reads,
//! the CRD installer, the webhook registrars, module discovery): their
//! variants carry the text, and their cause is the one their concept has.

use crate::addon::config::configmap::ConfigError;
use crate::addon::config::settings::SettingsError;
use crate::addon::config::values::ValuesError;
use crate::addon::release::crd_error::CrdError;
use crate::addon::release::helm_error::HelmError;
use crate::addon::release::release_error::ReleaseError;
use crate::addon::release::yaml11::YamlError;
use crate::kube::KubeError;
use crate::queue::{Cause, TaskError};
use std::fmt;

/// Why an addon task failed.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum Error {
    /// A helm run failed.
    Helm(HelmError),
    /// The ConfigMap was refused, or could not be read or written.
    Config(ConfigError),
    /// Values or a values patch broke a schema or could not be applied.
    Values(ValuesError),
    /// A ModuleSettings object could not be read or written.
    Settings(SettingsError),
    /// A Kubernetes call failed; `context` says what it was for.
    Kube {
        context: String,
        /// Boxed: a Kubernetes error is large, and most results are `Ok`.
        error: Box<KubeError>,
    },
    /// A hook the step ran itself failed (onStartup, beforeHelm, afterHelm, ...);
    /// the hook run's error, which knows its cause.
    Hook(TaskError),
    /// A hook's values patch file (`env` names it) is not a patch.
    PatchFile {
        env: &'static str,
        error: ValuesError,
    },
    /// A hook's patch has an operation on a path it may not patch.
    ForeignPath { path: String },
    /// A global hook set a `/<module>Enabled` flag to something not boolean.
    EnabledFlag { path: String, got: String },
    /// Other writers kept changing `what` values while a hook's config patch was
    /// written (`attempts` times).
    KeptMoving { what: String, attempts: usize },
    /// A module index the operator does not know.
    NoSuchModule,
    /// A step failed in a part named by `context` (`check helm values`).
    In {
        context: &'static str,
        source: Box<Error>,
    },
    /// The operator's own temporary file (a module's values file for helm)
    /// could not be written.
    TempFile(std::io::Error),
    /// Values could not be serialised for helm.
    Encode(serde_json::Error),
    /// A question about the module's release could not be answered (its
    /// storage Secrets, its record, the objects of its manifest).
    Release(ReleaseError),
    /// The release is left `status` (`pending-upgrade`, `uninstalling`) by an
    /// interrupted helm and helm's storage is not Secrets, which the operator
    /// would repair: someone must recover it by hand.
    Stuck { release: String, status: String },
    /// A release's manifest cannot be read as YAML 1.1.
    Manifest(YamlError),
    /// The module's CRDs could not be installed.
    Crds(CrdError),
    /// The module's chart could not be read (for its checksum).
    Chart(crate::addon::release::chart_sum::ChartError),
    /// The module's admission or conversion webhooks could not be configured.
    Webhooks(String),
    /// The module's watches could not be stopped (the monitor thread is gone).
    Monitor(String),
}

impl Error {
    /// The kind of failure, for the queue's error count. The text-carrying
    /// variants take their concept's usual cause: release reads, CRD installs
    /// and webhook registration are API calls (transient); a monitor that is
    /// gone is the operator's own state (internal).
    pub(crate) fn cause(&self) -> Cause {
        match self {
            Error::Helm(e) => e.cause(),
            Error::Config(e) => e.cause(),
            Error::Settings(e) => e.cause(),
            Error::Kube { error, .. } => Cause::of_kube(error),
            Error::Hook(e) => e.cause(),
            Error::In { source, .. } => source.cause(),
            Error::Values(_)
            | Error::PatchFile { .. }
            | Error::ForeignPath { .. }
            | Error::EnabledFlag { .. }
            | Error::Chart(_)
            | Error::Stuck { .. }
            | Error::Manifest(_) => Cause::InvalidInput,
            Error::Release(e) => e.cause(),
            Error::Crds(e) => e.cause(),
            Error::KeptMoving { .. } | Error::Webhooks(_) => Cause::Transient,
            Error::NoSuchModule | Error::TempFile(_) | Error::Encode(_) | Error::Monitor(_) => {
                Cause::Internal
            }
        }
    }

    /// This error with `context` said before it.
    pub(crate) fn context(self, context: &'static str) -> Error {
        Error::In {
            context,
            source: Box::new(self),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Helm(e) => e.fmt(f),
            Error::Config(e) => e.fmt(f),
            Error::Values(e) => e.fmt(f),
            Error::Settings(e) => e.fmt(f),
            Error::Kube { context, error } => write!(f, "{context}: {error}"),
            Error::Hook(e) => e.fmt(f),
            Error::PatchFile { env, error } => write!(f, "bad ${env} file: {error}"),
            Error::ForeignPath { path } => {
                write!(f, "unacceptable patch operation for path {path}")
            }
            Error::EnabledFlag { path, got } => {
                write!(f, "path {path}: value must be true or false, got {got}")
            }
            Error::KeptMoving { what, attempts } => write!(
                f,
                "{what} values changed while the config patch was written, {attempts} times; \
                 the run is retried"
            ),
            Error::NoSuchModule => f.write_str("no such module"),
            Error::Stuck { release, status } => write!(
                f,
                "release {release} is {status} and HELM_DRIVER is not secrets: recover it by hand"
            ),
            Error::In { context, source } => write!(f, "{context}: {source}"),
            Error::TempFile(e) => e.fmt(f),
            Error::Manifest(e) => e.fmt(f),
            Error::Encode(e) => e.fmt(f),
            Error::Release(e) => e.fmt(f),
            Error::Crds(e) => e.fmt(f),
            Error::Chart(e) => e.fmt(f),
            Error::Webhooks(m) | Error::Monitor(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Helm(e) => Some(e),
            Error::Config(e) => Some(e),
            Error::Values(e) | Error::PatchFile { error: e, .. } => Some(e),
            Error::Settings(e) => Some(e),
            Error::Kube { error, .. } => Some(&**error),
            Error::Hook(e) => Some(e),
            Error::In { source, .. } => Some(&**source),
            Error::TempFile(e) => Some(e),
            Error::Manifest(e) => Some(e),
            Error::Release(e) => Some(e),
            Error::Encode(e) => Some(e),
            _ => None,
        }
    }
}

/// The queue's view: the message and the cause.
impl From<Error> for TaskError {
    fn from(e: Error) -> TaskError {
        TaskError::new(e.cause(), e.to_string())
    }
}

impl From<HelmError> for Error {
    fn from(e: HelmError) -> Error {
        Error::Helm(e)
    }
}

impl From<ReleaseError> for Error {
    fn from(e: ReleaseError) -> Error {
        Error::Release(e)
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Error {
        Error::Config(e)
    }
}

impl From<ValuesError> for Error {
    fn from(e: ValuesError) -> Error {
        Error::Values(e)
    }
}

impl From<SettingsError> for Error {
    fn from(e: SettingsError) -> Error {
        Error::Settings(e)
    }
}

impl From<TaskError> for Error {
    fn from(e: TaskError) -> Error {
        Error::Hook(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn messages_are_the_wrapped_errors_own_with_the_context_before() {
        let helm = HelmError::Failed {
            what: "upgrade demo".into(),
            bin: "/bin/helm".into(),
            status: "exit status 1".into(),
            stderr: "Error: another operation (install/upgrade/rollback) is in progress".into(),
        };
        let text = helm.to_string();
        let e = Error::from(helm).context("helm phase");
        assert_eq!(e.to_string(), format!("helm phase: {text}"));
        assert_eq!(e.cause(), Cause::Transient, "helm's lock is transient");
        let source = e.source().expect("a source");
        assert_eq!(source.to_string(), text);
    }

    #[test]
    fn a_task_error_keeps_message_and_cause() {
        let e = Error::PatchFile {
            env: "VALUES_JSON_PATCH_PATH",
            error: ValuesError::PatchFile("document 1: not a list".into()),
        };
        let task = TaskError::from(e);
        assert_eq!(task.cause(), Cause::InvalidInput);
        assert_eq!(
            task.as_str(),
            "bad $VALUES_JSON_PATCH_PATH file: document 1: not a list"
        );
        let hook = Error::from(TaskError::new(Cause::Hook, "h FAILED: exit 1"));
        assert_eq!(hook.cause(), Cause::Hook);
        assert_eq!(hook.to_string(), "h FAILED: exit 1");
    }
}
