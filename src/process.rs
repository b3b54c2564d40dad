//! Child processes: spawning hooks in their own process group, collecting their exit
//! status with resource usage, killing them on timeout or shutdown, and reaping
//! orphans when the operator runs as PID 1.
//!
//! One reaper thread owns every `wait` of the process. It sleeps in
//! `waitid(WNOWAIT)` until some child has exited, then, holding the registry lock,
//! reaps it: a registered child's status and rusage go to the thread that spawned it;
//! anything else is an orphaned grandchild (re-parented to us as PID 1) and is simply
//! reaped. Spawning happens under the same lock, so the reaper can never take a
//! hook's status before the hook is registered (flant's bug #886 was a reaper that
//! stole statuses). Every child of the operator must therefore be started here.

use crossbeam_channel::{Receiver, Sender, bounded};
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
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
pub struct Usage {
    pub user_cpu: Duration,
    pub sys_cpu: Duration,
    pub max_rss_bytes: u64,
}

/// The end of a child: status and usage.
#[derive(Debug, Clone, Copy)]
pub struct Exit {
    pub status: ExitStatus,
    pub usage: Usage,
}

struct Registry {
    /// pid → where its exit goes.
    waiting: HashMap<i32, Sender<Exit>>,
    /// Wakes the reaper when the first child appears.
    wake: Sender<()>,
}

static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();

fn registry() -> MutexGuard<'static, Registry> {
    let reg = REGISTRY.get_or_init(|| {
        let (wake, woken) = bounded(1);
        std::thread::Builder::new()
            .name("reaper".into())
            .spawn(move || reap_forever(woken))
            .map_err(|e| {
                crate::log::error("cannot start reaper thread", &[("error", &e.to_string())])
            })
            .ok();
        Mutex::new(Registry {
            waiting: HashMap::new(),
            wake,
        })
    });
    reg.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts the reaper early. As PID 1 (a scratch image has no init) the kernel
/// re-parents orphaned grandchildren of hooks to us; the reaper collects them so
/// they do not pile up as zombies.
pub fn init_reaper() {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } == 1 {
        crate::log::info("running as PID 1: reaping orphaned processes", &[]);
    }
    drop(registry());
}

/// A spawned child in its own process group.
pub struct Running {
    pub pid: i32,
    exit: Receiver<Exit>,
}

/// Spawns `cmd` in a new process group and registers it with the reaper.
pub fn spawn(cmd: &mut Command) -> std::io::Result<(Running, std::process::Child)> {
    cmd.process_group(0);
    let mut reg = registry();
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    let (tx, rx) = bounded(1);
    reg.waiting.insert(pid, tx);
    let _ = reg.wake.try_send(());
    Ok((Running { pid, exit: rx }, child))
}

impl Running {
    /// The exit, if the child has already ended.
    pub fn try_exit(&self) -> Option<Exit> {
        self.exit.try_recv().ok()
    }

    /// Waits for the child; after `timeout` its whole group is killed with SIGKILL
    /// and the status says it timed out.
    pub fn wait(&self, timeout: Option<Duration>) -> Exit {
        if let Some(limit) = timeout {
            match self.exit.recv_timeout(limit) {
                Ok(exit) => return exit,
                Err(_) => {
                    kill_group(self.pid, libc::SIGKILL);
                    let exit = self.exit.recv().unwrap_or(Exit {
                        status: ExitStatus::Signal(9),
                        usage: Usage::default(),
                    });
                    return Exit {
                        status: ExitStatus::TimedOut(limit),
                        usage: exit.usage,
                    };
                }
            }
        }
        self.exit.recv().unwrap_or(Exit {
            status: ExitStatus::Signal(9),
            usage: Usage::default(),
        })
    }
}

/// Sends `signal` to the process group `pgid`.
pub fn kill_group(pgid: i32, signal: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// Shutdown: SIGTERM to every running child's group, SIGKILL to those still alive
/// after `grace`. Returns once all have exited or been killed.
pub fn terminate_all(grace: Duration) {
    let pids: Vec<i32> = registry().waiting.keys().copied().collect();
    if pids.is_empty() {
        return;
    }
    crate::log::info(
        "stopping running hooks",
        &[("count", &pids.len().to_string())],
    );
    pids.iter().for_each(|p| kill_group(*p, libc::SIGTERM));
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && !registry().waiting.is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<i32> = registry().waiting.keys().copied().collect();
    for pid in left {
        crate::log::warn(
            "hook did not stop within the grace period: killed",
            &[("pid", &pid.to_string())],
        );
        kill_group(pid, libc::SIGKILL);
    }
}

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
        match reg.waiting.remove(&pid) {
            Some(tx) => {
                let _ = tx.send(exit);
            }
            None => crate::log::debug("reaped orphaned process", &[("pid", &pid.to_string())]),
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

/// Output and end of a child run with captured stdout and stderr.
pub struct Captured {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: ExitStatus,
}

/// Runs `cmd` to completion with stdin closed and both outputs captured. After a
/// timeout the group is killed; output still held open by a stray grandchild is
/// given up on after a short drain.
pub fn run_captured(cmd: &mut Command, timeout: Option<Duration>) -> std::io::Result<Captured> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (running, mut child) = spawn(cmd)?;
    let stdout = child.stdout.take().map(read_in_thread);
    let stderr = child.stderr.take().map(read_in_thread);
    let exit = running.wait(timeout);
    let collect = |rx: Option<Receiver<Vec<u8>>>| {
        rx.and_then(|rx| rx.recv_timeout(Duration::from_secs(2)).ok())
            .unwrap_or_default()
    };
    Ok(Captured {
        stdout: collect(stdout),
        stderr: collect(stderr),
        status: exit.status,
    })
}

fn read_in_thread(mut pipe: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_usage_reach_the_spawner() {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", "echo out; echo err >&2; exit 3"]);
        let run = run_captured(&mut c, None).expect("spawn");
        assert_eq!(run.status, ExitStatus::Code(3));
        assert_eq!(run.stdout, b"out\n");
        assert_eq!(run.stderr, b"err\n");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let started = Instant::now();
        let mut c = Command::new("/bin/sh");
        c.args(["-c", "sleep 30 & sleep 30; echo never"]);
        let run = run_captured(&mut c, Some(Duration::from_millis(300))).expect("spawn");
        assert_eq!(run.status, ExitStatus::TimedOut(Duration::from_millis(300)));
        // The background sleep was in the same group; had it survived, stdout would stay open for 30 s.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn failed_exec_is_an_error_not_a_panic() {
        let err = run_captured(&mut Command::new("/nonexistent/hook"), None)
            .err()
            .expect("spawn fails");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
