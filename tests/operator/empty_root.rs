//! The scratch image without Docker: the static (musl) binary runs in a root
//! directory holding only itself, `/tmp` and a hooks dir with one static C hook
//! (`tests/static-hook/hook.c`, compiled here with `gcc -static`), as uid 65534 like
//! `Dockerfile.scratch`. It must start, run the onStartup hook (which copies its
//! binding context to /tmp/hook-ran) and answer `/metrics` with the hook's metric.
//!
//! The root is entered with `chroot` inside `unshare --mount` (as root; otherwise
//! inside a user namespace), with `/dev/null` bind-mounted as every container
//! runtime provides it. A missing static binary is built, never skipped.

use crate::common;

use common::{TempDir, http_get, metric};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MUSL: &str = "x86_64-unknown-linux-musl";

/// The static binary `make static` builds, brought up to date first by the same
/// script (scripts/static.sh: cargo does nothing when it already is, and the
/// same flags mean no rebuild), so the test never runs a stale build.
fn static_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/static.sh"))
        .arg("amd64")
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/static.sh");
    assert!(out.status.success(), "scripts/static.sh amd64 failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let bin = PathBuf::from(text.lines().last().expect("binary path").trim());
    assert!(
        bin.ends_with(Path::new(MUSL).join("release/shell-operator")),
        "{bin:?}"
    );
    bin
}

/// The root dir: /shell-operator, /tmp (1777), /hooks/startup (static, 0755) and
/// an empty /dev/null to mount the real one on.
fn build_root(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("hooks")).expect("hooks dir");
    std::fs::create_dir_all(root.join("dev")).expect("dev dir");
    std::fs::write(root.join("dev/null"), "").expect("dev/null mount point");
    std::fs::create_dir_all(root.join("tmp")).expect("tmp dir");
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777))
        .expect("chmod tmp");
    std::fs::copy(static_binary(), root.join("shell-operator")).expect("copy binary");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/static-hook/hook.c");
    let hook = root.join("hooks/startup");
    let out = Command::new("gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&hook)
        .arg(&source)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc -static: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod hook");
    root
}

/// Starts the operator inside `root` with an empty environment. Like a container
/// runtime, the test provides `/dev/null` (bind-mounted in a private mount
/// namespace): the operator gives hooks `/dev/null` as stdin.
fn start_in(root: &Path) -> Child {
    let args = [
        "start",
        "--hooks-dir",
        "/hooks",
        "--tmp-dir",
        "/tmp/shell-operator",
        "--listen-address",
        "127.0.0.1",
        "--listen-port",
        "0",
        "--debug-unix-socket",
        "/tmp/run/debug.socket",
    ];
    run_in(root, &args, &[])
}

/// Runs `/shell-operator <args>` chrooted into `root` as uid 65534, with only
/// `PATH`, `LOG_TYPE=json` and `env` in its environment.
fn run_in(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Child {
    // SAFETY: geteuid has no preconditions.
    let as_root = unsafe { libc::geteuid() } == 0;
    let (ns, user): (&[&str], &str) = if as_root {
        (&["--mount"], "--userspec=65534:65534")
    } else {
        (&["--user", "--map-root-user", "--mount"], "--userspec=0:0")
    };
    let script = format!(
        "mount --bind /dev/null \"$0/dev/null\" && exec chroot {user} \"$0\" /shell-operator \"$@\""
    );
    let mut cmd = Command::new("unshare");
    cmd.args(ns)
        .args(["--", "/bin/sh", "-c", &script])
        .arg(root)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LOG_TYPE", "json")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd.spawn().expect("start unshare")
}

/// Kills the operator if the test fails before stopping it.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn static_binary_runs_in_an_empty_root() {
    let dir = TempDir::new("empty-root");
    let root = build_root(&dir.0);
    let mut child = KillOnDrop(start_in(&root));
    let child = &mut child.0;
    let rx = common::stdout_lines(child);
    let mut logs = Vec::new();
    let mut port = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while port.is_none() && Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        if line.contains("HTTP server listening") {
            let v: serde_json::Value = serde_json::from_str(&line).expect("json log");
            port = v["address"]
                .as_str()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok());
        }
        logs.push(line);
    }
    let port = port.unwrap_or_else(|| panic!("no HTTP server line; logs:\n{}", logs.join("\n")));

    let ran = root.join("tmp/hook-ran");
    let success = "shell_operator_hook_run_success_total{binding=\"onStartup\",hook=\"startup\",queue=\"main\"} 1";
    let body = loop {
        let (_, body) = http_get(port, "/metrics");
        if body.contains(success) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    logs.extend(rx.try_iter());
    let context = std::fs::read_to_string(&ran)
        .unwrap_or_else(|e| panic!("{}: {e}; logs:\n{}", ran.display(), logs.join("\n")));
    let context: serde_json::Value = serde_json::from_str(&context).expect("context JSON");
    assert_eq!(context, serde_json::json!([{"binding": "onStartup"}]));
    assert_eq!(
        metric(&body, "empty_root_hook_runs_total{hook=\"startup\"}"),
        Some(1.0),
        "{body}"
    );
    assert!(body.contains(success), "{body}");
    assert_eq!(http_get(port, "/ready").0, 200);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit status {status:?}");
    assert!(
        !root.join("tmp/run/debug.socket").exists(),
        "debug socket removed"
    );
}

/// addon-operator from the same image: the static binary, the static helm and a
/// module in a root that holds nothing else, as uid 65534, against kube-sim; the
/// module's release is installed (through our binary as helm's post-renderer) and
/// the process stops cleanly.
#[test]
fn addon_operator_runs_in_an_empty_root_with_static_helm() {
    let dir = TempDir::new("empty-root-addon");
    let root = dir.0.join("root");
    for d in ["dev", "tmp", "global-hooks", "modules/001-hello/templates"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::write(root.join("dev/null"), "").expect("dev/null mount point");
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777))
        .expect("chmod tmp");
    std::fs::copy(static_binary(), root.join("shell-operator")).expect("copy binary");
    let helm = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/helm");
    assert!(
        helm.is_file(),
        "run scripts/install-k8s-clients.sh: no {}",
        helm.display()
    );
    std::fs::copy(&helm, root.join("helm")).expect("copy helm");
    std::fs::write(root.join("modules/values.yaml"), "helloEnabled: true\n").expect("values");
    std::fs::write(
        root.join("modules/001-hello/Chart.yaml"),
        "apiVersion: v2\nname: hello\nversion: 0.0.1\n",
    )
    .expect("chart");
    std::fs::write(
        root.join("modules/001-hello/templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  from: scratch\n",
    )
    .expect("template");
    let sim = kube_sim::Sim::start();
    sim.create(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "addons"}}))
        .expect("namespace");
    sim.write_kubeconfig(&root.join("kubeconfig"))
        .expect("kubeconfig");
    std::fs::set_permissions(
        root.join("kubeconfig"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    let args = [
        "addon-operator",
        "start",
        "--namespace",
        "addons",
        "--modules-dir",
        "/modules",
        "--global-hooks-dir",
        "/global-hooks",
        "--tmp-dir",
        "/tmp/addon-operator",
        "--debug-unix-socket",
        "/tmp/run/debug.socket",
        "--prometheus-listen-address",
        "127.0.0.1",
        "--prometheus-listen-port",
        "0",
    ];
    let env = [("KUBECONFIG", "/kubeconfig"), ("HELM_BIN_PATH", "/helm")];
    let mut child = KillOnDrop(run_in(&root, &args, &env));
    let child = &mut child.0;
    let rx = common::stdout_lines(child);
    let mut logs = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let cm = loop {
        logs.extend(rx.try_iter());
        if let Some(cm) = sim.get("v1", "ConfigMap", "addons", "hello") {
            break cm;
        }
        assert!(
            Instant::now() < deadline,
            "not installed; logs:\n{}",
            logs.join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(cm["data"]["from"], "scratch");
    assert_eq!(cm["metadata"]["labels"]["heritage"], "addon-operator");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "exit status {status:?}; logs:\n{}",
        logs.join("\n")
    );
}
