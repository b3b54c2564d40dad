//! The object patcher ($KUBERNETES_PATCH_PATH): operations, conflicts, invalid files, flant's example.
//!
//! One test binary for the area (linking one binary per file cost CI most of its
//! time); each former file is a module.

#[path = "../common/mod.rs"]
mod common;
#[path = "../patch_common/mod.rs"]
mod patch_common;

mod conflicts;
mod example;
mod invalid;
mod ops;
