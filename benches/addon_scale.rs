//! `make bench-addon` (issue 28): addon-operator at N = 20 and N = 100 modules, each
//! a chart of a ConfigMap, a Service and a Deployment with one `beforeHelm` hook,
//! modules each in its own order and all in one order, against a kube-sim process,
//! with helm 4 and helm 3; bare helm is timed in the same run with the same charts
//! and values. Printed per (helm, N, orders), each a ratio with its target:
//!
//! - cold converge (start → `/ready`, N releases deployed) / the sum of the N bare
//!   `helm upgrade --install` run one after the other;
//! - the same N bare upgrades run as many at once as the operator runs modules of
//!   one order (the CPU count, at least 2) / that sum: what helm alone reaches here;
//! - the cold converge / those parallel bare upgrades;
//!
//!   these three are medians of three trials, each trial timing the bare upgrades and
//!   then the operator, each in a namespace of its own (a single sample of a second
//!   varies by a tenth on a 2-CPU machine);
//! - restart with nothing changed (start → `/ready`; 0 new revisions asserted) / that sum;
//! - a `global` change no template reads (ConfigMap write → the converge's end, 0
//!   revisions asserted) / that sum;
//! - one module's value (ConfigMap write → its next revision stored, the median of
//!   three changes) / one bare `helm upgrade` of that module with the same new value;
//! - one module's value no template reads (ConfigMap write → that module's run done,
//!   no revision: the deduplicating upgrade stopped by the post-renderer) / one bare
//!   `helm upgrade` (medians of three);
//! - VmRSS idle after the restart, idle again after eight `global` changes in a row
//!   (N = 100), and the peak VmHWM: of the cold converge's process, of the restart,
//!   and of the changes after it (the restarted process's peak reset before them).
//!
//! Usage: `cargo bench --bench addon_scale -- --operator <binary> --kube-sim <binary>
//! [--helm <helm 4>] [--helm3 <helm 3>] [--sizes 20,100]` (defaults:
//! target/release/shell-operator, target/release/kube-sim, .tools/bin/helm,
//! .tools/bin/helm3, 20,100).

mod common;

use common::addon::{module_name, proc_kb, write_layout};
use common::pods::KubeSim;
use serde_json::json;
use shell_operator::kube::Client;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// Longest wait for a converge or a revision.
const TIMEOUT: Duration = Duration::from_secs(600);
/// `global` changes in a row for the memory figure.
const GLOBAL_CHANGES: usize = 8;

struct Setup {
    operator: PathBuf,
    sim: KubeSim,
    client: Client,
    work: PathBuf,
}

/// One configuration: a helm, a module count, one order or each its own.
struct Case<'a> {
    helm: &'a Path,
    label: &'a str,
    n: usize,
    one_order: bool,
}

fn main() {
    let arg = |name: &str, default: &str| {
        PathBuf::from(common::arg_value(name).unwrap_or_else(|| default.to_string()))
    };
    let operator = arg("--operator", "target/release/shell-operator");
    let kube_sim = arg("--kube-sim", "target/release/kube-sim");
    let helms = [
        ("helm 4", arg("--helm", ".tools/bin/helm")),
        ("helm 3", arg("--helm3", ".tools/bin/helm3")),
    ];
    let sizes: Vec<usize> = common::arg_value("--sizes")
        .unwrap_or_else(|| "20,100".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let work = std::env::temp_dir().join(format!("so-addon-scale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    for d in ["seed", "home"] {
        std::fs::create_dir_all(work.join(d)).expect("work dir");
    }
    let work = std::fs::canonicalize(&work).expect("work dir");
    let sim = KubeSim::start(&kube_sim, &work);
    let client = common::pods::client(&sim);
    let setup = Setup {
        operator,
        sim,
        client,
        work: work.clone(),
    };
    for (label, helm) in &helms {
        let helm = std::fs::canonicalize(helm)
            .unwrap_or_else(|e| panic!("{label} {}: {e}", helm.display()));
        run(&setup, &helm, &["version", "--short"]);
        for &n in &sizes {
            for one_order in [false, true] {
                let case = Case {
                    helm: &helm,
                    label,
                    n,
                    one_order,
                };
                measure(&setup, &case);
            }
        }
    }
    drop(setup);
    let _ = std::fs::remove_dir_all(&work);
}

/// Every figure of one case, printed.
fn measure(s: &Setup, c: &Case) {
    let orders = if c.one_order {
        "one order"
    } else {
        "own orders"
    };
    let tag = format!(
        "{}-{}-{}",
        c.label.replace(' ', ""),
        c.n,
        if c.one_order { "one" } else { "own" }
    );
    let layout = s.work.join(format!("layout-{tag}"));
    write_layout(&layout, c.n, c.one_order);

    // Cold converge, COLD_TRIALS times: bare helm's N upgrades in a row, the same N
    // as many at once as the operator runs modules of one order (the CPU count, at
    // least 2: what helm alone makes of this machine's CPUs), and the operator's cold
    // converge, each in a namespace of its own. The figures are the medians.
    let mut trials = Vec::new();
    let mut cold_peak = 0;
    for t in 1..=COLD_TRIALS {
        let bare = bare_upgrades(s, c, &layout, &format!("bare-{tag}-{t}"), 1);
        let wide = bare_upgrades(
            s,
            c,
            &layout,
            &format!("wide-{tag}-{t}"),
            module_run_width(),
        );
        let ns = format!("op-{tag}-{t}");
        common::addon::create_namespace(&s.client, &ns);
        let (cold, mut child, _) = start(s, c, &layout, &ns);
        assert_eq!(
            common::addon::revisions(&s.client, &ns),
            c.n,
            "cold converge releases"
        );
        cold_peak = cold_peak.max(proc_kb(child.id(), "VmHWM:"));
        stop(&mut child);
        trials.push(Trial { bare, wide, cold });
    }
    let ratios = |part: fn(&Trial) -> Duration| {
        median_f64(
            trials
                .iter()
                .map(|t| secs(part(t)) / secs(t.bare))
                .collect(),
        )
    };
    let (cold_ratio, wide_ratio) = (ratios(|t| t.cold), ratios(|t| t.wide));
    let bare = median(trials.iter().map(|t| t.bare).collect());
    let cold = median(trials.iter().map(|t| t.cold).collect());
    let wide = median(trials.iter().map(|t| t.wide).collect());
    let ours_to_wide = median_f64(trials.iter().map(|t| secs(t.cold) / secs(t.wide)).collect());

    // One value, three times: the median (bare, in the last trial's namespace).
    let bare_ns = format!("bare-{tag}-{COLD_TRIALS}");
    let bare_one = median(
        (1..=ONE_VALUE_ROUNDS)
            .map(|k| bare_upgrade(s, c, &layout, &bare_ns, 1, &format!("changed-{k}")))
            .collect(),
    );

    // The operator again on the last trial's releases: a restart with nothing changed.
    let ns = format!("op-{tag}-{COLD_TRIALS}");
    let (restart, mut child, port) = start(s, c, &layout, &ns);
    assert_eq!(
        common::addon::revisions(&s.client, &ns),
        c.n,
        "a restart made revisions"
    );
    let restart_peak = proc_kb(child.id(), "VmHWM:");
    std::thread::sleep(Duration::from_secs(2));
    let idle = proc_kb(child.id(), "VmRSS:");
    // From here the peak is that of the changes alone.
    reset_peak(child.id());

    // A `global` value no template reads: a full converge, no revision.
    let global = global_change(s, &ns, port, 1);
    assert_eq!(
        common::addon::revisions(&s.client, &ns),
        c.n,
        "a global change made revisions"
    );

    // One module's value: its next revision, three times (the median). Polled through
    // that release's Secrets only (listing all N releases every 10 ms would load the
    // machine the operator and helm share).
    let (_, first) = module_name(1, c.one_order);
    let selector = format!("owner=helm,name={first}");
    let mut ones = Vec::new();
    for k in 1..=ONE_VALUE_ROUNDS {
        let started = Instant::now();
        let config = format!("message: changed-{k}\n");
        common::addon::set_config(&s.client, &ns, &first, &config);
        poll(
            || common::addon::helm_secrets(&s.client, &ns, &selector) == k + 1,
            "the module's new revision",
        );
        ones.push(started.elapsed());
    }
    let one = median(ones);

    // One module's value no template reads (seed 004, "Releases deduplication"):
    // ConfigMap write → that module's run done, three times; no revision.
    let mut unused = Vec::new();
    for k in 1..=ONE_VALUE_ROUNDS {
        let runs = module_runs(port, &first);
        let started = Instant::now();
        let config = format!("message: changed-{ONE_VALUE_ROUNDS}\nunusedKnob: {k}\n");
        common::addon::set_config(&s.client, &ns, &first, &config);
        poll(|| module_runs(port, &first) > runs, "the module's run");
        unused.push(started.elapsed());
    }
    let unused = median(unused);
    assert_eq!(
        common::addon::helm_secrets(&s.client, &ns, &selector),
        ONE_VALUE_ROUNDS + 1,
        "a value no template reads made a revision"
    );

    // Memory after repeated converges (N = 100).
    let after = if c.n >= 100 {
        for k in 2..=GLOBAL_CHANGES {
            global_change(s, &ns, port, k);
        }
        std::thread::sleep(Duration::from_secs(2));
        Some(proc_kb(child.id(), "VmRSS:"))
    } else {
        None
    };
    let changes_peak = proc_kb(child.id(), "VmHWM:");
    let peak = cold_peak.max(restart_peak).max(changes_peak);
    stop(&mut child);

    let ratio = |d: Duration| secs(d) / secs(bare);
    println!(
        "{} · N={} · {orders}: bare sequential helm upgrade --install {:.2} s ({:.0} ms each), one bare upgrade {:.3} s",
        c.label,
        c.n,
        secs(bare),
        secs(bare) * 1000.0 / c.n as f64,
        secs(bare_one)
    );
    println!(
        "  cold converge / bare sequential             : {:>5.2}  ({:.2} s; target ≤ 0.6 with one order; median of {COLD_TRIALS})",
        cold_ratio,
        secs(cold)
    );
    println!(
        "  bare helm {} at a time / bare sequential   : {:>5.2}  ({:.2} s; helm alone on these CPUs; median of {COLD_TRIALS})",
        module_run_width(),
        wide_ratio,
        secs(wide)
    );
    println!(
        "  cold converge / bare helm {} at a time      : {:>5.2}  (the operator against helm alone at its parallelism)",
        module_run_width(),
        ours_to_wide
    );
    println!(
        "  restart, nothing changed / bare sequential  : {:>5.2}  ({:.2} s; 0 new revisions; target ≤ 0.2)",
        ratio(restart),
        secs(restart)
    );
    println!(
        "  global change no template uses / bare seq.  : {:>5.2}  ({:.2} s; 0 revisions; target ≤ 0.3)",
        ratio(global),
        secs(global)
    );
    println!(
        "  one module's value / one bare helm upgrade  : {:>5.2}  ({:.3} s; target ≤ 1.3)",
        secs(one) / secs(bare_one),
        secs(one)
    );
    println!(
        "  one value no template reads / one bare upgr.: {:>5.2}  ({:.3} s; 0 revisions; target ≤ 1.0)",
        secs(unused) / secs(bare_one),
        secs(unused)
    );
    let mib = |kb: u64| kb as f64 / 1024.0;
    match after {
        Some(after) => println!(
            "  VmRSS idle {:.1} MiB, after {GLOBAL_CHANGES} global changes {:.1} MiB ({:.2}× idle; target ≤ 2×), peak VmHWM {:.1} MiB (target ≤ 20 MiB)",
            mib(idle),
            mib(after),
            after as f64 / idle.max(1) as f64,
            mib(peak)
        ),
        None => println!(
            "  VmRSS idle {:.1} MiB, peak VmHWM {:.1} MiB",
            mib(idle),
            mib(peak)
        ),
    }
    println!(
        "  peak VmHWM by phase: cold converge {:.1}, restart {:.1}, the changes after it {:.1} MiB",
        mib(cold_peak),
        mib(restart_peak),
        mib(changes_peak)
    );
}

/// Resets the process's VmHWM to its current VmRSS (`/proc/<pid>/clear_refs`, 5).
fn reset_peak(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// How many times the cold converge and the bare upgrades it is compared with run.
const COLD_TRIALS: usize = 3;

/// How many modules of one order the operator runs at once by default: the CPU
/// count, at least 2.
fn module_run_width() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// One trial of the cold converge and the bare upgrades it is compared with.
struct Trial {
    bare: Duration,
    wide: Duration,
    cold: Duration,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn median_f64(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The N bare `helm upgrade --install` in a new namespace `ns`, `width` at a time;
/// the wall time of all of them.
fn bare_upgrades(s: &Setup, c: &Case, layout: &Path, ns: &str, width: usize) -> Duration {
    common::addon::create_namespace(&s.client, ns);
    let next = std::sync::atomic::AtomicUsize::new(1);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..width {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i > c.n {
                        break;
                    }
                    bare_upgrade(s, c, layout, ns, i, "hello");
                }
            });
        }
    });
    let took = started.elapsed();
    assert_eq!(
        common::addon::revisions(&s.client, ns),
        c.n,
        "bare releases in {ns}"
    );
    took
}

/// One bare `helm upgrade --install` of module `i` with the values the operator gives it.
fn bare_upgrade(s: &Setup, c: &Case, layout: &Path, ns: &str, i: usize, message: &str) -> Duration {
    let (dir, name) = module_name(i, c.one_order);
    let enabled: Vec<String> = (1..=c.n).map(|i| module_name(i, c.one_order).1).collect();
    let mut doc = json!({"global": {"cluster": "bench", "enabledModules": enabled}});
    doc[&name] = json!({"message": message});
    let values = layout.join(format!("bare-{name}.json"));
    std::fs::write(&values, doc.to_string()).expect("values file");
    let chart = layout.join("modules").join(&dir);
    let kubeconfig = s.sim.kubeconfig.to_str().expect("UTF-8 path");
    let args = [
        "upgrade",
        "--install",
        &name,
        chart.to_str().expect("UTF-8 path"),
        "--values",
        values.to_str().expect("UTF-8 path"),
        "--namespace",
        ns,
        "--kubeconfig",
        kubeconfig,
    ];
    run(s, c.helm, &args)
}

/// How many times one value is changed (bare and the operator) for its median.
const ONE_VALUE_ROUNDS: usize = 3;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Runs helm; its wall time. Panics on a failure.
fn run(s: &Setup, helm: &Path, args: &[&str]) -> Duration {
    common::addon::timed_helm(helm, &s.work.join("home"), args, true)
}

/// Writes the `k`-th unused `global` value; the time until that converge ends.
fn global_change(s: &Setup, ns: &str, port: u16, k: usize) -> Duration {
    let before = converges_done(port);
    let started = Instant::now();
    common::addon::set_config(&s.client, ns, "global", &format!("unusedKnob: {k}\n"));
    poll(
        || converges_done(port) > before,
        "the converge after a global change",
    );
    started.elapsed()
}

/// How many runs of `module` ended (`addon_operator_module_run_seconds_count`).
fn module_runs(port: u16, module: &str) -> f64 {
    let body = common::http_get_body(port, "/metrics");
    let label = format!("module=\"{module}\"");
    body.lines()
        .filter(|l| l.starts_with("addon_operator_module_run_seconds_count{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The sum of `addon_operator_convergence_seconds` (grows when a converge ends).
fn converges_done(port: u16) -> f64 {
    let body = common::http_get_body(port, "/metrics");
    body.lines()
        .filter(|l| l.starts_with("addon_operator_convergence_seconds{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Starts the operator in `ns`; the time to `/ready`, the process and its port.
fn start(s: &Setup, c: &Case, layout: &Path, ns: &str) -> (Duration, Child, u16) {
    let home = s.work.join("home");
    let start = common::addon::AddonStart {
        operator: &s.operator,
        kubeconfig: &s.sim.kubeconfig,
        helm: c.helm,
        home: &home,
    };
    let ready = start.ready(ns, layout, &[], TIMEOUT);
    (ready.took, ready.child, ready.port)
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Polls `cond` every 10 ms until it holds; panics after [`TIMEOUT`].
fn poll(cond: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "not in {TIMEOUT:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
