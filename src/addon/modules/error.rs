//! What can go wrong while reading the modules directories and the global hooks
//! directory (`mod.rs`, `chart_dir.rs`, `drift_settings.rs`): every message
//! names the directory or file, and the module where there is one. Built at
//! startup and by a reload of the modules; the texts are the ones logged before
//! this type existed.

use crate::addon::config::values::ValuesError;
use crate::hook::LoadError;
use std::fmt;
use std::path::PathBuf;

/// Why the modules or global hooks could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum ModulesError {
    /// `--global-hooks-dir` is not a directory.
    NoGlobalDir(PathBuf),
    /// A modules directory cannot be listed.
    Dir { dir: PathBuf, error: std::io::Error },
    /// A module directory's name is not a module's (`problem` says why: the
    /// name's rules, Helm's release name rules).
    DirName { path: PathBuf, problem: String },
    /// Two modules directories define module `module`.
    Twice {
        module: String,
        first: PathBuf,
        second: PathBuf,
    },
    /// A file of a module (`values.yaml`, `drift.yaml`) cannot be read or
    /// breaks a rule; `problem` names the field where there is one.
    File { path: PathBuf, problem: String },
    /// An OpenAPI schema of the global values or a module cannot be used.
    Schema(ValuesError),
    /// Module `module`'s Chart.yaml could not be generated in `dir`.
    Chart {
        module: String,
        dir: PathBuf,
        error: std::io::Error,
    },
    /// A hook (of module `module`, or a global one) cannot be loaded.
    Hook {
        module: Option<String>,
        error: LoadError,
    },
}

impl ModulesError {
    /// A problem of the file at `path`.
    pub(crate) fn file(path: impl Into<PathBuf>, problem: impl fmt::Display) -> ModulesError {
        ModulesError::File {
            path: path.into(),
            problem: problem.to_string(),
        }
    }
}

impl fmt::Display for ModulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModulesError::NoGlobalDir(dir) => {
                write!(f, "global hooks dir '{}' does not exist", dir.display())
            }
            ModulesError::Dir { dir, error } => {
                write!(f, "modules dir '{}': {error}", dir.display())
            }
            ModulesError::DirName { path, problem } => {
                write!(f, "module dir '{}': {problem}", path.display())
            }
            ModulesError::Twice {
                module,
                first,
                second,
            } => write!(
                f,
                "module '{module}' is defined twice: '{}' and '{}'",
                first.display(),
                second.display()
            ),
            ModulesError::File { path, problem } => write!(f, "{}: {problem}", path.display()),
            ModulesError::Schema(e) => e.fmt(f),
            ModulesError::Chart { module, dir, error } => write!(
                f,
                "module '{module}': generating a Chart.yaml in {}: {error}",
                dir.display()
            ),
            ModulesError::Hook {
                module: Some(module),
                error,
            } => write!(f, "module '{module}': {error}"),
            ModulesError::Hook {
                module: None,
                error,
            } => error.fmt(f),
        }
    }
}

impl std::error::Error for ModulesError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModulesError::Dir { error, .. } | ModulesError::Chart { error, .. } => Some(error),
            ModulesError::Schema(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ValuesError> for ModulesError {
    fn from(e: ValuesError) -> ModulesError {
        ModulesError::Schema(e)
    }
}
