//! `make bench` (kubernetes bindings): figures measured against kube-sim, each with
//! its baseline in the same run.
//!
//! 1. Throughput on 10k pods: the monitor's path (list → jq `.metadata.labels` →
//!    checksum → snapshot) vs our client decoding the same list with nothing else.
//! 2. RSS of the real operator binary with 10k pods cached: full objects (vs their
//!    compact JSON), again after every pod was modified once (the snapshot then
//!    holds the watch events' copies), and `keepFullObjectsInMemory: false` with a
//!    small filter (vs the filter output plus 100 bytes per object), over the idle
//!    baseline.
//! 3. Event-to-hook-start latency, p50/p99, with an idle queue, and where it goes
//!    (`kube/latency.rs`).
//!
//! kube-sim runs as its own process (`target/release/kube-sim`), so its memory is
//! not counted; the operator is `target/release/shell-operator` unless `--operator`.

mod common;
#[path = "kube/latency.rs"]
mod latency;

use common::pods::{KubeSim, MonitorRun, PODS, write_pods};
use shell_operator::kube::{Client, WatchParams};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

fn main() {
    let arg = |name: &str| common::arg_value(name).map(PathBuf::from);
    let operator =
        arg("--operator").unwrap_or_else(|| PathBuf::from("target/release/shell-operator"));
    let kube_sim = arg("--kube-sim").unwrap_or_else(|| PathBuf::from("target/release/kube-sim"));
    let work = std::env::temp_dir().join(format!("so-kube-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("seed")).expect("mkdir");
    write_pods(&work.join("seed/pods.yaml"));
    let sim = KubeSim::start(&kube_sim, &work);
    let client = common::pods::client(&sim);

    let (decode, json_bytes) = decode_only(&client);
    let monitor = through_monitor(&client);
    println!("throughput, {PODS} pods (list):");
    println!(
        "  client decode only        : {:>8.0} objects/s ({} ms)",
        rate(decode),
        decode.as_millis()
    );
    println!(
        "  monitor jq+checksum+store : {:>8.0} objects/s ({} ms)",
        rate(monitor),
        monitor.as_millis()
    );
    println!(
        "  ratio monitor/decode      : {:>8.2}  (target ≥ 0.5)",
        decode.as_secs_f64() / monitor.as_secs_f64()
    );
    let (streamed, paged) = (initial_list(&sim, true), initial_list(&sim, false));
    println!("initial list, {PODS} pods, client at its default QPS 5 / burst 10 (issue 12):");
    println!(
        "  streaming watch-list      : {:>8} ms (1 request)",
        streamed.as_millis()
    );
    println!(
        "  paged LIST, 500 per page  : {:>8} ms ({} requests)",
        paged.as_millis(),
        PODS.div_ceil(500)
    );
    println!(
        "  ratio streamed/paged      : {:>8.2}",
        streamed.as_secs_f64() / paged.as_secs_f64()
    );

    let idle = rss_with(
        &operator,
        &sim,
        &work,
        "kind: Pod\n  namespace:\n    nameSelector:\n      matchNames: [empty]\n  jqFilter: .metadata.labels",
        false,
    );
    let full = rss_with(
        &operator,
        &sim,
        &work,
        "kind: Pod\n  jqFilter: .metadata.labels",
        false,
    );
    let churned = rss_with(
        &operator,
        &sim,
        &work,
        "kind: Pod\n  jqFilter: .metadata.labels",
        true,
    );
    let slim = rss_with(
        &operator,
        &sim,
        &work,
        "kind: Pod\n  keepFullObjectsInMemory: false\n  jqFilter: .metadata.name",
        false,
    );
    let filter_bytes = PODS * "\"pod-00000\"".len();
    println!(
        "memory, {PODS} pods, compact JSON {:.1} MB:",
        json_bytes as f64 / 1e6
    );
    println!("  idle baseline (0 objects)  : {:>7.1} MB", mb(idle));
    println!(
        "  full objects               : {:>7.1} MB over baseline = {:.2}× compact JSON  (target ≤ 1.5×)",
        mb(full.saturating_sub(idle)),
        full.saturating_sub(idle) as f64 / json_bytes as f64
    );
    println!(
        "  full, every pod modified   : {:>7.1} MB over baseline = {:.2}× compact JSON",
        mb(churned.saturating_sub(idle)),
        churned.saturating_sub(idle) as f64 / json_bytes as f64
    );
    println!(
        "  keepFull false, .metadata.name: {:>4.1} MB over baseline; budget {:.1} MB (filter output + 100 B/object)",
        mb(slim.saturating_sub(idle)),
        mb(filter_bytes + 100 * PODS)
    );
    println!("Synchronization, {PODS} pods, the hook run once with all of them:");
    for (what, binding) in [
        ("full objects              ", "kind: Pod"),
        (
            "keepFull false, .metadata.name",
            "kind: Pod\n  keepFullObjectsInMemory: false\n  jqFilter: .metadata.name",
        ),
    ] {
        let (peak, after) = synchronization_peak(&operator, &sim, &work, binding);
        println!(
            "  {what}: peak (VmHWM) {:>6.1} MB, RSS after {:>6.1} MB",
            mb(peak),
            mb(after)
        );
    }
    let (p50, p99) = latency::run(&operator, &sim, &work, latency::Hook::Shell).p50_p99();
    println!(
        "event-to-hook-start latency, idle queue: p50 {:.1} ms, p99 {:.1} ms",
        p50, p99
    );
    let traced = latency::run(&operator, &sim, &work, latency::Hook::StaticC);
    let (c50, c99) = traced.p50_p99();
    println!(
        "  the same with a static C hook (no sh, no date): p50 {c50:.1} ms, p99 {c99:.1} ms \
         (the operator's own part + fork/exec)"
    );
    println!(
        "  where the static hook's time goes (median per stage, SHELL_OPERATOR_LATENCY_TRACE):"
    );
    for (stage, v) in traced.stages() {
        println!("    {stage:<40} {v:>8.0}");
    }
    drop(sim);
    let _ = std::fs::remove_dir_all(&work);
}

fn rate(d: Duration) -> f64 {
    PODS as f64 / d.as_secs_f64()
}
fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

/// The client's reflector listing every pod: time to the complete list, and the
/// compact JSON size of the objects.
fn decode_only(client: &Client) -> (Duration, usize) {
    let pods = client.resolve("v1", "Pod", "bench").expect("resolve");
    let started = Instant::now();
    let (handle, rx) = client.watch(&pods, WatchParams::default());
    let objects = loop {
        if let Ok(shell_operator::kube::Event::Synced(objects)) = rx.recv() {
            break objects;
        }
    };
    // The reflector hands on each object decoded (canonical text and metadata):
    // that decode is the baseline.
    let elapsed = started.elapsed();
    assert_eq!(objects.len(), PODS);
    let bytes = objects.iter().map(|o| o.json.len()).sum();
    handle.stop();
    (elapsed, bytes)
}

/// Time to the complete initial list with the client's default rate limits (a
/// fresh client, so its token bucket starts full), streamed or paged.
fn initial_list(sim: &KubeSim, watch_list: bool) -> Duration {
    let settings = shell_operator::kube::KubeSettings {
        kubeconfig: sim.kubeconfig.display().to_string(),
        ..shell_operator::kube::KubeSettings::default()
    };
    let client = Client::from_config(&settings).expect("client");
    let pods = client.resolve("v1", "Pod", "bench").expect("resolve");
    let started = Instant::now();
    let params = WatchParams {
        watch_list,
        ..WatchParams::default()
    };
    let (handle, rx) = client.watch(&pods, params);
    loop {
        if let Ok(shell_operator::kube::Event::Synced(objects)) = rx.recv() {
            assert_eq!(objects.len(), PODS);
            break;
        }
    }
    let elapsed = started.elapsed();
    handle.stop();
    elapsed
}

/// The monitor enabling one binding over the same list.
fn through_monitor(client: &Client) -> Duration {
    let run = MonitorRun::start(
        client,
        "kind: Pod\n  jqFilter: .metadata.labels",
        ".metadata.labels",
    );
    let started = Instant::now();
    run.enable();
    let elapsed = started.elapsed();
    assert_eq!(run.store.size(0, 0).0, PODS);
    elapsed
}

fn write_hook(dir: &Path, binding: &str, body: &str) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("hooks dir");
    let path = dir.join("h.sh");
    let text = format!(
        "#!/bin/sh\nif [ \"$1\" = --config ]; then cat <<'EOF'\nconfigVersion: v1\nkubernetes:\n- name: b\n  {binding}\nEOF\nexit 0\nfi\n{body}\n"
    );
    std::fs::write(&path, text).expect("hook");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Starts the operator with one binding; waits until it is ready.
fn operator(bin: &Path, sim: &KubeSim, work: &Path, binding: &str, body: &str) -> (Child, u16) {
    write_hook(&work.join("hooks"), binding, body);
    start_on_hooks(bin, sim, work)
}

/// Starts the operator on the hooks already in `work/hooks`; waits until ready.
fn start_on_hooks(bin: &Path, sim: &KubeSim, work: &Path) -> (Child, u16) {
    start_on_hooks_with(bin, sim, work, &[("OUT", &work.join("out"))])
}

/// [`start_on_hooks`] with the operator's environment given.
fn start_on_hooks_with(
    bin: &Path,
    sim: &KubeSim,
    work: &Path,
    env: &[(&str, &Path)],
) -> (Child, u16) {
    let kubeconfig = sim.kubeconfig.to_str().expect("utf8 path");
    let (child, port) = common::start_operator(bin, work, &["--kube-config", kubeconfig], env)
        .expect("start operator");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !common::ready(port) {
        assert!(Instant::now() < deadline, "operator never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

/// VmRSS of the operator with one binding, 2 s after it is ready; with `churn`,
/// after every pod was modified once and the monitor has taken every event.
fn rss_with(bin: &Path, sim: &KubeSim, work: &Path, binding: &str, churn: bool) -> usize {
    let (mut child, port) = operator(
        bin,
        sim,
        work,
        &format!("{binding}\n  executeHookOnSynchronization: false\n  executeHookOnEvent: []"),
        "",
    );
    if churn {
        modify_every_pod(sim, port);
    }
    std::thread::sleep(Duration::from_secs(2));
    let rss = proc_status(&child, "VmRSS:");
    let _ = child.kill();
    let _ = child.wait();
    rss
}

/// Peak and current RSS of an operator whose binding runs its Synchronization with
/// every pod (the hook reads nothing and exits), once it is ready (the run is done).
fn synchronization_peak(bin: &Path, sim: &KubeSim, work: &Path, binding: &str) -> (usize, usize) {
    let (mut child, _) = operator(
        bin,
        sim,
        work,
        &format!("{binding}\n  executeHookOnEvent: []"),
        "",
    );
    std::thread::sleep(Duration::from_secs(1));
    let peak = proc_status(&child, "VmHWM:");
    let rss = proc_status(&child, "VmRSS:");
    let _ = child.kill();
    let _ = child.wait();
    (peak, rss)
}

/// A `/proc/<pid>/status` field in bytes (the file gives kB).
fn proc_status(child: &Child, field: &str) -> usize {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let kb: usize = status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    kb * 1024
}

/// Adds an annotation to every pod (merge patch), then waits until the operator's
/// monitor has handled all those events (its event-duration histogram count).
fn modify_every_pod(sim: &KubeSim, port: u16) {
    let agent = ureq::Agent::new_with_defaults();
    let stamp = std::process::id();
    for i in 0..PODS {
        let url = format!(
            "{}/api/v1/namespaces/ns-{}/pods/pod-{i:05}",
            sim.url,
            i % 10
        );
        agent
            .patch(&url)
            .header("Content-Type", "application/merge-patch+json")
            .send(format!(
                r#"{{"metadata":{{"annotations":{{"churn":"{stamp}"}}}}}}"#
            ))
            .expect("patch pod");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let seen = handled_events(port);
        if seen >= PODS as f64 {
            return;
        }
        assert!(Instant::now() < deadline, "monitor handled {seen} events");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The operator's `kube_event_duration_seconds_count`, summed over bindings.
fn handled_events(port: u16) -> f64 {
    let body = ureq::get(format!("http://127.0.0.1:{port}/metrics"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default();
    body.lines()
        .filter(|l| l.starts_with("shell_operator_kube_event_duration_seconds_count"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
