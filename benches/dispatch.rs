//! `make bench`: the foundation's figures, each measured against a baseline in the
//! same run.
//!
//! 1. Hook dispatch overhead: N runs of a trivial hook through the operator's queue
//!    thread, runner and executor (binding context rendered and written, output files
//!    created and read back, output logged, metrics recorded) vs N bare fork/execs of
//!    the same hook writing and reading the same files. Target ratio ≤ 1.25.
//!
//! Binary size and idle memory with 20 hooks are measured by `benches/observability.rs`.

mod common;

use shell_operator::executor::Executor;
use shell_operator::hook::context::BindingContext;
use shell_operator::metrics::Metrics;
use shell_operator::queue::Task;
use shell_operator::queue::worker::{SharedView, Worker};
use shell_operator::runner::Runner;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: usize = 400;

fn main() {
    let work = std::env::temp_dir().join(format!("so-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("hooks")).expect("mkdir");
    let hook_path = work.join("hooks/trivial.sh");
    common::write_exec(&hook_path, "#!/bin/sh\nexit 0\n");
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

    let _ = std::fs::remove_dir_all(&work);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The baseline: what any runner must do per run, with nothing else.
fn bare_runs(hook: &Path, tmp: &Path, n: usize) -> Duration {
    std::fs::create_dir_all(tmp).expect("tmp");
    let context = b"[{\"binding\":\"bench\",\"type\":\"Schedule\"}]\n";
    let started = Instant::now();
    for i in 0..n {
        common::bare_run(hook, tmp, i, context);
    }
    started.elapsed()
}

/// N tasks through a real queue thread, runner and executor.
fn operator_runs(hook_path: &Path, tmp: &Path, n: usize) -> Duration {
    let hook = common::plain_hook("trivial.sh", hook_path);
    let executor = Executor {
        tmp_dir: tmp.to_path_buf(),
        keep_tmp_files: false,
        timeout: None,
        ..Default::default()
    };
    executor.prepare_tmp_dir().expect("tmp");
    let (sched_tx, _sched_rx) = crossbeam_channel::unbounded();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    let runner = Runner::without_cluster(
        Arc::new(vec![hook]).into(),
        executor,
        Arc::new(Metrics::new("bench_").expect("metrics")),
        sched_tx,
    );
    let (task_tx, task_rx) = crossbeam_channel::unbounded();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let view: SharedView = Arc::default();
    let worker = Worker::new(
        "main",
        task_rx,
        stop_rx,
        Arc::new(common::Counting {
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
