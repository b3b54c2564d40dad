//! kube-sim's own tests, one binary: the API surface, lists and paging, robustness
//! against bad requests, watch semantics, TLS, and real `kubectl` and `helm` clients
//! against it. Each former test file is a module.

#[path = "../common/mod.rs"]
mod common;

mod admission;
mod api;
mod api_lists;
mod api_robustness;
mod clients;
mod helm;
mod hook_server;
mod kubectl;
mod tls_and_binary;
mod watch;
