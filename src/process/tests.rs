//! Tests of the one runner's rules (`run.rs`) on both kinds of child: a hook run
//! through the executor (log sink) and a captured run (`run_captured`'s sink). Each
//! rule is checked on both, with the outcome each caller actually gets. Stop flags
//! are each test's own, never the process-wide one (tests run in parallel).
// Needs unsafe for signals sent by the tests (libc); each block says why it is sound (SAFETY).
#![allow(unsafe_code)]

use super::capture::run_captured_under;
use super::run::{OUTPUT_DRAIN, Rules};
use super::{Captured, ExitStatus};
use crate::executor::{Executor, RunLabels, RunResult};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// A fresh directory for one test.
fn workdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("so-runner-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

fn rules(timeout: Option<Duration>, stop: &Arc<AtomicBool>, grace: Duration) -> Rules {
    Rules {
        timeout,
        stop: Arc::clone(stop),
        grace,
    }
}

fn no_stop() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

/// `body` run as a hook through the executor; its run time.
fn hook_run(dir: &Path, body: &str, rules: &Rules) -> (RunResult, Duration) {
    let hooks = dir.join("hooks");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    let path = hooks.join("hook.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let e = Executor {
        tmp_dir: dir.join("tmp"),
        ..Default::default()
    };
    e.prepare_tmp_dir().expect("tmp dir");
    let started = Instant::now();
    let run = e
        .run_under(
            &path,
            &|w| w.write_all(b"[]"),
            &RunLabels::default(),
            &[],
            rules,
        )
        .expect("the hook runs");
    (run, started.elapsed())
}

/// `body` run by `sh -c` with its output captured; its run time.
fn captured_run(body: &str, rules: &Rules, max: usize) -> (std::io::Result<Captured>, Duration) {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", body]);
    let started = Instant::now();
    let run = run_captured_under(&mut cmd, rules, max);
    (run, started.elapsed())
}

/// Whether `pid` is gone (or a zombie waiting for init).
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn pid_in(file: &Path) -> i32 {
    let text = std::fs::read_to_string(file).expect("pid file");
    text.trim().parse().expect("pid")
}

fn assert_dies(pid: i32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !dead(pid) {
        assert!(Instant::now() < deadline, "{what}: pid {pid} still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn timeout_kills_the_whole_group_of_a_hook_and_of_a_captured_run() {
    let dir = workdir("timeout");
    let limit = Duration::from_millis(300);
    let stop = no_stop();
    let body = |name: &str| {
        let gc = dir.join(name).display().to_string();
        format!("sleep 30 & echo $! > '{gc}'; sleep 30; echo never")
    };
    let (hook, took) = hook_run(
        &dir,
        &body("hook-gc"),
        &rules(Some(limit), &stop, Duration::ZERO),
    );
    assert_eq!(hook.status, ExitStatus::TimedOut(limit));
    assert!(took < Duration::from_secs(5), "hook took {took:?}");
    assert_dies(pid_in(&dir.join("hook-gc")), "the hook's grandchild");

    let r = rules(Some(limit), &stop, Duration::ZERO);
    let (captured, took) = captured_run(&body("captured-gc"), &r, MIB);
    let captured = captured.expect("runs");
    assert_eq!(captured.status, ExitStatus::TimedOut(limit));
    assert_eq!(captured.stdout, b"");
    assert!(took < Duration::from_secs(5), "captured run took {took:?}");
    assert_dies(
        pid_in(&dir.join("captured-gc")),
        "the captured run's grandchild",
    );
}

#[test]
fn a_grandchild_holding_the_pipes_keeps_neither_kind_past_the_drain() {
    let dir = workdir("drain");
    let stop = no_stop();
    let r = rules(None, &stop, Duration::ZERO);
    let body = |name: &str| {
        let gc = dir.join(name).display().to_string();
        format!("sleep 30 & echo $! > '{gc}'; echo done; echo warn >&2; exit 0")
    };
    let most = OUTPUT_DRAIN + Duration::from_secs(3);

    let (hook, took) = hook_run(&dir, &body("hook-gc"), &r);
    let gc = pid_in(&dir.join("hook-gc"));
    // SAFETY: kill(2) on a pid we started; no memory is touched.
    unsafe { libc::kill(gc, libc::SIGKILL) };
    assert_eq!(hook.status, ExitStatus::Code(0));
    assert_eq!(hook.stderr, "warn\n");
    assert!(took >= OUTPUT_DRAIN && took < most, "hook took {took:?}");

    let (captured, took) = captured_run(&body("captured-gc"), &r, MIB);
    let gc = pid_in(&dir.join("captured-gc"));
    // SAFETY: as above.
    unsafe { libc::kill(gc, libc::SIGKILL) };
    let captured = captured.expect("runs");
    assert_eq!(captured.status, ExitStatus::Code(0));
    assert_eq!(captured.stdout, b"done\n");
    assert_eq!(captured.stderr, b"warn\n");
    assert!(
        took >= OUTPUT_DRAIN && took < most,
        "captured run took {took:?}"
    );
}

#[test]
fn the_stdout_cap_kills_a_captured_run_and_its_group() {
    let dir = workdir("cap");
    let stop = no_stop();
    let gc = dir.join("gc").display().to_string();
    let body = format!("sleep 30 & echo $! > '{gc}'; head -c 5000 /dev/zero; sleep 30");
    let (captured, took) = captured_run(&body, &rules(None, &stop, Duration::ZERO), 4096);
    let err = captured.err().expect("too much output");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        err.to_string(),
        "output is larger than 4096 bytes; the process was killed"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_dies(pid_in(&dir.join("gc")), "the grandchild");
}

#[test]
fn binary_output_round_trips_byte_for_byte() {
    let dir = workdir("binary");
    // 300 KiB of every byte value in a scrambled order: many reads, pipe buffers
    // refilled, no newline structure, invalid UTF-8 throughout.
    let bytes: Vec<u8> = (0..300 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let file = dir.join("blob");
    std::fs::write(&file, &bytes).expect("write");
    let body = format!("cat '{0}'; cat '{0}' >&2", file.display());
    let stop = no_stop();
    let (captured, _) = captured_run(&body, &rules(None, &stop, Duration::ZERO), MIB);
    let captured = captured.expect("runs");
    assert_eq!(captured.status, ExitStatus::Code(0));
    assert!(captured.stdout == bytes, "stdout differs");
    assert!(
        captured.stderr[..] == bytes[bytes.len() - 64 * 1024..],
        "stderr's last 64 KiB differ"
    );
}

#[test]
fn only_the_end_of_a_hooks_long_stderr_is_kept() {
    let dir = workdir("tail");
    let stop = no_stop();
    let body = "head -c 70000 /dev/zero | tr '\\0' a >&2; echo END >&2";
    let (hook, _) = hook_run(&dir, body, &rules(None, &stop, Duration::ZERO));
    assert_eq!(hook.stderr.len(), 64 * 1024);
    assert!(
        hook.stderr.ends_with("aaaaEND\n"),
        "{}",
        &hook.stderr[65000..]
    );
}

/// The stop flag: SIGTERM to the group at once. A hook started while the operator
/// stops used to run to its end (only the hooks running when `terminate_all` looked
/// were signalled).
#[test]
fn the_stop_flag_terminates_a_hook_and_interrupts_a_captured_run() {
    let dir = workdir("stop");
    let stop = Arc::new(AtomicBool::new(true));
    let r = rules(None, &stop, Duration::from_secs(30));
    let (hook, took) = hook_run(&dir, "sleep 30", &r);
    assert_eq!(hook.status, ExitStatus::Signal(libc::SIGTERM));
    assert!(took < Duration::from_secs(5), "hook took {took:?}");

    let (captured, took) = captured_run("sleep 30", &r, MIB);
    let err = captured.err().expect("interrupted");
    assert_eq!(err.kind(), std::io::ErrorKind::Interrupted);
    assert_eq!(err.to_string(), "stopped: the operator is shutting down");
    assert!(took < Duration::from_secs(5), "captured run took {took:?}");
}

/// A child that ignores SIGTERM gets SIGKILL once the grace period has passed.
#[test]
fn a_child_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = workdir("grace");
    let grace = Duration::from_millis(300);
    for kind in ["hook", "captured"] {
        let ready = dir.join(format!("{kind}-ready"));
        let body = format!("trap '' TERM; touch '{}'; sleep 30", ready.display());
        let stop = no_stop();
        let setter = {
            let (stop, ready) = (Arc::clone(&stop), ready.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                while !ready.exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                stop.store(true, Ordering::SeqCst);
                Instant::now()
            })
        };
        let r = rules(None, &stop, grace);
        let ended_at = if kind == "hook" {
            let (hook, _) = hook_run(&dir.join(kind), &body, &r);
            assert_eq!(hook.status, ExitStatus::Signal(libc::SIGKILL), "{kind}");
            Instant::now()
        } else {
            let (captured, _) = captured_run(&body, &r, MIB);
            let err = captured.err().expect("interrupted");
            assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "{kind}");
            Instant::now()
        };
        let stopped_at = setter.join().expect("setter");
        let after = ended_at.duration_since(stopped_at);
        assert!(
            after >= grace && after < Duration::from_secs(5),
            "{kind}: ended {after:?} after the stop"
        );
    }
}
