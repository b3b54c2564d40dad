//! The object patcher's errors: either the patch file is invalid (nothing was
//! applied; the message names the document, the operation and the field) or an
//! operation failed against the API server (the message starts with the
//! operation's description, e.g. `Create object v1/ConfigMap/ns/name: ...`, and
//! ends with what to do where the cause says it: an existing object, a missing
//! one, a forbidden verb, a writer that keeps winning). Callers branch on the
//! variants ([`PatchError::is_invalid_file`], [`ApplyError::is_conflict`], ...),
//! never on the text. Built on the queue thread that ran the hook.

use crate::kube::KubeError;
use crate::queue::Cause;
use std::fmt;
use std::time::Duration;

/// Why a patch file was rejected or an operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum PatchError {
    /// The file is neither a JSON stream nor YAML, as a whole.
    Syntax(String),
    /// One document is invalid. `doc` is 1-based.
    Invalid {
        doc: usize,
        operation: Option<String>,
        field: Option<String>,
        message: String,
    },
    /// An operation failed while being applied; the ones after it did not run.
    Apply {
        /// flant's description of the operation: `Create object v1/ConfigMap/ns/name`.
        operation: String,
        /// Boxed: a Kubernetes error is large, and most results are `Ok`.
        cause: Box<ApplyError>,
    },
}

/// Why one operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ApplyError {
    /// The API server refused it or could not be reached. `create` tells a
    /// 409 AlreadyExists of a Create from a 409 Conflict of a write.
    Kube { error: KubeError, create: bool },
    /// A read-modify-write (JQPatch, CreateOrUpdate) lost every race.
    Conflict {
        attempts: usize,
        last: Option<KubeError>,
    },
    /// A foreground delete's object is still there after the wait.
    StillPresent { waited: Duration },
    /// A JQPatch filter did not compile (modules are resolved only now) or failed.
    Jq(String),
    /// A JQPatch filter's result is not one object; `what` says what it is.
    NotAnObject { what: &'static str, result: String },
}

impl PatchError {
    /// The kind of failure: a rejected file is the hook's invalid output; a
    /// failed operation is as its API call says (a lost race or an object still
    /// being deleted is transient, a jq filter that fails is invalid input).
    pub(crate) fn cause(&self) -> Cause {
        let PatchError::Apply { cause, .. } = self else {
            return Cause::InvalidInput;
        };
        match &**cause {
            ApplyError::Kube { error, .. } => Cause::of_kube(error),
            ApplyError::Conflict { .. } | ApplyError::StillPresent { .. } => Cause::Transient,
            ApplyError::Jq(_) | ApplyError::NotAnObject { .. } => Cause::InvalidInput,
        }
    }

    pub(crate) fn syntax(message: impl Into<String>) -> PatchError {
        PatchError::Syntax(message.into())
    }

    pub(crate) fn invalid(
        doc: usize,
        operation: Option<&str>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> PatchError {
        PatchError::Invalid {
            doc,
            operation: operation.map(String::from),
            field: field.map(String::from),
            message: message.into(),
        }
    }

    /// True when the file was rejected before anything was applied.
    pub fn is_invalid_file(&self) -> bool {
        !matches!(self, PatchError::Apply { .. })
    }

    /// The 1-based index of the invalid document, if the error is about one.
    pub fn document(&self) -> Option<usize> {
        match self {
            PatchError::Invalid { doc, .. } => Some(*doc),
            _ => None,
        }
    }

    /// The field at fault (e.g. `jsonPatch[1].value`), if known.
    pub fn field(&self) -> Option<&str> {
        match self {
            PatchError::Invalid { field, .. } => field.as_deref(),
            _ => None,
        }
    }

    /// Why an operation failed, if one did.
    pub fn apply_error(&self) -> Option<&ApplyError> {
        match self {
            PatchError::Apply { cause, .. } => Some(&**cause),
            _ => None,
        }
    }
}

impl ApplyError {
    /// The API server's error, if it gave one (for a lost race, the last 409).
    pub fn kube_error(&self) -> Option<&KubeError> {
        match self {
            ApplyError::Kube { error, .. } => Some(error),
            ApplyError::Conflict { last, .. } => last.as_ref(),
            _ => None,
        }
    }

    /// True when another writer won: a 409 Conflict, or every attempt lost.
    pub fn is_conflict(&self) -> bool {
        match self {
            ApplyError::Kube { error, create } => error.is_conflict() && !create,
            ApplyError::Conflict { .. } => true,
            _ => false,
        }
    }

    /// What the user can do about it, when the cause says.
    fn hint(&self) -> Option<&'static str> {
        let code = match self {
            ApplyError::Kube { error, .. } => error.status_code(),
            ApplyError::Conflict { .. } => {
                return Some("another writer keeps changing the object; the hook run is retried");
            }
            ApplyError::StillPresent { .. } => {
                return Some("a finalizer may hold it; DeleteInBackground does not wait");
            }
            ApplyError::NotAnObject { .. } => return Some("the filter must output one object"),
            ApplyError::Jq(_) => return None,
        };
        match (code, self) {
            (Some(409), ApplyError::Kube { create: true, .. }) => {
                Some("use CreateOrUpdate or CreateIfNotExists if the object may exist")
            }
            (Some(404), _) => Some("set ignoreMissingObject: true if the object may be absent"),
            (Some(403), _) => {
                Some("grant the operator's ServiceAccount this verb in its RBAC rules")
            }
            (Some(422), _) => {
                Some("the API server rejected the object as invalid; fix it in the patch file")
            }
            _ => None,
        }
    }
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::Syntax(m) => write!(f, "patch file: {m}"),
            PatchError::Invalid {
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
            PatchError::Apply { operation, cause } => write!(f, "{operation}: {cause}"),
        }
    }
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyError::Kube { error, .. } => write!(f, "{error}")?,
            ApplyError::Conflict { attempts, last } => {
                write!(f, "still conflicting after {attempts} attempts")?;
                if let Some(e) = last {
                    write!(f, ": {e}")?;
                }
            }
            ApplyError::StillPresent { waited } => write!(
                f,
                "object is still present {}s after a foreground delete",
                waited.as_secs()
            )?,
            ApplyError::Jq(m) => f.write_str(m)?,
            ApplyError::NotAnObject { what, result } => {
                write!(f, "jqFilter result is {what}: {result}")?
            }
        }
        match self.hint() {
            Some(hint) => write!(f, " ({hint})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for PatchError {}
impl std::error::Error for ApplyError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(cause: ApplyError) -> PatchError {
        PatchError::Apply {
            operation: "Delete object v1/ConfigMap/ns/a".into(),
            cause: Box::new(cause),
        }
    }

    #[test]
    fn apply_errors_say_what_to_do_and_can_be_told_apart() {
        let still = applied(ApplyError::StillPresent {
            waited: Duration::from_secs(20),
        });
        assert_eq!(
            still.to_string(),
            "Delete object v1/ConfigMap/ns/a: object is still present 20s after a foreground \
             delete (a finalizer may hold it; DeleteInBackground does not wait)"
        );
        let lost = applied(ApplyError::Conflict {
            attempts: 5,
            last: None,
        });
        assert!(lost.apply_error().is_some_and(ApplyError::is_conflict));
        assert!(!still.apply_error().is_some_and(ApplyError::is_conflict));
        assert!(!still.is_invalid_file() && PatchError::syntax("x").is_invalid_file());
        let many = ApplyError::NotAnObject {
            what: "an array (several outputs?)",
            result: "[1,2]".into(),
        };
        assert_eq!(
            many.to_string(),
            "jqFilter result is an array (several outputs?): [1,2] (the filter must output one object)"
        );
    }
}
