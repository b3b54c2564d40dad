//! The object patcher: the operations a hook writes to `$KUBERNETES_PATCH_PATH`
//! (create, delete and patch Kubernetes objects without kubectl).
//!
//! A queue thread calls [`parse`] on the file after a hook run, then [`apply`]
//! with the shared [`Client`](crate::kube::Client). Parsing validates every
//! document before anything is applied; applying runs the operations in order and
//! stops at the first failure.
//!
//! # Layout
//! - this file: [`Operation`] and its kinds, the two entry points.
//! - `parse`: the file → documents (JSON stream or multi-document YAML).
//! - `validate`: one document → one [`Operation`] (every field checked).
//! - `apply`: one operation → API calls (create, delete + wait, patch, jq + PUT).
//! - `error`: [`PatchError`] and [`ApplyError`].
//!
//! Differences from flant (each a fix of a bug listed in the spec): unknown or
//! misspelled keys are errors, every JSON-patch op is checked (not only the
//! first), `ignoreHookError` works with any subresource, and the first failing
//! operation stops the rest instead of all being attempted.

mod apply;
mod error;
mod parse;
mod validate;

pub use apply::apply;
pub use parse::parse;

use crate::jq::JqFilter;
use crate::kube::Patch;
use serde_json::Value;

/// The nine operation names (case-sensitive in the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OperationKind {
    Create,
    CreateOrUpdate,
    CreateIfNotExists,
    Delete,
    DeleteInBackground,
    DeleteNonCascading,
    JQPatch,
    MergePatch,
    JSONPatch,
}

impl OperationKind {
    /// Every kind, in the order the docs list them.
    pub(crate) const ALL: [OperationKind; 9] = [
        OperationKind::Create,
        OperationKind::CreateOrUpdate,
        OperationKind::CreateIfNotExists,
        OperationKind::Delete,
        OperationKind::DeleteInBackground,
        OperationKind::DeleteNonCascading,
        OperationKind::JQPatch,
        OperationKind::MergePatch,
        OperationKind::JSONPatch,
    ];

    /// The name as written in patch files.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OperationKind::Create => "Create",
            OperationKind::CreateOrUpdate => "CreateOrUpdate",
            OperationKind::CreateIfNotExists => "CreateIfNotExists",
            OperationKind::Delete => "Delete",
            OperationKind::DeleteInBackground => "DeleteInBackground",
            OperationKind::DeleteNonCascading => "DeleteNonCascading",
            OperationKind::JQPatch => "JQPatch",
            OperationKind::MergePatch => "MergePatch",
            OperationKind::JSONPatch => "JSONPatch",
        }
    }

    /// Parses an exact (case-sensitive) name.
    pub(crate) fn from_name(s: &str) -> Option<OperationKind> {
        OperationKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Create, CreateOrUpdate, CreateIfNotExists.
    pub(crate) fn is_create(self) -> bool {
        matches!(
            self,
            OperationKind::Create
                | OperationKind::CreateOrUpdate
                | OperationKind::CreateIfNotExists
        )
    }

    /// Delete, DeleteInBackground, DeleteNonCascading.
    pub(crate) fn is_delete(self) -> bool {
        matches!(
            self,
            OperationKind::Delete
                | OperationKind::DeleteInBackground
                | OperationKind::DeleteNonCascading
        )
    }
}

/// What an operation carries besides the object's coordinates.
#[derive(Debug)]
pub(crate) enum Payload {
    /// The full object of a create operation.
    Object(Value),
    /// Deletes carry nothing.
    Nothing,
    /// A JQPatch filter: compiled at parse time, or `None` when it imports
    /// modules, which are resolved at apply time with the jq library path.
    Jq {
        code: String,
        filter: Option<JqFilter>,
    },
    /// A merge patch or a JSON patch, ready to send.
    Patch(Patch),
}

/// One validated operation from a patch file.
#[derive(Debug)]
pub struct Operation {
    pub(crate) kind: OperationKind,
    /// May be empty (the kind's preferred version); for creates, the object's.
    pub(crate) api_version: String,
    /// The object's kind; for creates, the object's.
    pub(crate) object_kind: String,
    /// For creates, the object's namespace or else the top-level `namespace`.
    pub(crate) namespace: String,
    /// For creates, the object's name (empty with `metadata.generateName`).
    pub(crate) name: String,
    /// `status`, `scale`, ...: used by the patch operations only.
    pub(crate) subresource: Option<String>,
    pub(crate) ignore_missing_object: bool,
    pub(crate) ignore_hook_error: bool,
    pub(crate) payload: Payload,
}

impl Operation {
    /// flant's description, the prefix of this operation's errors:
    /// `Create object v1/ConfigMap/ns/name`.
    pub fn description(&self) -> String {
        let verb = if self.kind.is_create() {
            "Create"
        } else if self.kind.is_delete() {
            "Delete"
        } else if self.kind == OperationKind::JQPatch {
            "Filter"
        } else {
            "Patch"
        };
        format!(
            "{verb} object {}/{}/{}/{}",
            self.api_version, self.object_kind, self.namespace, self.name
        )
    }

    /// The patch of a MergePatch or JSONPatch.
    pub fn patch(&self) -> Option<&Patch> {
        match &self.payload {
            Payload::Patch(p) => Some(p),
            _ => None,
        }
    }
}
