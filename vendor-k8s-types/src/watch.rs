//! The watch stream's event envelope (`metav1.WatchEvent`).

use serde::{Deserialize, Serialize};

/// The `type` of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    /// Carries only `metadata.resourceVersion`; advances the resume point.
    Bookmark,
    /// `object` is a `Status` (410 Expired is the common one).
    Error,
}

/// One line of a watch stream: `{"type": ..., "object": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchEvent<T> {
    #[serde(rename = "type")]
    pub event_type: EventType,
    pub object: T,
}
