//! `metav1.Status`: the body of every API error and of watch ERROR events.

use serde::{Deserialize, Serialize};

/// The fields of a Status that an error message needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `Success` or `Failure`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub message: String,
    /// Machine-readable reason: `NotFound`, `AlreadyExists`, `Conflict`, `Expired`, `Gone`...
    #[serde(default)]
    pub reason: String,
    /// The HTTP status code this Status stands for.
    #[serde(default)]
    pub code: u16,
}
