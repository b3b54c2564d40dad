//! The node's long-running processes: started with their output in a log file and
//! `PR_SET_PDEATHSIG` (they get SIGKILL when the thread that started them ends, so
//! start the node from a thread that outlives it: a test's main thread), stopped by
//! their own pid, newest first, SIGTERM then SIGKILL.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One started process.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

/// The processes of one node, in start order.
#[derive(Default)]
pub(crate) struct Procs {
    list: Vec<Proc>,
}

impl Procs {
    /// Starts `cmd` as `name`, stdout and stderr appended to `log`.
    pub(crate) fn start(&mut self, name: &str, mut cmd: Command, log: &Path) -> Result<(), String> {
        control_plane::logged_and_tied(&mut cmd, log)?;
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name} ({:?}): {e}", cmd.get_program()))?;
        self.list.push(Proc {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        });
        Ok(())
    }

    /// An error naming `name` if it has exited, with the end of its log.
    pub(crate) fn check(&mut self, name: &str) -> Result<(), String> {
        let Some(p) = self.list.iter_mut().find(|p| p.name == name) else {
            return Err(format!("{name} was never started"));
        };
        match p.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{name} exited ({status}); {}",
                log_tail(&p.log, 20)
            )),
            Err(e) => Err(format!("{name}: {e}")),
        }
    }

    /// Stops `name` (SIGTERM, then SIGKILL after `grace`); true if it was running.
    pub(crate) fn stop(&mut self, name: &str, grace: Duration) -> bool {
        let Some(i) = self.list.iter().position(|p| p.name == name) else {
            return false;
        };
        let mut p = self.list.remove(i);
        stop_child(&mut p.child, grace)
    }

    /// Stops every process, newest first.
    pub(crate) fn stop_all(&mut self, grace: Duration) {
        while let Some(mut p) = self.list.pop() {
            stop_child(&mut p.child, grace);
        }
    }
}

fn stop_child(child: &mut Child, grace: Duration) -> bool {
    if child.try_wait().ok().flatten().is_some() {
        return false;
    }
    // SAFETY: kill(2) on the pid of our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    true
}

/// The last `n` lines of `log`, for error messages.
pub(crate) fn log_tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    format!(
        "last lines of {}:\n{}",
        log.display(),
        lines[from..].join("\n")
    )
}

/// Runs `cmd` to its end; stdout on success, else an error with its stderr.
pub(crate) fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{:?} {:?} failed ({}): {}",
            cmd.get_program(),
            cmd.get_args().collect::<Vec<_>>(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
