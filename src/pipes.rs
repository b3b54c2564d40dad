//! Reading a running hook's stdout and stderr on the calling thread with poll(2),
//! line by line, until both pipes close and the hook has exited, killing the hook's
//! process group when its run timeout passes. One thread per run, no helper threads:
//! the executor's hot path.

use crate::process::{Exit, ExitStatus, Running, kill_group};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Longest line passed on whole; longer ones are split.
pub const MAX_LINE: usize = 64 * 1024;
/// How long to keep reading after the hook exited (a daemonised grandchild may hold
/// the pipes open forever).
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);
/// Poll interval, so the hook's exit is noticed while a pipe stays open.
const TICK_MS: i32 = 100;

/// Splits a byte stream into lines (lossy UTF-8, without the newline).
#[derive(Default)]
pub struct LineSplitter {
    line: Vec<u8>,
}

impl LineSplitter {
    /// Feeds bytes; calls `f` for every completed line.
    pub fn push(&mut self, bytes: &[u8], f: &mut impl FnMut(&str)) {
        for &b in bytes {
            if b == b'\n' {
                f(&String::from_utf8_lossy(&self.line));
                self.line.clear();
            } else {
                self.line.push(b);
                if self.line.len() >= MAX_LINE {
                    f(&String::from_utf8_lossy(&self.line));
                    self.line.clear();
                }
            }
        }
    }

    /// Passes on the last line if it had no newline.
    pub fn finish(&mut self, f: &mut impl FnMut(&str)) {
        if !self.line.is_empty() {
            f(&String::from_utf8_lossy(&self.line));
            self.line.clear();
        }
    }
}

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Pumps both pipes into `on_line` until they close (or the drain time after the
/// hook's exit runs out), then returns the hook's exit. After `timeout` the hook's
/// group is killed and the status says it timed out.
pub fn pump(
    running: &Running,
    mut pipes: [Option<Box<dyn ReadFd>>; 2],
    timeout: Option<Duration>,
    mut on_line: impl FnMut(Stream, &str),
) -> Exit {
    let started = Instant::now();
    let mut splitters = [LineSplitter::default(), LineSplitter::default()];
    let mut exit: Option<Exit> = None;
    let mut drain_until: Option<Instant> = None;
    let mut timed_out = false;
    let mut buf = [0u8; 8192];
    while pipes.iter().any(Option::is_some) {
        if exit.is_none()
            && let Some(e) = running.try_exit()
        {
            exit = Some(e);
            drain_until = Some(Instant::now() + OUTPUT_DRAIN);
        }
        if drain_until.is_some_and(|d| Instant::now() > d) {
            break;
        }
        if let Some(limit) = timeout
            && !timed_out
            && exit.is_none()
            && started.elapsed() > limit
        {
            kill_group(running.pid, libc::SIGKILL);
            timed_out = true;
        }
        let mut fds: Vec<libc::pollfd> = pipes
            .iter()
            .map(|p| libc::pollfd {
                fd: p.as_ref().map_or(-1, |p| p.fd()),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of pollfd for its length; negative fds are ignored.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, TICK_MS) };
        if ready <= 0 {
            continue;
        }
        for (i, pfd) in fds.iter().enumerate() {
            if pfd.revents == 0 {
                continue;
            }
            let stream = if i == 0 {
                Stream::Stdout
            } else {
                Stream::Stderr
            };
            let mut emit = |line: &str| on_line(stream, line);
            let n = pipes[i].as_mut().map_or(Ok(0), |p| p.read(&mut buf));
            match n {
                Ok(n) if n > 0 => splitters[i].push(&buf[..n], &mut emit),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => {
                    splitters[i].finish(&mut emit);
                    pipes[i] = None;
                }
            }
        }
    }
    let exit = match exit {
        Some(e) => e,
        None if timed_out => running.wait(None),
        None => running.wait(timeout.map(|t| {
            t.saturating_sub(started.elapsed())
                .max(Duration::from_millis(1))
        })),
    };
    if timed_out && let Some(limit) = timeout {
        return Exit {
            status: ExitStatus::TimedOut(limit),
            usage: exit.usage,
        };
    }
    exit
}

/// A readable pipe with its file descriptor.
pub trait ReadFd: Read + Send {
    fn fd(&self) -> i32;
}

impl<T: Read + AsRawFd + Send> ReadFd for T {
    fn fd(&self) -> i32 {
        self.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_and_long_lines() {
        let mut lines = Vec::new();
        let mut s = LineSplitter::default();
        s.push(b"a\nb", &mut |l: &str| lines.push(l.to_string()));
        s.push(b"b\nc", &mut |l: &str| lines.push(l.to_string()));
        s.finish(&mut |l: &str| lines.push(l.to_string()));
        assert_eq!(lines, ["a", "bb", "c"]);
        let mut sizes = Vec::new();
        let mut s = LineSplitter::default();
        s.push(&vec![b'x'; MAX_LINE + 5], &mut |l: &str| {
            sizes.push(l.len())
        });
        s.finish(&mut |l: &str| sizes.push(l.len()));
        assert_eq!(sizes, [MAX_LINE, 5]);
    }
}
