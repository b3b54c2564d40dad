//! Metrics end to end: a scheduled hook writes scripted `$METRICS_PATH` files step by
//! step (the test moves it to the next step), and every step's scrape of
//! `/metrics/hooks` is compared in full: ungrouped counters, group expiry, observe
//! buckets, `expire`, and a bad file that fails the run and changes nothing.
//! Also the self metrics' names and labels, and `QUEUE_ACTIONS_METRICS=no`.

use crate::common;

use common::{Operator, hook, metric};
use std::time::{Duration, Instant};

const SCHEDULE: &str = "configVersion: v1\nschedule:\n- name: tick\n  crontab: \"* * * * * *\"";

/// Each run: if `$OUT_DIR/step` moved on since the last applied step, write that
/// step's metrics file (`$OUT_DIR/metrics-<step>`) and remember the step.
const STEP_BODY: &str = r#"step=$(cat "$OUT_DIR/step" 2>/dev/null || echo 0)
last=$(cat "$OUT_DIR/last" 2>/dev/null || echo 0)
[ "$step" = "$last" ] && exit 0
cat "$OUT_DIR/metrics-$step" > "$METRICS_PATH"
echo "$step" > "$OUT_DIR/last""#;

fn step(op: &Operator, n: u32, lines: &[&str]) {
    let out = op.dir.0.join("out");
    std::fs::write(out.join(format!("metrics-{n}")), lines.join("\n")).expect("metrics file");
    std::fs::write(out.join("step"), n.to_string()).expect("step file");
}

/// Polls `/metrics/hooks` until `done(body)`; returns the body.
fn scrape_until(op: &Operator, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (code, body) = op.http_get("/metrics/hooks");
        assert_eq!(code, 200);
        if done(&body) {
            return body;
        }
        if Instant::now() > deadline {
            panic!(
                "{what}: not reached; last scrape:\n{body}\nlogs:\n{}",
                op.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hook_metrics_steps_scraped_exactly() {
    let op = Operator::start(&[("m.sh", hook("m", SCHEDULE, STEP_BODY))], &[], &[]);
    step(
        &op,
        1,
        &[
            r#"{"name":"runs_total","add":1}"#,
            r#"{"group":"g","name":"objects","action":"add","value":1,"labels":{"kind":"pod"}}"#,
            r#"{"group":"g","name":"objects","action":"add","value":1,"labels":{"kind":"rs"}}"#,
            r#"{"group":"g","name":"size","set":7}"#,
            r#"{"name":"latency","action":"observe","value":0.3,"buckets":[0.1,1,10]}"#,
            r#"{"name":"latency","action":"observe","value":4,"buckets":[0.1,1,10]}"#,
        ],
    );
    let body = scrape_until(&op, "step 1", |b| b.contains("runs_total"));
    assert_eq!(
        body,
        "# HELP latency latency\n# TYPE latency histogram\n\
         latency_bucket{hook=\"m.sh\",le=\"0.1\"} 0\nlatency_bucket{hook=\"m.sh\",le=\"1\"} 1\n\
         latency_bucket{hook=\"m.sh\",le=\"10\"} 2\nlatency_bucket{hook=\"m.sh\",le=\"+Inf\"} 2\n\
         latency_sum{hook=\"m.sh\"} 4.3\nlatency_count{hook=\"m.sh\"} 2\n\
         # HELP objects objects\n# TYPE objects counter\n\
         objects{hook=\"m.sh\",kind=\"pod\"} 1\nobjects{hook=\"m.sh\",kind=\"rs\"} 1\n\
         # HELP runs_total runs_total\n# TYPE runs_total counter\nruns_total{hook=\"m.sh\"} 1\n\
         # HELP size size\n# TYPE size gauge\nsize{hook=\"m.sh\"} 7\n"
    );
    let (_, all) = op.http_get("/metrics");
    assert!(
        all.contains("objects{hook=\"m.sh\",kind=\"pod\"} 1\n"),
        "{all}"
    );

    // Group g reported again with only pod: rs and size expire, pod keeps adding.
    step(
        &op,
        2,
        &[
            r#"{"name":"runs_total","add":1}"#,
            r#"{"group":"g","name":"objects","add":1,"labels":{"kind":"pod"}}"#,
        ],
    );
    let body = scrape_until(&op, "step 2", |b| b.contains("runs_total{hook=\"m.sh\"} 2"));
    let samples: Vec<&str> = body.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        samples,
        [
            "latency_bucket{hook=\"m.sh\",le=\"0.1\"} 0",
            "latency_bucket{hook=\"m.sh\",le=\"1\"} 1",
            "latency_bucket{hook=\"m.sh\",le=\"10\"} 2",
            "latency_bucket{hook=\"m.sh\",le=\"+Inf\"} 2",
            "latency_sum{hook=\"m.sh\"} 4.3",
            "latency_count{hook=\"m.sh\"} 2",
            "objects{hook=\"m.sh\",kind=\"pod\"} 2",
            "runs_total{hook=\"m.sh\"} 2",
        ]
    );

    // A bad line 2 fails the run; line 1 is not applied either.
    step(
        &op,
        3,
        &[
            r#"{"name":"runs_total","add":100}"#,
            r#"{"name":"size","action":"set"}"#,
        ],
    );
    let line = op.wait_log("bad metrics file", Duration::from_secs(15));
    assert!(
        line.contains(
            "m.sh FAILED: bad metrics file: line 2: field 'value': required for action \\\"set\\\""
        ),
        "{line}"
    );
    let (_, body) = op.http_get("/metrics");
    assert_eq!(metric(&body, "runs_total{hook=\"m.sh\"}"), Some(2.0));
    assert_eq!(
        metric(
            &body,
            "shell_operator_hook_run_errors_total{binding=\"tick\",hook=\"m.sh\",queue=\"main\"}"
        ),
        Some(1.0),
        "{body}"
    );

    // `expire` drops group g; ungrouped series stay. (Waits out the retry backoff.)
    step(
        &op,
        4,
        &[
            r#"{"group":"g","action":"expire"}"#,
            r#"{"name":"runs_total","add":1}"#,
        ],
    );
    let body = scrape_until(&op, "step 4", |b| b.contains("runs_total{hook=\"m.sh\"} 3"));
    assert!(!body.contains("objects"), "{body}");
    assert!(body.contains("latency_count{hook=\"m.sh\"} 2\n"), "{body}");
}

#[test]
fn self_metrics_names_and_queue_actions_switch() {
    let on_startup = "configVersion: v1\nonStartup: 1";
    let op = Operator::start(&[("s.sh", hook("s", on_startup, ""))], &[], &[]);
    op.wait_runs(Duration::from_secs(10), |r| !r.is_empty());
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let (_, body) = op.http_get("/metrics");
        if body.contains("hook_run_success_total") || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let labels = "{binding=\"onStartup\",hook=\"s.sh\",queue=\"main\"}";
    for series in [
        "shell_operator_live_ticks 1".to_string(),
        "shell_operator_tasks_queue_length{queue=\"main\"}".to_string(),
        format!("shell_operator_hook_run_success_total{labels} 1"),
        format!("shell_operator_hook_run_errors_total{labels} 0"),
        format!("shell_operator_hook_run_allowed_errors_total{labels} 0"),
        format!("shell_operator_hook_run_seconds_count{labels} 1"),
        format!("shell_operator_hook_run_user_cpu_seconds_count{labels} 1"),
        format!("shell_operator_hook_run_sys_cpu_seconds_count{labels} 1"),
        format!("shell_operator_hook_run_max_rss_bytes{labels}"),
        format!("shell_operator_task_wait_in_queue_seconds_total{labels}"),
        "shell_operator_tasks_queue_action_duration_seconds_count{queue_action=\"AddLast\",queue_name=\"main\"}".to_string(),
        "shell_operator_tasks_queue_action_duration_seconds_bucket{queue_action=\"RemoveFirst\",queue_name=\"main\",le=\"0.0001\"}".to_string(),
        "# TYPE shell_operator_tasks_queue_action_duration_seconds histogram".to_string(),
    ] {
        assert!(body.contains(&series), "missing {series}\n{body}");
    }
    let off = Operator::start(
        &[("s.sh", hook("s", on_startup, ""))],
        &[],
        &[("QUEUE_ACTIONS_METRICS", "no")],
    );
    off.wait_runs(Duration::from_secs(10), |r| !r.is_empty());
    let (_, body) = off.http_get("/metrics");
    assert!(body.contains("shell_operator_live_ticks 1"), "{body}");
    assert!(!body.contains("queue_action_duration"), "{body}");
}

/// The bundled example (`examples/hooks/005-hook-metrics`) writes a file the parser
/// accepts, with its group, counter and histogram.
#[test]
fn example_hook_metrics_file_is_valid() {
    let dir = common::TempDir::new("example-metrics");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/hooks/005-hook-metrics/disk-usage.sh");
    let metrics = dir.0.join("metrics.json");
    let status = std::process::Command::new(&script)
        .env("METRICS_PATH", &metrics)
        .env("BINDING_CONTEXT_PATH", "/dev/null")
        .status()
        .expect("run example hook");
    assert!(status.success());
    let text = std::fs::read(&metrics).expect("metrics file");
    let ops = shell_operator::hook_metrics::parse::parse(&text).expect("valid metrics file");
    let store = shell_operator::hook_metrics::HookMetrics::default();
    store.apply("disk-usage.sh", &ops).expect("apply");
    let out = store.render();
    assert!(
        out.contains("example_runs_total{hook=\"disk-usage.sh\"} 1\n"),
        "{out}"
    );
    assert!(
        out.contains("example_run_seconds_count{hook=\"disk-usage.sh\"} 1\n"),
        "{out}"
    );
    assert!(
        ops.iter()
            .skip(1)
            .take(ops.len() - 2)
            .all(|op| op.group.as_deref() == Some("tmp-files")),
        "{ops:?}"
    );
}
