//! Tests of the values library: every pinned example of spec §2.1, §3 and §4, one file
//! per area; shared helpers live here.

mod names_merge;
mod patch;
mod schema;
mod scope;

use super::PatchOp;
use serde_json::Value;

pub(super) fn add(path: &str, value: Value) -> PatchOp {
    PatchOp::Add {
        path: path.into(),
        value,
    }
}

pub(super) fn remove(path: &str) -> PatchOp {
    PatchOp::Remove { path: path.into() }
}

/// The global config-values schema of seed 004 ("Validation" example).
pub(super) const SEED_GLOBAL_CONFIG: &str = "type: object
additionalProperties: false
required:
  - project
  - clusterName
minProperties: 2
properties:
  project:
    type: string
  clusterName:
    type: string
  clusterHostname:
    type: string
  discovery:
    type: object
";
