//! `make bench` (snapshot heap): the heap a binding's snapshot of 10k pods really
//! holds, counted by a global allocator that tracks live bytes, so the figure does
//! not depend on the allocator's slack the way RSS does. Each mode runs in its own
//! child process (this binary re-run with `--mode`) so nothing freed late by one
//! mode is charged to the other. kube-sim is `target/release/kube-sim` unless
//! `--kube-sim`.
//!
//! With `--real` (issue 41) the same pods are created through a real
//! kube-apiserver + etcd (tests/control-plane) instead, so each carries what a real
//! server adds (defaults, `managedFields`): the figure that shows what the
//! monitor's sharing of repeated subtrees saves.

mod common;

use common::pods::{KubeSim, MonitorRun, PODS, client_for, seed_api, write_pods};
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
        return measure(mode, &kube_sim, arg("--kubeconfig").map(PathBuf::from));
    }
    let real = std::env::args().any(|a| a == "--real");
    let work = std::env::temp_dir().join(format!("so-heap-real-{}", std::process::id()));
    let plane = real.then(|| real_server(&work));
    println!(
        "snapshot heap, {PODS} pods on {} (live bytes held once the binding is enabled):",
        if real {
            "a real kube-apiserver"
        } else {
            "kube-sim"
        }
    );
    for mode in 0..MODES.len() {
        let me = std::env::current_exe().expect("own path");
        let mut cmd = std::process::Command::new(me);
        cmd.args(["--mode", &mode.to_string(), "--kube-sim"])
            .arg(&kube_sim);
        if let Some(cp) = &plane {
            cmd.arg("--kubeconfig").arg(cp.admin_kubeconfig());
        }
        let status = cmd.status().expect("run mode");
        assert!(status.success(), "mode {mode} failed");
    }
    drop(plane);
    let _ = std::fs::remove_dir_all(&work);
}

/// A real control plane in `work` holding the pods.
fn real_server(work: &std::path::Path) -> control_plane::ControlPlane {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work.join("seed")).expect("mkdir");
    write_pods(&work.join("seed/pods.yaml"));
    let cp =
        control_plane::ControlPlane::start(&work.join("control-plane")).expect("control plane");
    let client = client_for(&cp.admin_kubeconfig());
    let n = seed_api(&client, &work.join("seed/pods.yaml")).expect("seed");
    assert_eq!(n, PODS);
    cp
}

/// Enables one binding over the pods (of kube-sim, or of the real server behind
/// `kubeconfig`) and prints the heap it added.
fn measure(mode: usize, kube_sim: &std::path::Path, kubeconfig: Option<PathBuf>) {
    let (name, binding, filter) = MODES[mode];
    let work = std::env::temp_dir().join(format!("so-heap-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("seed")).expect("mkdir");
    let (sim, client) = match &kubeconfig {
        Some(path) => (None, client_for(path)),
        None => {
            write_pods(&work.join("seed/pods.yaml"));
            let sim = KubeSim::start(kube_sim, &work);
            let client = common::pods::client(&sim);
            (Some(sim), client)
        }
    };
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
