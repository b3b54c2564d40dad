//! A binding that joins a running watch lists anew; events the watch delivered
//! before that list but the monitor had not taken yet reach the binding after it.
//! Those must not take the binding's snapshot back to an older state: the joined
//! binding skips every event its list already holds (resourceVersion at or below
//! the list's) and a relist older than its list, while the binding that was there
//! first gets them all. Driven without the monitor's thread, so the events are
//! queued when the second binding joins, every run.

use super::Monitor;
use super::parse_once::{client, hook};
use super::store::SnapshotStore;
use super::sync::Input;
use crate::hook::config::WatchEventType;
use crate::metrics::Metrics;
use kube_sim::Sim;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BINDINGS: &str = "\
- name: first\n  kind: ConfigMap\n  namespace: {nameSelector: {matchNames: [jw]}}\n  jqFilter: .data\n\
- name: joins\n  kind: ConfigMap\n  namespace: {nameSelector: {matchNames: [jw]}}\n  jqFilter: .data\n";

fn cm(value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "jw"}, "data": {"v": value}})
}

/// The filter result of each Modified event binding `b` releases, in order.
fn modified(store: &SnapshotStore, b: usize) -> Vec<String> {
    (store.step(0, b, Input::Release).events.into_iter())
        .filter(|e| e.watch_event == WatchEventType::Modified)
        .map(|e| e.item.filter_result().unwrap_or_default().to_string())
        .collect()
}

/// The monitor (not started) with the first binding enabled on a sim that holds
/// ConfigMap `x` at `v: "1"`, and a view of the watch events it has not taken yet.
struct Setup {
    monitor: Monitor,
    store: Arc<SnapshotStore>,
    queued: crossbeam_channel::Receiver<super::WatchEvent>,
}

impl Setup {
    fn first_binding(sim: &Sim) -> Setup {
        sim.create(cm("1")).expect("create");
        let hook = hook(BINDINGS);
        let store = Arc::new(SnapshotStore::new([(0, hook.config.kubernetes.len())]));
        let (events_tx, _) = crossbeam_channel::unbounded();
        let (watch_tx, watch_rx) = crossbeam_channel::unbounded();
        let queued = watch_rx.clone();
        let metrics = Arc::new(Metrics::new("joined_").expect("metrics"));
        let hooks = Arc::new(vec![hook]);
        let mut monitor = Monitor::new(
            client(sim),
            hooks.into(),
            Arc::clone(&store),
            metrics,
            watch_tx,
            watch_rx,
            events_tx,
        );
        monitor.enable_one(0);
        Setup {
            monitor,
            store,
            queued,
        }
    }
}

impl Monitor {
    /// Enables binding `b` of the one hook, as its Enable task would.
    fn enable_one(&mut self, b: usize) {
        let hooks = self.hooks.load();
        let binding = &hooks[0].config.kubernetes[b];
        self.enable_binding(&hooks[0], 0, b, binding)
            .expect("enabled");
    }
}

#[test]
fn a_joining_binding_skips_the_events_its_list_already_holds() {
    let sim = Sim::start();
    let mut s = Setup::first_binding(&sim);

    // Two changes the watch delivers while the monitor is busy elsewhere.
    let mut obj = sim.get("v1", "ConfigMap", "jw", "x").expect("x");
    for v in ["2", "3"] {
        obj["data"]["v"] = json!(v);
        obj = sim.update(obj).expect("update");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.queued.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the watch did not deliver both changes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    // The second binding joins now: its list holds "3". Both Synchronizations read
    // their snapshots (as the queue does) before the monitor takes the two events.
    s.monitor.enable_one(1);
    let read = |b| s.store.step(0, b, Input::ReadForSync).objects;
    assert_eq!(read(1)[0].filter_result(), Some(r#"{"v":"3"}"#));
    let _ = read(0);
    s.monitor.drain();

    assert_eq!(modified(&s.store, 0), [r#"{"v":"2"}"#, r#"{"v":"3"}"#]);
    assert_eq!(modified(&s.store, 1), Vec::<String>::new());
}

/// The same for a relist: one the watch made (after a 410) before the second binding
/// listed, still waiting for the monitor, is older than that binding's list and must
/// not delete from its snapshot the object created in between.
#[test]
fn a_joining_binding_skips_a_relist_older_than_its_list() {
    let sim = Sim::start();
    let mut s = Setup::first_binding(&sim);

    // The watch breaks and its resourceVersion is gone: the reflector lists again
    // and sends the whole list; it waits, as if the monitor were busy.
    sim.fail_next(1_000_000, 503);
    sim.drop_watches();
    let mut x = sim.get("v1", "ConfigMap", "jw", "x").expect("x");
    x["data"]["v"] = json!("2");
    sim.update(x).expect("update");
    sim.compact();
    sim.fail_next(0, 503);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "no relist");
        let Ok(event) = s.queued.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        let relisted = matches!(event.1, crate::kube::Event::Relisted(..));
        s.monitor.pending.push_back(event);
        if relisted {
            break;
        }
    }

    // An object created after that relist, then the second binding joins: its own
    // list holds it.
    let mut z = cm("z");
    z["metadata"]["name"] = json!("z");
    sim.create(z).expect("z");
    s.monitor.enable_one(1);
    let read = |b| s.store.step(0, b, Input::ReadForSync).objects;
    assert_eq!(read(1).len(), 2);
    let _ = read(0);
    s.monitor.drain();

    let deleted: Vec<String> = (s.store.step(0, 1, Input::Release).events.into_iter())
        .filter(|e| e.watch_event == WatchEventType::Deleted)
        .map(|e| e.item.namespace_and_name().1.to_string())
        .collect();
    assert_eq!(deleted, Vec::<String>::new());
}
