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

/// `f` of every item, up to `width` at a time (the caller's thread is one of them),
/// in the items' order: the hooks' `--config` at startup (`hook-config-N`), the
/// module runs of a `ParallelModuleRun` (`module-run-N`). A thread that cannot
/// start leaves its share to the others.
pub(crate) fn map_parallel<T: Sync, R: Send>(
    name: &str,
    items: &[T],
    width: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let work = || {
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let (Some(item), Some(slot)) = (items.get(k), slots.get(k)) else {
                break;
            };
            let out = f(item);
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(out);
        }
    };
    std::thread::scope(|scope| {
        for i in 1..width.min(items.len()) {
            if let Err(e) = spawn_scoped(scope, &format!("{name}-{i}"), work) {
                // The caller's thread still does every item, fewer at once.
                crate::log::error("work goes on with fewer threads", &[("error", &e)]);
                break;
            }
        }
        work();
    });
    slots
        .into_iter()
        .filter_map(|s| s.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect()
}

/// How many hooks' `--config` run at once at startup: the CPU count, at least 2.
pub(crate) fn startup_width() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_parallel_keeps_the_order_and_runs_at_once() {
        let items: Vec<u64> = (0..40).collect();
        let running = std::sync::atomic::AtomicUsize::new(0);
        let most = std::sync::atomic::AtomicUsize::new(0);
        let out = map_parallel("t", &items, 3, |n| {
            use std::sync::atomic::Ordering::SeqCst;
            let now = running.fetch_add(1, SeqCst) + 1;
            most.fetch_max(now, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            running.fetch_sub(1, SeqCst);
            n * 2
        });
        assert_eq!(out, items.iter().map(|n| n * 2).collect::<Vec<_>>());
        let most = most.into_inner();
        assert!((2..=3).contains(&most), "{most} at once");
        assert_eq!(map_parallel("t", &[] as &[u8], 4, |_| 1), Vec::<i32>::new());
    }
}
