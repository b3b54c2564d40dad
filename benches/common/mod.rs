//! Helpers shared by the benchmarks (addon-operator module sets in addon.rs, kube-sim
//! and 10k pods in pods.rs): the bare fork/exec baseline, a hook with an
//! empty config, a handler that counts finished tasks, and writing hook scripts.
#![allow(dead_code)]

pub mod addon;
pub mod pods;

use shell_operator::hook::Hook;
use shell_operator::hook::limiter::TokenBucket;
use shell_operator::queue::Task;
use shell_operator::queue::worker::Handler;
use shell_operator::runner::Runner;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The value after `--name` on the bench's command line, if given.
pub fn arg_value(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Writes an executable script.
pub fn write_exec(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// One run with nothing but what any runner must do: the five files created (the
/// first holding `context`), the hook fork/exec'd with the same environment, both
/// pipes drained, the files read back and removed. `i` keeps names unique.
pub fn bare_run(hook: &Path, tmp: &Path, i: usize, context: &[u8]) {
    let files: Vec<PathBuf> = ["ctx", "metrics", "patch", "admission", "conversion"]
        .iter()
        .map(|k| tmp.join(format!("{k}-{i}.json")))
        .collect();
    for (j, f) in files.iter().enumerate() {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(f)
            .expect("create");
        if j == 0 {
            std::io::Write::write_all(&mut file, context).expect("write");
        }
    }
    let mut child = Command::new(hook)
        .current_dir(hook.parent().expect("dir"))
        .env("BINDING_CONTEXT_PATH", &files[0])
        .env("METRICS_PATH", &files[1])
        .env("KUBERNETES_PATCH_PATH", &files[2])
        .env("VALIDATING_RESPONSE_PATH", &files[3])
        .env("CONVERSION_RESPONSE_PATH", &files[4])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut sink = Vec::new();
    let _ = child.stdout.take().map(|mut p| p.read_to_end(&mut sink));
    let _ = child.stderr.take().map(|mut p| p.read_to_end(&mut sink));
    child.wait().expect("wait");
    for f in &files {
        let _ = std::fs::read(f);
        let _ = std::fs::remove_file(f);
    }
}

/// A v1 hook with only an onStartup binding, for driving a runner directly (the
/// runner runs the tasks it is given, whatever the binding).
pub fn plain_hook(name: &str, path: &Path) -> Hook {
    let config = shell_operator::hook::config::parse(name, "configVersion: v1\nonStartup: 1\n")
        .expect("config");
    Hook {
        name: name.into(),
        path: path.to_path_buf(),
        limiter: std::sync::Arc::new(Mutex::new(TokenBucket::from_settings(&config.settings))),
        config_sum: 0,
        retired: false,
        jq_filters: vec![],
        config,
    }
}

/// Forwards to the runner and signals every finished task.
pub struct Counting {
    pub inner: Runner,
    pub done: crossbeam_channel::Sender<()>,
}

impl Handler for Counting {
    fn rate_limit(&self, task: &Task) -> Duration {
        self.inner.rate_limit(task)
    }
    fn handle(&self, task: &Task, queue: &str) -> shell_operator::queue::Outcome {
        let r = self.inner.handle(task, queue);
        let _ = self.done.send(());
        r
    }
    fn queue_action(&self, queue: &str, action: &str, took: Duration) {
        self.inner.queue_action(queue, action, took);
    }
    fn queue_length(&self, queue: &str, len: usize) {
        self.inner.queue_length(queue, len);
    }
}

/// Starts `bin start` on a free loopback port with `dir/hooks`, `dir/tmp` and a
/// debug socket in `dir`, plus `extra` arguments and `env`. Returns the child and port.
pub fn start_operator(
    bin: &Path,
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &Path)],
) -> Result<(std::process::Child, u16), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())?;
    let child = Command::new(bin)
        .args(["start", "--listen-address", "127.0.0.1", "--listen-port"])
        .arg(port.to_string())
        .arg("--hooks-dir")
        .arg(dir.join("hooks"))
        .arg("--tmp-dir")
        .arg(dir.join("tmp"))
        .arg("--debug-unix-socket")
        .arg(dir.join("debug.socket"))
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("start {}: {e}", bin.display()))?;
    Ok((child, port))
}

/// `GET path` on `127.0.0.1:port`: the whole answer, head and body ("" when it
/// cannot be read).
fn http_get(port: u16, path: &str) -> String {
    use std::io::Write;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = write!(s, "GET {path} HTTP/1.0\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text
}

/// The body of `GET path` on `127.0.0.1:port` ("" when it cannot be read).
pub fn http_get_body(port: u16, path: &str) -> String {
    let text = http_get(port, path);
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// True once the operator on `port` answers `/ready` with 200.
pub fn ready(port: u16) -> bool {
    http_get(port, "/ready").split_whitespace().nth(1) == Some("200")
}

/// Runs `openssl <args>` in `dir`, panicking if it fails.
fn openssl(dir: &Path, args: &str) {
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("openssl {args}"))
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "openssl {args} failed (is openssl installed?)");
}

/// A test CA (`ca.crt`) and a server certificate (`tls.crt`, `tls.key`) in `dir`
/// for the subject alternative name `san` (`IP:127.0.0.1`, `DNS:svc.ns.svc`).
pub fn make_cert(dir: &Path, san: &str) {
    let ec = "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out";
    openssl(dir, &format!("{ec} ca.key"));
    openssl(
        dir,
        "req -x509 -new -key ca.key -subj /CN=bench-ca -days 1 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign -out ca.crt",
    );
    openssl(dir, &format!("{ec} tls.key"));
    openssl(dir, "req -new -key tls.key -subj /CN=bench -out tls.csr");
    let ext = format!("subjectAltName={san}\nextendedKeyUsage=serverAuth\n");
    std::fs::write(dir.join("tls.ext"), ext).expect("ext");
    openssl(
        dir,
        "x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile tls.ext -out tls.crt",
    );
}

/// Raises the open-file limit to `want` (or the hard limit), for benches that hold
/// more connections than a default soft limit of 1,024 allows.
pub fn raise_fd_limit(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// `gcc -O2 -static -o out source`: the benches' stamping hooks are static C
/// programs, so no shell or loader start-up is in what they measure.
pub fn compile_static(source: &Path, out: &Path) -> Result<(), String> {
    let status = Command::new("gcc")
        .args(["-O2", "-static", "-o"])
        .arg(out)
        .arg(source)
        .status()
        .map_err(|e| format!("gcc: {e}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("gcc -static {} failed", source.display()))
}
