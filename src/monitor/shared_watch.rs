//! Two bindings of one hook on one watch (same kind and namespace, different
//! jqFilters): an object created after the bindings' Synchronization, or while
//! they are being enabled, reaches each binding exactly once, in its
//! Synchronization snapshot or as an Added event. The monitor thread runs against
//! an in-process kube-sim, with the helpers of `parse_once.rs`.

use super::parse_once::{Running, client, enable, hook};
use super::store::KubeEvent;
use super::sync::Input;
use crate::hook::config::WatchEventType;
use kube_sim::Sim;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const BINDINGS: &str = "\
- name: data\n  kind: ConfigMap\n  namespace: {nameSelector: {matchNames: [sw]}}\n  jqFilter: .data\n\
- name: names\n  kind: ConfigMap\n  namespace: {nameSelector: {matchNames: [sw]}}\n  jqFilter: .metadata.name\n";

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "sw"}, "data": {"k": name}})
}

/// The Synchronization as the queue runs it: each binding's snapshot read (the
/// names in it), then the binding released.
fn synchronize(run: &Running) -> (Vec<Vec<String>>, Vec<KubeEvent>) {
    let snapshots = (0..2)
        .map(|b| {
            let read = run.store.step(0, b, Input::ReadForSync).objects;
            read.iter()
                .map(|i| i.namespace_and_name().1.to_string())
                .collect()
        })
        .collect();
    let released = (0..2)
        .flat_map(|b| run.store.step(0, b, Input::Release).events)
        .collect();
    (snapshots, released)
}

/// The bindings that got an Added event for `name`, sorted, once the event for
/// ConfigMap `fence` (created now) reached both.
fn added_until_fence(sim: &Sim, run: &Running, mut events: Vec<KubeEvent>) -> Vec<usize> {
    sim.create(cm("fence")).expect("fence");
    let fenced = |events: &[KubeEvent]| {
        let fence = events
            .iter()
            .filter(|e| e.item.namespace_and_name().1 == "fence");
        fence.count() == 2
    };
    while !fenced(&events) {
        let e = run.events.recv_timeout(Duration::from_secs(20));
        events.push(e.expect("an event before the fence reached both bindings"));
    }
    events
        .into_iter()
        .filter(|e| e.watch_event == WatchEventType::Added)
        .filter(|e| e.item.namespace_and_name().1 == "late")
        .map(|e| e.binding)
        .collect()
}

/// Created after the Synchronization: an Added event for each binding.
#[test]
fn an_object_created_after_synchronization_is_added_for_both_bindings() {
    let sim = Sim::start();
    sim.create(cm("seed")).expect("seed");
    let run = enable(&client(&sim), hook(BINDINGS));
    let (snapshots, released) = synchronize(&run);
    assert_eq!(snapshots, [vec!["seed"], vec!["seed"]]);
    assert_eq!(sim.watch_count(), 1, "one watch for both bindings");
    sim.create(cm("late")).expect("create");
    assert_eq!(added_until_fence(&sim, &run, released), [0, 1]);
}

/// Created while the bindings are being enabled (once the shared watch is open,
/// racing its initial list and the second binding's own list): each binding sees
/// it once, in its Synchronization snapshot or as an Added event.
#[test]
fn an_object_created_while_enabling_reaches_each_binding_once() {
    let sim = Arc::new(Sim::start());
    sim.create(cm("seed")).expect("seed");
    let creator = {
        let sim = Arc::clone(&sim);
        std::thread::spawn(move || {
            while sim.watch_count() == 0 {
                std::thread::yield_now();
            }
            sim.create(cm("late")).expect("create");
        })
    };
    let run = enable(&client(&sim), hook(BINDINGS));
    creator.join().expect("creator");
    let (snapshots, released) = synchronize(&run);
    let mut seen: Vec<usize> = (0..2)
        .filter(|b| snapshots[*b].iter().any(|n| n == "late"))
        .collect();
    seen.extend(added_until_fence(&sim, &run, released));
    seen.sort();
    assert_eq!(seen, [0, 1], "snapshots {snapshots:?}");
}
