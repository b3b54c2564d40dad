//! Hand-written Kubernetes API types.
//!
//! The operator treats almost every object as `serde_json::Value`; the types here are
//! the few it reads field by field: object and list metadata, watch events, Status
//! errors, the discovery documents, label selectors, the kubeconfig file and the
//! ExecCredential exchanged with credential plugins. Each struct keeps only the fields
//! the operator uses, and unknown fields are ignored when decoding.
//!
//! Plain data, no threads: every thread that decodes API responses uses these.

mod discovery;
mod exec;
mod kubeconfig;
mod meta;
mod selector;
mod status;
mod watch;

pub use discovery::{
    APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions, GroupVersionForDiscovery,
};
pub use exec::{ExecCluster, ExecCredential, ExecCredentialSpec, ExecCredentialStatus};
pub use kubeconfig::{
    AuthInfo, Cluster, Context, ExecConfig, ExecEnvVar, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
pub use meta::{ListMeta, ObjectList, ObjectMeta};
pub use selector::{LabelSelector, LabelSelectorRequirement};
pub use status::Status;
pub use watch::{EventType, WatchEvent};
