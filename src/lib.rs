//! shell-operator in Rust: run executables ("hooks") on startup, on schedules, on
//! Kubernetes events and as webhooks, with flant's hook contract.
//!
//! The binary (`src/main.rs`) is a thin wrapper around [`cli::main`]. Everything else
//! lives in modules, each owning one concept; `operator.rs` starts every long-lived
//! thread and creates the channels between them (`docs/threads.md` lists the
//! threads and channels made elsewhere, each where its one use is).

//!
//! Everything is `pub(crate)` unless something outside the crate uses it, and the
//! compiler holds us to it (`unreachable_pub` below; dead code then shows as a
//! warning). What is `pub` is what the binary (`cli::main`), the fuzz targets
//! (`fuzzing`), the integration tests and the benches reach: the Kubernetes client,
//! the hook config parser, the object patcher, the queue worker and runner the
//! dispatch benches drive, and the types those name.

#![warn(unreachable_pub)]
// Unsafe code only where a file allows it, each block with its SAFETY comment.
#![deny(unsafe_code)]

pub mod addon;
#[cfg(test)]
mod alloc_count;
pub(crate) mod bounded_read;
pub(crate) mod builtin_jq;
pub(crate) mod canonical;
pub mod cli;
pub(crate) mod debug;
pub(crate) mod duration;
pub mod executor;
pub mod flags;
pub(crate) mod fnv;
#[doc(hidden)]
pub mod fuzzing;
pub mod hook;
pub mod hook_metrics;
pub(crate) mod http;
pub(crate) mod inflate;
pub mod jq;
pub(crate) mod jq_cli;
pub(crate) mod json_kind;
pub mod kube;
pub(crate) mod latency_trace;
pub(crate) mod leader;
pub(crate) mod listen;
pub mod log;
pub(crate) mod md5;
#[doc(hidden)]
pub mod metric_reference;
pub mod metrics;
pub mod monitor;
pub(crate) mod operator;
pub(crate) mod parse_count;
pub mod patch;
pub(crate) mod pipes;
pub(crate) mod process;
pub mod queue;
pub(crate) mod reload;
pub(crate) mod router;
pub mod runner;
pub(crate) mod schedule;
pub(crate) mod startup;
pub(crate) mod threads;
pub(crate) mod tmp_dir;
pub mod webhook;
pub(crate) mod yaml_depth;
