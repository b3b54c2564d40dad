//! Regression tests for issue 11 (hostile hooks and neighbours), on the real binary:
//! a tmp dir we do not own or that is a symlink, a `--config` that prints forever,
//! nests without end or hangs through a SIGTERM, and signals that used to kill the
//! operator with their default action and orphan its hooks.

use crate::common;

use common::{Operator, TempDir, hook};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Waits for the operator to exit; returns (code, stdout logs + stderr).
fn exit_and_output(op: &mut Operator, within: Duration) -> (Option<i32>, String) {
    let code = op.wait_exit(within);
    let mut stderr = String::new();
    if code.is_some() {
        if let Some(mut pipe) = op.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
    }
    // The stdout reader thread may lag the exit by a moment.
    std::thread::sleep(Duration::from_millis(100));
    (code, format!("{}\n{stderr}", op.logs()))
}

/// A hook whose `--config` runs `script` instead of printing a config.
fn config_script(script: &str) -> String {
    format!("#!/bin/sh\nif [ \"$1\" = \"--config\" ]; then\n{script}\nfi\nexit 0\n")
}

/// True once `pid` is gone (or a zombie nobody reaps yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn wait_gone(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    gone(pid)
}

/// Reads the pid a hook wrote to `path`, waiting for it.
fn wait_pid(path: &Path, op: &Operator) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "no pid in {}; logs:\n{}",
            path.display(),
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tmp_dir_that_is_a_symlink_is_refused_and_its_target_left_alone() {
    let work = TempDir::new("tmp-link");
    let target = work.0.join("target");
    std::fs::create_dir(&target).expect("mkdir");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let link = work.0.join("link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let startup = [("a.sh", hook("a", "configVersion: v1\nonStartup: 1", ""))];
    let link_arg = link.display().to_string();
    let mut op = Operator::start(&startup, &["--tmp-dir", &link_arg], &[]);
    let (code, out) = exit_and_output(&mut op, Duration::from_secs(15));
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("tmp dir '{link_arg}': is a symbolic link")),
        "{out}"
    );
    let mode = std::fs::metadata(&target)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o755, "the link's target is not chmodded");
    assert!(op.runs().is_empty(), "no hook ran");
}

/// A world-writable tmp dir owned by someone else could have its files swapped
/// between our write and the hook's read: startup refuses it. Needs root (to make
/// the directory another user's), as the empty-root tests do.
#[test]
fn tmp_dir_owned_by_another_user_is_refused() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
    let work = TempDir::new("tmp-foreign");
    let foreign = work.0.join("foreign");
    std::fs::create_dir(&foreign).expect("mkdir");
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).expect("chown");
    std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let startup = [("a.sh", hook("a", "configVersion: v1\nonStartup: 1", ""))];
    let arg = foreign.display().to_string();
    let mut op = Operator::start(&startup, &["--tmp-dir", &arg], &[]);
    let (code, out) = exit_and_output(&mut op, Duration::from_secs(15));
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "tmp dir '{arg}': owned by uid 65534, not by us (uid 0)"
        )),
        "{out}"
    );
    let meta = std::fs::metadata(&foreign).expect("stat");
    assert_eq!(
        (meta.uid(), meta.mode() & 0o777),
        (65534, 0o777),
        "untouched"
    );
    assert!(op.runs().is_empty(), "no hook ran");
}

/// `yes` as a `--config`: the output is cut at the cap, the hook's group is
/// killed, and the error names the hook without repeating the output.
#[test]
fn config_that_prints_forever_is_stopped_at_the_cap() {
    let hooks = [("loud.sh", config_script("exec yes"))];
    let started = Instant::now();
    let mut op = Operator::start(&hooks, &[], &[]);
    let (code, out) = exit_and_output(&mut op, Duration::from_secs(30));
    assert_eq!(code, Some(1), "{}", &out[..out.len().min(2000)]);
    assert!(
        out.contains("cannot get config for hook 'loud.sh': --config output is larger than"),
        "{}",
        &out[..out.len().min(2000)]
    );
    assert!(out.len() < 64 * 1024, "the log repeats {} bytes", out.len());
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(common::processes_mentioning(&op.dir.0.join("hooks")), 0);
}

/// A big invalid `--config` is quoted in the error only up to a few KiB.
#[test]
fn big_invalid_config_is_not_repeated_whole_in_the_log() {
    let script = "i=0; while [ $i -lt 2000 ]; do printf 'bad: [%0500d\\n' $i; i=$((i+1)); done";
    let hooks = [("big.sh", config_script(script))];
    let mut op = Operator::start(&hooks, &[], &[]);
    let (code, out) = exit_and_output(&mut op, Duration::from_secs(30));
    assert_eq!(code, Some(1), "{}", &out[..out.len().min(2000)]);
    assert!(
        out.contains("hook --config output (first "),
        "{}",
        &out[..out.len().min(2000)]
    );
    assert!(out.len() < 64 * 1024, "the log repeats {} bytes", out.len());
}

/// 40,000 nested flow sequences in YAML are refused at once, like deep JSON.
#[test]
fn deeply_nested_config_is_refused_quickly() {
    let script = "head -c 40000 /dev/zero | tr '\\0' '['";
    let hooks = [("deep.sh", config_script(script))];
    let started = Instant::now();
    let mut op = Operator::start(&hooks, &[], &[]);
    let (code, out) = exit_and_output(&mut op, Duration::from_secs(30));
    assert_eq!(code, Some(1), "{}", &out[..out.len().min(2000)]);
    assert!(
        out.contains("nested deeper than 128 levels"),
        "{}",
        &out[..out.len().min(2000)]
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

/// SIGTERM while a hook's `--config` hangs at startup: exit 0 (as for SIGTERM at
/// any other time) and the hook's child is killed with its group.
#[test]
fn sigterm_while_config_hangs_exits_0_and_leaves_no_child() {
    let script = "sleep 300 & echo $! > \"$OUT_DIR/child.pid\"; wait";
    let hooks = [("hang.sh", config_script(script))];
    let mut op = Operator::start(&hooks, &[], &[]);
    let child = wait_pid(&op.dir.0.join("out/child.pid"), &op);
    op.signal(libc::SIGTERM);
    let (code, out) = exit_and_output(&mut op, Duration::from_secs(10));
    assert_eq!(code, Some(0), "{out}");
    assert!(
        wait_gone(child, Duration::from_secs(5)),
        "child {child} left behind"
    );
}

/// SIGUSR1 and SIGUSR2 are logged and ignored; SIGHUP reloads the hooks (issue
/// 39: flant dies of it); SIGQUIT shuts down like SIGTERM: exit 0 and the
/// running hook's process group is stopped.
#[test]
fn other_signals_neither_kill_the_operator_nor_orphan_hooks() {
    for stop_with in [libc::SIGQUIT] {
        let body = "sleep 300 & echo $! > \"$OUT_DIR/child.pid\"; wait";
        let hooks = [("a.sh", hook("a", "configVersion: v1\nonStartup: 1", body))];
        let mut op = Operator::start(&hooks, &[], &[]);
        let child = wait_pid(&op.dir.0.join("out/child.pid"), &op);
        for sig in [libc::SIGUSR1, libc::SIGUSR2] {
            op.signal(sig);
        }
        op.wait_log("signal ignored", Duration::from_secs(5));
        // SIGHUP asks for a reload (it runs once startup is done, which this
        // blocking onStartup hook never lets happen) and does not stop.
        op.signal(libc::SIGHUP);
        op.wait_log("SIGHUP: reload asked", Duration::from_secs(10));
        assert_eq!(op.http_get("/healthz").0, 200, "still serving");
        assert!(!gone(child), "the hook still runs");
        op.signal(stop_with);
        let (code, out) = exit_and_output(&mut op, Duration::from_secs(15));
        assert_eq!(code, Some(0), "signal {stop_with}: {out}");
        assert!(
            wait_gone(child, Duration::from_secs(5)),
            "child {child} left behind"
        );
    }
}

/// Issue 37: a hook still running when the operator is told to stop gets SIGTERM
/// from the operator and dies of it. That is the operator's own stop, not a hook
/// failure: it is logged as stopped, and never as "Hook failed, will retry" (no
/// retry comes; the operator exits 0).
#[test]
fn a_hook_stopped_at_shutdown_is_not_logged_as_failed() {
    let body = "echo $$ > \"$OUT_DIR/hook.pid\"; sleep 300";
    let hooks = [(
        "slow.sh",
        hook("slow", "configVersion: v1\nonStartup: 1", body),
    )];
    let mut op = Operator::start(&hooks, &[], &[]);
    let pid = wait_pid(&op.dir.0.join("out/hook.pid"), &op);
    op.signal(libc::SIGTERM);
    let (code, out) = exit_and_output(&mut op, Duration::from_secs(15));
    assert_eq!(code, Some(0), "{out}");
    assert!(wait_gone(pid, Duration::from_secs(5)), "hook {pid} left");
    assert!(!out.contains("will retry"), "{out}");
    assert!(!out.contains("Hook failed"), "{out}");
    let stopped = out
        .lines()
        .find(|l| l.contains("Hook stopped by the operator's shutdown"))
        .unwrap_or_else(|| panic!("no stop line for the hook:\n{out}"));
    assert!(stopped.contains("slow.sh"), "{stopped}");
}

/// Issue 37 (found on the node: `kubectl logs` of the deploy/ pod): with
/// `LOG_TYPE=json` every line the operator writes to stdout is a JSON object, the
/// version banner at `start` included (it was a plain `shell-operator v…` line).
#[test]
fn json_log_has_only_json_lines() {
    let hooks = [(
        "a.sh",
        hook("a", "configVersion: v1\nonStartup: 1", "echo hello from a"),
    )];
    let mut op = Operator::start(&hooks, &[], &[]);
    op.wait_log("hello from a", Duration::from_secs(10));
    op.signal(libc::SIGTERM);
    let (code, _) = exit_and_output(&mut op, Duration::from_secs(15));
    assert_eq!(code, Some(0));
    let logs = op.logs();
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}\n{logs}"));
        assert!(v["msg"].is_string() && v["level"].is_string(), "{line}");
    }
    assert!(
        logs.contains("\"msg\":\"shell-operator v"),
        "the version is logged:\n{logs}"
    );
}
