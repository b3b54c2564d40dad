//! The life of one Added event, measured: the wire line decoded by the reflector,
//! the binding's item (filter, checksum, object text), the Synchronization
//! protocol step, the router's step that makes the hook's task, and the task's
//! binding context streamed for the hook. A counting allocator (`alloc_count.rs`)
//! holds the path to its budget, at most 4× the object's size on the wire in bytes
//! allocated, and `parse_count.rs` counts the parses of the object: exactly one
//! (the decode), or two with a jqFilter (jaq reads its own input).
//! `docs/threads.md`, "Life of an event", lists each step's parses and copies.

use super::filter::ItemFilter;
use super::store::SnapshotStore;
use super::sync::Input;
use crate::alloc_count::measure;
use crate::hook::config::WatchEventType;
use crate::hook::context::{Snapshots, write_file};
use crate::jq::JqFilter;
use crate::kube::Event;
use crate::kube::decode::{Applied, apply_line};
use crate::kube::{Cache, Store};
use crate::parse_count::Counter;
use std::sync::Arc;

/// A pod as kube-sim and kube-apiserver send it in a watch event (~750 bytes);
/// `uid` (36 characters) marks it for the parse count.
fn pod_line(uid: &str) -> String {
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d4b9c8f6d-x2x9q","namespace":"team-a","uid":"UID","resourceVersion":"123456","generateName":"web-7d4b9c8f6d-","creationTimestamp":"2026-11-25T03:00:00Z","labels":{"app":"web","pod-template-hash":"7d4b9c8f6d","tier":"frontend"},"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-25T02:59:00Z"}},"spec":{"nodeName":"node-3","serviceAccountName":"default","restartPolicy":"Always","containers":[{"name":"web","image":"registry.example.com/web:1.4.2","ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}]},"status":{"phase":"Running","podIP":"10.42.3.17","hostIP":"192.168.1.13","startTime":"2026-11-25T03:00:01Z"}}"#;
    format!(
        "{{\"type\":\"ADDED\",\"object\":{}}}\n",
        pod.replace("UID", uid)
    )
}

/// The hook the router finds for binding `pods` (made outside the measurement).
fn hooks() -> Vec<crate::hook::Hook> {
    let text = "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n";
    let config = crate::hook::config::parse("life.sh", text).expect("config");
    vec![crate::hook::Hook {
        name: "life.sh".into(),
        path: "/bin/true".into(),
        limiter: std::sync::Arc::new(std::sync::Mutex::new(
            crate::hook::limiter::TokenBucket::from_settings(&config.settings),
        )),
        config_sum: 0,
        retired: false,
        jq_filters: vec![None],
        config,
    }]
}

/// Runs the whole path for one event and one binding: decode, item, protocol
/// step, the router's step to the hook's task, and that task's context written.
/// The context goes to `file`, made outside the measurement: like the executor's
/// file buffer, it is per hook run, not per event.
fn one_event(
    line: &[u8],
    filter: &ItemFilter,
    store: &SnapshotStore,
    hooks: &[crate::hook::Hook],
    file: &mut Vec<u8>,
) {
    let mut cache = Store::new(Cache::Off);
    let Applied::Object {
        event: Some(Event::Added(obj)),
        ..
    } = apply_line(&mut cache, line)
    else {
        panic!("not an Added event");
    };
    let item = filter.item(&obj).expect("item");
    drop(obj);
    let steps = store.step(0, 0, Input::Upsert(item));
    let [event] = <[_; 1]>::try_from(steps.events).expect("one event");
    let (queue, task) = crate::router::kube_task(hooks, event).expect("a task");
    assert_eq!(queue, "main");
    write_file(file, &task.contexts, false, &Snapshots::default()).expect("write");
}

/// A binding already enabled and released, holding other objects (so the event
/// lands in a snapshot the way it does in a running operator).
fn released_store() -> SnapshotStore {
    let store = SnapshotStore::new([(0, 1)]);
    let others = (0..8)
        .map(|i| crate::hook::context::Item::new(("team-a", &format!("other-{i}")), None, None, i))
        .collect();
    store.step(
        0,
        0,
        Input::Begin {
            items: others,
            hold: false,
            events: WatchEventType::ALL.to_vec(),
        },
    );
    store
}

#[test]
fn an_added_event_is_parsed_once_and_allocates_at_most_four_times_its_wire_size() {
    let uid = "11111111-life-full-object-0000000000";
    let line = pod_line(uid);
    let wire = line.len();
    let full = ItemFilter {
        jq: None,
        keep_full_object: true,
    };
    let (store, hooks) = (released_store(), hooks());
    let mut file = Vec::with_capacity(8192);
    // A reflector thread's decode buffer exists after its first event.
    crate::kube::Object::decode(&line[25..line.len() - 2], None).expect("object");
    let parses = Counter::new(uid);
    let ((), count, bytes) =
        measure(|| one_event(line.as_bytes(), &full, &store, &hooks, &mut file));
    eprintln!(
        "Added event, full object: {wire} bytes on the wire, {count} allocations, {bytes} bytes ({:.2}x), {} parse",
        bytes as f64 / wire as f64,
        parses.get()
    );
    assert_eq!(parses.get(), 1, "parses of the object");
    assert!(
        bytes <= 4 * wire,
        "{bytes} bytes allocated for a {wire}-byte event"
    );
    let text = String::from_utf8(file).expect("utf8");
    assert!(
        text.starts_with(
            r#"[{"binding":"pods","object":{"apiVersion":"v1","kind":"Pod","metadata":"#
        ),
        "{text}"
    );
    assert!(
        text.ends_with("\"type\":\"Event\",\"watchEvent\":\"Added\"}]\n"),
        "{text}"
    );
}

/// With a jqFilter, jaq builds its own value tree of the object to run the filter
/// on; that tree is the filter engine's cost (reported, not budgeted). Everything
/// else on the path stays within the same 4× budget.
#[test]
fn an_added_event_with_a_jq_filter_stays_within_budget_besides_jq_itself() {
    let uid = "22222222-life-jq-filter-000000000000";
    let line = pod_line(uid);
    let wire = line.len();
    let jq = Arc::new(JqFilter::compile(".metadata.labels", None, &[]).expect("jq"));
    let labels = ItemFilter {
        jq: Some(Arc::clone(&jq)),
        keep_full_object: false,
    };
    let object = crate::kube::Object::decode(&line[25..line.len() - 2], None).expect("object");
    let (_, _, jq_bytes) = measure(|| jq.apply_text(&object.json).expect("jq"));
    let (store, hooks) = (released_store(), hooks());
    let mut file = Vec::with_capacity(8192);
    let parses = Counter::new(uid);
    let ((), count, bytes) =
        measure(|| one_event(line.as_bytes(), &labels, &store, &hooks, &mut file));
    let ours = bytes - jq_bytes;
    eprintln!(
        "Added event, jqFilter only: {wire} bytes on the wire, {count} allocations, {bytes} bytes, of which jq {jq_bytes}; the rest {ours} ({:.2}x), {} parses",
        ours as f64 / wire as f64,
        parses.get()
    );
    assert_eq!(
        parses.get(),
        2,
        "parses of the object: the decode and jaq's input"
    );
    assert_eq!(
        String::from_utf8(file).expect("utf8"),
        "[{\"binding\":\"pods\",\"filterResult\":{\"app\":\"web\",\"pod-template-hash\":\"7d4b9c8f6d\",\"tier\":\"frontend\"},\"type\":\"Event\",\"watchEvent\":\"Added\"}]\n"
    );
    assert!(
        ours <= 4 * wire,
        "{ours} bytes besides jq for a {wire}-byte event"
    );
}
