//! `make bench`: the foundation's figures, each measured against a baseline in the
//! same run.
//!
//! 1. Hook dispatch overhead: N runs of a trivial hook through the operator's queue
//!    thread, runner and executor (binding context rendered and written, output files
//!    created and read back, output logged, metrics recorded) vs N bare fork/execs of
//!    the same hook writing and reading the same files. Target ratio ≤ 1.25.
//! 2. Binary size of the stripped static (musl) build. Target ≤ 6 MB.
//! 3. Idle RSS of the real binary with 20 hooks configured. Target ≤ 8 MB.

use shell_operator::executor::Executor;
use shell_operator::hook::Hook;
use shell_operator::hook::config::{ConfigVersion, HookConfig, Settings};
use shell_operator::hook::context::BindingContext;
use shell_operator::metrics::Metrics;
use shell_operator::queue::Task;
use shell_operator::queue::ratelimit::TokenBucket;
use shell_operator::queue::worker::{Handler, SharedView, Worker};
use shell_operator::runner::Runner;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RUNS: usize = 400;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from)
    };
    let work = std::env::temp_dir().join(format!("so-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("hooks")).expect("mkdir");
    let hook_path = work.join("hooks/trivial.sh");
    write_exec(&hook_path, "#!/bin/sh\nexit 0\n");
    shell_operator::log::set_level(shell_operator::log::Level::Error);

    // Warm up the page cache and the reaper, then alternate the two measurements.
    bare_runs(&hook_path, &work.join("bare"), 20);
    operator_runs(&hook_path, &work.join("op"), 20);
    let mut bare = Duration::MAX;
    let mut op = Duration::MAX;
    for _ in 0..3 {
        bare = bare.min(bare_runs(&hook_path, &work.join("bare"), RUNS));
        op = op.min(operator_runs(&hook_path, &work.join("op"), RUNS));
    }
    println!("hook dispatch ({RUNS} runs, best of 3):");
    println!(
        "  bare fork/exec + files : {:>8.1} ms  ({:.0} µs/run)",
        ms(bare),
        us(bare) / RUNS as f64
    );
    println!(
        "  through the operator   : {:>8.1} ms  ({:.0} µs/run)",
        ms(op),
        us(op) / RUNS as f64
    );
    println!(
        "  ratio operator/bare    : {:>8.3}  (target ≤ 1.25)",
        op.as_secs_f64() / bare.as_secs_f64()
    );

    for (label, path) in [
        ("release (gnu)", arg("--operator")),
        ("static (musl)", arg("--static")),
    ] {
        if let Some(size) = path
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
        {
            println!(
                "binary size {label:<14}: {:>8.2} MB ({size} bytes){}",
                size as f64 / 1e6,
                if label.starts_with("static") {
                    "  (target ≤ 6 MB)"
                } else {
                    ""
                }
            );
        }
    }
    if let Some(bin) = arg("--static").or(arg("--operator")) {
        match idle_rss(&bin, &work.join("idle")) {
            Ok(kb) => println!(
                "idle RSS, 20 hooks      : {:>8.2} MB ({kb} kB VmRSS, {})  (target ≤ 8 MB)",
                kb as f64 / 1024.0,
                bin.display()
            ),
            Err(e) => println!("idle RSS: {e}"),
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn write_exec(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The baseline: what any runner must do per run, with nothing else.
fn bare_runs(hook: &Path, tmp: &Path, n: usize) -> Duration {
    std::fs::create_dir_all(tmp).expect("tmp");
    let context = b"[{\"binding\":\"bench\",\"type\":\"Schedule\"}]\n";
    let started = Instant::now();
    for i in 0..n {
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
    started.elapsed()
}

/// Counts finished tasks so the bench knows when all N ran.
struct Counting {
    inner: Runner,
    done: crossbeam_channel::Sender<()>,
}

impl Handler for Counting {
    fn rate_limit(&self, task: &Task) -> Duration {
        self.inner.rate_limit(task)
    }
    fn handle(&self, task: &Task, queue: &str) -> Result<Vec<Task>, String> {
        let r = self.inner.handle(task, queue);
        let _ = self.done.send(());
        r
    }
}

/// N tasks through a real queue thread, runner and executor.
fn operator_runs(hook_path: &Path, tmp: &Path, n: usize) -> Duration {
    let config = HookConfig {
        version: ConfigVersion::V1,
        on_startup: None,
        schedule: vec![],
        kubernetes: vec![],
        validating: vec![],
        mutating: vec![],
        conversion: vec![],
        settings: Settings::default(),
    };
    let hook = Hook {
        name: "trivial.sh".into(),
        path: hook_path.to_path_buf(),
        limiter: Mutex::new(TokenBucket::from_settings(&config.settings)),
        jq_filters: vec![],
        config,
    };
    let executor = Executor {
        tmp_dir: tmp.to_path_buf(),
        keep_tmp_files: false,
        timeout: None,
    };
    executor.prepare_tmp_dir().expect("tmp");
    let (sched_tx, _sched_rx) = crossbeam_channel::unbounded();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    let runner = Runner {
        hooks: Arc::new(vec![hook]),
        executor,
        metrics: Arc::new(Metrics::new("bench_").expect("metrics")),
        scheduler: sched_tx,
        startup_left: AtomicUsize::new(0),
        ready: Arc::new(AtomicBool::new(true)),
        kube: None,
        patcher: Err("no cluster in this benchmark".into()),
        jq_library: None,
    };
    let (task_tx, task_rx) = crossbeam_channel::unbounded();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let view: SharedView = Arc::default();
    let worker = Worker::new(
        "main",
        task_rx,
        stop_rx,
        Arc::new(Counting {
            inner: runner,
            done: done_tx,
        }),
        view,
    );
    let thread = std::thread::spawn(move || worker.run());
    let started = Instant::now();
    for _ in 0..n {
        // Not combinable, so each task is its own run (as N separate events would be).
        let ctx = BindingContext::schedule("bench", None, vec![]);
        task_tx
            .send(Task::hook_run(0, "trivial.sh", false, false, ctx))
            .expect("send");
    }
    for _ in 0..n {
        done_rx.recv().expect("done");
    }
    let elapsed = started.elapsed();
    drop(stop_tx);
    let _ = thread.join();
    elapsed
}

/// Starts the binary with 20 hooks (onStartup + a yearly schedule each), waits until
/// ready, and reads its resident memory.
fn idle_rss(bin: &Path, dir: &Path) -> Result<u64, String> {
    for i in 0..20 {
        let config = format!(
            "configVersion: v1\nonStartup: {i}\nschedule:\n- name: yearly-{i}\n  crontab: \"0 0 1 1 *\"\n  queue: q{}",
            i % 4
        );
        write_exec(
            &dir.join(format!("hooks/{i:02}-hook.sh")),
            &format!("#!/bin/sh\nif [ \"$1\" = --config ]; then cat <<'EOF'\n{config}\nEOF\nfi\n"),
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())?;
    let mut child = Command::new(bin)
        .args([
            "start",
            "--listen-address",
            "127.0.0.1",
            "--listen-port",
            &port.to_string(),
            "--hooks-dir",
        ])
        .arg(dir.join("hooks"))
        .arg("--tmp-dir")
        .arg(dir.join("tmp"))
        .arg("--debug-unix-socket")
        .arg(dir.join("debug.socket"))
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("start {}: {e}", bin.display()))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let result = loop {
        if ready(port) {
            std::thread::sleep(Duration::from_secs(2));
            let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
                .map_err(|e| e.to_string())?;
            break status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| "no VmRSS".to_string());
        }
        if Instant::now() > deadline {
            break Err("operator never became ready".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn ready(port: u16) -> bool {
    use std::io::Write;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = write!(s, "GET /ready HTTP/1.0\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200")
}
