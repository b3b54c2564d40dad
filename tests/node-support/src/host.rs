//! What the node changes on the host, recorded before it starts and undone when it
//! stops (also after a failed test, and for a run that was killed: the next start
//! undoes it first, from the ledger file).
//!
//! - the bridge `BRIDGE` with the node IP, made here (the kubelet refuses a loopback
//!   node IP; the CNI bridge plugin attaches pods to it);
//! - the guard chain `GUARD` hooked into FORWARD: traffic may cross the bridge, but
//!   nothing from it leaves, and nothing from elsewhere is forwarded onto it; and
//!   `GUARD_OUT` in OUTPUT: the host's own packets to the Service range that kube-proxy
//!   did not rewrite are rejected (they would leave by the default route);
//! - every iptables/ip6tables chain and rule that appeared meanwhile (kube-proxy's
//!   `KUBE-*`, the CNI plugins' `CNI-*`): the tables are compared with a snapshot;
//! - sysctls the kubelet, kube-proxy and the bridge plugin set (`SYSCTLS`);
//! - cgroups the kubelet makes (`kubepods*` under each v1 hierarchy);
//! - mounts under the node's dir and the network namespaces of its pods;
//! - fixed paths these versions use whatever their configuration says
//!   (`FIXED_PATHS`), and what our own dockerd adds: removed when they did not exist
//!   before.
//!
//! The node's logs are kept in `target/node-logs/` when its dir is removed.

use crate::procs::run;
use std::collections::BTreeSet;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bridge (at most 15 characters).
pub const BRIDGE: &str = "sonode0";
/// The node IP, on the bridge; pods get addresses of `POD_SUBNET` from 10.244.0.10.
pub const NODE_IP: &str = "10.244.0.1";
pub const POD_SUBNET: &str = "10.244.0.0/24";
/// The Service range; `kubernetes` is 10.0.0.1 (pods route it via the node IP).
pub const SERVICE_SUBNET: &str = "10.0.0.0/24";
const GUARD: &str = "SO-NODE-GUARD";
/// The host's own guard: a packet to the Service range that kube-proxy has not
/// rewritten (no rule yet, no endpoint) would follow the default route off the
/// machine; it is rejected instead (filter OUTPUT sees the address after DNAT).
const GUARD_OUT: &str = "SO-NODE-GUARD-OUT";
const LOCK: &str = "/run/shell-operator-node.lock";
const LEDGER: &str = "/run/shell-operator-node.ledger";

const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/forwarding",
    "net/ipv4/conf/all/route_localnet",
    "net/ipv6/conf/all/forwarding",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
    "net/netfilter/nf_conntrack_tcp_be_liberal",
];

const FIXED_PATHS: &[&str] = &[
    "/var/lib/kubelet/device-plugins",
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd/s",
    "/run/containerd",
    "/var/lib/cni/results",
    "/var/lib/cni",
    "/var/run/netns",
    "/etc/cni/net.d",
    "/etc/cni",
    "/opt/cni/bin",
    "/opt/cni",
    "/etc/docker",
    "/run/docker",
];

/// The host as it was, and what to undo.
pub(crate) struct Host {
    dir: PathBuf,
    sysctls: Vec<(String, String)>,
    existed: Vec<String>,
    netns: BTreeSet<String>,
    tables: [String; 2],
    _lock: File,
}

impl Host {
    /// Takes the machine-wide lock (one node at a time), undoes a killed run's
    /// changes, checks that the bridge and subnet are free, and records the host.
    pub(crate) fn record(dir: &Path) -> Result<Host, String> {
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK)
            .map_err(|e| format!("{LOCK}: {e} (the node tier needs root)"))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(format!(
                "another node runs on this machine ({LOCK} is locked)"
            ));
        }
        if let Ok(text) = std::fs::read_to_string(LEDGER) {
            eprintln!("node: undoing the changes of an earlier run that did not stop");
            Host::from_ledger(&text, lock.try_clone().map_err(|e| e.to_string())?).undo();
        }
        if Path::new("/sys/class/net").join(BRIDGE).exists() {
            return Err(format!("interface {BRIDGE} exists already"));
        }
        let routes = run(Command::new("ip").args(["-4", "route", "show", POD_SUBNET]))?;
        if !routes.trim().is_empty() {
            return Err(format!("{POD_SUBNET} is routed already: {routes}"));
        }
        let host = Host {
            dir: dir.to_path_buf(),
            sysctls: SYSCTLS
                .iter()
                .filter_map(|s| Some((s.to_string(), read_sysctl(s)?)))
                .collect(),
            existed: FIXED_PATHS
                .iter()
                .filter(|p| Path::new(p).exists())
                .map(|p| p.to_string())
                .collect(),
            netns: netns_names(),
            tables: [save("iptables-save")?, save("ip6tables-save")?],
            _lock: lock,
        };
        std::fs::write(LEDGER, host.ledger()).map_err(|e| format!("{LEDGER}: {e}"))?;
        Ok(host)
    }

    /// Makes the bridge with the node IP and the forward guard.
    pub(crate) fn network(&self) -> Result<(), String> {
        let ip = |args: &[&str]| run(Command::new("ip").args(args)).map(drop);
        ip(&["link", "add", BRIDGE, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{NODE_IP}/24"), "dev", BRIDGE])?;
        ip(&["link", "set", BRIDGE, "up"])?;
        let ipt = |args: &[&str]| run(Command::new("iptables").args(["-w"]).args(args)).map(drop);
        ipt(&["-N", GUARD])?;
        ipt(&["-A", GUARD, "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT"])?;
        ipt(&["-A", GUARD, "-i", BRIDGE, "-j", "DROP"])?;
        ipt(&["-A", GUARD, "-o", BRIDGE, "-j", "DROP"])?;
        ipt(&["-I", "FORWARD", "1", "-j", GUARD])?;
        ipt(&["-N", GUARD_OUT])?;
        ipt(&["-A", GUARD_OUT, "-d", SERVICE_SUBNET, "-j", "REJECT"])?;
        ipt(&["-I", "OUTPUT", "1", "-j", GUARD_OUT])
    }

    fn ledger(&self) -> String {
        let mut out = format!("dir {}\n", self.dir.display());
        for (k, v) in &self.sysctls {
            out += &format!("sysctl {k} {v}\n");
        }
        for p in &self.existed {
            out += &format!("existed {p}\n");
        }
        for n in &self.netns {
            out += &format!("netns {n}\n");
        }
        for (i, t) in self.tables.iter().enumerate() {
            for line in t.lines() {
                out += &format!("table{i} {line}\n");
            }
        }
        out
    }

    fn from_ledger(text: &str, lock: File) -> Host {
        let mut host = Host {
            dir: PathBuf::new(),
            sysctls: Vec::new(),
            existed: Vec::new(),
            netns: BTreeSet::new(),
            tables: [String::new(), String::new()],
            _lock: lock,
        };
        for line in text.lines() {
            let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
            match kind {
                "dir" => host.dir = PathBuf::from(rest),
                "sysctl" => {
                    if let Some((k, v)) = rest.split_once(' ') {
                        host.sysctls.push((k.into(), v.into()));
                    }
                }
                "existed" => host.existed.push(rest.into()),
                "netns" => {
                    host.netns.insert(rest.into());
                }
                "table0" => host.tables[0] += &format!("{rest}\n"),
                "table1" => host.tables[1] += &format!("{rest}\n"),
                _ => {}
            }
        }
        host
    }

    /// Undoes everything; call once every process of the node has stopped. Each
    /// step goes on after a failure (printed), so one leftover does not keep the rest.
    pub(crate) fn undo(&self) {
        let report = |what: &str, r: Result<(), String>| {
            if let Err(e) = r {
                eprintln!("node cleanup: {what}: {e}");
            }
        };
        kill_leftovers(&self.dir);
        report("mounts", unmount_under(&self.dir));
        for name in netns_names().difference(&self.netns) {
            let path = format!("/var/run/netns/{name}");
            let _ = unmount(&path);
            report(
                &path,
                std::fs::remove_file(&path).map_err(|e| e.to_string()),
            );
        }
        if Path::new("/sys/class/net").join(BRIDGE).exists() {
            report(
                "bridge",
                run(Command::new("ip").args(["link", "del", BRIDGE])).map(drop),
            );
        }
        for (i, (save_cmd, cmd)) in [
            ("iptables-save", "iptables"),
            ("ip6tables-save", "ip6tables"),
        ]
        .into_iter()
        .enumerate()
        {
            report(cmd, restore_tables(save_cmd, cmd, &self.tables[i]));
        }
        for (k, v) in &self.sysctls {
            if read_sysctl(k).as_deref() != Some(v.as_str()) {
                let path = format!("/proc/sys/{k}");
                report(&path, std::fs::write(&path, v).map_err(|e| e.to_string()));
            }
        }
        report("cgroups", remove_cgroups());
        let _ = std::fs::remove_dir_all("/var/lib/cni/results");
        for p in FIXED_PATHS {
            if !self.existed.iter().any(|e| e == p) && Path::new(p).exists() {
                report(p, std::fs::remove_dir_all(p).map_err(|e| e.to_string()));
            }
        }
        if !self.dir.as_os_str().is_empty() {
            keep_logs(&self.dir);
            report(
                &self.dir.display().to_string(),
                std::fs::remove_dir_all(&self.dir).or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e.to_string()),
                }),
            );
        }
        let _ = std::fs::remove_file(LEDGER);
    }
}

fn read_sysctl(key: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{key}"))
        .ok()
        .map(|v| v.trim().to_string())
}

fn netns_names() -> BTreeSet<String> {
    std::fs::read_dir("/var/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn save(cmd: &str) -> Result<String, String> {
    let text = run(&mut Command::new(cmd))
        .map_err(|e| format!("{e} (install-node.sh installs iptables)"))?;
    Ok(text)
}

/// The table's chains and rules, comments and counters left out.
fn normalize(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("COMMIT"))
        .map(|l| match l.strip_prefix(':') {
            Some(chain) => format!(":{}", chain.split(' ').next().unwrap_or("")),
            None => l.to_string(),
        })
        .collect()
}

/// Removes the rules and chains that are not in `before`, rules first.
fn restore_tables(save_cmd: &str, cmd: &str, before: &str) -> Result<(), String> {
    let now = run(&mut Command::new(save_cmd))?;
    let old = normalize(before);
    let mut table = String::new();
    let mut rules = Vec::new();
    let mut chains = Vec::new();
    for line in now.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.to_string();
            continue;
        }
        let key = match line.strip_prefix(':') {
            Some(chain) => format!(":{}", chain.split(' ').next().unwrap_or("")),
            None => line.to_string(),
        };
        if old.contains(&key) {
            continue;
        }
        if let Some(rule) = line.strip_prefix("-A ") {
            rules.push((table.clone(), rule.to_string()));
        } else if let Some(chain) = key.strip_prefix(':') {
            chains.push((table.clone(), chain.to_string()));
        }
    }
    let mut errors = Vec::new();
    for (table, rule) in rules {
        // iptables-save quotes like a shell; let sh split the rule again.
        let script = format!("{cmd} -w -t {table} -D {rule}");
        if let Err(e) = run(Command::new("sh").args(["-c", &script])) {
            errors.push(e);
        }
    }
    for (table, chain) in &chains {
        let _ = run(Command::new(cmd).args(["-w", "-t", table, "-F", chain]));
    }
    for (table, chain) in &chains {
        if ["INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"].contains(&chain.as_str()) {
            continue;
        }
        if let Err(e) = run(Command::new(cmd).args(["-w", "-t", table, "-X", chain])) {
            errors.push(e);
        }
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(errors.join("; ")),
    }
}

/// SIGKILL to every process whose command line names `dir` (containerd shims and
/// what they run), so nothing keeps the mounts busy.
fn kill_leftovers(dir: &Path) {
    if dir.as_os_str().is_empty() {
        return;
    }
    let needle = dir.display().to_string();
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == me || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle)
            && let Ok(pid) = name.parse::<i32>()
        {
            // SAFETY: kill(2); the pid belongs to a process the node started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
}

fn unmount(path: &str) -> Result<(), String> {
    let c = std::ffi::CString::new(path).map_err(|e| e.to_string())?;
    // SAFETY: umount2 with a valid C string.
    match unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } {
        0 => Ok(()),
        _ => Err(format!(
            "umount {path}: {}",
            std::io::Error::last_os_error()
        )),
    }
}

/// Unmounts every mount point under `dir`, deepest first.
fn unmount_under(dir: &Path) -> Result<(), String> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    let prefix = format!("{}/", dir.display());
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| p.replace("\\040", " "))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    let errors: Vec<String> = points.iter().filter_map(|p| unmount(p).err()).collect();
    match errors.is_empty() {
        true => Ok(()),
        false => Err(errors.join("; ")),
    }
}

/// Removes the kubelet's `kubepods*` cgroups in every v1 hierarchy, deepest first.
fn remove_cgroups() -> Result<(), String> {
    let mut dirs = Vec::new();
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .map_err(|e| e.to_string())?
        .flatten()
    {
        for e in std::fs::read_dir(h.path()).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with("kubepods") {
                collect_dirs(&e.path(), &mut dirs);
            }
        }
    }
    // Processes a killed shim left behind (the containers) keep their cgroups busy.
    for _ in 0..20 {
        let pids: Vec<i32> = dirs
            .iter()
            .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // SAFETY: kill(2) on a process of the kubelet's pod cgroups.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    let errors: Vec<String> = dirs
        .iter()
        .filter_map(|d| {
            std::fs::remove_dir(d)
                .err()
                .map(|e| format!("{}: {e}", d.display()))
        })
        .collect();
    match errors.is_empty() {
        true => Ok(()),
        false => Err(errors.join("; ")),
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_dirs(&e.path(), out);
        }
    }
}

/// Copies the node's `*.log` files to `target/node-logs/` (replaced each run) before
/// its dir goes, so a failed run can be read afterwards.
fn keep_logs(dir: &Path) {
    let keep = control_plane::repo_root().join("target/node-logs");
    let _ = std::fs::remove_dir_all(&keep);
    if std::fs::create_dir_all(&keep).is_err() {
        return;
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path()
            .extension()
            .is_some_and(|x| x == "log" || x == "watch")
        {
            let _ = std::fs::copy(e.path(), keep.join(e.file_name()));
        }
    }
}
