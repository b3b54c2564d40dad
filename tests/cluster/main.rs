//! The cluster tier: the real binary against a real kube-apiserver + etcd
//! (tests/control-plane, built from their Go modules by
//! scripts/install-control-plane.sh). It judges what only a real API server can:
//! typing and validation, watch resume and 410 after compaction, admission and
//! conversion calls, server-side apply, Leases and RBAC.
//!
//! One control plane per run of this binary; each test works in a namespace of its
//! own and never deletes it (there is no controller-manager to empty it).
//! `make test-cluster` runs this binary alone; `make test` runs it with the rest.

#[path = "../common/mod.rs"]
mod common;

mod harness;

mod addon;
mod addon_reload;
mod bindings;
mod drift;
mod ha;
mod kube_sim_diff;
mod patcher;
mod rbac;
mod reload;
mod webhooks;
