//! `make bench` (addon-operator, issue 10): figures of the real binary started as
//! `shell-operator addon-operator start` against a kube-sim process, with the real
//! helm 4, each printed with its target.
//!
//! 1. Converge of 20 modules with small charts (a Chart.yaml and one ConfigMap
//!    template reading `.Values`, enabled in `modules/values.yaml`, no hooks): wall
//!    time from the operator's start to `/ready` (200 after the first converge; all
//!    20 release Secrets are then checked to be `deployed`), over the sum of the same
//!    20 `helm upgrade --install <name> <chart> --namespace ns --values <file>` run
//!    one after the other into a fresh namespace. Rounds alternate baseline and
//!    operator; each round uses fresh namespaces; the median ratio is the figure.
//!    Target ≤ 1.3. On a fresh namespace the operator reads each release from helm's
//!    storage Secrets (no helm process) and runs one `helm upgrade --install` per
//!    module, plus `helm version` once: a second ratio puts the
//!    operator over exactly those helm commands run directly, which shows what the
//!    operator adds beyond the helm processes it starts.
//! 2. Idle RSS (VmRSS of `/proc/<pid>/status`) 2 s after `/ready`, with 20 modules
//!    (each with a trivial beforeHelm hook) and 10 global shell hooks bound to
//!    onStartup, beforeAll, afterAll and a schedule. Target ≤ 12 MB.
//! 3. Size of the `--operator` binary (the static one from `make static`). Target ≤ 8 MB.
//!
//! Usage: `cargo bench --bench addon -- --operator <binary> --kube-sim <binary>
//! [--helm <helm 4>] [--rounds N]` (defaults: target/release/shell-operator,
//! target/release/kube-sim, .tools/bin/helm, 5 rounds).

mod common;

use common::pods::KubeSim;
use serde_json::json;
use shell_operator::kube::{Client, ListParams};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const MODULES: usize = 20;
const GLOBAL_HOOKS: usize = 10;
/// Longest wait for the first converge.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// What a measurement samples from the ready operator (its process and port).
type Sample<'a, T> = &'a dyn Fn(&Child, u16) -> T;

/// Paths the bench runs with.
struct Setup {
    operator: PathBuf,
    helm: PathBuf,
    sim: KubeSim,
    client: Client,
    work: PathBuf,
}

fn main() {
    let arg = |name: &str| common::arg_value(name).map(PathBuf::from);
    let operator =
        arg("--operator").unwrap_or_else(|| PathBuf::from("target/release/shell-operator"));
    let kube_sim = arg("--kube-sim").unwrap_or_else(|| PathBuf::from("target/release/kube-sim"));
    let helm = arg("--helm").unwrap_or_else(|| PathBuf::from(".tools/bin/helm"));
    let rounds: usize = common::arg_value("--rounds")
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
        .max(1);
    let work = std::env::temp_dir().join(format!("so-addon-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    for d in ["seed", "home"] {
        std::fs::create_dir_all(work.join(d)).expect("work dir");
    }
    let work = std::fs::canonicalize(&work).expect("work dir");
    let helm = std::fs::canonicalize(&helm).unwrap_or_else(|e| {
        panic!(
            "helm {}: {e} (scripts/install-k8s-clients.sh)",
            helm.display()
        )
    });
    let sim = KubeSim::start(&kube_sim, &work);
    let client = common::pods::client(&sim);
    let setup = Setup {
        operator,
        helm,
        sim,
        client,
        work,
    };
    warm_up(&setup);

    converge_ratio(&setup, rounds);
    idle_rss(&setup);
    monitor_cost(&setup);
    binary_size(&setup.operator);
    let work = setup.work.clone();
    drop(setup);
    let _ = std::fs::remove_dir_all(&work);
}

/// One `helm version` so neither side pays for loading helm's 60 MB binary first.
fn warm_up(s: &Setup) {
    let ok = Command::new(&s.helm)
        .args(["version", "--short"])
        .env("HOME", s.work.join("home"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    assert!(ok, "{} version failed", s.helm.display());
}

/// Measurement 1: rounds of (baseline, operator), printed with the median ratio.
fn converge_ratio(s: &Setup, rounds: usize) {
    let layout = s.work.join("plain");
    write_layout(&layout, false);
    println!("converge of {MODULES} modules (small charts, no hooks), helm 4, kube-sim:");
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let direct = direct_helm(s, &layout, &format!("direct-{round}"), false);
        let (op, ()) = run_operator(s, &layout, &format!("addons-{round}"), None, &[]);
        let same = direct_helm(s, &layout, &format!("same-{round}"), true);
        let ratio = op.as_secs_f64() / direct.as_secs_f64();
        println!(
            "  round {round}: operator start → ready {:>5.2} s; {MODULES} × helm upgrade --install {:>5.2} s ({:.0} ms each): ratio {ratio:.2}",
            op.as_secs_f64(),
            direct.as_secs_f64(),
            direct.as_secs_f64() * 1000.0 / MODULES as f64
        );
        println!(
            "           the operator's own helm commands run directly (version, {MODULES} × upgrade) {:>5.2} s: operator/those {:.2}",
            same.as_secs_f64(),
            op.as_secs_f64() / same.as_secs_f64()
        );
        ratios.push((ratio, op.as_secs_f64() / same.as_secs_f64()));
    }
    let median = |f: fn(&(f64, f64)) -> f64| {
        let mut v: Vec<f64> = ratios.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "  median ratio operator / {MODULES} × helm upgrade --install : {:>5.2}  (target ≤ 1.3)",
        median(|r| r.0)
    );
    println!(
        "  median ratio operator / the same helm commands run directly: {:>5.2}",
        median(|r| r.1)
    );
}

/// Measurement 2: VmRSS 2 s after the first converge, with module and global hooks.
fn idle_rss(s: &Setup) {
    let layout = s.work.join("hooked");
    write_layout(&layout, true);
    let sample = |child: &Child, _port: u16| {
        std::thread::sleep(Duration::from_secs(2));
        (
            common::addon::proc_kb(child.id(), "VmRSS:"),
            common::addon::proc_kb(child.id(), "VmHWM:"),
        )
    };
    let (took, (rss, hwm)) = run_operator(s, &layout, "idle", Some(&sample), &[]);
    println!(
        "idle, {MODULES} modules (beforeHelm hook each) + {GLOBAL_HOOKS} global hooks (onStartup, beforeAll, afterAll, schedule):"
    );
    println!(
        "  start → ready              : {:>6.2} s",
        took.as_secs_f64()
    );
    println!(
        "  VmRSS 2 s after ready      : {:>6.2} MiB ({rss} kB)  (target ≤ 12 MB); peak VmHWM {:.2} MiB",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
}

/// Objects per module chart in the resource monitor measurement.
const OBJECTS: usize = 20;
/// Check periods the resource monitor measurement averages over.
const PERIODS: u64 = 10;

/// Measurement 4: the resource monitor on 20 modules × 20 objects with a 1 s period:
/// API requests (its client's `kubernetes_client_request_result_total`) and CPU
/// (utime + stime of `/proc/<pid>/stat`) per check, and VmRSS while it runs.
fn monitor_cost(s: &Setup) {
    let layout = s.work.join("monitored");
    write_layout(&layout, false);
    for i in 1..=MODULES {
        let (dir, name) = module_name(i);
        let cms = format!(
            "{{{{- range $i := until {OBJECTS} }}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-{{{{ $i }}}}\ndata:\n  message: {{{{ $.Values.{name}.message | quote }}}}\n{{{{- end }}}}\n"
        );
        std::fs::write(
            layout.join("modules").join(dir).join("templates/cm.yaml"),
            cms,
        )
        .expect("template");
    }
    let sample = |child: &Child, port: u16| {
        // The first checks read each release's manifest once; measure after them.
        std::thread::sleep(Duration::from_secs(3));
        let before = (monitor_requests(port), cpu_ticks(child.id()));
        std::thread::sleep(Duration::from_secs(PERIODS));
        let after = (monitor_requests(port), cpu_ticks(child.id()));
        let rss = common::addon::proc_kb(child.id(), "VmRSS:");
        (after.0 - before.0, after.1 - before.1, rss)
    };
    let env = [("ADDON_OPERATOR_RESOURCES_CHECK_PERIOD", "1s")];
    let (_, (requests, ticks, rss)) = run_operator(s, &layout, "monitored", Some(&sample), &env);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    println!(
        "resource monitor, {MODULES} modules × {OBJECTS} ConfigMaps, check every 1 s, {PERIODS} checks:"
    );
    println!(
        "  API requests per check     : {:>6.1}  (one list of release Secrets + one ConfigMap list; target: one list per kind and namespace, not {} GETs)",
        requests / PERIODS as f64,
        MODULES * OBJECTS
    );
    println!(
        "  CPU per check              : {:>6.1} ms",
        ticks as f64 / hz * 1000.0 / PERIODS as f64
    );
    println!(
        "  VmRSS with the monitor     : {:>6.2} MiB ({rss} kB)  (target ≤ 12 MB)",
        rss as f64 / 1024.0
    );
}

/// Requests the resource monitor's client made so far (every verb and code).
fn monitor_requests(port: u16) -> f64 {
    let body = common::http_get_body(port, "/metrics");
    body.lines()
        .filter(|l| {
            l.starts_with("addon_operator_kubernetes_client_request_result_total{")
                && l.contains("component=\"helm_monitor\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let get = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(11) + get(12)
}

/// Measurement 3: the binary's size on disk.
fn binary_size(bin: &Path) {
    match std::fs::metadata(bin) {
        Ok(m) => println!(
            "binary size ({})  : {:.2} MB ({} bytes)  (target ≤ 8 MB)",
            bin.display(),
            m.len() as f64 / 1e6,
            m.len()
        ),
        Err(e) => println!("binary size: {}: {e}", bin.display()),
    }
}

/// Module directory name and release name of module `i` (1-based).
fn module_name(i: usize) -> (String, String) {
    (format!("{i:03}-m{i:02}"), format!("m{i:02}"))
}

/// Writes `root/modules` (20 modules, enabled in `values.yaml`) and
/// `root/global-hooks`; with `hooks`, a beforeHelm hook per module and
/// `GLOBAL_HOOKS` global hooks.
fn write_layout(root: &Path, hooks: bool) {
    let _ = std::fs::remove_dir_all(root);
    let modules = root.join("modules");
    std::fs::create_dir_all(root.join("global-hooks/hooks")).expect("global hooks dir");
    let mut values = String::from("global:\n  cluster: bench\n");
    for i in 1..=MODULES {
        let (dir, name) = module_name(i);
        values.push_str(&format!(
            "{name}Enabled: true\n{name}:\n  message: hello-{i}\n"
        ));
        let m = modules.join(&dir);
        std::fs::create_dir_all(m.join("templates")).expect("module dir");
        std::fs::write(
            m.join("Chart.yaml"),
            format!("apiVersion: v2\nname: {name}\nversion: 0.0.1\n"),
        )
        .expect("Chart.yaml");
        std::fs::write(m.join("templates/cm.yaml"), template(&name)).expect("template");
        if hooks {
            common::write_exec(
                &m.join("hooks/before-helm.sh"),
                "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"configVersion\":\"v1\",\"beforeHelm\":1}'; exit 0; fi\nexit 0\n",
            );
        }
    }
    std::fs::write(modules.join("values.yaml"), values).expect("values.yaml");
    if hooks {
        for j in 1..=GLOBAL_HOOKS {
            common::write_exec(
                &root.join(format!("global-hooks/hooks/{j:03}-g{j}.sh")),
                "#!/bin/sh\nif [ \"$1\" = --config ]; then cat <<'EOF'\n{\"configVersion\":\"v1\",\"onStartup\":1,\"beforeAll\":1,\"afterAll\":1,\"schedule\":[{\"name\":\"tick\",\"crontab\":\"*/30 * * * *\"}]}\nEOF\nexit 0; fi\nexit 0\n",
            );
        }
    }
}

/// One ConfigMap from the module's values and the global enabled modules.
fn template(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  message: {{{{ .Values.{name}.message | quote }}}}\n  enabledModules: {{{{ .Values.global.enabledModules | join \",\" | quote }}}}\n"
    )
}

/// Creates namespace `ns` in kube-sim.
fn create_namespace(s: &Setup, ns: &str) {
    let resource = s
        .client
        .resolve("v1", "Namespace", "bench")
        .expect("resolve");
    s.client
        .api(&resource, None)
        .create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .unwrap_or_else(|e| panic!("create namespace {ns}: {e}"));
}

/// Sum of the wall times of the 20 `helm upgrade --install`, one after the other,
/// into the fresh namespace `ns`, each with the values the operator would give.
/// With `as_operator`, also the other helm commands the operator runs on a fresh
/// namespace (`version` once).
fn direct_helm(s: &Setup, layout: &Path, ns: &str, as_operator: bool) -> Duration {
    create_namespace(s, ns);
    let kubeconfig = s.sim.kubeconfig.to_str().expect("UTF-8 kubeconfig path");
    let mut total = Duration::ZERO;
    if as_operator {
        total += helm(s, &["version", "--short"], true);
    }
    for i in 1..=MODULES {
        let (dir, name) = module_name(i);
        let values = write_direct_values(layout, &name, i);
        let values = values.to_str().expect("UTF-8 values path");
        let chart = layout.join("modules").join(&dir);
        let chart = chart.to_str().expect("UTF-8 chart path");
        let common = ["--namespace", ns, "--kubeconfig", kubeconfig];
        let upgrade = ["upgrade", "--install", &name, chart, "--values", values];
        total += helm(s, &[&upgrade[..], &common].concat(), true);
    }
    assert_eq!(deployed_releases(s, ns), MODULES, "direct helm releases");
    total
}

/// The values file the operator would pass to module `i`'s chart.
fn write_direct_values(layout: &Path, name: &str, i: usize) -> PathBuf {
    let enabled: Vec<String> = (1..=MODULES).map(|i| module_name(i).1).collect();
    let path = layout.join(format!("direct-{name}.json"));
    let mut doc = json!({"global": {"cluster": "bench", "enabledModules": enabled}});
    doc[name] = json!({"message": format!("hello-{i}")});
    std::fs::write(&path, doc.to_string()).expect("values file");
    path
}

/// Runs helm with `args`; its wall time. Fails unless it exits as `must_succeed` says.
fn helm(s: &Setup, args: &[&str], must_succeed: bool) -> Duration {
    common::addon::timed_helm(&s.helm, &s.work.join("home"), args, must_succeed)
}

/// Number of helm release Secrets in `ns` whose status label is `deployed`.
fn deployed_releases(s: &Setup, ns: &str) -> usize {
    let resource = s.client.resolve("v1", "Secret", "bench").expect("resolve");
    let params = ListParams {
        label_selector: "owner=helm".into(),
        ..ListParams::default()
    };
    let list = s
        .client
        .api(&resource, Some(ns))
        .list_all(&params)
        .unwrap_or_else(|e| panic!("list secrets in {ns}: {e}"));
    list.items
        .iter()
        .filter(|secret| secret["metadata"]["labels"]["status"] == "deployed")
        .count()
}

/// Starts addon-operator on `layout` in the fresh namespace `ns`; returns the time
/// from spawn to `/ready` (every release then checked deployed) and what `sample`
/// measured of the ready process (then it is stopped).
fn run_operator<T: Default>(
    s: &Setup,
    layout: &Path,
    ns: &str,
    sample: Option<Sample<'_, T>>,
    env: &[(&str, &str)],
) -> (Duration, T) {
    create_namespace(s, ns);
    let home = s.work.join("home");
    let start = common::addon::AddonStart {
        operator: &s.operator,
        kubeconfig: &s.sim.kubeconfig,
        helm: &s.helm,
        home: &home,
    };
    let mut ready = start.ready(ns, layout, env, READY_TIMEOUT);
    let deployed = deployed_releases(s, ns);
    let measured = sample
        .map(|f| f(&ready.child, ready.port))
        .unwrap_or_default();
    let _ = ready.child.kill();
    let _ = ready.child.wait();
    assert_eq!(
        deployed,
        MODULES,
        "releases deployed by the operator in {ns}; log {}",
        ready.run.join("operator.log").display()
    );
    (ready.took, measured)
}
