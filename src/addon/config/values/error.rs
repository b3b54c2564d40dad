//! The values store's errors: a values patch file that cannot be read, a patch
//! operation that cannot be applied, an operation outside the hook's scope, values
//! that break the scope's OpenAPI schema, and a schema file that cannot be used.
//! Every message starts with the scope ("global" or the module) and names the
//! operation, path or field; where the cause says, it ends with what to do.
//! Callers branch on the variants (a schema violation is [`ValuesError::Invalid`]),
//! never on the text. Pure data: built by the values library on the queue thread
//! that applies a hook's patches, and at startup for the schemas.

use super::schema::SchemaKind;
use std::fmt;

/// Why a values operation failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub(crate) enum ValuesError {
    /// A `$VALUES_JSON_PATCH_PATH` / `$CONFIG_VALUES_JSON_PATCH_PATH` file is not a
    /// list of `add` / `remove` operations; the message says which document or
    /// operation and why.
    PatchFile(String),
    /// An operation of a patch could not be applied; nothing of the patch was.
    Apply {
        /// "global" or the module's values key; empty outside a scope.
        scope: String,
        /// What the patch was applied to.
        target: PatchTarget,
        op: OpError,
    },
    /// A hook patched a path outside its own scope (`/<scope>/...`).
    ForeignPath { scope: String, path: String },
    /// A patch replaced the scope's section with something that is not an object.
    NotAnObject { scope: String },
    /// Values break the scope's OpenAPI schema of `kind`; every problem is listed
    /// (`<path>: <message>`).
    Invalid {
        scope: String,
        kind: SchemaKind,
        problems: Vec<String>,
    },
    /// A schema file (`openapi/config-values.yaml`, `openapi/values.yaml` or a file
    /// it refers to) cannot be read, parsed or compiled.
    Schema { scope: String, message: String },
}

/// What a values patch was applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchTarget {
    /// A hook's config values patch, applied to the config section.
    Config,
    /// A hook's values patch, applied to the effective values.
    Values,
    /// The stored values patches, re-applied to compute the effective values.
    Stored,
}

/// One operation of a patch that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpError {
    /// 0-based, in the patch's order.
    pub(crate) index: usize,
    /// `add` or `remove`.
    pub(crate) op: &'static str,
    pub(crate) path: String,
    pub(crate) reason: String,
}

impl ValuesError {
    #[cfg(test)]
    /// True when values (or config) break an OpenAPI schema.
    pub(crate) fn is_schema_violation(&self) -> bool {
        matches!(self, ValuesError::Invalid { .. })
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let OpError {
            index,
            op,
            path,
            reason,
        } = self;
        write!(
            f,
            "values patch operation {index} ({op} '{path}'): {reason}"
        )
    }
}

impl fmt::Display for ValuesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValuesError::PatchFile(m) => f.write_str(m),
            ValuesError::Apply { scope, target, op } => {
                if !scope.is_empty() {
                    write!(f, "{scope}: ")?;
                }
                match target {
                    PatchTarget::Config => write!(f, "config {op}"),
                    PatchTarget::Values => write!(f, "{op}"),
                    PatchTarget::Stored => write!(f, "stored values patches: {op}"),
                }
            }
            ValuesError::ForeignPath { scope, path } => write!(
                f,
                "{scope}: unacceptable patch operation for path '{path}' \
                 (a hook of '{scope}' may only patch paths under /{scope})"
            ),
            ValuesError::NotAnObject { scope } => {
                write!(
                    f,
                    "{scope}: values section must be an object after patching"
                )
            }
            ValuesError::Invalid {
                scope,
                kind,
                problems,
            } => write!(
                f,
                "{scope}: {kind} values are invalid: {}",
                super::schema::join_problems(problems)
            ),
            ValuesError::Schema { scope, message } => {
                if !scope.is_empty() {
                    write!(f, "{scope}: ")?;
                }
                f.write_str(message)
            }
        }
    }
}

impl std::error::Error for ValuesError {}
impl std::error::Error for OpError {}
