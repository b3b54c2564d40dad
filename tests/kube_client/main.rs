//! Our Kubernetes client against kube-sim: config, discovery, HTTP, list/watch. (In-cluster config changes process environment variables, so it stays its own binary: tests/kube_client_incluster.rs.)
//!
//! One test binary for the area (linking one binary per file cost CI most of its
//! time); each former file is a module.

#[path = "../kube_client_common/mod.rs"]
mod kube_client_common;

mod config;
mod discovery;
mod http;
mod watch;
