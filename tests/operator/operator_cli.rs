//! End-to-end tests of the command line, startup failures, logging of hook output,
//! and PID-1 reaping, on the real binary.

use crate::common;

use common::{Operator, TempDir, hook, run_binary, write_hooks};
use std::time::{Duration, Instant};

#[test]
fn version_and_help() {
    let (code, out, _) = run_binary(&["version"], &[]);
    assert_eq!(code, 0);
    assert!(out.starts_with("shell-operator v"), "{out}");
    let (code, out, _) = run_binary(&["start", "--help"], &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("--hooks-dir <value>") && out.contains("SHELL_OPERATOR_HOOKS_DIR"),
        "{out}"
    );
}

#[test]
fn bad_flag_values_exit_1_naming_flag_and_accepted_values() {
    let (code, _, err) = run_binary(&["start", "--listen-port", "abc"], &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("flag --listen-port: invalid value \"abc\": expected a port number"),
        "{err}"
    );
    let (code, _, err) = run_binary(&["--log-type", "fancy"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("accepted values: text, json, color"), "{err}");
    let (code, _, err) = run_binary(&[], &[("LOG_LEVEL", "loud")]);
    assert_eq!(code, 1);
    assert!(
        err.contains("env LOG_LEVEL: invalid value \"loud\""),
        "{err}"
    );
}

/// A client rate too small to schedule a request stops startup, before any hook
/// runs, naming the variable or flag (it used to panic in the rate limiter).
#[test]
fn unusable_kube_client_qps_exits_1_naming_the_variable() {
    let startup = [("a.sh", hook("a", "configVersion: v1\nonStartup: 1", ""))];
    let mut op = Operator::start(&startup, &[], &[("KUBE_CLIENT_QPS", "1e-30")]);
    let stderr = exit_1_stderr(&mut op);
    assert!(
        stderr.contains("env KUBE_CLIENT_QPS: invalid value \"1e-30\""),
        "{stderr}"
    );
    assert!(op.runs().is_empty(), "no hook ran");
    let mut op = Operator::start(&startup, &["--object-patcher-kube-client-qps", "NaN"], &[]);
    let stderr = exit_1_stderr(&mut op);
    assert!(
        stderr.contains("flag --object-patcher-kube-client-qps: invalid value \"NaN\""),
        "{stderr}"
    );
}

/// Waits for `op` to exit, asserts code 1 and returns its stderr.
fn exit_1_stderr(op: &mut Operator) -> String {
    let code = op.wait_exit(Duration::from_secs(15));
    let mut stderr = String::new();
    if code.is_some() {
        if let Some(mut pipe) = op.child.stderr.take() {
            std::io::Read::read_to_string(&mut pipe, &mut stderr).expect("read stderr");
        }
    }
    assert_eq!(code, Some(1), "stderr: {stderr}\nlogs:\n{}", op.logs());
    stderr
}

#[test]
fn missing_hooks_dir_exits_1() {
    let (code, out, _) = run_binary(
        &[
            "start",
            "--hooks-dir",
            "/nonexistent/hooks",
            "--listen-port",
            "0",
        ],
        &[],
    );
    assert_eq!(code, 1);
    assert!(out.contains("hooks dir '/nonexistent/hooks'"), "{out}");
}

fn start_and_expect_failure(hooks: &[(&str, String)]) -> String {
    let dir = TempDir::new("cli");
    write_hooks(&dir.0.join("hooks"), hooks);
    let hooks_dir = dir.0.join("hooks");
    let tmp = dir.0.join("tmp");
    let (code, out, err) = run_binary(
        &[
            "start",
            "--hooks-dir",
            hooks_dir.to_str().expect("utf8"),
            "--tmp-dir",
            tmp.to_str().expect("utf8"),
            "--listen-port",
            "0",
        ],
        &[],
    );
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    out
}

#[test]
fn a_hook_failing_config_stops_startup() {
    let broken = "#!/bin/sh\necho 'no config for you' >&2\nexit 3\n".to_string();
    let out = start_and_expect_failure(&[("a/broken.sh", broken)]);
    assert!(
        out.contains("cannot get config for hook 'a/broken.sh': exit status 3: no config for you"),
        "{out}"
    );
}

#[test]
fn an_invalid_config_names_hook_binding_and_field() {
    let config = "configVersion: v1\nschedule:\n- name: ok\n  crontab: \"* * * * *\"\n- name: bad-one\n  crontab: \"*/5 * *\"";
    let out = start_and_expect_failure(&[("sched.sh", hook("x", config, ""))]);
    assert!(
        out.contains("sched.sh")
            && out.contains("schedule[1]")
            && out.contains("bad-one")
            && out.contains("crontab"),
        "{out}"
    );
}

#[test]
fn json_lines_from_hooks_are_merged_not_double_encoded() {
    let body =
        "echo '{\"level\":\"error\",\"msg\":\"from hook\",\"foo\":\"bar\"}'\necho plain line";
    let op = Operator::start(
        &[("j.sh", hook("j", "configVersion: v1\nonStartup: 1", body))],
        &[],
        &[],
    );
    let line = op.wait_log("from hook", Duration::from_secs(10));
    let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON record");
    assert_eq!(v["level"], "error");
    assert_eq!(v["msg"], "from hook");
    assert_eq!(v["hook_foo"], "bar");
    assert_eq!(v["hook"], "j.sh");
    assert_eq!(v["binding"], "onStartup");
    assert_eq!(v["output"], "stdout");
    let plain: serde_json::Value =
        serde_json::from_str(&op.wait_log("plain line", Duration::from_secs(5))).expect("json");
    assert_eq!(plain["msg"], "plain line");
    assert_eq!(plain["queue"], "main");
}

#[test]
fn proxy_mode_passes_hook_json_through_with_labels() {
    let body = "echo '{\"msg\":\"proxied\",\"foo\":\"bar\"}'";
    let op = Operator::start(
        &[("p.sh", hook("p", "configVersion: v1\nonStartup: 1", body))],
        &[],
        &[("LOG_PROXY_HOOK_JSON", "true")],
    );
    let v: serde_json::Value =
        serde_json::from_str(&op.wait_log("proxied", Duration::from_secs(10))).expect("json");
    assert_eq!(v["foo"], "bar");
    assert_eq!(v["hook"], "p.sh");
}

#[test]
fn text_logs_without_time() {
    let op = Operator::start(
        &[(
            "t.sh",
            hook("t", "configVersion: v1\nonStartup: 1", "echo hello-text"),
        )],
        &[],
        &[("LOG_TYPE", "text"), ("LOG_NO_TIME", "true")],
    );
    op.wait_runs(Duration::from_secs(10), |r| !r.is_empty());
    let line = op.wait_log("hello-text", Duration::from_secs(5));
    assert!(line.starts_with("INFO  hello-text"), "{line}");
    assert!(
        line.contains("hook=t.sh") && line.contains("output=stdout"),
        "{line}"
    );
}

/// The operator on `dir`'s hooks as PID 1 of a new PID namespace (unshare's only
/// child), JSON logs on a piped stdout.
fn start_as_pid1(dir: &TempDir) -> std::process::Child {
    std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", common::binary(), "start"])
        .args(["--listen-port", "0", "--hooks-dir"])
        .arg(dir.0.join("hooks"))
        .arg("--tmp-dir")
        .arg(dir.0.join("tmp"))
        .arg("--debug-unix-socket")
        .arg(dir.0.join("debug.socket"))
        .env("OUT_DIR", dir.0.join("out"))
        .env("LOG_TYPE", "json")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("unshare must be available (util-linux)")
}

/// As PID 1 (in a new PID namespace) the operator reaps orphaned grandchildren,
/// and still sees each hook's own exit status. No fixed wait: each orphan marks
/// its start, then runs `sleep 0.3`; the test waits until none of the operator's
/// children is such a sleep or a zombie, which only a reaper can bring about.
#[test]
fn pid1_reaps_orphans_without_stealing_hook_status() {
    let dir = TempDir::new("pid1");
    let orphan = r#"( sh -c 'touch "$OUT_DIR/orphan-$$"; exec sleep 0.3' & )"#;
    let orphaner = format!("{orphan} ; {orphan}");
    let config = "configVersion: v1\nschedule:\n- name: tick\n  crontab: \"* * * * * *\"\n  allowFailure: true";
    write_hooks(
        &dir.0.join("hooks"),
        &[
            (
                "o.sh",
                hook("o", "configVersion: v1\nonStartup: 1", &orphaner),
            ),
            ("f.sh", hook("f", config, "exit 7")),
        ],
    );
    std::fs::create_dir_all(dir.0.join("out")).expect("out");
    let mut child = start_as_pid1(&dir);
    let lines = common::stdout_lines(&mut child);
    let mut logs = String::new();
    let out = dir.0.join("out");
    let deadline = Instant::now() + Duration::from_secs(20);
    let orphans_started = || {
        std::fs::read_dir(&out).map_or(0, |d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("orphan-"))
                .count()
        })
    };
    let failing_hook_ran =
        || std::fs::read_to_string(out.join("runs.log")).is_ok_and(|l| l.contains("f [{"));
    while orphans_started() < 2 || !failing_hook_ran() {
        assert!(
            Instant::now() < deadline,
            "orphans or the failing hook never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The operator is unshare's only child.
    let operator_pid =
        std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
            .expect("children");
    let operator_pid = operator_pid
        .split_whitespace()
        .next()
        .expect("operator pid")
        .to_string();
    // Wait for the reaping and for the failing hook's logged status (the hook's
    // runs.log line is written when it starts, before it exits).
    let mut left = orphans_left(&operator_pid);
    while (!left.is_empty() || !logs.contains("exit status 7")) && Instant::now() < deadline {
        while let Ok(line) = lines.recv_timeout(Duration::from_millis(20)) {
            logs.push_str(&line);
            logs.push('\n');
        }
        left = orphans_left(&operator_pid);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(left.is_empty(), "orphans not reaped (pid, state): {left:?}");
    assert!(logs.contains("running as PID 1"), "{logs}");
    assert!(
        logs.contains("exit status 7"),
        "the failing hook's own status was seen: {logs}"
    );
}

/// As PID 1, SIGTERM ends the operator with exit code 0 (a pod stop must not wait for
/// the grace period and SIGKILL): the reaper thread must not keep the process alive.
/// A hook still running then gets the usual SIGTERM and nothing is left behind.
#[test]
fn pid1_exits_zero_on_sigterm_with_nothing_left_running() {
    let dir = TempDir::new("pid1-term");
    let config = "configVersion: v1\nonStartup: 1";
    write_hooks(
        &dir.0.join("hooks"),
        &[("s.sh", hook("s", config, "sleep 300; true"))],
    );
    std::fs::create_dir_all(dir.0.join("out")).expect("out");
    let mut child = start_as_pid1(&dir);
    let lines = common::stdout_lines(&mut child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(dir.0.join("out/runs.log")).is_ok_and(|l| l.contains("s [{")) {
        assert!(Instant::now() < deadline, "the startup hook never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    let operator_pid =
        std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
            .expect("children");
    let operator_pid: i32 = operator_pid
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("operator pid");
    // SAFETY: kill(2) on a pid we just read; no memory involved.
    unsafe { libc::kill(operator_pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("PID 1 still running 10 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut logs = String::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_millis(100)) {
        logs.push_str(&line);
        logs.push('\n');
    }
    assert_eq!(status.code(), Some(0), "exit code after SIGTERM: {logs}");
    assert!(logs.contains("running as PID 1"), "{logs}");
    assert!(
        !std::path::Path::new(&format!("/proc/{operator_pid}")).exists(),
        "the operator is gone"
    );
    assert_eq!(
        common::processes_mentioning(&dir.0),
        0,
        "no hook or child is left running"
    );
}

/// The operator's children that are orphans still sleeping or already zombies, as
/// (pid, state).
fn orphans_left(operator_pid: &str) -> Vec<(String, char)> {
    let mut left = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{operator_pid}/task")) else {
        return left;
    };
    for task in tasks.filter_map(Result::ok) {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children.split_whitespace() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.trim_start().chars().next())
                .unwrap_or('?');
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if state == 'Z' || cmdline == b"sleep\x000.3\x00" {
                left.push((pid.to_string(), state));
            }
        }
    }
    left
}
