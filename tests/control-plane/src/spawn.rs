//! Starting the servers so that they never outlive the test process, and running
//! short commands (kubectl) with a deadline.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child ends, and test
//! threads end all the time; so every server is forked by one keeper thread that
//! lives until the process exits.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Mutex, OnceLock};

type Request = (Command, Sender<std::io::Result<Child>>);

fn keeper() -> &'static Mutex<Sender<Request>> {
    static KEEPER: OnceLock<Mutex<Sender<Request>>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let (tx, rx) = channel::<Request>();
        std::thread::Builder::new()
            .name("control-plane-keeper".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // The sender lives in a static: this loop ends only with the process.
                loop {
                    std::thread::park();
                }
            })
            .expect("spawn the keeper thread");
        Mutex::new(tx)
    })
}

/// Sets `cmd` up to append stdout and stderr to `log`, with no stdin, and to get
/// SIGKILL when the thread that forks it ends (`PR_SET_PDEATHSIG`).
pub fn logged_and_tied(cmd: &mut Command, log: &Path) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stdout(file).stderr(err);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

/// Blocks until SIGINT or SIGTERM arrives (the foreground `make cluster` and
/// `make node`).
pub fn wait_for_stop_signal() {
    // SAFETY: sigset manipulation on a local set, then sigwait on it; no handlers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        let mut sig = 0;
        libc::sigwait(&set, &mut sig);
    }
}

/// Starts `cmd` with stdout and stderr appended to `log`, killed with SIGKILL when
/// this process ends.
pub fn kept(mut cmd: Command, log: &Path) -> Result<Child, String> {
    logged_and_tied(&mut cmd, log)?;
    let program = format!("{:?}", cmd.get_program());
    let (tx, rx) = channel();
    keeper()
        .lock()
        .map_err(|_| "keeper lock poisoned".to_string())?
        .send((cmd, tx))
        .map_err(|_| "keeper thread gone".to_string())?;
    rx.recv()
        .map_err(|_| "keeper thread gone".to_string())?
        .map_err(|e| format!("{program}: {e}"))
}

/// Runs `cmd` to completion, feeding `stdin`; stdout on success, stderr (and
/// stdout) on failure. The command bounds its own time (kubectl's --request-timeout).
pub fn run(cmd: &mut Command, stdin: Option<&str>) -> Result<String, String> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{}{}{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            if stdout.is_empty() { "" } else { "\n" },
            stdout.trim()
        ))
    }
}
