//! The operator end to end: the real binary on temp hooks dirs (CLI, hooks, kubernetes bindings against kube-sim, HA leader election, the debug CLI, hook metrics, the README's flag table, the metric reference, the empty-root image, deploy manifests, the jq CLI).
//!
//! One test binary for the area (linking one binary per file cost CI most of its
//! time); each former file is a module.

#[path = "../common/mod.rs"]
mod common;

mod debug_cli;
mod deploy_manifests;
mod doc_links;
mod empty_root;
mod ha;
mod hardening;
mod hook_metrics;
mod jq_cli;
mod operator_cli;
mod operator_hooks;
mod operator_kube;
mod pacing;
mod readme_flags;
mod reference;
mod reload;
