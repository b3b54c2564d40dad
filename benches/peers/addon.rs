//! The addon part of `make bench-peers` (issue 25 item 5): flant's addon-operator
//! v1.5.0 beside ours on one real kube-apiserver + etcd (tests/control-plane), with
//! N modules each in its own order (v1.5.0 runs modules one at a time), both running
//! helm 3.17 as a binary (`HELM_BIN_PATH`; v1.5.0 is a helm-3 era release), each
//! trial in a namespace of its own. The module set is benches/common/addon.rs's
//! (a ConfigMap, a Service and a Deployment plus one `beforeHelm` hook per module),
//! with one global `afterAll` hook that appends a line to `$BENCH_MARKER`.
//!
//! "Converged" is the same test for both: the `afterAll` hook ran in this process's
//! life and N releases are stored as `deployed` (helm's Secret labels). Per trial:
//! cold converge (start → converged), idle VmRSS 3 s later; stop (SIGTERM), start
//! again with nothing changed (start → converged) and, 3 s later, the helm revisions
//! that appeared; one module's value changed in the ConfigMap → its next revision
//! stored as `deployed`. Peak RSS is the larger VmHWM of the two processes; CPU is
//! utime+stime from /proc/<pid>/stat summed over both processes: the operator's own,
//! and separately cutime+cstime, the children it has reaped (helm and the hooks).

use crate::common::addon::{
    create_namespace, helm_secrets, module_name, proc_kb, revisions, set_config, write_layout,
};
use crate::common::write_exec;
use crate::scenario::cpu_seconds;
use control_plane::ControlPlane;
use shell_operator::kube::{Client, KubeSettings};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for a converge or a revision.
const TIMEOUT: Duration = Duration::from_secs(900);
/// Quiet time after a converge before memory and revisions are read.
const SETTLE: Duration = Duration::from_secs(3);

/// Which addon-operator a trial runs.
#[derive(Clone, Copy, PartialEq)]
enum Who {
    Ours,
    Flant,
}

impl Who {
    fn label(self) -> &'static str {
        match self {
            Who::Ours => "ours",
            Who::Flant => "flant",
        }
    }
}

/// Where the programs are.
pub struct AddonPrograms {
    /// Our binary (run as `<bin> addon-operator start`).
    pub ours: PathBuf,
    /// flant's addon-operator v1.5.0 (`scripts/install-flant.sh addon-operator`).
    pub flant: PathBuf,
    /// helm 3 (`.tools/bin/helm3`), for both.
    pub helm3: PathBuf,
}

/// One trial's figures (seconds, MB, a count).
#[derive(Clone, Copy, Default)]
struct Figures {
    cold_s: f64,
    restart_s: f64,
    new_revisions: f64,
    upgrade_s: f64,
    idle_mb: f64,
    peak_mb: f64,
    cpu_s: f64,
    cpu_children_s: f64,
}

/// The real API server and a client for it.
struct Server {
    cp: ControlPlane,
    client: Client,
}

/// Runs every size as `(n, trials)` and prints one table per size.
pub fn run(programs: &AddonPrograms, work: &Path, sizes: &[(usize, usize)]) {
    let server = match start_server(work) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("addon part: real API server: {e}");
            return;
        }
    };
    for &(n, trials) in sizes {
        let layout = work.join(format!("addon-layout-{n}"));
        write_layout(&layout, n, false);
        write_exec(
            &layout.join("global-hooks/after-all.sh"),
            "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"configVersion\":\"v1\",\"afterAll\":10}'; exit 0; fi\necho done >> \"$BENCH_MARKER\"\n",
        );
        let mut runs: Vec<(Who, Figures)> = Vec::new();
        for k in 1..=trials {
            for who in [Who::Ours, Who::Flant] {
                match trial(&server, programs, who, &layout, n, k) {
                    Ok(f) => {
                        eprintln!("addon N={n} {} trial {k}: {}", who.label(), one_line(&f));
                        runs.push((who, f));
                    }
                    Err(e) => eprintln!("addon N={n} {} trial {k} failed: {e}", who.label()),
                }
            }
        }
        print_table(n, &runs);
    }
}

fn start_server(work: &Path) -> Result<Server, String> {
    let cp = ControlPlane::start(&work.join("control-plane-addon"))?;
    let settings = KubeSettings {
        kubeconfig: cp.admin_kubeconfig().display().to_string(),
        qps: -1.0,
        ..KubeSettings::default()
    };
    let client = Client::from_config(&settings).map_err(|e| e.to_string())?;
    Ok(Server { cp, client })
}

/// One operator's trial at N modules in a fresh namespace.
fn trial(
    s: &Server,
    programs: &AddonPrograms,
    who: Who,
    layout: &Path,
    n: usize,
    k: usize,
) -> Result<Figures, String> {
    let ns = format!("addon-{}-{n}-{k}", who.label());
    create_namespace(&s.client, &ns);
    let p = Place { layout, n, ns };
    let ns = &p.ns;
    let mut f = Figures::default();

    let (mut op, cold) = Operator::start(s, programs, who, &p, "cold")?;
    f.cold_s = cold.as_secs_f64();
    std::thread::sleep(SETTLE);
    f.idle_mb = op.mb("VmRSS:");
    let (peak, cpu, children) = op.stop();
    let stored = revisions(&s.client, ns);

    let (mut op, restart) = Operator::start(s, programs, who, &p, "restart")?;
    f.restart_s = restart.as_secs_f64();
    std::thread::sleep(SETTLE);
    f.new_revisions = (revisions(&s.client, ns) - stored) as f64;

    let name = module_name(1, false).1;
    let next = helm_secrets(&s.client, ns, &format!("owner=helm,name={name}")) + 1;
    let wanted = format!("owner=helm,name={name},version={next},status=deployed");
    let started = Instant::now();
    set_config(&s.client, ns, &name, "message: changed\n");
    op.poll(|| helm_secrets(&s.client, ns, &wanted) == 1, "the upgrade")?;
    f.upgrade_s = started.elapsed().as_secs_f64();

    let (peak2, cpu2, children2) = op.stop();
    free_service_ips(&s.client, &p)?;
    f.peak_mb = peak.max(peak2);
    f.cpu_s = cpu + cpu2;
    f.cpu_children_s = children + children2;
    Ok(f)
}

/// Deletes the trial's Services once both runs are over: the control plane's
/// service range (a /24) would run out of cluster IPs after ~250 modules.
fn free_service_ips(client: &Client, p: &Place) -> Result<(), String> {
    let services = client
        .resolve("v1", "Service", "bench")
        .map_err(|e| e.to_string())?;
    let api = client.api(&services, Some(&p.ns));
    (1..=p.n).try_for_each(|i| {
        let name = module_name(i, false).1;
        api.delete(&name, None)
            .map_err(|e| format!("delete Service {}/{name}: {e}", p.ns))
    })
}

/// A trial's module set, its size and its namespace.
struct Place<'a> {
    layout: &'a Path,
    n: usize,
    ns: String,
}

/// A running addon-operator and where its log and marker go.
struct Operator {
    child: Child,
    log: PathBuf,
    marker: PathBuf,
}

impl Operator {
    /// Starts `who` with the same flags and environment for both (those of
    /// tests/compat/addon_oracle.rs); returns once converged, with the time taken.
    fn start(
        s: &Server,
        programs: &AddonPrograms,
        who: Who,
        p: &Place,
        phase: &str,
    ) -> Result<(Operator, Duration), String> {
        let (layout, ns) = (p.layout, p.ns.as_str());
        let dir = p.layout.join(format!("run-{ns}")).join(phase);
        for d in ["tmp", "home"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| format!("{ns}: mkdir: {e}"))?;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("free port: {e}"))?;
        let log = dir.join("operator.log");
        let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = file.try_clone().map_err(|e| e.to_string())?;
        let kubeconfig = s.cp.admin_kubeconfig();
        let mut cmd = match who {
            Who::Ours => {
                let mut c = Command::new(&programs.ours);
                c.arg("addon-operator");
                c
            }
            Who::Flant => Command::new(&programs.flant),
        };
        cmd.args(["start", "--namespace", ns])
            .args(["--prometheus-listen-address", "127.0.0.1"])
            .args(["--prometheus-listen-port", &port.to_string()])
            .arg("--modules-dir")
            .arg(layout.join("modules"))
            .arg("--global-hooks-dir")
            .arg(layout.join("global-hooks"))
            .arg("--kube-config")
            .arg(&kubeconfig)
            .arg("--tmp-dir")
            .arg(dir.join("tmp"))
            .arg("--debug-unix-socket")
            .arg(dir.join("debug.socket"))
            // flant's helm child finds the cluster through KUBECONFIG only.
            .env("KUBECONFIG", &kubeconfig)
            .env("HELM_BIN_PATH", &programs.helm3)
            .env("HOME", dir.join("home"))
            .env("BENCH_MARKER", dir.join("marker"))
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err));
        let started = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| format!("start {}: {e}", who.label()))?;
        let mut op = Operator {
            child,
            log,
            marker: dir.join("marker"),
        };
        let marker = op.marker.clone();
        op.poll(
            || {
                marked(&marker)
                    && helm_secrets(&s.client, &p.ns, "owner=helm,status=deployed") == p.n
            },
            &format!("the {phase} converge"),
        )?;
        Ok((op, started.elapsed()))
    }

    /// Polls `cond` every 20 ms; an error with the log's tail if the process exits or
    /// [`TIMEOUT`] passes.
    fn poll(&mut self, cond: impl Fn() -> bool, what: &str) -> Result<(), String> {
        let deadline = Instant::now() + TIMEOUT;
        while !cond() {
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > deadline {
                let text = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(format!(
                    "{what}: not reached (exit {exited:?}); log tail:\n{}",
                    tail.join("\n")
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn mb(&self, field: &str) -> f64 {
        proc_kb(self.child.id(), field) as f64 * 1024.0 / 1e6
    }

    /// Reads VmHWM (MB) and CPU (own, reaped children; seconds), then SIGTERM and
    /// a wait of up to 30 s (a kill after that).
    fn stop(&mut self) -> (f64, f64, f64) {
        let peak = self.mb("VmHWM:");
        let own = cpu_seconds(&self.child, false);
        let children = cpu_seconds(&self.child, true) - own;
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.marker);
        (peak, own, children)
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True once the `afterAll` hook wrote its line.
fn marked(marker: &Path) -> bool {
    std::fs::metadata(marker).is_ok_and(|m| m.len() > 0)
}

fn one_line(f: &Figures) -> String {
    format!(
        "cold {:.2} s, restart {:.2} s ({} new revisions), upgrade {:.2} s, idle {:.1} MB, peak {:.1} MB, cpu {:.2} s + children {:.2} s",
        f.cold_s,
        f.restart_s,
        f.new_revisions,
        f.upgrade_s,
        f.idle_mb,
        f.peak_mb,
        f.cpu_s,
        f.cpu_children_s
    )
}

/// The per-figure median of `who`'s trials (NaN with none) and their count.
fn median(runs: &[(Who, Figures)], who: Who) -> (usize, Figures) {
    let mine: Vec<Figures> = runs.iter().filter(|r| r.0 == who).map(|r| r.1).collect();
    let m = |get: fn(&Figures) -> f64| {
        let mut v: Vec<f64> = mine.iter().map(get).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let f = Figures {
        cold_s: m(|f| f.cold_s),
        restart_s: m(|f| f.restart_s),
        new_revisions: m(|f| f.new_revisions),
        upgrade_s: m(|f| f.upgrade_s),
        idle_mb: m(|f| f.idle_mb),
        peak_mb: m(|f| f.peak_mb),
        cpu_s: m(|f| f.cpu_s),
        cpu_children_s: m(|f| f.cpu_children_s),
    };
    (mine.len(), f)
}

type Row = (&'static str, fn(&Figures) -> f64, &'static str);

const ROWS: [Row; 8] = [
    (
        "cold converge (start → all deployed, afterAll ran)",
        |f| f.cold_s,
        "s",
    ),
    (
        "restart, nothing changed (start → converged)",
        |f| f.restart_s,
        "s",
    ),
    (
        "new helm revisions on that restart",
        |f| f.new_revisions,
        "",
    ),
    (
        "one module's value in the ConfigMap → deployed",
        |f| f.upgrade_s,
        "s",
    ),
    ("RSS idle 3 s after the cold converge", |f| f.idle_mb, "MB"),
    ("peak RSS (VmHWM, larger of both runs)", |f| f.peak_mb, "MB"),
    ("process CPU, operator's own (both runs)", |f| f.cpu_s, "s"),
    (
        "CPU of reaped children: helm + hooks",
        |f| f.cpu_children_s,
        "s",
    ),
];

fn print_table(n: usize, runs: &[(Who, Figures)]) {
    let (on, ours) = median(runs, Who::Ours);
    let (fnum, flant) = median(runs, Who::Flant);
    println!(
        "\naddon-operator on the real kube-apiserver, N={n} modules each in its own order, helm 3.17; median of {on}/{fnum} trials (ours/flant's v1.5.0)"
    );
    println!("| figure | ours | flant's v1.5.0 | ours/flant |\n| --- | --- | --- | --- |");
    for (name, get, unit) in ROWS {
        let (o, f) = (get(&ours), get(&flant));
        let ratio = if unit.is_empty() {
            "–".to_string()
        } else {
            format!("{:.2}", o / f)
        };
        println!("| {name} | {o:.2} {unit} | {f:.2} {unit} | {ratio} |");
    }
    if ours.new_revisions > 0.0 {
        eprintln!("WARNING: our restart with nothing changed made new helm revisions");
    }
}
