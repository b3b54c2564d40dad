//! `make bench` (snapshot heap): the heap a binding's snapshot of 10k pods really
//! holds, counted by a global allocator that tracks live bytes, so the figure does
//! not depend on the allocator's slack the way RSS does. Each mode runs in its own
//! child process (this binary re-run with `--mode`) so nothing freed late by one
//! mode is charged to the other. kube-sim is `target/release/kube-sim` unless
//! `--kube-sim`.

mod common;

use common::pods::{KubeSim, MonitorRun, PODS, write_pods};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts live heap bytes and live allocations.
struct Counting;
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static LIVE_ALLOCS: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        LIVE_ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        LIVE_ALLOCS.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// (mode name, binding, jqFilter)
const MODES: [(&str, &str, &str); 2] = [
    (
        "full objects, .metadata.labels",
        "kind: Pod\n  jqFilter: .metadata.labels",
        ".metadata.labels",
    ),
    (
        "keepFull false, .metadata.name",
        "kind: Pod\n  keepFullObjectsInMemory: false\n  jqFilter: .metadata.name",
        ".metadata.name",
    ),
];

fn main() {
    let arg = common::arg_value;
    let kube_sim = arg("--kube-sim").unwrap_or_else(|| "target/release/kube-sim".into());
    let kube_sim = std::fs::canonicalize(&kube_sim).unwrap_or_else(|_| PathBuf::from(&kube_sim));
    if let Some(mode) = arg("--mode").and_then(|m| m.parse::<usize>().ok()) {
        return measure(mode, &kube_sim);
    }
    println!("snapshot heap, {PODS} pods (live bytes held once the binding is enabled):");
    for mode in 0..MODES.len() {
        let me = std::env::current_exe().expect("own path");
        let status = std::process::Command::new(me)
            .args(["--mode", &mode.to_string(), "--kube-sim"])
            .arg(&kube_sim)
            .status()
            .expect("run mode");
        assert!(status.success(), "mode {mode} failed");
    }
}

/// Enables one binding over the pods and prints the heap it added.
fn measure(mode: usize, kube_sim: &std::path::Path) {
    let (name, binding, filter) = MODES[mode];
    let work = std::env::temp_dir().join(format!("so-heap-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("seed")).expect("mkdir");
    write_pods(&work.join("seed/pods.yaml"));
    let sim = KubeSim::start(kube_sim, &work);
    let client = common::pods::client(&sim);
    let run = MonitorRun::start(&client, binding, filter);
    let before = (
        LIVE_BYTES.load(Ordering::Relaxed),
        LIVE_ALLOCS.load(Ordering::Relaxed),
    );
    run.enable();
    // Let the reflector thread drop its copy of the list.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let bytes = LIVE_BYTES.load(Ordering::Relaxed) - before.0;
    let allocs = LIVE_ALLOCS.load(Ordering::Relaxed) - before.1;
    let (objects, text) = run.store.size(0, 0);
    assert_eq!(objects, PODS);
    println!(
        "  {name:<32}: {:>6.0} B/object heap ({:.1} allocations/object); text {:.0} B/object",
        bytes as f64 / PODS as f64,
        allocs as f64 / PODS as f64,
        text as f64 / PODS as f64
    );
    drop(run);
    drop(sim);
    let _ = std::fs::remove_dir_all(&work);
}
