//! What can go wrong with a module's CRDs (`crds.rs`): a file that cannot be
//! read or holds no CRD, an API call that failed, a CRD the server does not
//! accept or establish in time; and the contexts an install adds (the file and
//! CRD, the module). The texts are the ones logged before this type existed.
//! Built at startup (discovery) and on the queue thread of a module's startup.

use crate::kube::KubeError;
use crate::queue::Cause;
use std::fmt;

/// Why a module's CRDs could not be found, read or installed.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum CrdError {
    /// `ADDON_OPERATOR_CRD_EXTRA_LABELS` is not a list of labels.
    ExtraLabels { text: String, why: String },
    /// A CRD file or directory (`at`, with the document when it is one
    /// document's) cannot be read or holds something that is not a CRD.
    File { at: String, problem: String },
    /// An API call failed; `what` it was (`creating`, `CRD <name>`).
    Kube { what: String, error: Box<KubeError> },
    /// Every update lost its race (the last conflict's message).
    Conflict { last: String },
    /// The server refused the CRD's names.
    NotAccepted { name: String, message: String },
    /// These CRDs were not Established within `after_secs`.
    NotEstablished { after_secs: u64, names: Vec<String> },
    /// CRD `name` of `file` failed.
    InFile {
        file: String,
        name: String,
        error: Box<CrdError>,
    },
    /// Every failure of one install.
    Several(Vec<CrdError>),
    /// Module `module`'s CRD files could not be found.
    Module {
        module: String,
        error: Box<CrdError>,
    },
    /// A module's CRDs could not be installed.
    Installing(Box<CrdError>),
}

impl CrdError {
    /// A failed API call.
    pub(crate) fn kube(what: impl Into<String>, error: KubeError) -> CrdError {
        CrdError::Kube {
            what: what.into(),
            error: Box::new(error),
        }
    }

    /// A file problem at `at`.
    pub(crate) fn file(at: impl fmt::Display, problem: impl fmt::Display) -> CrdError {
        CrdError::File {
            at: at.to_string(),
            problem: problem.to_string(),
        }
    }

    /// The kind of failure: files, names and flags are for a user to fix, API
    /// calls are as they say, races and a slow establishment are transient.
    pub(crate) fn cause(&self) -> Cause {
        match self {
            CrdError::ExtraLabels { .. } | CrdError::File { .. } | CrdError::NotAccepted { .. } => {
                Cause::InvalidInput
            }
            CrdError::Kube { error, .. } => Cause::of_kube(error),
            CrdError::Conflict { .. } | CrdError::NotEstablished { .. } => Cause::Transient,
            CrdError::InFile { error, .. }
            | CrdError::Module { error, .. }
            | CrdError::Installing(error) => error.cause(),
            CrdError::Several(all) => all.first().map_or(Cause::Internal, CrdError::cause),
        }
    }
}

impl fmt::Display for CrdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CrdError::ExtraLabels { text, why } => {
                write!(
                    f,
                    "ADDON_OPERATOR_CRD_EXTRA_LABELS (--crd-extra-labels) {text:?}: {why}"
                )
            }
            CrdError::File { at, problem } => write!(f, "{at}: {problem}"),
            CrdError::Kube { what, error } => write!(f, "{what}: {error}"),
            CrdError::Conflict { last } => {
                write!(f, "updating: still conflicting after 5 tries: {last}")
            }
            CrdError::NotAccepted { name, message } => {
                write!(f, "CRD {name}: names not accepted: {message}")
            }
            CrdError::NotEstablished { after_secs, names } => write!(
                f,
                "CRDs not Established after {after_secs}s: {}",
                names.join(", ")
            ),
            CrdError::InFile { file, name, error } => write!(f, "{file}: CRD {name}: {error}"),
            CrdError::Several(all) => {
                let texts: Vec<String> = all.iter().map(ToString::to_string).collect();
                f.write_str(&texts.join("; "))
            }
            CrdError::Module { module, error } => write!(f, "module '{module}': crds: {error}"),
            CrdError::Installing(error) => write!(f, "installing CRDs: {error}"),
        }
    }
}

impl std::error::Error for CrdError {}
