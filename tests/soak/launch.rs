//! Starts the operator binary under test on the soak's hooks dir with a kubeconfig
//! for kube-sim and the webhook flags, keeping only a bounded tail of its log (an
//! hour of info logs would otherwise grow the test process, not the operator).

use crate::common::{TempDir, write_hooks};
use crate::webhook_common::{Pki, flags};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TAIL_LINES: usize = 400;

/// The operator's log: the last lines, plus every "listening" line (ports).
#[derive(Default)]
pub struct Log {
    pub tail: VecDeque<String>,
    pub listening: Vec<String>,
}

/// A running operator and its workspace.
pub struct Running {
    pub child: Child,
    pub dir: TempDir,
    pub log: Arc<Mutex<Log>>,
}

impl Running {
    /// Starts `binary` with `hooks` against `sim`, webhooks on `pki`'s certificates.
    pub fn start(
        binary: &Path,
        hooks: &[(&str, String)],
        sim: &kube_sim::Sim,
        pki: &Pki,
    ) -> Running {
        let dir = TempDir::new("soak");
        write_hooks(&dir.0.join("hooks"), hooks);
        std::fs::create_dir_all(dir.0.join("out")).expect("out dir");
        let kubeconfig = dir.0.join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let mut child = Command::new(binary)
            .arg("start")
            .arg("--hooks-dir")
            .arg(dir.0.join("hooks"))
            .arg("--tmp-dir")
            .arg(dir.0.join("tmp"))
            .args(["--listen-address", "127.0.0.1", "--listen-port", "0"])
            .arg("--debug-unix-socket")
            .arg(dir.0.join("debug.socket"))
            .args(flags(pki, &kubeconfig))
            .env("LOG_TYPE", "json")
            .env("OUT_DIR", dir.0.join("out"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let log = Arc::new(Mutex::new(Log::default()));
        let pipe = child.stdout.take().expect("stdout");
        let sink = Arc::clone(&log);
        std::thread::spawn(move || keep_log(BufReader::new(pipe), &sink));
        Running { child, dir, log }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn out(&self, file: &str) -> PathBuf {
        self.dir.0.join("out").join(file)
    }

    pub fn hooks_dir(&self) -> PathBuf {
        self.dir.0.join("hooks")
    }

    /// The last log lines, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = self.log.lock().expect("log lock");
        log.tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The port of the first log line containing `needle` (its `address` field).
    pub fn port_from_log(&self, needle: &str) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let line = self
                .log
                .lock()
                .expect("log lock")
                .listening
                .iter()
                .find(|l| l.contains(needle))
                .cloned();
            if let Some(port) = line.as_deref().and_then(port_of) {
                return port;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} log line:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `sig` to the operator.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// Waits up to `timeout` for the exit; its code, or None if still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<Option<i32>> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.code());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn keep_log(pipe: impl BufRead, log: &Mutex<Log>) {
    for line in pipe.lines().map_while(Result::ok) {
        let mut log = log.lock().expect("log lock");
        if line.contains("listening") {
            log.listening.push(line.clone());
        }
        if log.tail.len() == TAIL_LINES {
            log.tail.pop_front();
        }
        log.tail.push_back(line);
    }
}

fn port_of(line: &str) -> Option<u16> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    v["address"].as_str()?.rsplit(':').next()?.parse().ok()
}
