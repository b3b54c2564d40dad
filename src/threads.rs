//! The one function that starts an OS thread. Every thread of the process gets a
//! name here, so `ps -T`, panics and logs say which part of the operator it is, and
//! a reader can find every spawn site by searching for `threads::spawn`.
//!
//! The static threads (signals, HTTP, debug, queues, router, monitor, scheduler,
//! webhook listeners, reaper) are started by `operator.rs` in its spawn step; the
//! dynamic ones (one per watch, webhook handlers) by their owners through this same
//! function. The full list, with who spawns each and which channels it uses, is in
//! `operator.rs` and `docs/threads.md`.

use std::thread::{JoinHandle, Scope, ScopedJoinHandle};

/// Starts a named thread running `body`; the error names the thread.
pub(crate) fn spawn<T: Send + 'static>(
    name: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, String> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(body)
        .map_err(|e| format!("cannot start thread {name}: {e}"))
}

/// Starts a named thread in `scope` (joined when the scope ends); the error names
/// the thread.
pub(crate) fn spawn_scoped<'scope, T: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    body: impl FnOnce() -> T + Send + 'scope,
) -> Result<ScopedJoinHandle<'scope, T>, String> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn_scoped(scope, body)
        .map_err(|e| format!("cannot start thread {name}: {e}"))
}
