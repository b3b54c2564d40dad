//! A hook whose events stream in runs fewer, larger runs (issue 41,
//! `src/queue/pace.rs`): kube-sim gets 300 ConfigMaps 10 ms apart while the hook
//! takes 200 ms a run. Before pacing, each run took the ~20 events that came during
//! the previous one (about 15 runs for the stream); now a run that follows a
//! combined one starts only after a pause of up to 250 ms, so the stream goes in
//! about half as many runs, every event in exactly one of them. A change that finds
//! the hook idle still runs it alone.

use crate::common::{self, Operator, hook};
use kube_sim::Sim;
use serde_json::{Value, json};
use std::time::Duration;

const STREAM: usize = 300;

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "pace"}, "data": {"v": "1"}})
}

/// Names of the objects in each run's Event contexts.
fn event_runs(op: &Operator) -> Vec<Vec<String>> {
    op.runs()
        .iter()
        .map(|(_, run)| {
            run.as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["type"] == "Event")
                .filter_map(|c| c["object"]["metadata"]["name"].as_str())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|names| !names.is_empty())
        .collect()
}

#[test]
fn a_stream_of_events_goes_in_fewer_larger_runs_and_a_lone_one_alone() {
    let sim = Sim::start();
    let dir = common::TempDir::new("kubeconfig");
    let kubeconfig = dir.0.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [pace]";
    let op = Operator::start(
        &[("p.sh", hook("p", config, "sleep 0.2"))],
        &["--kube-config", kubeconfig.to_str().expect("utf8")],
        &[],
    );
    op.wait_runs(Duration::from_secs(20), |r| !r.is_empty());
    for i in 0..STREAM {
        sim.create(cm(&format!("s{i:03}"))).expect("create");
        std::thread::sleep(Duration::from_millis(10));
    }
    let seen = |op: &Operator| event_runs(op).iter().map(Vec::len).sum::<usize>();
    op.wait_runs(Duration::from_secs(60), |_| seen(&op) >= STREAM);
    let runs = event_runs(&op);
    let mut names: Vec<&String> = runs.iter().flatten().collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), STREAM, "every event once: {runs:?}");
    assert_eq!(seen(&op), STREAM, "no event twice");
    let sizes: Vec<usize> = runs.iter().map(Vec::len).collect();
    eprintln!("contexts per run of the stream: {sizes:?}");
    // 3 s of events, 200 ms runs: about 15 runs unpaced, 7 or 8 paced (fewer when
    // the machine is slow and runs take longer).
    assert!(
        sizes.len() <= 11,
        "the stream went in {} runs: {sizes:?}",
        sizes.len()
    );
    // The queue is idle again: one change runs the hook with it alone.
    std::thread::sleep(Duration::from_secs(1));
    sim.create(cm("lone")).expect("create");
    op.wait_runs(Duration::from_secs(20), |_| {
        event_runs(&op)
            .last()
            .is_some_and(|r| r.contains(&"lone".to_string()))
    });
    assert_eq!(event_runs(&op).last(), Some(&vec!["lone".to_string()]));
}
