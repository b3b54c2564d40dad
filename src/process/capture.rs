//! The captured sink of the one runner (`run.rs`): a child run to completion with
//! its output kept for the caller, byte for byte: a hook's `--config`, a module's
//! `enabled` script, helm, a kubeconfig exec plugin.
//!
//! stdout is kept exactly (helm's output must round-trip) up to a cap: a child that
//! prints more is killed at once and the run is an error, so `yes` as a `--config`
//! costs a bounded buffer, not the node's memory. Of stderr only the last 64 KiB are
//! kept. Time limit, shutdown (SIGTERM, then SIGKILL after the grace period; the run
//! ends as an `Interrupted` error, so startup never outlives a SIGTERM), drain and
//! reaping are the runner's rules, the same as for hooks.

use super::ExitStatus;
use super::run::{Rules, Sink, Stream, Tail, run};
use std::process::Command;
use std::time::Duration;

/// The part of stderr kept (its end: where errors usually are).
const STDERR_KEPT: usize = 64 * 1024;

/// Output and end of a child run with captured stdout and stderr.
pub(crate) struct Captured {
    pub(crate) stdout: Vec<u8>,
    /// The last 64 KiB of stderr.
    pub(crate) stderr: Vec<u8>,
    pub(crate) status: ExitStatus,
    /// CPU and memory it used (with its children).
    pub(crate) usage: super::Usage,
}

/// Runs `cmd` to completion with stdin closed and both outputs captured. After
/// `timeout` the group is killed; output still held open by a stray grandchild is
/// given up on after a short drain. Errors: the child could not start; it printed
/// more than `max_stdout` bytes (`InvalidData`; it was killed); the operator is
/// shutting down (`Interrupted`; it was stopped).
pub(crate) fn run_captured(
    cmd: &mut Command,
    timeout: Option<Duration>,
    max_stdout: usize,
) -> std::io::Result<Captured> {
    run_captured_under(cmd, &Rules::new(timeout), max_stdout)
}

/// [`run_captured`] under the given rules.
pub(crate) fn run_captured_under(
    cmd: &mut Command,
    rules: &Rules,
    max_stdout: usize,
) -> std::io::Result<Captured> {
    let mut sink = Capture {
        stdout: Vec::new(),
        max_stdout,
        too_much: false,
        stderr: Tail::new(STDERR_KEPT),
    };
    let ended = run(cmd, rules, &mut sink)?;
    if ended.interrupted {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "stopped: the operator is shutting down",
        ));
    }
    if sink.too_much {
        let text = format!("output is larger than {max_stdout} bytes; the process was killed");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, text));
    }
    Ok(Captured {
        stdout: sink.stdout,
        stderr: sink.stderr.into_bytes(),
        status: ended.exit.status,
        usage: ended.exit.usage,
    })
}

/// Keeps stdout exactly up to its cap, and the end of stderr.
struct Capture {
    stdout: Vec<u8>,
    max_stdout: usize,
    too_much: bool,
    stderr: Tail,
}

impl Sink for Capture {
    fn bytes(&mut self, stream: Stream, bytes: &[u8]) -> bool {
        match stream {
            Stream::Stdout => {
                let room = self.max_stdout.saturating_sub(self.stdout.len());
                if bytes.len() > room {
                    self.stdout.extend_from_slice(&bytes[..room]);
                    self.too_much = true;
                    return false;
                }
                self.stdout.extend_from_slice(bytes);
            }
            Stream::Stderr => self.stderr.push(bytes),
        }
        true
    }

    fn closed(&mut self, _: Stream) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

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
