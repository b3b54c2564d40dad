//! End-to-end tests of the foundation: the real binary on temp hooks dirs; every
//! assertion is on the binding context JSON the hooks actually received, the exit
//! code, or a metric actually scraped.

use crate::common;

use common::{Operator, hook, metric};
use serde_json::json;
use std::time::{Duration, Instant};

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn on_startup_hooks_run_by_order_then_name() {
    let op = Operator::start(
        &[
            (
                "001-a.sh",
                hook("a", "configVersion: v1\nonStartup: 10", ""),
            ),
            ("002-b.sh", hook("b", "configVersion: v1\nonStartup: 1", "")),
            (
                "003-c.sh",
                hook("c", "configVersion: v1\nonStartup: 10", ""),
            ),
            (
                "sub/004-d.sh",
                hook("d", "configVersion: v1\nonStartup: 5", ""),
            ),
            (
                "lib/not-a-hook.sh",
                hook("lib", "configVersion: v1\nonStartup: 0", ""),
            ),
        ],
        &[],
        &[],
    );
    let runs = op.wait_runs(10 * SECOND, |r| r.len() >= 4);
    let tags: Vec<&str> = runs.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tags, ["b", "d", "a", "c"]);
    for (_, ctx) in &runs {
        assert_eq!(ctx, &json!([{"binding": "onStartup"}]));
    }
}

#[test]
fn schedule_context_carries_the_binding_name() {
    let config = "configVersion: v1\nschedule:\n- name: every-second\n  crontab: \"* * * * * *\"\n- crontab: \"*/1 * * * * *\"";
    let op = Operator::start(&[("s.sh", hook("s", config, ""))], &[], &[]);
    let runs = op.wait_runs(10 * SECOND, |r| r.len() >= 2);
    let all: Vec<serde_json::Value> = runs
        .iter()
        .flat_map(|(_, c)| c.as_array().cloned().unwrap_or_default())
        .collect();
    assert!(
        all.contains(&json!({"binding": "every-second", "type": "Schedule"})),
        "{all:?}"
    );
    assert!(
        all.contains(&json!({"binding": "schedule", "type": "Schedule"})),
        "default name; {all:?}"
    );
}

#[test]
fn queued_tasks_of_one_hook_are_combined_into_one_run() {
    // Two bindings fire every second; the first run sleeps, so tasks pile up behind it.
    let config = "configVersion: v1\nschedule:\n- name: a\n  crontab: \"* * * * * *\"\n- name: b\n  crontab: \"* * * * * *\"";
    let body = "[ -f \"$OUT_DIR/slept\" ] || { touch \"$OUT_DIR/slept\"; sleep 3; }";
    let op = Operator::start(&[("c.sh", hook("c", config, body))], &[], &[]);
    let runs = op.wait_runs(15 * SECOND, |r| r.len() >= 2);
    let second = runs[1].1.as_array().expect("array");
    assert!(
        second.len() >= 3,
        "expected the piled-up contexts in one run, got {second:?}"
    );
    let names: Vec<&str> = second
        .iter()
        .map(|c| c["binding"].as_str().unwrap_or(""))
        .collect();
    for c in second {
        assert_eq!(c["type"], "Schedule", "{second:?}");
    }
    // Both bindings fire on every tick, in config order: the contexts alternate.
    for pair in names.windows(2) {
        assert_ne!(pair[0], pair[1], "{names:?}");
    }
}

#[test]
fn adjacent_contexts_of_a_group_collapse_to_the_last() {
    let config = "configVersion: v1\nschedule:\n- name: a\n  crontab: \"* * * * * *\"\n  group: pods\n- name: b\n  crontab: \"* * * * * *\"\n  group: pods";
    let body = "[ -f \"$OUT_DIR/slept\" ] || { touch \"$OUT_DIR/slept\"; sleep 3; }";
    let op = Operator::start(&[("g.sh", hook("g", config, body))], &[], &[]);
    let runs = op.wait_runs(15 * SECOND, |r| r.len() >= 2);
    assert_eq!(
        runs[1].1,
        json!([{"binding": "b", "groupName": "pods", "type": "Group"}])
    );
}

#[test]
fn failed_hook_is_retried_after_backoff_and_blocks_its_queue() {
    let fail_once = "[ -f \"$OUT_DIR/failed\" ] || { touch \"$OUT_DIR/failed\"; echo 'first run fails' >&2; exit 1; }";
    let op = Operator::start(
        &[
            (
                "1-flaky.sh",
                hook("flaky", "configVersion: v1\nonStartup: 1", fail_once),
            ),
            (
                "2-next.sh",
                hook("next", "configVersion: v1\nonStartup: 2", ""),
            ),
        ],
        &[],
        &[],
    );
    let started = Instant::now();
    let runs = op.wait_runs(15 * SECOND, |r| r.len() >= 3);
    let tags: Vec<&str> = runs.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        tags,
        ["flaky", "flaky", "next"],
        "the queue waits for the failed head task"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(4500),
        "retried after ~5s backoff, took {:?}",
        started.elapsed()
    );
    let (_, body) = op.http_get("/metrics");
    let labels = "{binding=\"onStartup\",hook=\"1-flaky.sh\",queue=\"main\"}";
    assert_eq!(
        metric(
            &body,
            &format!("shell_operator_hook_run_errors_total{labels}")
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        metric(
            &body,
            &format!("shell_operator_hook_run_success_total{labels}")
        ),
        Some(1.0),
        "{body}"
    );
    let by_cause =
        "shell_operator_task_errors_total{cause=\"hook\",queue=\"main\",task=\"HookRun\"}";
    assert_eq!(metric(&body, by_cause), Some(1.0), "{body}");
    let log = op.wait_log("Hook failed, will retry", SECOND);
    assert!(
        log.contains("first run fails") && log.contains("\"hook\":\"1-flaky.sh\""),
        "{log}"
    );
}

/// A hook that exits 0 but writes a `$KUBERNETES_PATCH_PATH` that is no patch
/// fails its run as flant does (retried, here once), and the failure is counted
/// as invalid input, not as the hook's exit: `task_errors_total{cause}`.
#[test]
fn a_bad_patch_file_is_counted_as_invalid_input() {
    let body = r#"[ -f "$OUT_DIR/first" ] || { touch "$OUT_DIR/first"; echo '{"operation": "Explode"}' > "$KUBERNETES_PATCH_PATH"; }"#;
    let op = Operator::start(
        &[("p.sh", hook("p", "configVersion: v1\nonStartup: 1", body))],
        &[],
        &[],
    );
    op.wait_runs(15 * SECOND, |r| r.len() >= 2);
    let series = |cause: &str| {
        format!(
            "shell_operator_task_errors_total{{cause=\"{cause}\",queue=\"main\",task=\"HookRun\"}}"
        )
    };
    let deadline = Instant::now() + 5 * SECOND;
    let body = loop {
        let (_, body) = op.http_get("/metrics");
        if metric(&body, &series("invalid_input")).is_some() || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(metric(&body, &series("invalid_input")), Some(1.0), "{body}");
    for other in ["hook", "transient", "internal"] {
        assert_eq!(metric(&body, &series(other)), None, "{other}\n{body}");
    }
    let log = op.wait_log("Hook failed, will retry", SECOND);
    assert!(log.contains("KUBERNETES_PATCH_PATH"), "{log}");
}

/// An output file the operator cannot read (here the hook made
/// `$KUBERNETES_PATCH_PATH` a directory) fails the run, naming the variable and the
/// path, and nothing the run wrote is applied (its metric); the retry then succeeds.
#[test]
fn an_unreadable_output_file_fails_the_run_and_applies_nothing() {
    let body = r#"echo '{"name":"runs_total","add":1}' > "$METRICS_PATH"
[ -f "$OUT_DIR/first" ] || { touch "$OUT_DIR/first"; rm "$KUBERNETES_PATCH_PATH"; mkdir "$KUBERNETES_PATCH_PATH"; }"#;
    let op = Operator::start(
        &[("p.sh", hook("p", "configVersion: v1\nonStartup: 1", body))],
        &[],
        &[],
    );
    op.wait_runs(15 * SECOND, |r| r.len() >= 2);
    let log = op.wait_log("Hook failed, will retry", SECOND);
    assert!(
        log.contains("$KUBERNETES_PATCH_PATH file ")
            && log.contains("kubernetes-patch")
            && log.contains("cannot read it"),
        "{log}"
    );
    let labels = "{binding=\"onStartup\",hook=\"p.sh\",queue=\"main\"}";
    let deadline = Instant::now() + 5 * SECOND;
    let body = loop {
        let (_, body) = op.http_get("/metrics");
        if metric(
            &body,
            &format!("shell_operator_hook_run_success_total{labels}"),
        ) == Some(1.0)
            || Instant::now() > deadline
        {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for (series, value) in [
        (format!("shell_operator_hook_run_errors_total{labels}"), 1.0),
        (
            format!("shell_operator_hook_run_success_total{labels}"),
            1.0,
        ),
        ("runs_total{hook=\"p.sh\"}".to_string(), 1.0),
    ] {
        assert_eq!(metric(&body, &series), Some(value), "{series}\n{body}");
    }
}

#[test]
fn allow_failure_moves_on_without_backoff() {
    let config = "configVersion: v1\nschedule:\n- name: tick\n  crontab: \"* * * * * *\"\n  allowFailure: true";
    let op = Operator::start(&[("f.sh", hook("f", config, "exit 1"))], &[], &[]);
    let started = Instant::now();
    op.wait_runs(10 * SECOND, |r| r.len() >= 3);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "no 5s backoff between runs"
    );
    let (_, body) = op.http_get("/metrics");
    let labels = "{binding=\"tick\",hook=\"f.sh\",queue=\"main\"}";
    let allowed = metric(
        &body,
        &format!("shell_operator_hook_run_allowed_errors_total{labels}"),
    )
    .unwrap_or(0.0);
    assert!(allowed >= 3.0, "{body}");
    assert_eq!(
        metric(
            &body,
            &format!("shell_operator_hook_run_errors_total{labels}")
        ),
        Some(0.0)
    );
}

#[test]
fn named_queue_runs_while_main_is_blocked() {
    let blocked = "configVersion: v1\nschedule:\n- name: stuck\n  crontab: \"* * * * * *\"";
    let side =
        "configVersion: v1\nschedule:\n- name: side\n  crontab: \"* * * * * *\"\n  queue: side";
    let op = Operator::start(
        &[
            ("a-stuck.sh", hook("stuck", blocked, "exit 1")),
            ("b-side.sh", hook("side", side, "")),
        ],
        &[],
        &[],
    );
    let runs = op.wait_runs(15 * SECOND, |r| {
        r.iter().filter(|(t, _)| t == "side").count() >= 4
    });
    let stuck = runs.iter().filter(|(t, _)| t == "stuck").count();
    let side = runs.iter().filter(|(t, _)| t == "side").count();
    // Without the backoff "stuck" would run every second too.
    assert!(
        stuck >= 1 && (stuck <= 2 || stuck * 2 <= side),
        "main retries with backoff only: {stuck} runs vs {side}"
    );
    assert!(
        (1..=2).contains(&stuck),
        "main retries with backoff only: {stuck} runs"
    );
}

#[test]
fn execution_rate_throttles_and_piles_up_contexts() {
    let config = "configVersion: v1\nschedule:\n- name: tick\n  crontab: \"* * * * * *\"\n  queue: rl\nsettings:\n  executionMinInterval: 3s\n  executionBurst: 1";
    let body = "date +%s.%N >> \"$OUT_DIR/times\"";
    let op = Operator::start(&[("r.sh", hook("r", config, body))], &[], &[]);
    let runs = op.wait_runs(20 * SECOND, |r| r.len() >= 3);
    let times: Vec<f64> = std::fs::read_to_string(op.dir.0.join("out/times"))
        .expect("times")
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect();
    for w in times.windows(2) {
        assert!(w[1] - w[0] >= 2.8, "runs at least 3s apart: {times:?}");
    }
    let later = runs[2].1.as_array().expect("array").len();
    assert!(
        later >= 2,
        "events that waited for the rate limit are combined: {runs:?}"
    );
}

#[test]
fn sigterm_stops_a_running_hook_gracefully_and_exits_zero() {
    let body = "trap 'echo \"term\" >> \"$OUT_DIR/signals\"; exit 0' TERM\necho started >> \"$OUT_DIR/signals\"\nsleep 60 &\nwait";
    let mut op = Operator::start(
        &[(
            "long.sh",
            hook("long", "configVersion: v1\nonStartup: 1", body),
        )],
        &[],
        &[],
    );
    let signals = op.dir.0.join("out/signals");
    let deadline = Instant::now() + 10 * SECOND;
    while !std::fs::read_to_string(&signals)
        .unwrap_or_default()
        .contains("started")
    {
        assert!(
            Instant::now() < deadline,
            "hook never started: {}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    op.signal(libc::SIGTERM);
    assert_eq!(op.wait_exit(10 * SECOND), Some(0), "logs: {}", op.logs());
    assert_eq!(
        std::fs::read_to_string(&signals).expect("signals"),
        "started\nterm\n"
    );
    // Neither the run's temp files nor those made ahead for a next run are left.
    let left: Vec<_> = std::fs::read_dir(op.dir.0.join("tmp"))
        .expect("tmp dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "left in the tmp dir: {left:?}");
}

#[test]
fn a_hook_ignoring_sigterm_is_killed_after_the_grace_period() {
    let body = "trap '' TERM\necho started >> \"$OUT_DIR/signals\"\nwhile true; do sleep 0.1; done";
    let mut op = Operator::start(
        &[(
            "stubborn.sh",
            hook("s", "configVersion: v1\nonStartup: 1", body),
        )],
        &["--shutdown-grace-period", "1s"],
        &[],
    );
    op.wait_runs(10 * SECOND, |r| !r.is_empty());
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    op.signal(libc::SIGTERM);
    assert_eq!(op.wait_exit(10 * SECOND), Some(0));
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t0.elapsed()
    );
    op.wait_log("did not stop within the grace period", SECOND);
}

#[test]
fn hook_run_timeout_kills_a_hung_hook_and_counts_a_failure() {
    let config = "configVersion: v1\nschedule:\n- name: hang\n  crontab: \"* * * * * *\"\n  allowFailure: true";
    let op = Operator::start(
        &[("h.sh", hook("h", config, "sleep 60"))],
        &["--hook-run-timeout", "500ms"],
        &[],
    );
    op.wait_runs(10 * SECOND, |r| r.len() >= 2);
    let log = op.wait_log("Hook failed, but allowed to fail", 5 * SECOND);
    assert!(log.contains("timed out after 0.5s"), "{log}");
}

#[test]
fn metrics_and_health_endpoints() {
    let op = Operator::start(
        &[("ok.sh", hook("ok", "configVersion: v1\nonStartup: 1", ""))],
        &["--prometheus-metrics-prefix", "my_"],
        &[],
    );
    op.wait_runs(10 * SECOND, |r| !r.is_empty());
    let deadline = Instant::now() + 5 * SECOND;
    while op.http_get("/ready").0 != 200 {
        assert!(Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(op.http_get("/healthz"), (200, "ok\n".to_string()));
    // The queue-length series appears with the main thread's first update.
    let (code, body) = loop {
        let (code, body) = op.http_get("/metrics");
        if body.contains("my_tasks_queue_length{queue=\"main\"}")
            || Instant::now() > deadline + 5 * SECOND
        {
            break (code, body);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, 200);
    assert!(
        metric(&body, "my_live_ticks").unwrap_or(0.0) >= 1.0,
        "{body}"
    );
    assert_eq!(
        metric(
            &body,
            "my_hook_run_success_total{binding=\"onStartup\",hook=\"ok.sh\",queue=\"main\"}"
        ),
        Some(1.0),
        "{body}"
    );
    assert!(body.contains("my_hook_run_seconds_bucket{binding=\"onStartup\",hook=\"ok.sh\",queue=\"main\",le=\"0.02\"}"), "{body}");
    assert_eq!(
        metric(&body, "my_tasks_queue_length{queue=\"main\"}"),
        Some(0.0),
        "{body}"
    );
    assert!(
        metric(
            &body,
            "my_hook_run_max_rss_bytes{binding=\"onStartup\",hook=\"ok.sh\",queue=\"main\"}"
        )
        .unwrap_or(0.0)
            > 0.0,
        "{body}"
    );
}

/// Startup binds everything before anything runs: a debug socket that cannot be
/// bound exits 1, and no hook ran. The socket path is too long for a unix socket
/// and sits 600 directories deep, so its bind fails only after the operator made
/// those directories: when binding came after the queues started, the onStartup
/// hooks ran meanwhile. The fence for "no hook ran": every process started from
/// this test's hooks dir is gone (a hook writes its record as its first action, so
/// a hook that started has written it by then), and the operator, having exited,
/// can start no more.
#[test]
fn unbindable_debug_socket_exits_1_before_any_hook_runs() {
    let deep = common::TempDir::new("deep");
    let socket = deep.0.join("d/".repeat(600)).join("debug.socket");
    let mut op = Operator::start(
        &[
            ("001-a.sh", hook("a", "configVersion: v1\nonStartup: 1", "")),
            ("002-b.sh", hook("b", "configVersion: v1\nonStartup: 2", "")),
        ],
        &["--debug-unix-socket", socket.to_str().expect("utf8")],
        &[],
    );
    assert_eq!(op.wait_exit(10 * SECOND), Some(1));
    op.wait_log("debug socket", 10 * SECOND);
    let hooks_dir = op.dir.0.join("hooks");
    let deadline = Instant::now() + 10 * SECOND;
    while common::processes_mentioning(&hooks_dir) > 0 {
        assert!(Instant::now() < deadline, "hook processes did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(op.runs().is_empty(), "hooks ran: {:?}", op.runs());
}

/// The hooks' `--config` run a few at a time (each sleeps here, so one after the
/// other would never overlap), and the hooks still run in their order.
#[test]
fn hooks_config_runs_overlap_and_the_order_holds() {
    let slow = |tag: &str, order: u32| {
        format!(
            "#!/bin/sh\nif [ \"$1\" = \"--config\" ]; then\n\
             echo \"{tag} start $(date +%s%N)\" >> \"$OUT_DIR/config.log\"\nsleep 0.3\n\
             echo \"{tag} end $(date +%s%N)\" >> \"$OUT_DIR/config.log\"\n\
             echo 'configVersion: v1'; echo 'onStartup: {order}'; exit 0\nfi\n\
             echo '{tag} {{}}' >> \"$OUT_DIR/runs.log\"\n"
        )
    };
    let hooks = [
        ("a.sh", slow("a", 4)),
        ("b.sh", slow("b", 3)),
        ("c.sh", slow("c", 2)),
        ("d.sh", slow("d", 1)),
    ];
    let op = Operator::start(&hooks, &[], &[]);
    let runs = op.wait_runs(20 * SECOND, |r| r.len() >= 4);
    let tags: Vec<&str> = runs.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tags, ["d", "c", "b", "a"]);
    let log = std::fs::read_to_string(op.dir.0.join("out/config.log")).expect("config.log");
    let at = |tag: &str, what: &str| -> u128 {
        log.lines()
            .find_map(|l| {
                let mut f = l.split(' ');
                (f.next() == Some(tag) && f.next() == Some(what)).then(|| f.next()?.parse().ok())?
            })
            .unwrap_or_else(|| panic!("no {tag} {what} in {log}"))
    };
    let spans: Vec<(u128, u128)> = ["a", "b", "c", "d"]
        .iter()
        .map(|t| (at(t, "start"), at(t, "end")))
        .collect();
    let overlapping = spans
        .iter()
        .enumerate()
        .any(|(i, a)| spans[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(overlapping, "no two --config ran at once: {log}");
}
