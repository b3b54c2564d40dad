//! The arm64 binary under Debian's qemu-user-static: `version --verbose`, the
//! built-in jq, and the operator end to end against kube-sim over TLS (ring's
//! aarch64 assembly in the handshake): the onStartup and kubernetes hooks run with
//! the right binding contexts, a hook's patch creates an object, and /metrics
//! answers with the hook's metric. Every qemu process is bounded in time.
//!
//! Without binfmt_misc (containers rarely have it) the binary is started as
//! `qemu-aarch64-static BINARY ...` through a small wrapper; the hooks it starts
//! are host programs, which qemu-user runs natively.

use crate::common::{self, Operator, hook, metric};
use crate::{elf_machine, run, static_binary};
use kube_sim::{Sim, SimOptions, TlsFiles};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const QEMU: &str = "qemu-aarch64-static";
/// Bound for one short command under qemu.
const SHORT: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(60);

/// Runs the arm64 binary with `args` and `stdin` under qemu, killed after
/// [`SHORT`]; (exit code, stdout).
fn qemu(bin: &Path, args: &[&str], stdin: &str) -> (i32, String) {
    let mut child = Command::new(QEMU)
        .arg(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{QEMU} is required (apt-get install qemu-user-static): {e}"));
    let mut input = child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut input, stdin.as_bytes()).expect("write stdin");
    drop(input);
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > SHORT {
            let _ = child.kill();
            panic!("{bin:?} {args:?} under qemu took more than {SHORT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn arm64_binary_is_static_aarch64_and_small() {
    let bin = static_binary("arm64");
    let bytes = std::fs::read(&bin).expect("read binary");
    assert_eq!(elf_machine(&bytes), 183, "AArch64");
    assert!(bytes.len() <= 8 << 20, "{} bytes > 8 MiB", bytes.len());
    // Static: no PT_INTERP program header (no dynamic loader named anywhere).
    assert!(!bytes.windows(14).any(|w| w == b"ld-linux-aarch"));
    assert!(!bytes.windows(9).any(|w| w == b"ld-musl-a"));
}

#[test]
fn arm64_version_verbose_and_jq_under_qemu() {
    let bin = static_binary("arm64");
    let (code, out) = qemu(&bin, &["version", "--verbose"], "");
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("shell-operator v"), "{out}");
    assert!(
        out.contains("\ntarget: aarch64-unknown-linux-musl\n"),
        "{out}"
    );
    let head = run(Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(crate::root()));
    assert!(
        out.contains(&format!("\ncommit: {}\n", head.trim())),
        "{out}"
    );
    let rustc = run(Command::new("rustc").arg("-V"));
    assert!(
        out.contains(&format!("\nrustc: {}\n", rustc.trim())),
        "{out}"
    );
    let crates: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("crates: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("crates line: {out}"));
    assert!(crates > 50, "{out}");

    let (code, out) = qemu(
        &bin,
        &["jq", "-c", "[.items[] | select(.n > 1) | .name]"],
        r#"{"items":[{"name":"a","n":1},{"name":"b","n":2},{"name":"c","n":3}]}"#,
    );
    assert_eq!((code, out.as_str()), (0, "[\"b\",\"c\"]\n"));
}

/// A wrapper that starts the arm64 binary under qemu, for `Operator::start_program`.
fn qemu_wrapper(dir: &Path, bin: &Path) -> PathBuf {
    let path = dir.join("shell-operator-arm64");
    let text = format!("#!/bin/sh\nexec {QEMU} '{}' \"$@\"\n", bin.display());
    std::fs::write(&path, text).expect("write wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// A self-signed server certificate for 127.0.0.1 (openssl), for kube-sim's TLS.
fn server_cert(dir: &Path) -> TlsFiles {
    let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    TlsFiles {
        cert,
        key,
        client_ca: None,
    }
}

#[test]
fn arm64_operator_runs_hooks_against_kube_sim_under_qemu() {
    let bin = static_binary("arm64");
    let dir = common::TempDir::new("arm64");
    let sim = Sim::start_with(SimOptions {
        tls: Some(server_cert(&dir.0)),
        ..Default::default()
    })
    .expect("kube-sim over TLS");
    sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "seed", "namespace": "default"}, "data": {"k": "v"}}))
        .expect("seed");
    let kubeconfig = dir.0.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");

    let config = "configVersion: v1\nonStartup: 1\nkubernetes:\n- name: cms\n  apiVersion: v1\n  kind: ConfigMap\n  executeHookOnSynchronization: true\n  jqFilter: .data";
    // Each run counts itself in a metric; the run for "trigger" creates "from-arm64".
    let body = r#"echo '{"name":"arm64_hook_runs_total","action":"add","value":1}' >> "$METRICS_PATH"
if grep -q '"trigger"' "$BINDING_CONTEXT_PATH"; then
  echo '{"operation":"Create","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"from-arm64","namespace":"default"},"data":{"by":"arm64"}}}' > "$KUBERNETES_PATCH_PATH"
fi"#;
    let program = qemu_wrapper(&dir.0, &bin);
    let op = Operator::start_program(
        &program,
        &[("h.sh", hook("h", config, body))],
        &["--kube-config", kubeconfig.to_str().expect("utf8")],
        &[],
    );
    // onStartup, then the Synchronization holding the seeded object's filter result.
    let runs = op.wait_runs(WAIT, |r| r.len() >= 2);
    assert_eq!(runs[0].1[0]["binding"], "onStartup", "{runs:?}");
    let sync = &runs[1].1[0];
    assert_eq!(sync["type"], "Synchronization", "{sync}");
    assert_eq!(
        sync["objects"][0]["filterResult"],
        json!({"k": "v"}),
        "{sync}"
    );

    sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "trigger", "namespace": "default"}}))
        .expect("trigger");
    let deadline = Instant::now() + WAIT;
    while sim
        .get("v1", "ConfigMap", "default", "from-arm64")
        .is_none()
    {
        assert!(
            Instant::now() < deadline,
            "no from-arm64 object: {}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let made = sim
        .get("v1", "ConfigMap", "default", "from-arm64")
        .expect("object");
    assert_eq!(made["data"], json!({"by": "arm64"}));
    // Runs 3 and 4: "trigger" Added, then the hook's own "from-arm64" Added.
    let runs = op.wait_runs(WAIT, |r| r.len() >= 4);
    assert_eq!(runs[2].1[0]["watchEvent"], "Added", "{runs:?}");
    assert_eq!(runs[3].1[0]["object"]["metadata"]["name"], "from-arm64");

    let series = "arm64_hook_runs_total{hook=\"h.sh\"}";
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, text) = op.http_get("/metrics");
        assert_eq!(status, 200);
        if metric(&text, series) == Some(4.0) {
            break;
        }
        assert!(Instant::now() < deadline, "{series} never 4: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
