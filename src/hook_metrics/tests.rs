//! The store against the seed's "grouped metrics" walkthrough, plus type checks,
//! histograms and label escaping.

use super::*;

fn run(store: &HookMetrics, hook: &str, lines: &[&str]) -> Result<(), String> {
    let ops = parse::parse(lines.join("\n").as_bytes()).map_err(|e| e.to_string())?;
    store.apply(hook, &ops)
}

fn samples(store: &HookMetrics) -> Vec<String> {
    store
        .render()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(String::from)
        .collect()
}

#[test]
fn seed_grouped_metrics_walkthrough() {
    let s = HookMetrics::default();
    let hook1_first = [
        r#"{"group":"hook1", "name":"hook_metric", "action":"add", "value":1, "labels":{"kind":"pod"}}"#,
        r#"{"group":"hook1", "name":"hook_metric", "action":"add", "value":1, "labels":{"kind":"replicaset"}}"#,
        r#"{"group":"hook1", "name":"hook_metric", "action":"add", "value":1, "labels":{"kind":"deployment"}}"#,
        r#"{"group":"hook1", "name":"hook1_special_metric", "action":"set", "value":12, "labels":{"label1":"value1"}}"#,
        r#"{"group":"hook1", "name":"common_metric", "action":"set", "value":300, "labels":{"source":"source3"}}"#,
        r#"{"name":"common_metric", "action":"set", "value":100, "labels":{"source":"source1"}}"#,
    ];
    let hook2_first = [
        r#"{"group":"hook2", "name":"hook_metric","action":"add", "value":1, "labels":{"kind":"configmap"}}"#,
        r#"{"group":"hook2", "name":"hook_metric","action":"add", "value":1, "labels":{"kind":"secret"}}"#,
        r#"{"group":"hook2", "name":"hook2_special_metric", "action":"set", "value":42}"#,
        r#"{"name":"common_metric", "action":"set", "value":200, "labels":{"source":"source2"}}"#,
    ];
    run(&s, "hook1.sh", &hook1_first).expect("hook1");
    run(&s, "hook2.sh", &hook2_first).expect("hook2");
    assert_eq!(s.series_count(), 10);
    run(
        &s,
        "hook1.sh",
        &[r#"{"group":"hook1", "name":"hook_metric", "action":"add", "value":1, "labels":{"kind":"pod"}}"#],
    )
    .expect("hook1 again");
    assert_eq!(
        samples(&s),
        [
            r#"common_metric{hook="hook1.sh",source="source1"} 100"#,
            r#"common_metric{hook="hook2.sh",source="source2"} 200"#,
            r#"hook2_special_metric{hook="hook2.sh"} 42"#,
            r#"hook_metric{hook="hook1.sh",kind="pod"} 2"#,
            r#"hook_metric{hook="hook2.sh",kind="configmap"} 1"#,
            r#"hook_metric{hook="hook2.sh",kind="secret"} 1"#,
        ]
    );
    run(&s, "hook2.sh", &[r#"{"group":"hook2", "action":"expire"}"#]).expect("expire");
    assert_eq!(
        samples(&s),
        [
            r#"common_metric{hook="hook1.sh",source="source1"} 100"#,
            r#"common_metric{hook="hook2.sh",source="source2"} 200"#,
            r#"hook_metric{hook="hook1.sh",kind="pod"} 2"#,
        ]
    );
}

#[test]
fn ungrouped_counters_keep_adding_and_hook_label_wins() {
    let s = HookMetrics::default();
    for _ in 0..3 {
        run(
            &s,
            "a.sh",
            &[r#"{"name":"runs","add":1.5,"labels":{"hook":"fake"}}"#],
        )
        .expect("run");
    }
    run(&s, "a.sh", &[r#"{"name":"other","set":1}"#]).expect("run");
    assert_eq!(
        s.render(),
        "# HELP other other\n# TYPE other gauge\nother{hook=\"a.sh\"} 1\n\
         # HELP runs runs\n# TYPE runs counter\nruns{hook=\"a.sh\"} 4.5\n"
    );
}

#[test]
fn histogram_buckets_are_cumulative() {
    let s = HookMetrics::default();
    let line = |v: f64| {
        format!(
            r#"{{"name":"lat","action":"observe","value":{v},"buckets":[1,5,2],"labels":{{"q":"a"}}}}"#
        )
    };
    let lines = [line(0.5), line(1.0), line(3.0), line(10.0)];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    run(&s, "h.sh", &refs).expect("observe");
    assert_eq!(
        samples(&s),
        [
            r#"lat_bucket{hook="h.sh",q="a",le="1"} 2"#,
            r#"lat_bucket{hook="h.sh",q="a",le="2"} 2"#,
            r#"lat_bucket{hook="h.sh",q="a",le="5"} 3"#,
            r#"lat_bucket{hook="h.sh",q="a",le="+Inf"} 4"#,
            r#"lat_sum{hook="h.sh",q="a"} 14.5"#,
            r#"lat_count{hook="h.sh",q="a"} 4"#,
        ]
    );
}

#[test]
fn type_conflicts_fail_the_whole_batch() {
    let s = HookMetrics::default();
    run(&s, "a.sh", &[r#"{"name":"m","add":1}"#]).expect("first");
    let err = run(
        &s,
        "a.sh",
        &[r#"{"name":"ok","set":1}"#, r#"{"name":"m","set":2}"#],
    )
    .expect_err("conflict");
    assert_eq!(
        err,
        "line 2: field 'action': metric \"m\" is already a counter"
    );
    assert_eq!(samples(&s), [r#"m{hook="a.sh"} 1"#], "nothing applied");
    let err = run(
        &s,
        "a.sh",
        &[
            r#"{"name":"h","action":"observe","value":1,"buckets":[1]}"#,
            r#"{"name":"h","action":"observe","value":1,"buckets":[2]}"#,
        ],
    )
    .expect_err("buckets");
    assert_eq!(
        err,
        "line 2: field 'buckets': metric \"h\" is already a histogram with buckets [1.0]"
    );
}

#[test]
fn expire_in_the_same_batch_and_escaping() {
    let s = HookMetrics::default();
    run(
        &s,
        "a.sh",
        &[
            r#"{"group":"g","name":"x","add":1}"#,
            r#"{"group":"g","action":"expire"}"#,
            r#"{"name":"y","set":1,"labels":{"v":"a\"b\\c\nd"}}"#,
        ],
    )
    .expect("run");
    assert_eq!(samples(&s), [r#"y{hook="a.sh",v="a\"b\\c\nd"} 1"#]);
}
