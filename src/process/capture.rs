//! Running a child to completion with its output captured, within bounds: a hook's
//! `--config`, a module's `enabled` script, helm, a kubeconfig exec plugin.
//!
//! Each run has a time limit (its process group is killed after it), a cap on
//! stdout (a child that prints more is killed at once and the run is an error, so
//! `yes` as a `--config` costs a bounded buffer, not the node's memory), and keeps
//! only the last 64 KiB of stderr. A stop signal during the run (the operator's
//! shutdown flag, set even before the signal thread exists) sends the group SIGTERM,
//! then SIGKILL after the shutdown grace period, and the run ends as an
//! `Interrupted` error: startup never outlives a SIGTERM, and no child is left.

use super::{ExitStatus, Running, kill_group, shutdown_grace, shutdown_requested, spawn};
use crossbeam_channel::{Receiver, bounded};
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The part of stderr kept (its end: where errors usually are).
const STDERR_KEPT: usize = 64 * 1024;

/// Output and end of a child run with captured stdout and stderr.
pub struct Captured {
    pub stdout: Vec<u8>,
    /// The last 64 KiB of stderr.
    pub stderr: Vec<u8>,
    pub status: ExitStatus,
}

/// Runs `cmd` to completion with stdin closed and both outputs captured. After
/// `timeout` the group is killed; output still held open by a stray grandchild is
/// given up on after a short drain. Errors: the child could not start; it printed
/// more than `max_stdout` bytes (`InvalidData`; it was killed); the operator is
/// shutting down (`Interrupted`; it was stopped).
pub fn run_captured(
    cmd: &mut Command,
    timeout: Option<Duration>,
    max_stdout: usize,
) -> std::io::Result<Captured> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (running, mut child) = spawn(cmd)?;
    let too_much = Arc::new(AtomicBool::new(false));
    let stdout = child.stdout.take().map(|pipe| {
        let flag = Arc::clone(&too_much);
        let pid = running.pid;
        read_in_thread(move || read_capped(pipe, max_stdout, pid, &flag))
    });
    let stderr = child
        .stderr
        .take()
        .map(|pipe| read_in_thread(|| read_tail(pipe)));
    let status = wait(&running, timeout);
    let collect = |rx: Option<Receiver<Vec<u8>>>| {
        rx.and_then(|rx| rx.recv_timeout(Duration::from_secs(2)).ok())
            .unwrap_or_default()
    };
    let captured = Captured {
        stdout: collect(stdout),
        stderr: collect(stderr),
        status: status?,
    };
    if too_much.load(Ordering::SeqCst) {
        let text = format!("output is larger than {max_stdout} bytes; the process was killed");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, text));
    }
    Ok(captured)
}

/// Waits for the child, polling (from 50 µs up to 10 ms) so that the time limit and
/// a stop signal are noticed while it runs.
fn wait(running: &Running, timeout: Option<Duration>) -> std::io::Result<ExitStatus> {
    let started = Instant::now();
    let mut stopping: Option<Instant> = None;
    let mut pause = Duration::from_micros(50);
    loop {
        if let Some(exit) = running.try_exit() {
            return match stopping {
                Some(_) => Err(interrupted()),
                None => Ok(exit.status),
            };
        }
        if let Some(limit) = timeout.filter(|l| started.elapsed() >= *l) {
            kill_group(running.pid, libc::SIGKILL);
            running.wait(None);
            return Ok(ExitStatus::TimedOut(limit));
        }
        match stopping {
            None if shutdown_requested() => {
                kill_group(running.pid, libc::SIGTERM);
                stopping = Some(Instant::now());
            }
            Some(since) if since.elapsed() >= shutdown_grace() => {
                kill_group(running.pid, libc::SIGKILL);
            }
            _ => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

fn interrupted() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "stopped: the operator is shutting down",
    )
}

/// Reads up to `max` bytes; past that, sets `too_much`, kills the group `pid`
/// and stops reading.
fn read_capped(mut pipe: impl Read, max: usize, pid: i32, too_much: &AtomicBool) -> Vec<u8> {
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let _ = pipe.by_ref().take(limit).read_to_end(&mut buf);
    if buf.len() > max {
        too_much.store(true, Ordering::SeqCst);
        kill_group(pid, libc::SIGKILL);
        buf.truncate(max);
    }
    buf
}

/// Reads to the end, keeping the last [`STDERR_KEPT`] bytes.
fn read_tail(mut pipe: impl Read) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend_from_slice(&chunk[..n]);
                if kept.len() > 2 * STDERR_KEPT {
                    kept.drain(..kept.len() - STDERR_KEPT);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    if kept.len() > STDERR_KEPT {
        kept.drain(..kept.len() - STDERR_KEPT);
    }
    kept
}

fn read_in_thread(read: impl FnOnce() -> Vec<u8> + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = bounded(1);
    let spawned = crate::threads::spawn("child-output", move || {
        let _ = tx.send(read());
    });
    if let Err(e) = spawned {
        crate::log::error("cannot read a child's output", &[("error", &e)]);
    }
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn statuses_and_outputs_reach_the_caller() {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", "echo out; echo err >&2; exit 3"]);
        let run = run_captured(&mut c, None, MIB).expect("spawn");
        assert_eq!(run.status, ExitStatus::Code(3));
        assert_eq!(run.stdout, b"out\n");
        assert_eq!(run.stderr, b"err\n");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let started = Instant::now();
        let mut c = Command::new("/bin/sh");
        c.args(["-c", "sleep 30 & sleep 30; echo never"]);
        let run = run_captured(&mut c, Some(Duration::from_millis(300)), MIB).expect("spawn");
        assert_eq!(run.status, ExitStatus::TimedOut(Duration::from_millis(300)));
        // The background sleep was in the same group; had it survived, stdout would stay open for 30 s.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn endless_stdout_is_cut_at_the_cap_and_the_child_killed() {
        let started = Instant::now();
        let err = run_captured(&mut Command::new("yes"), None, MIB)
            .err()
            .expect("too much output");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(
            err.to_string(),
            format!("output is larger than {MIB} bytes; the process was killed")
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn only_the_end_of_a_long_stderr_is_kept() {
        let mut c = Command::new("/bin/sh");
        c.args([
            "-c",
            "head -c 1000000 /dev/zero | tr '\\0' a >&2; echo END >&2",
        ]);
        let run = run_captured(&mut c, None, MIB).expect("spawn");
        assert_eq!(run.stderr.len(), STDERR_KEPT);
        assert!(run.stderr.ends_with(b"aEND\n"));
    }

    #[test]
    fn failed_exec_is_an_error_not_a_panic() {
        let err = run_captured(&mut Command::new("/nonexistent/hook"), None, MIB)
            .err()
            .expect("spawn fails");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
