//! Why addon-operator's bind step failed (`mod.rs`): a setting, the modules, the
//! CRDs, helm, a Kubernetes client, the metrics, or the configuration the
//! ConfigMap (and ModuleSettings objects) hold. Any of them stops startup before
//! a hook runs (exit 1, as flant does), with the message naming the flag, file,
//! module or ConfigMap. The texts are the ones printed before this type existed.

use crate::addon::config::configmap::ConfigError;
use crate::addon::config::settings::SettingsError;
use crate::addon::config::values::ValuesError;
use crate::addon::modules::ModulesError;
use crate::addon::release::crd_error::CrdError;
use crate::addon::release::helm_error::HelmError;
use crate::addon::release::post_render::PluginError;
use crate::kube::KubeError;
use std::fmt;
use std::path::PathBuf;

/// A failed step of addon-operator's startup.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum BindError {
    /// A required setting is missing or out of range (the text names its flag
    /// and environment variable).
    Setting(&'static str),
    /// A modules directory cannot be resolved.
    ModulesDir {
        dir: PathBuf,
        error: std::io::Error,
    },
    Modules(ModulesError),
    Crds(CrdError),
    Helm(HelmError),
    /// The post-renderer plugin could not be written.
    Plugin(PluginError),
    /// A Kubernetes client (`what`) could not be made.
    Client {
        what: &'static str,
        /// Boxed: a Kubernetes error is large.
        error: Box<KubeError>,
    },
    /// Metrics (`what`; empty when the error names them) could not be registered.
    Metrics {
        what: &'static str,
        error: String,
    },
    /// The ConfigMap could not be read.
    Config(ConfigError),
    /// The ModuleSettings CRD or objects could not be installed or listed.
    Settings(SettingsError),
    /// Values the configuration holds break a schema.
    Values(ValuesError),
    /// The configuration of `configmap` (and of the ModuleSettings objects, when
    /// `objects`) was refused.
    Refused {
        configmap: String,
        objects: &'static str,
        error: Box<BindError>,
    },
}

impl BindError {
    /// Metrics `what` could not be registered.
    pub(crate) fn metrics(what: &'static str, error: impl fmt::Display) -> BindError {
        BindError::Metrics {
            what,
            error: error.to_string(),
        }
    }
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::Setting(text) => f.write_str(text),
            BindError::ModulesDir { dir, error } => {
                write!(f, "modules dir '{}': {error}", dir.display())
            }
            BindError::Modules(e) => e.fmt(f),
            BindError::Crds(e) => e.fmt(f),
            BindError::Helm(e) => e.fmt(f),
            BindError::Plugin(e) => e.fmt(f),
            BindError::Client { what, error } => write!(f, "{what}: {error}"),
            BindError::Metrics { what: "", error } => f.write_str(error),
            BindError::Metrics { what, error } => write!(f, "{what}: {error}"),
            BindError::Config(e) => e.fmt(f),
            BindError::Settings(e) => e.fmt(f),
            BindError::Values(e) => e.fmt(f),
            BindError::Refused {
                configmap,
                objects,
                error,
            } => write!(f, "ConfigMap {configmap}{objects}: {error}"),
        }
    }
}

impl std::error::Error for BindError {}

impl From<ModulesError> for BindError {
    fn from(e: ModulesError) -> BindError {
        BindError::Modules(e)
    }
}

impl From<CrdError> for BindError {
    fn from(e: CrdError) -> BindError {
        BindError::Crds(e)
    }
}

impl From<HelmError> for BindError {
    fn from(e: HelmError) -> BindError {
        BindError::Helm(e)
    }
}

impl From<ConfigError> for BindError {
    fn from(e: ConfigError) -> BindError {
        BindError::Config(e)
    }
}

impl From<SettingsError> for BindError {
    fn from(e: SettingsError) -> BindError {
        BindError::Settings(e)
    }
}

impl From<ValuesError> for BindError {
    fn from(e: ValuesError) -> BindError {
        BindError::Values(e)
    }
}
