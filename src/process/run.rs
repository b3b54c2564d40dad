//! The one runner for every child process of the operator: hooks (through the
//! executor), helm, modules' `enabled` scripts, a hook's `--config` and kubeconfig
//! exec plugins all start and end here, under one set of rules.
//!
//! [`run`] spawns the command in its own process group ([`super::spawn`]: registered,
//! so shutdown and the PID-1 reaper see it) with stdin closed and both outputs piped,
//! and reads both pipes on the calling thread with poll(2): no helper thread. What
//! is read goes to a [`Sink`]; there are two: the executor's log sink (`pipes.rs`:
//! hook output logged line by line, the end of stderr kept) and the captured sink
//! (`capture.rs`: stdout kept byte for byte up to a cap, the end of stderr kept).
//!
//! The rules, the same for every child:
//! - **timeout**: once the run's time limit passes, the whole group gets SIGKILL and
//!   the status is [`ExitStatus::TimedOut`];
//! - **shutdown**: once the stop flag is set (the process-wide shutdown flag, see
//!   [`super::shutdown_flag`]) the group gets SIGTERM, and SIGKILL if the child is
//!   still running after the shutdown grace period; the run is marked interrupted;
//! - **caps**: a sink may refuse more output (a captured run's stdout past its cap):
//!   the group gets SIGKILL and that pipe is read no more;
//! - **drain**: after the child exited its pipes are read for at most
//!   [`OUTPUT_DRAIN`] more, since a daemonised grandchild may hold them open forever;
//! - **reaping**: the exit status and rusage come from the registry (`wait4` on the
//!   pid, or the reaper as PID 1); a pidfd in the same poll(2) says when to look,
//!   so an exit is seen at once, even while a grandchild holds the pipes.
// Needs unsafe for pre_exec and signals (libc); each block says why it is sound (SAFETY).
#![allow(unsafe_code)]

use super::{Exit, ExitStatus, Running, kill_group, shutdown_flag, shutdown_grace, spawn};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long to keep reading after the child exited (a daemonised grandchild may
/// hold the pipes open forever).
pub(crate) const OUTPUT_DRAIN: Duration = Duration::from_secs(2);
/// Longest poll(2) wait: how often the stop flag is looked at (and, without a
/// pidfd, how soon an exit is noticed while a grandchild holds a pipe).
const TICK: Duration = Duration::from_millis(100);
/// Longest sleep between exit checks once both pipes are closed.
const MAX_PAUSE: Duration = Duration::from_millis(5);

/// Which pipe bytes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout = 0,
    Stderr = 1,
}

const STREAMS: [Stream; 2] = [Stream::Stdout, Stream::Stderr];

/// Where a run's output goes.
pub(crate) trait Sink {
    /// Called right after the child started.
    fn started(&mut self) {}
    /// Bytes read from `stream`. `false`: the sink takes no more; the child's group
    /// is killed and the pipe is read no more.
    fn bytes(&mut self, stream: Stream, bytes: &[u8]) -> bool;
    /// No more bytes come from `stream` (end of file, or the drain gave up on it).
    fn closed(&mut self, stream: Stream);
}

/// The limits of one run.
pub(crate) struct Rules {
    /// The run's time limit.
    pub(crate) timeout: Option<Duration>,
    /// Set when the operator stops: the child is stopped too.
    pub(crate) stop: Arc<AtomicBool>,
    /// Between SIGTERM and SIGKILL once `stop` is set.
    pub(crate) grace: Duration,
}

impl Rules {
    /// `timeout`, with the process-wide shutdown flag and grace period.
    pub(crate) fn new(timeout: Option<Duration>) -> Rules {
        Rules {
            timeout,
            stop: shutdown_flag(),
            grace: shutdown_grace(),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ended {
    /// Status ([`ExitStatus::TimedOut`] when the time limit killed it) and usage.
    pub(crate) exit: Exit,
    /// The stop flag was seen while the child ran: it was sent SIGTERM (and SIGKILL
    /// after the grace period).
    pub(crate) interrupted: bool,
}

/// Runs `cmd` to its end under `rules`, its output going to `sink`. An error: the
/// child could not be started.
pub(crate) fn run(cmd: &mut Command, rules: &Rules, sink: &mut dyn Sink) -> std::io::Result<Ended> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (running, mut child) = spawn(cmd)?;
    sink.started();
    let pipes = [
        child.stdout.take().map(|p| File::from(OwnedFd::from(p))),
        child.stderr.take().map(|p| File::from(OwnedFd::from(p))),
    ];
    let exit_fd = pidfd(running.pid);
    let mut pump = Pump::new(running, pipes, exit_fd, rules);
    pump.program = cmd.get_program().to_string_lossy().into_owned();
    Ok(pump.until_end(sink))
}

/// A file descriptor that poll(2) reports readable once `pid` has exited
/// (`pidfd_open`, Linux 5.3); `None` where the kernel refuses it, and then the exit
/// is found by polling `wait4` instead.
fn pidfd(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the descriptor was just returned to us and is owned by nothing else.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One run's state while its pipes are read.
struct Pump<'r> {
    running: Running,
    pipes: [Option<File>; 2],
    /// Readable once the child has exited; dropped once it has said so.
    exit_fd: Option<OwnedFd>,
    /// The command, for the log line when the grace period ends.
    program: String,
    rules: &'r Rules,
    deadline: Option<Instant>,
    exit: Option<Exit>,
    drain_until: Option<Instant>,
    timed_out: bool,
    /// When SIGTERM was sent for a stop, and whether SIGKILL followed.
    stopping: Option<Instant>,
    stop_killed: bool,
}

impl<'r> Pump<'r> {
    fn new(
        running: Running,
        pipes: [Option<File>; 2],
        exit_fd: Option<OwnedFd>,
        rules: &'r Rules,
    ) -> Pump<'r> {
        Pump {
            running,
            pipes,
            exit_fd,
            program: String::new(),
            rules,
            deadline: rules.timeout.map(|t| Instant::now() + t),
            exit: None,
            drain_until: None,
            timed_out: false,
            stopping: None,
            stop_killed: false,
        }
    }

    fn until_end(mut self, sink: &mut dyn Sink) -> Ended {
        let mut buf = [0u8; 8192];
        // Without a pidfd, once both pipes closed the exit is near: check quickly,
        // then back off.
        let mut pause = Duration::from_micros(50);
        let exit = loop {
            let now = Instant::now();
            if self.exit.is_none()
                && let Some(e) = self.running.try_exit()
            {
                self.exit = Some(e);
                self.drain_until = Some(now + OUTPUT_DRAIN);
            }
            let open = self.pipes.iter().any(Option::is_some);
            if let Some(exit) = self.exit
                && (!open || self.drain_until.is_some_and(|d| now >= d))
            {
                break exit;
            }
            if self.exit.is_none() {
                self.enforce(now);
            } else {
                self.exit_fd = None;
            }
            if open || self.exit_fd.is_some() {
                self.read_ready(now, &mut buf, sink);
            } else {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_PAUSE);
            }
        };
        for (pipe, stream) in self.pipes.iter_mut().zip(STREAMS) {
            if pipe.take().is_some() {
                sink.closed(stream);
            }
        }
        self.ended(exit)
    }

    /// The timeout and shutdown rules, while the child runs.
    fn enforce(&mut self, now: Instant) {
        let pid = self.running.pid;
        if !self.timed_out && self.deadline.is_some_and(|d| now >= d) {
            kill_group(pid, libc::SIGKILL);
            self.timed_out = true;
        }
        match self.stopping {
            None if self.rules.stop.load(Ordering::SeqCst) => {
                kill_group(pid, libc::SIGTERM);
                self.stopping = Some(now);
            }
            Some(since) if !self.stop_killed && now >= since + self.rules.grace => {
                let pid_text = pid.to_string();
                let fields = [
                    ("pid", pid_text.as_str()),
                    ("command", self.program.as_str()),
                ];
                crate::log::warn(super::GRACE_KILLED, &fields);
                kill_group(pid, libc::SIGKILL);
                self.stop_killed = true;
            }
            _ => {}
        }
    }

    /// One poll(2) on the open pipes and the exit descriptor, then a read from
    /// each ready pipe.
    fn read_ready(&mut self, now: Instant, buf: &mut [u8], sink: &mut dyn Sink) {
        let fd_of = |fd: Option<i32>| libc::pollfd {
            fd: fd.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = [
            fd_of(self.pipes[0].as_ref().map(|p| p.as_raw_fd())),
            fd_of(self.pipes[1].as_ref().map(|p| p.as_raw_fd())),
            fd_of(self.exit_fd.as_ref().map(|f| f.as_raw_fd())),
        ];
        let wait = self.poll_wait(now);
        // SAFETY: `fds` is a valid array of pollfd for its length; negative fds are ignored.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        if ready <= 0 {
            return;
        }
        if fds[2].revents != 0 {
            // Exited: `try_exit` has it now (or, as PID 1, once the reaper sent it).
            self.exit_fd = None;
        }
        for (i, stream) in STREAMS.into_iter().enumerate() {
            if fds[i].revents == 0 {
                continue;
            }
            let Some(pipe) = self.pipes[i].as_mut() else {
                continue;
            };
            let keep_reading = match pipe.read(buf) {
                Ok(n) if n > 0 => {
                    let more = sink.bytes(stream, &buf[..n]);
                    if !more {
                        self.refused();
                    }
                    more
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => true,
                _ => false,
            };
            if !keep_reading {
                self.pipes[i] = None;
                sink.closed(stream);
            }
        }
    }

    /// The sink refused more output: kill the child (if it still runs).
    fn refused(&self) {
        if self.exit.is_none() {
            kill_group(self.running.pid, libc::SIGKILL);
        }
    }

    /// Milliseconds poll(2) may wait: a tick, or less to the next deadline.
    fn poll_wait(&self, now: Instant) -> i32 {
        let grace_end = self
            .stopping
            .filter(|_| !self.stop_killed)
            .map(|s| s + self.rules.grace);
        let deadline = self.deadline.filter(|_| !self.timed_out);
        let next = [deadline, self.drain_until, grace_end]
            .into_iter()
            .flatten()
            .map(|d| d.saturating_duration_since(now))
            .fold(TICK, Duration::min);
        // Rounded up, so a deadline is not polled for in a busy loop of 0 ms waits.
        next.as_micros().div_ceil(1000) as i32
    }

    fn ended(self, exit: Exit) -> Ended {
        let status = match self.rules.timeout {
            Some(limit) if self.timed_out => ExitStatus::TimedOut(limit),
            _ => exit.status,
        };
        Ended {
            exit: Exit {
                status,
                usage: exit.usage,
            },
            interrupted: self.stopping.is_some(),
        }
    }
}

/// The last bytes of a stream (of stderr: where errors usually are).
pub(crate) struct Tail {
    kept: Vec<u8>,
    max: usize,
}

impl Tail {
    pub(crate) fn new(max: usize) -> Tail {
        Tail {
            kept: Vec::new(),
            max,
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.kept.extend_from_slice(bytes);
        // Cut only at twice the size, so a long stream is not moved on every push.
        if self.kept.len() > 2 * self.max {
            self.kept.drain(..self.kept.len() - self.max);
        }
    }

    /// The last `max` bytes pushed.
    pub(crate) fn into_bytes(mut self) -> Vec<u8> {
        if self.kept.len() > self.max {
            self.kept.drain(..self.kept.len() - self.max);
        }
        self.kept
    }
}
