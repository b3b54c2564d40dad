//! addon-operator values library: a pure (no threads, no Kubernetes) toolkit the
//! addon-operator engine calls to turn module directory names into values keys
//! ([`names`]), deep-merge values ([`merge`]), parse, apply and compact hook JSON
//! patches ([`patch`]), load and apply OpenAPI schemas ([`schema`]) and compute one
//! scope's config values / effective values ([`scope`]). Every failure is a
//! [`ValuesError`] (`error.rs`).

mod error;
pub(crate) mod merge;
pub(crate) mod names;
pub(crate) mod patch;
mod refs;
pub(crate) mod schema;
pub(crate) mod scope;

#[cfg(test)]
mod tests;

pub(crate) use error::ValuesError;
pub(crate) use merge::merge;
#[cfg(test)]
pub(crate) use names::module_name_of_key;
pub(crate) use names::{parse_dir_name, values_key};
pub(crate) use patch::{
    PatchOp, apply_lenient, apply_strict, compact, parse_patch, root_of, to_json,
};
pub(crate) use schema::{SchemaKind, Schemas};
pub(crate) use scope::{Scope, checksum};
