//! The object patcher's error: either the patch file is invalid (nothing was
//! applied; the message names the document, the operation and the field) or an
//! operation failed against the API server (the message starts with the
//! operation's description, e.g. `Create object v1/ConfigMap/ns/name: ...`).

use std::fmt;

/// Why a patch file was rejected or an operation failed.
#[derive(Debug)]
pub struct PatchError(Kind);

#[derive(Debug)]
enum Kind {
    /// The file is neither a JSON stream nor YAML, as a whole.
    Syntax(String),
    /// One document is invalid. `doc` is 1-based.
    Invalid {
        doc: usize,
        operation: Option<String>,
        field: Option<String>,
        message: String,
    },
    /// An operation failed while being applied.
    Apply {
        description: String,
        message: String,
    },
}

impl PatchError {
    pub(crate) fn syntax(message: impl Into<String>) -> PatchError {
        PatchError(Kind::Syntax(message.into()))
    }

    pub(crate) fn invalid(
        doc: usize,
        operation: Option<&str>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> PatchError {
        PatchError(Kind::Invalid {
            doc,
            operation: operation.map(String::from),
            field: field.map(String::from),
            message: message.into(),
        })
    }

    pub(crate) fn apply(description: String, message: String) -> PatchError {
        PatchError(Kind::Apply {
            description,
            message,
        })
    }

    /// True when the file was rejected before anything was applied.
    pub fn is_invalid_file(&self) -> bool {
        !matches!(self.0, Kind::Apply { .. })
    }

    /// The 1-based index of the invalid document, if the error is about one.
    pub fn document(&self) -> Option<usize> {
        match &self.0 {
            Kind::Invalid { doc, .. } => Some(*doc),
            _ => None,
        }
    }

    /// The field at fault (e.g. `jsonPatch[1].value`), if known.
    pub fn field(&self) -> Option<&str> {
        match &self.0 {
            Kind::Invalid { field, .. } => field.as_deref(),
            _ => None,
        }
    }
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Syntax(m) => write!(f, "patch file: {m}"),
            Kind::Invalid {
                doc,
                operation,
                field,
                message,
            } => {
                write!(f, "patch document {doc}")?;
                if let Some(op) = operation {
                    write!(f, " ({op})")?;
                }
                if let Some(field) = field {
                    write!(f, ", field '{field}'")?;
                }
                write!(f, ": {message}")
            }
            Kind::Apply {
                description,
                message,
            } => write!(f, "{description}: {message}"),
        }
    }
}

impl std::error::Error for PatchError {}
