//! shell-operator in Rust: run executables ("hooks") on startup, on schedules, on
//! Kubernetes events and as webhooks, with flant's hook contract.
//!
//! The binary (`src/main.rs`) is a thin wrapper around [`cli::main`]. Everything else
//! lives in modules, each owning one concept; `operator.rs` starts every thread and
//! owns every channel.

#[cfg(test)]
mod alloc_count;
pub mod canonical;
pub mod cli;
pub mod debug;
pub mod duration;
pub mod executor;
pub mod flags;
pub mod hook;
pub mod hook_metrics;
pub mod http;
pub mod jq;
pub mod jq_cli;
pub mod kube;
pub mod log;
pub mod metrics;
pub mod monitor;
pub mod operator;
pub mod patch;
pub mod pipes;
pub mod process;
pub mod queue;
pub mod router;
pub mod runner;
pub mod schedule;
pub mod startup;
pub mod threads;
pub mod webhook;
