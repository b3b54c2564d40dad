//! Test harness for integration tests: builds a temp hooks dir, starts the real
//! `shell-operator` binary on it, and reads what the hooks recorded.
//!
//! Every hook written by [`hook`] appends one line per run to `$OUT_DIR/runs.log`:
//! `<tag> <binding context JSON>`, so tests assert the exact JSON hooks received.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A hook script: prints `config` for `--config`, otherwise runs `body` after
/// recording its binding context under `tag`.
pub fn hook(tag: &str, config: &str, body: &str) -> String {
    format!(
        "#!/bin/sh\nif [ \"$1\" = \"--config\" ]; then\ncat <<'CONFIG'\n{config}\nCONFIG\nexit 0\nfi\n\
         printf '%s %s\\n' '{tag}' \"$(tr -d '\\n' < \"$BINDING_CONTEXT_PATH\")\" >> \"$OUT_DIR/runs.log\"\n{body}\n"
    )
}

/// A temp directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("so-it-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes executable `files` (relative path, content) under `dir`.
pub fn write_hooks(dir: &Path, files: &[(&str, String)]) {
    for (rel, content) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write hook");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}

/// A running operator and its workspace.
pub struct Operator {
    pub child: Child,
    pub dir: TempDir,
    pub stdout: Arc<Mutex<Vec<String>>>,
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_shell-operator")
}

impl Operator {
    /// Starts the binary on `hooks` with extra `args` and `env`; JSON logs, port 0.
    pub fn start(hooks: &[(&str, String)], args: &[&str], env: &[(&str, &str)]) -> Operator {
        Operator::start_program(Path::new(binary()), hooks, args, env)
    }

    /// [`Operator::start`] for another shell-operator binary with the same command
    /// line (flant's, in the compatibility suite).
    pub fn start_program(
        program: &Path,
        hooks: &[(&str, String)],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Operator {
        let dir = TempDir::new("op");
        write_hooks(&dir.0.join("hooks"), hooks);
        std::fs::create_dir_all(dir.0.join("out")).expect("out dir");
        let mut cmd = Command::new(program);
        cmd.arg("start")
            .arg("--hooks-dir")
            .arg(dir.0.join("hooks"))
            .arg("--tmp-dir")
            .arg(dir.0.join("tmp"))
            .args(["--listen-address", "127.0.0.1", "--listen-port", "0"])
            // Each operator gets its own debug socket (tests run in parallel).
            .arg("--debug-unix-socket")
            .arg(dir.0.join("debug.socket"))
            .args(args)
            .env("LOG_TYPE", "json")
            .env("OUT_DIR", dir.0.join("out"))
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start shell-operator");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&stdout);
        let pipe = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().expect("lock").push(line);
            }
        });
        Operator { child, dir, stdout }
    }

    /// Lines of `runs.log` as (tag, parsed JSON).
    pub fn runs(&self) -> Vec<(String, serde_json::Value)> {
        let text = std::fs::read_to_string(self.dir.0.join("out/runs.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(tag, json)| {
                (
                    tag.to_string(),
                    serde_json::from_str(json).unwrap_or(serde_json::Value::Null),
                )
            })
            .collect()
    }

    /// Waits until `cond(runs)` holds; panics with the runs and logs after `timeout`.
    pub fn wait_runs(
        &self,
        timeout: Duration,
        cond: impl Fn(&[(String, serde_json::Value)]) -> bool,
    ) -> Vec<(String, serde_json::Value)> {
        let deadline = Instant::now() + timeout;
        loop {
            let runs = self.runs();
            if cond(&runs) {
                return runs;
            }
            if Instant::now() > deadline {
                panic!(
                    "condition not met in {timeout:?}\nruns: {runs:#?}\nlogs:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn logs(&self) -> String {
        self.stdout.lock().expect("lock").join("\n")
    }

    /// Waits for a log line containing `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self
                .stdout
                .lock()
                .expect("lock")
                .iter()
                .find(|l| l.contains(needle))
            {
                return l.clone();
            }
            if Instant::now() > deadline {
                panic!(
                    "no log line with {needle:?} in {timeout:?}; logs:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The HTTP port, from the "HTTP server listening" log line.
    pub fn port(&self) -> u16 {
        self.port_from_log("HTTP server listening")
    }

    /// The port in the `address` field of the first log line containing `needle`
    /// (e.g. "admission webhook server listening").
    pub fn port_from_log(&self, needle: &str) -> u16 {
        let line = self.wait_log(needle, Duration::from_secs(20));
        let v: serde_json::Value = serde_json::from_str(&line).expect("json log line");
        let addr = v["address"].as_str().expect("address field");
        addr.rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port")
    }

    /// The path of this operator's debug socket.
    pub fn debug_socket(&self) -> PathBuf {
        self.dir.0.join("debug.socket")
    }

    /// GETs `path` from the HTTP server: (status, body).
    pub fn http_get(&self, path: &str) -> (u16, String) {
        http_get(self.port(), path)
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    /// Waits for the process to exit; returns its code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Operator {
    /// Stops the operator as a pod would (SIGTERM, so it stops its hooks' process
    /// groups), then SIGKILL if it is still there; no hook outlives a test.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.signal(libc::SIGTERM);
            if self.wait_exit(Duration::from_secs(15)).is_none() {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.0 GET over a TCP socket to 127.0.0.1.
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    http_get_from("127.0.0.1", port, path)
}

/// [`http_get`] to another loopback address (HA replicas listen on 127.0.0.2, ...).
pub fn http_get_from(host: &str, port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect((host, port)).expect("connect");
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// Runs the binary to completion: (exit code, stdout, stderr).
pub fn run_binary(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(binary())
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The value of the first sample line starting with `series` in a metrics body.
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// How many live processes have `path` in their command line (hooks of a test's
/// own hooks dir, say), read from /proc.
pub fn processes_mentioning(path: &Path) -> usize {
    let needle = path.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmd| String::from_utf8_lossy(cmd).contains(&needle))
        .count()
}

/// Asserts that the RBAC manifest `text` has `rules` rules (`- apiGroups:` lines)
/// and a comment line right above each of them.
pub fn assert_rules_commented(text: &str, rules: usize) {
    let lines: Vec<&str> = text.lines().collect();
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("- apiGroups:"))
        .collect();
    assert_eq!(starts.len(), rules, "rules in the manifest");
    for i in starts {
        assert!(
            i > 0 && lines[i - 1].starts_with('#'),
            "rule at line {} has no comment",
            i + 1
        );
    }
}

/// The lines a child writes to stdout, as they come (its stdout is taken).
pub fn stdout_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Runs `addon-operator <args>` against the debug socket `socket`; its stdout, or
/// a panic with its stderr.
#[allow(dead_code)]
pub fn addon_cli(socket: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shell-operator"))
        .arg("addon-operator")
        .args(args)
        .arg("--debug-unix-socket")
        .arg(socket)
        .output()
        .expect("addon-operator debug cli");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `content` at `path` with `mode` atomically (a dot-file renamed over it),
/// as a deploy tool or the kubelet would; creates the parent directories.
#[allow(dead_code)]
pub fn put_atomically(path: &Path, content: &str, mode: u32) {
    let dir = path.parent().expect("parent");
    std::fs::create_dir_all(dir).expect("mkdir");
    let name = path.file_name().expect("name").to_string_lossy();
    let tmp = dir.join(format!(".tmp-{name}"));
    std::fs::write(&tmp, content).expect("write");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).expect("chmod");
    std::fs::rename(&tmp, path).expect("rename");
}

/// The real helm: `$HELM`/`.tools/bin/helm` (4) or `$HELM3`/`.tools/bin/helm3` (3),
/// as `make clients` installs them. Missing is a failure, never a skip.
pub fn helm_bin(major: u32) -> PathBuf {
    let (var, name) = if major == 3 {
        ("HELM3", "helm3")
    } else {
        ("HELM", "helm")
    };
    let path = std::env::var(var).map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(".tools/bin")
            .join(name)
    });
    assert!(
        path.is_file(),
        "helm {major} not found at {} (run scripts/install-k8s-clients.sh or set ${var})",
        path.display()
    );
    path
}

/// Runs `helm` with `args` in namespace `ns` through `kubeconfig`, with a throwaway
/// home so no test reads another's cache or repositories; its stdout, or a panic
/// with its stderr.
pub fn run_helm(helm: &Path, kubeconfig: &Path, ns: &str, args: &[&str]) -> String {
    let home = TempDir::new("helm-home");
    let out = Command::new(helm)
        .args(args)
        .args(["--namespace", ns, "--kubeconfig"])
        .arg(kubeconfig)
        .env("HOME", &home.0)
        .env("HELM_CACHE_HOME", home.0.join("cache"))
        .env("HELM_CONFIG_HOME", home.0.join("config"))
        .env("HELM_DATA_HOME", home.0.join("data"))
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A port on 127.0.0.1 free now, for a program that cannot report a port it picked
/// (flant's operators, and ours beside them in the same case). It is taken below
/// the kernel's ephemeral range (32768 up), so the client sockets of the tests, the
/// API server and the operators cannot take it before the program binds it; a
/// port 0 bind would hand out exactly such a port. Successive calls in one test
/// binary never return the same port.
pub fn listen_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20000;
    const SPAN: u32 = 12000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7919) % SPAN;
    for _ in 0..SPAN {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (FIRST + (start + step) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + SPAN);
}
