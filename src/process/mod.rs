//! Child processes: spawning each child in its own process group, collecting its exit
//! status with resource usage, signalling groups, the shutdown flag, and reaping
//! orphans when the operator runs as PID 1.
//!
//! Every child is run by the one runner in `run.rs` (its rules: timeout, shutdown,
//! output caps, drain, reaping); `capture.rs` is its sink for runs whose output the
//! caller keeps (helm, `enabled` scripts, `--config`, exec plugins), `pipes.rs` its
//! sink for hooks (output logged line by line). This file is what they stand on.
//!
//! Normally each child is waited for by pid (`wait4(pid)`) by the thread that runs
//! it, so other children of the process (a library user's own) are never touched.
//! As PID 1 (a scratch image has no init) orphaned grandchildren of hooks are
//! re-parented to us and must be reaped too: then one reaper thread owns every
//! `wait` of the process. It sleeps in `waitid(WNOWAIT)` until some child has exited
//! and, holding the registry lock, reaps it: a registered child's status and rusage
//! go to the thread that spawned it; anything else is an orphan and is simply
//! reaped. Spawning happens under the same lock, so the reaper can never take a
//! hook's status before the hook is registered (flant's bug #886 was a reaper that
//! stole statuses). Every child of the operator is therefore started here.
// Needs unsafe for process groups and signals (libc); each block says why it is sound (SAFETY).
#![allow(unsafe_code)]

mod capture;
mod run;
#[cfg(test)]
mod tests;

pub(crate) use capture::{Captured, run_captured};
pub(crate) use run::{Rules, Sink, Stream, Tail, run};

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};
use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitStatus {
    Code(i32),
    Signal(i32),
    /// Killed by us after the run timeout.
    TimedOut(Duration),
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Code(c) => write!(f, "exit status {c}"),
            ExitStatus::Signal(s) => write!(f, "killed by signal {s}"),
            ExitStatus::TimedOut(d) => {
                write!(f, "timed out after {}s and was killed", d.as_secs_f64())
            }
        }
    }
}

/// CPU time and peak memory of a finished child, from `wait4`'s rusage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    pub(crate) user_cpu: Duration,
    pub(crate) sys_cpu: Duration,
    pub(crate) max_rss_bytes: u64,
}

/// The end of a child: status and usage.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exit {
    pub(crate) status: ExitStatus,
    pub(crate) usage: Usage,
}

/// The exit of a child whose status was taken by someone else.
const GONE: Exit = Exit {
    status: ExitStatus::Signal(libc::SIGKILL),
    usage: Usage {
        user_cpu: Duration::ZERO,
        sys_cpu: Duration::ZERO,
        max_rss_bytes: 0,
    },
};

struct Registry {
    /// Running children (for shutdown); in reaper mode also where each exit goes.
    running: HashMap<i32, Option<Sender<Exit>>>,
    /// Wakes the reaper when the first child appears; `None` outside reaper mode.
    wake: Option<Sender<()>>,
}

static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();

fn is_pid1() -> bool {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() == 1 }
}

fn registry() -> MutexGuard<'static, Registry> {
    let reg = REGISTRY.get_or_init(|| {
        Mutex::new(Registry {
            running: HashMap::new(),
            wake: None,
        })
    });
    reg.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The reaper thread's body, when this process is PID 1 (a scratch image has no
/// init): the kernel re-parents orphaned grandchildren of hooks to us, and the
/// reaper collects every exit so they do not pile up as zombies. From this call
/// on, children's exits come from the reaper, so the caller must start the body
/// on a thread at once (`operator.rs` does, in its spawn step). `None` when not
/// PID 1: each child is waited for by pid.
pub(crate) fn reaper() -> Option<impl FnOnce() + Send + 'static> {
    if !is_pid1() {
        return None;
    }
    crate::log::info("running as PID 1: reaping orphaned processes", &[]);
    let (wake, woken) = bounded(1);
    registry().wake = Some(wake);
    Some(move || reap_forever(woken))
}

/// A spawned child in its own process group.
pub(crate) struct Running {
    pub(crate) pid: i32,
    exit: ExitSource,
}

/// Where a child's exit comes from.
enum ExitSource {
    /// The reaper thread sends it (PID-1 mode).
    Reaper(Receiver<Exit>),
    /// We wait for the pid ourselves; the exit is kept once reaped.
    Direct(Mutex<Option<Exit>>),
}

/// Spawns `cmd` in a new process group and registers it.
pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<(Running, std::process::Child)> {
    cmd.process_group(0);
    let mut reg = registry();
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    let exit = match reg.wake.clone() {
        Some(wake) => {
            let (tx, rx) = bounded(1);
            reg.running.insert(pid, Some(tx));
            let _ = wake.try_send(());
            ExitSource::Reaper(rx)
        }
        None => {
            reg.running.insert(pid, None);
            ExitSource::Direct(Mutex::new(None))
        }
    };
    Ok((Running { pid, exit }, child))
}

impl Running {
    /// The exit, if the child has already ended. A child whose status can no
    /// longer be had (reaped by someone else) counts as killed.
    pub(crate) fn try_exit(&self) -> Option<Exit> {
        match &self.exit {
            ExitSource::Reaper(rx) => match rx.try_recv() {
                Ok(exit) => Some(exit),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => Some(GONE),
            },
            ExitSource::Direct(_) => self.reap(),
        }
    }

    /// Direct mode: `wait4(WNOHANG)` on our pid (the result is kept once reaped).
    fn reap(&self) -> Option<Exit> {
        let ExitSource::Direct(kept) = &self.exit else {
            return None;
        };
        let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.is_none() {
            let mut status = 0;
            // SAFETY: rusage is plain data, zero-initialised and filled by wait4.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            loop {
                // SAFETY: wait4 on our own child's pid writes only to the two out-pointers.
                let rc = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut usage) };
                let errno = (rc < 0).then(|| std::io::Error::last_os_error().raw_os_error());
                if errno == Some(Some(libc::EINTR)) {
                    continue;
                }
                if rc == self.pid || errno == Some(Some(libc::ECHILD)) {
                    *kept = Some(if rc == self.pid {
                        Exit {
                            status: decode_status(status),
                            usage: decode_usage(&usage),
                        }
                    } else {
                        GONE
                    });
                    registry().running.remove(&self.pid);
                }
                break;
            }
        }
        *kept
    }
}

/// Sends `signal` to the process group `pgid`.
pub(crate) fn kill_group(pgid: i32, signal: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

static SHUTDOWN: OnceLock<Arc<AtomicBool>> = OnceLock::new();
static GRACE_MS: AtomicU64 = AtomicU64::new(30_000);

/// The process-wide "shutting down" flag. The operator registers it for its stop
/// signals at the very start, so a child run before the signal thread exists (a
/// hook's `--config` at startup) is stopped too: the runner (`run.rs`) watches it
/// for every child.
pub(crate) fn shutdown_flag() -> Arc<AtomicBool> {
    Arc::clone(SHUTDOWN.get_or_init(|| Arc::new(AtomicBool::new(false))))
}

/// True once a stop signal arrived.
pub(crate) fn shutdown_requested() -> bool {
    SHUTDOWN.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// How long a child gets between SIGTERM and SIGKILL at shutdown
/// (`--shutdown-grace-period`; 30 s until set).
pub(crate) fn set_shutdown_grace(grace: Duration) {
    let ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    GRACE_MS.store(ms, Ordering::SeqCst);
}

fn shutdown_grace() -> Duration {
    Duration::from_millis(GRACE_MS.load(Ordering::SeqCst))
}

/// Shutdown: SIGTERM to every running child's group, SIGKILL to those still alive
/// after `grace`. Returns once all have exited or been killed.
///
/// Once the stop flag is set each child's runner (`run.rs`) sends those signals
/// itself, so a child gets one SIGTERM, and one that starts later is stopped too:
/// then this only waits for them, with a second's margin, and kills what is left.
/// Without the flag (leadership lost) the signals are sent from here.
pub(crate) fn terminate_all(grace: Duration) {
    let pids: Vec<i32> = registry().running.keys().copied().collect();
    if pids.is_empty() {
        return;
    }
    crate::log::info(
        "stopping running hooks",
        &[("count", &pids.len().to_string())],
    );
    let runners_stop = shutdown_requested();
    let mut deadline = Instant::now() + grace;
    if runners_stop {
        deadline += Duration::from_secs(1);
    } else {
        pids.iter().for_each(|p| kill_group(*p, libc::SIGTERM));
    }
    while Instant::now() < deadline && !registry().running.is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<i32> = registry().running.keys().copied().collect();
    for pid in left {
        crate::log::warn(GRACE_KILLED, &[("pid", &pid.to_string())]);
        kill_group(pid, libc::SIGKILL);
    }
}

/// Logged when a child is killed at the end of the shutdown grace period.
pub(crate) const GRACE_KILLED: &str = "hook did not stop within the grace period: killed";

fn reap_forever(woken: Receiver<()>) {
    loop {
        let Some(pid) = next_exited_child() else {
            let _ = woken.recv_timeout(Duration::from_secs(1));
            continue;
        };
        let mut reg = registry();
        let mut status = 0;
        // SAFETY: rusage is plain data, zero-initialised and filled by wait4.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 writes only to the two out-pointers we pass.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if reaped != pid {
            continue; // std already reaped it (a failed exec inside spawn)
        }
        let exit = Exit {
            status: decode_status(status),
            usage: decode_usage(&usage),
        };
        match reg.running.remove(&pid) {
            Some(Some(tx)) => {
                let _ = tx.send(exit);
            }
            _ => crate::log::debug("reaped orphaned process", &[("pid", &pid.to_string())]),
        }
    }
}

/// Blocks until some child has exited and returns its pid without reaping it;
/// `None` when there are no children at all.
fn next_exited_child() -> Option<i32> {
    loop {
        // SAFETY: siginfo_t is plain data; waitid fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with P_ALL only writes into `info`.
        let rc = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            // SAFETY: for WEXITED results si_pid is the valid union member.
            return Some(unsafe { info.si_pid() });
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}

fn decode_status(status: i32) -> ExitStatus {
    if libc::WIFEXITED(status) {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    } else {
        ExitStatus::Signal(libc::WTERMSIG(status))
    }
}

fn decode_usage(u: &libc::rusage) -> Usage {
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Usage {
        user_cpu: tv(u.ru_utime),
        sys_cpu: tv(u.ru_stime),
        max_rss_bytes: (u.ru_maxrss.max(0) as u64) * 1024,
    }
}
