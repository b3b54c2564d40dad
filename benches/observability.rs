//! `make bench` (observability part): the shipping and memory figures of issue 6,
//! each printed with its target.
//!
//! 1. Static binary size, and the image's content: a tar of the would-be rootfs
//!    (only `/shell-operator`, as `Dockerfile.scratch` builds it), plain and gzipped
//!    (registries store gzipped layers). No Docker engine needed.
//! 2. Idle RSS of the static binary with 20 hooks (onStartup + schedule on 4 queues)
//!    after startup finished. Target ≤ 10 MB.
//! 3. RSS growth over 10,000 hook runs that write hook metrics (counters, a churning
//!    group, a histogram), VmRSS after 1,000 warm-up runs vs after 10,000 (target:
//!    flat within 5%), twice: (a) the static binary itself, 200 hooks firing every
//!    second on 8 queues, `/metrics` scraped every 500 ms (about 60 s); (b) in this
//!    process (glibc malloc), 4 real queue threads, the runner, the executor and the
//!    hook metrics store, `/metrics` rendered every 500 runs (`--runs N` to change).
//!
//! Usage: `cargo bench --bench observability -- --static <musl binary> [--runs N]`.

mod common;

use shell_operator::executor::Executor;
use shell_operator::hook::context::BindingContext;
use shell_operator::metrics::Metrics;
use shell_operator::queue::Task;
use shell_operator::queue::worker::{SharedView, Worker};
use shell_operator::runner::Runner;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WARMUP: usize = 1_000;
const QUEUES: usize = 4;

/// Writes a counter, a gauge in a group shared by the 4 hooks (so every run
/// expires the other hooks' series of that group) and a histogram observation.
const METRICS_HOOK: &str = r#"#!/bin/sh
slot=$(( $$ % 20 ))
cat > "$METRICS_PATH" <<EOF
{"name":"bench_runs_total","add":1}
{"group":"churn","name":"bench_objects","set":$$,"labels":{"slot":"$slot"}}
{"name":"bench_seconds","action":"observe","value":0.$slot,"buckets":[0.1,0.5,1]}
EOF
"#;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let static_bin = args
        .iter()
        .position(|a| a == "--static")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let work = std::env::temp_dir().join(format!("so-obs-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");
    shell_operator::log::set_level(shell_operator::log::Level::Error);

    match &static_bin {
        Some(bin) => {
            sizes(bin, &work.join("image"));
            match binary_rss_growth(bin, &work.join("binary-growth"), 10_000) {
                Ok(samples) => print_binary_growth(&samples),
                Err(e) => println!("RSS growth of the binary: {e}"),
            }
            match idle_rss(bin, &work.join("idle")) {
                Ok(kb) => println!(
                    "idle RSS, 20 hooks (static)   : {:>8.2} MB ({kb} kB VmRSS)  (target ≤ 10 MB)",
                    kb as f64 / 1024.0
                ),
                Err(e) => println!("idle RSS: {e}"),
            }
        }
        None => println!("(no --static <binary>: sizes and idle RSS skipped)"),
    }
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    rss_growth(&work.join("growth"), runs);
    let _ = std::fs::remove_dir_all(&work);
}

fn print_binary_growth(samples: &[(u64, u64)]) {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return;
    };
    let growth = (last.1 as f64 - first.1 as f64) / first.1.max(1) as f64 * 100.0;
    println!(
        "RSS of the static binary over hook runs with hook metrics (200 hooks, every second):"
    );
    println!(
        "  after {} runs: {} kB, after {}: {} kB, growth {growth:+.2}%  (target within ±5%)",
        first.0, first.1, last.0, last.1
    );
    let kb: Vec<String> = samples.iter().map(|(_, kb)| kb.to_string()).collect();
    println!("  VmRSS every 1000 runs (kB): {}", kb.join(" "));
}

fn sizes(bin: &Path, dir: &Path) {
    let Ok(meta) = std::fs::metadata(bin) else {
        println!(
            "static binary {} not found: run `make static`",
            bin.display()
        );
        return;
    };
    println!(
        "static binary                 : {:>8.2} MB ({} bytes)  (target ≤ 8 MB)",
        meta.len() as f64 / 1e6,
        meta.len()
    );
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(&rootfs).expect("rootfs");
    std::fs::copy(bin, rootfs.join("shell-operator")).expect("copy");
    let tar = dir.join("layer.tar");
    let ok = Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .args(["--owner=0", "--group=0", "-cf"])
        .arg(&tar)
        .arg("shell-operator")
        .status()
        .is_ok_and(|s| s.success());
    let tar_len = std::fs::metadata(&tar).map(|m| m.len()).unwrap_or(0);
    let gz = Command::new("gzip")
        .args(["-9", "-n", "-c"])
        .arg(&tar)
        .stderr(Stdio::null())
        .output()
        .map(|o| o.stdout.len())
        .unwrap_or(0);
    if ok {
        println!(
            "image layer (tar of rootfs)   : {:>8.2} MB ({tar_len} bytes); gzipped {:.2} MB ({gz} bytes)",
            tar_len as f64 / 1e6,
            gz as f64 / 1e6
        );
    }
}

fn vm_rss_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The binary with 20 hooks, after /ready and 2 s of idling.
fn idle_rss(bin: &Path, dir: &Path) -> Result<u64, String> {
    for i in 0..20 {
        let config = format!(
            "configVersion: v1\nonStartup: {i}\nschedule:\n- name: yearly-{i}\n  crontab: \"0 0 1 1 *\"\n  queue: q{}",
            i % 4
        );
        common::write_exec(
            &dir.join(format!("hooks/{i:02}-hook.sh")),
            &format!("#!/bin/sh\nif [ \"$1\" = --config ]; then cat <<'EOF'\n{config}\nEOF\nfi\n"),
        );
    }
    let (mut child, port) = common::start_operator(bin, dir, &[], &[])?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let result = loop {
        if common::ready(port) {
            std::thread::sleep(Duration::from_secs(2));
            break vm_rss_kb(child.id()).ok_or_else(|| "no VmRSS".to_string());
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

/// The real binary: 200 hooks firing every second on 8 queues, each run writing
/// hook metrics, `/metrics` scraped every 500 ms. Runs are counted from the scraped
/// `hook_run_success_total`; VmRSS is sampled at every 1,000 runs.
fn binary_rss_growth(bin: &Path, dir: &Path, runs: u64) -> Result<Vec<(u64, u64)>, String> {
    const HOOKS: usize = 200;
    for i in 0..HOOKS {
        let config = format!(
            "{{\"configVersion\":\"v1\",\"schedule\":[{{\"name\":\"tick\",\"crontab\":\"* * * * * *\",\"queue\":\"q{}\"}}]}}",
            i % 8
        );
        let body = METRICS_HOOK.replacen(
            "#!/bin/sh\n",
            &format!("#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{config}'; exit 0; fi\n"),
            1,
        );
        common::write_exec(&dir.join(format!("hooks/{i:03}.sh")), &body);
    }
    let (mut child, port) = common::start_operator(bin, dir, &["--log-level", "error"], &[])?;
    let mut samples = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(runs / 50 + 120);
    let mut next = 1000;
    while next <= runs && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        let done = scrape(port).map_or(0, |body| total_runs(&body));
        if done >= next {
            samples.push((done, vm_rss_kb(child.id()).unwrap_or(0)));
            next += 1000;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    if next <= runs {
        return Err(format!("only {} runs before the deadline", next - 1000));
    }
    Ok(samples)
}

fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

fn total_runs(body: &str) -> u64 {
    body.lines()
        .filter(|l| l.starts_with("shell_operator_hook_run_success_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn rss_growth(dir: &Path, runs: usize) {
    let hook_path = dir.join("hooks/metrics.sh");
    common::write_exec(&hook_path, METRICS_HOOK);
    let executor = Executor {
        tmp_dir: dir.join("tmp"),
        keep_tmp_files: false,
        timeout: None,
        ..Default::default()
    };
    executor.prepare_tmp_dir().expect("tmp");
    let metrics = Arc::new(Metrics::new("shell_operator_").expect("metrics"));
    let (sched_tx, _sched_rx) = crossbeam_channel::unbounded();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    let handler = Arc::new(common::Counting {
        inner: Runner::without_cluster(
            Arc::new(
                (0..QUEUES)
                    .map(|i| common::plain_hook(&format!("metrics-{i}.sh"), &hook_path))
                    .collect::<Vec<_>>(),
            )
            .into(),
            executor,
            Arc::clone(&metrics),
            sched_tx,
        ),
        done: done_tx,
    });
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let mut senders = Vec::new();
    let mut threads = Vec::new();
    for q in 0..QUEUES {
        let (tx, rx) = crossbeam_channel::unbounded();
        let view: SharedView = Arc::default();
        let worker = Worker::new(&format!("q{q}"), rx, stop_rx.clone(), handler.clone(), view);
        threads.push(std::thread::spawn(move || worker.run()));
        senders.push(tx);
    }
    let pid = std::process::id();
    let started = Instant::now();
    let (mut warm, mut scrape_len, mut samples) = (0, 0, Vec::new());
    // Feed in batches of 100 (a queue never holds thousands: no compaction at 100).
    for batch in 0..runs / 100 {
        for i in 0..100 {
            let q = i % QUEUES;
            let ctx = BindingContext::schedule("bench", None, vec![]);
            let task = Task::hook_run(q, &format!("metrics-{q}.sh"), false, false, ctx);
            let _ = senders[q].send(task);
        }
        for _ in 0..100 {
            let _ = done_rx.recv();
        }
        let done = (batch + 1) * 100;
        if done % 500 == 0 {
            scrape_len = metrics.render().len();
        }
        if done == WARMUP {
            warm = vm_rss_kb(pid).unwrap_or(0);
        }
        if done % 1000 == 0 {
            samples.push(vm_rss_kb(pid).unwrap_or(0));
        }
    }
    let end = vm_rss_kb(pid).unwrap_or(0);
    let elapsed = started.elapsed();
    drop(stop_tx);
    threads.into_iter().for_each(|t| drop(t.join()));
    let growth = (end as f64 - warm as f64) / warm.max(1) as f64 * 100.0;
    println!(
        "RSS over {runs} hook runs with hook metrics ({QUEUES} queues, {:.1} s):",
        elapsed.as_secs_f64()
    );
    println!(
        "  after {WARMUP} runs: {warm} kB, after {runs}: {end} kB, growth {growth:+.2}%  (target within ±5%)"
    );
    let kb: Vec<String> = samples.iter().map(u64::to_string).collect();
    println!("  VmRSS every 1000 runs (kB): {}", kb.join(" "));
    println!(
        "  hook metric series at the end: {}, /metrics body {scrape_len} bytes",
        metrics.hooks.series_count()
    );
}
