//! addon-operator values library: a pure (no threads, no Kubernetes) toolkit the
//! addon-operator engine calls to turn module directory names into values keys
//! ([`names`]), deep-merge values ([`merge`]), parse, apply and compact hook JSON
//! patches ([`patch`]), load and apply OpenAPI schemas ([`schema`]) and compute one
//! scope's config values / effective values ([`scope`]). Every failure is a
//! [`ValuesError`] (`error.rs`).

mod error;
pub mod merge;
pub mod names;
pub mod patch;
mod refs;
pub mod schema;
pub mod scope;

#[cfg(test)]
mod tests;

pub use error::{OpError, PatchTarget, ValuesError};
pub use merge::merge;
pub use names::{module_name_of_key, parse_dir_name, values_key};
pub use patch::{PatchOp, apply_lenient, apply_strict, compact, parse_patch, root_of, to_json};
pub use schema::{SchemaKind, Schemas};
pub use scope::{Scope, checksum};
