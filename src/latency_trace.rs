//! An optional timing of the operator's own part of "Kubernetes event → hook
//! start", stage by stage, for the latency benchmark (`cargo bench --bench kube`
//! prints the breakdown; docs/threads.md "The life of an event" names the stages).
//!
//! Off unless `SHELL_OPERATOR_LATENCY_TRACE` names a file when the operator starts.
//! Then each stage an event passes stamps the wall clock into a process-wide slot,
//! and every hook spawn appends one line to that file with all the stamps (Unix
//! nanoseconds, `0` for a stage this run did not pass). The slots are not per
//! event: the figures are right only when events come one at a time, as the
//! benchmark sends them. Off, a stage costs one relaxed atomic load.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The stages of an event on its way to a hook, in order.
#[derive(Clone, Copy)]
pub(crate) enum Stage {
    /// The reflector has a whole watch line from the socket.
    LineRead = 0,
    /// The line is decoded and cached; the event goes to the monitor.
    Decoded,
    /// The monitor thread took the event off its channel.
    MonitorGot,
    /// The monitor filtered it and sent a binding's event on.
    Routed,
    /// The task reached its queue thread.
    Queued,
    /// The runner starts the hook run (context not written yet).
    RunStarted,
    /// Temp files written; the hook is about to be spawned.
    FilesWritten,
    /// The spawn call returned (the hook has been exec'd).
    Spawned,
}

const NAMES: [&str; 8] = [
    "line_read",
    "decoded",
    "monitor_got",
    "routed",
    "queued",
    "run_started",
    "files_written",
    "spawned",
];

static STAMPS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

fn trace_file() -> Option<&'static str> {
    static FILE: OnceLock<Option<String>> = OnceLock::new();
    FILE.get_or_init(|| {
        std::env::var("SHELL_OPERATOR_LATENCY_TRACE")
            .ok()
            .filter(|f| !f.is_empty())
    })
    .as_deref()
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Stamps `stage` (when tracing is on).
#[inline]
pub(crate) fn mark(stage: Stage) {
    if trace_file().is_some() {
        STAMPS[stage as usize].store(now_ns(), Ordering::Relaxed);
    }
}

/// After a spawn: stamps [`Stage::Spawned`], appends the line of stamps to the
/// trace file and clears the slots for the next event.
pub(crate) fn spawned() {
    let Some(path) = trace_file() else { return };
    mark(Stage::Spawned);
    let line: Vec<String> = NAMES
        .iter()
        .zip(&STAMPS)
        .map(|(name, slot)| format!("{name}={}", slot.swap(0, Ordering::Relaxed)))
        .collect();
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| writeln!(f, "{}", line.join(" ")));
    if let Err(e) = appended {
        crate::log::warn(
            "cannot write the latency trace",
            &[("file", path), ("error", &e.to_string())],
        );
    }
}
