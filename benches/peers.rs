//! `make bench-peers` (issue 12): our operator against kopf, and a plain watch loop
//! as the floor, one at a time against a fresh kube-sim seeded with 10,000 pods in
//! 10 namespaces, then again against one real kube-apiserver + etcd holding the same
//! pods (issue 24; benches/peers/cluster.rs). Each reacts to every Pod event by appending its start time and the
//! pod's name to a file (benches/peers/contender.rs); the scenario and its figures
//! are in benches/peers/scenario.rs. Prints the median of `--trials` (3) per figure
//! with the ratio ours/kopf.
//!
//! `cargo bench --bench peers -- --operator BIN --kube-sim BIN --venv DIR [--trials N]
//! [--servers sim,real] [--flant BIN]` (with `--flant`, flant's shell-operator runs
//! the same hook as a fifth contender; `--contenders ours,flant` runs only those,
//! of ours, at-exec, flant, kopf, floor).
//! (the venv needs kopf; `make bench-peers` makes one in `.tools/peers-venv`).
//!
//! With `PEERS_SCALE=N` in the environment (issue 41; e.g. `PEERS_SCALE=50000 make
//! bench-peers`), the real server then grows to N pods and every contender runs
//! the scenario again there; a last table gives time to ready, idle and peak RSS
//! at both sizes and the memory per watched object as the slope between them.
//!
//! With `--addon` (after the pods) or `--addon-only` (alone), flant's addon-operator
//! v1.5.0 beside ours on a real kube-apiserver (benches/peers/addon.rs):
//! `[--flant-addon BIN] [--helm3 BIN] [--addon-sizes 20,100] [--addon-trials 3]`
//! (trials per size, in order; defaults `.tools/flant/addon-operator-v1.5.0/addon-operator`,
//! `.tools/bin/helm3`, 20,100 and 3). `--keep-work` keeps the work dir (operators'
//! logs) for reading afterwards.

#[path = "peers/addon.rs"]
mod addon;
#[path = "peers/cluster.rs"]
mod cluster;
mod common;
#[path = "peers/contender.rs"]
mod contender;
#[path = "peers/scenario.rs"]
mod scenario;
#[path = "peers/seen.rs"]
mod seen;
#[path = "peers/trace.rs"]
mod trace;

use cluster::Cluster;
use common::pods::{PODS, write_pods};
use contender::{Contender, Programs};
use scenario::Figures;
use std::path::PathBuf;

fn main() {
    let arg = |name: &str| common::arg_value(name).map(PathBuf::from);
    let programs = Programs {
        operator: arg("--operator")
            .unwrap_or_else(|| PathBuf::from("target/release/shell-operator")),
        venv: arg("--venv").unwrap_or_else(|| PathBuf::from(".tools/peers-venv")),
        flant: arg("--flant"),
        scripts: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/peers"),
    };
    let kube_sim = arg("--kube-sim").unwrap_or_else(|| PathBuf::from("target/release/kube-sim"));
    let trials: usize = common::arg_value("--trials")
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let work = std::env::temp_dir().join(format!("so-peers-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("seed")).expect("mkdir");
    write_pods(&work.join("seed/pods.yaml"));
    let addon_only = std::env::args().any(|a| a == "--addon-only");
    let servers = if addon_only {
        String::new()
    } else {
        eprintln!("{}", kopf_version(&programs));
        common::arg_value("--servers").unwrap_or_else(|| "sim,real".to_string())
    };
    let scale: Option<usize> = std::env::var("PEERS_SCALE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > PODS);
    for server in servers.split(',').filter(|s| !s.is_empty()) {
        let mut shared = match server {
            "sim" => None,
            "real" => match Cluster::real(&work) {
                Ok(c) => Some(c),
                Err(e) => {
                    eprintln!("real API server: {e}");
                    continue;
                }
            },
            other => panic!("--servers: unknown server {other} (sim or real)"),
        };
        let medians = run_all(&programs, &work, trials, |w| match &shared {
            Some(c) => Ok(Cow::Borrowed(c)),
            None => Cluster::sim(&kube_sim, w).map(Cow::Owned),
        });
        print_table(server, &medians);
        if let (Some(n), Some(cluster)) = (scale, shared.as_mut()) {
            if let Err(e) = cluster.grow(&work, n) {
                eprintln!("PEERS_SCALE={n}: {e}");
                continue;
            }
            let cluster = &*cluster;
            let at_n = run_all(&programs, &work, trials, |_| Ok(Cow::Borrowed(cluster)));
            print_scale(n, &medians, &at_n);
        }
    }
    if addon_only || std::env::args().any(|a| a == "--addon") {
        run_addon(&programs, &work);
    }
    if std::env::args().any(|a| a == "--keep-work") {
        eprintln!("logs and layouts kept in {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
}

/// The addon part: flant's addon-operator v1.5.0 and ours at each size.
fn run_addon(programs: &Programs, work: &std::path::Path) {
    let path = |name: &str, default: &str| {
        let p = common::arg_value(name).unwrap_or_else(|| default.to_string());
        std::fs::canonicalize(&p).unwrap_or_else(|e| panic!("{name} {p}: {e}"))
    };
    let list = |name: &str, default: &str| -> Vec<usize> {
        let text = common::arg_value(name).unwrap_or_else(|| default.to_string());
        text.split(',')
            .filter_map(|v| v.trim().parse().ok())
            .collect()
    };
    let addon = addon::AddonPrograms {
        ours: std::fs::canonicalize(&programs.operator)
            .unwrap_or_else(|e| panic!("--operator {}: {e}", programs.operator.display())),
        flant: path(
            "--flant-addon",
            ".tools/flant/addon-operator-v1.5.0/addon-operator",
        ),
        helm3: path("--helm3", ".tools/bin/helm3"),
    };
    let trials = list("--addon-trials", "3");
    let sizes: Vec<(usize, usize)> = list("--addon-sizes", "20,100")
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, trials.get(i).or(trials.last()).copied().unwrap_or(1)))
        .collect();
    addon::run(&addon, work, &sizes);
}

/// A fresh cluster per trial (kube-sim) or one shared cluster (the real server).
enum Cow<'a> {
    Borrowed(&'a Cluster),
    Owned(Cluster),
}

impl std::ops::Deref for Cow<'_> {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        match self {
            Cow::Borrowed(c) => c,
            Cow::Owned(c) => c,
        }
    }
}

/// Every contender's trials against the clusters `cluster` gives; the medians.
fn run_all<'a>(
    programs: &Programs,
    work: &std::path::Path,
    trials: usize,
    cluster: impl Fn(&std::path::Path) -> Result<Cow<'a>, String>,
) -> Vec<(Contender, usize, Figures)> {
    let mut medians = Vec::new();
    for who in [
        Contender::Ours,
        Contender::OursAtExec,
        Contender::Flant,
        Contender::Kopf,
        Contender::Floor,
    ]
    .into_iter()
    .filter(|w| *w != Contender::Flant || programs.flant.is_some())
    .filter(|w| picked(*w))
    {
        let runs: Vec<Figures> = (0..trials)
            .filter_map(|n| {
                let result = cluster(work).and_then(|c| scenario::trial(who, programs, &c, work));
                match result {
                    Ok(f) => {
                        eprintln!("{} trial {}: {}", who.label(), n + 1, one_line(&f));
                        Some(f)
                    }
                    Err(e) => {
                        eprintln!("{} trial {} failed: {e}", who.label(), n + 1);
                        None
                    }
                }
            })
            .collect();
        medians.push((who, runs.len(), median_figures(&runs)));
    }
    medians
}

/// Whether `--contenders` (a comma list of labels: ours, at-exec, flant, kopf,
/// floor; all when absent) picks `who`.
fn picked(who: Contender) -> bool {
    let Some(list) = common::arg_value("--contenders") else {
        return true;
    };
    let name = match who {
        Contender::OursAtExec => "at-exec",
        other => other.label(),
    };
    list.split(',').any(|c| c.trim() == name)
}

/// What `kopf --version` in the venv prints (or why it could not run).
fn kopf_version(programs: &Programs) -> String {
    let kopf = programs.venv.join("bin/kopf");
    match std::process::Command::new(&kopf).arg("--version").output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Err(e) => format!("{}: {e} (`make bench-peers` installs kopf)", kopf.display()),
    }
}

fn one_line(f: &Figures) -> String {
    format!(
        "ready {:.0} ms, idle {:.1} MB, peak {:.1} MB, p50/p99 {:.1}/{:.1} ms, burst {:.0} ms ({:.0} runs, {:.2} s CPU), cpu {:.2} s ({:.2} s with hooks)",
        f.ready_ms,
        f.idle_mb,
        f.peak_mb,
        f.p50_ms,
        f.p99_ms,
        f.burst_ms,
        f.burst_runs,
        f.burst_cpu_s,
        f.cpu_s,
        f.cpu_children_s
    )
}

/// The per-figure median over trials (NaN with none).
fn median_figures(runs: &[Figures]) -> Figures {
    let m = |get: fn(&Figures) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(get).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    Figures {
        ready_ms: m(|f| f.ready_ms),
        idle_mb: m(|f| f.idle_mb),
        peak_mb: m(|f| f.peak_mb),
        p50_ms: m(|f| f.p50_ms),
        p99_ms: m(|f| f.p99_ms),
        burst_ms: m(|f| f.burst_ms),
        burst_runs: m(|f| f.burst_runs),
        burst_cpu_s: m(|f| f.burst_cpu_s),
        cpu_s: m(|f| f.cpu_s),
        cpu_children_s: m(|f| f.cpu_children_s),
    }
}

/// The scale table (`PEERS_SCALE`): ready, idle and peak RSS at 10k and at `n`
/// pods, and the memory each watched object adds (slope of idle and peak RSS).
fn print_scale(
    n: usize,
    at_10k: &[(Contender, usize, Figures)],
    at_n: &[(Contender, usize, Figures)],
) {
    println!(
        "scale on the real kube-apiserver, {PODS} and {n} pods; medians\n| contender | ready {PODS} / {n} | idle RSS {PODS} / {n} | peak RSS {PODS} / {n} | bytes per object (idle slope / peak slope) |\n| --- | --- | --- | --- | --- |"
    );
    let added = (n - PODS) as f64;
    for (who, _, small) in at_10k {
        if *who == Contender::OursAtExec {
            continue;
        }
        let Some((_, _, big)) = at_n.iter().find(|(w, _, _)| w == who) else {
            continue;
        };
        println!(
            "| {} | {:.2} / {:.2} s | {:.1} / {:.1} MB | {:.1} / {:.1} MB | {:.0} / {:.0} B |",
            who.label(),
            small.ready_ms / 1e3,
            big.ready_ms / 1e3,
            small.idle_mb,
            big.idle_mb,
            small.peak_mb,
            big.peak_mb,
            (big.idle_mb - small.idle_mb) * 1e6 / added,
            (big.peak_mb - small.peak_mb) * 1e6 / added,
        );
    }
}

type Row = (&'static str, fn(&Figures) -> f64, &'static str);

const ROWS: [Row; 10] = [
    ("time to ready (all 10k seen)", |f| f.ready_ms / 1e3, "s"),
    ("RSS idle after sync", |f| f.idle_mb, "MB"),
    ("peak RSS (VmHWM)", |f| f.peak_mb, "MB"),
    ("event latency p50 (50 ms apart)", |f| f.p50_ms, "ms"),
    ("event latency p99 (50 ms apart)", |f| f.p99_ms, "ms"),
    (
        "burst of 2,000 patches, all seen",
        |f| f.burst_ms / 1e3,
        "s",
    ),
    (
        "burst: hook runs (one per event for kopf/floor)",
        |f| f.burst_runs,
        "",
    ),
    ("burst: CPU with children during it", |f| f.burst_cpu_s, "s"),
    ("process CPU, whole scenario", |f| f.cpu_s, "s"),
    (
        "CPU with waited children (hooks)",
        |f| f.cpu_children_s,
        "s",
    ),
];

fn print_table(server: &str, medians: &[(Contender, usize, Figures)]) {
    let get = |who: Contender| medians.iter().find(|(w, _, _)| *w == who);
    let (Some(ours), Some(kopf), Some(floor)) = (
        get(Contender::Ours),
        get(Contender::Kopf),
        get(Contender::Floor),
    ) else {
        return;
    };
    println!(
        "peers on {}, {PODS} pods in 10 namespaces; median of {}/{}/{} trials (ours/kopf/floor)",
        if server == "real" {
            "the real kube-apiserver"
        } else {
            "kube-sim"
        },
        ours.1,
        kopf.1,
        floor.1
    );
    println!(
        "| figure | ours | kopf | ours/kopf | floor (plain watch loop) |\n| --- | --- | --- | --- | --- |"
    );
    for (name, get, unit) in ROWS {
        let (o, k, f) = (get(&ours.2), get(&kopf.2), get(&floor.2));
        println!(
            "| {name} | {o:.2} {unit} | {k:.2} {unit} | {:.2} | {f:.2} {unit} |",
            o / k
        );
    }
    // flant's shell-operator running the same `#!/bin/sh` hook (issue 25 targets:
    // idle RSS <= 0.25x, ready <= 0.5x, p50 <= 1x).
    if let Some(flant) = get(Contender::Flant) {
        println!(
            "\n| figure | ours | flant's shell-operator ({} trials) | ours/flant |\n| --- | --- | --- | --- |",
            flant.1
        );
        for (name, get, unit) in ROWS {
            let (o, f) = (get(&ours.2), get(&flant.2));
            println!("| {name} | {o:.2} {unit} | {f:.2} {unit} | {:.2} |", o / f);
        }
        println!();
    }
    // The same latency with the hook's start time taken as it starts (stamp_exec.c),
    // not after its shell and `date` have started.
    if let Some(at_exec) = get(Contender::OursAtExec) {
        for (name, get) in [("p50", ROWS[3].1), ("p99", ROWS[4].1)] {
            let (o, k) = (get(&at_exec.2), get(&kopf.2));
            println!(
                "| event latency {name}, hook start stamped at exec ({} trials) | {o:.2} ms | {k:.2} ms | {:.2} | |",
                at_exec.1,
                o / k
            );
        }
    }
}
