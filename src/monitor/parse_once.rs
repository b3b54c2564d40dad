//! "Decode once", counted: every object of an initial list is parsed exactly once
//! on its way from the API server into a binding's snapshot, whether the list
//! comes as one watch-list stream or in LIST pages, and whether the binding joins
//! a new watch or one already running. A v0 hook's context reads nothing back.
//! Counts come from `parse_count.rs`; the server is an in-process kube-sim. The
//! monitor helpers (`enable`, `hook`) serve `shared_watch.rs` too.

use super::store::{KubeEvent, SnapshotStore};
use super::{Control, Monitor};
use crate::hook::Hook;
use crate::kube::{AuthSettings, Client, ClusterConfig, Event, KubeSettings, TlsSettings};
use crate::kube::{WatchParams, reflector};
use crate::metrics::Metrics;
use crate::parse_count::Counter;
use kube_sim::Sim;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const OBJECTS: usize = 30;

/// A kube-sim holding `OBJECTS` ConfigMaps in namespace `ns`, each carrying
/// `marker` once (in its data), and a client for it that pages by 7.
fn server(ns: &str, marker: &str) -> (Sim, Client) {
    let sim = Sim::start();
    for i in 0..OBJECTS {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i:02}"), "namespace": ns, "labels": {"app": "x"}},
            "data": {"m": marker}});
        sim.create(cm).expect("create");
    }
    let client = client(&sim);
    (sim, client)
}

/// A client for `sim` without a rate limit.
pub(super) fn client(sim: &Sim) -> Client {
    let cfg = ClusterConfig {
        server: sim.url(),
        tls: TlsSettings::default(),
        auth: AuthSettings::None,
        namespace: "default".into(),
        origin: "test".into(),
    };
    let settings = KubeSettings {
        qps: -1.0,
        ..KubeSettings::default()
    };
    Client::new(&cfg, &settings).expect("client")
}

/// The reflector's initial list, paged or streamed: one parse per object, and the
/// objects it hands on are already decoded (apiVersion and kind filled in).
#[test]
fn a_listed_object_is_parsed_once_by_the_reflector() {
    for watch_list in [false, true] {
        let (ns, marker) = (format!("po-r-{watch_list}"), format!("mark-r-{watch_list}"));
        let (_sim, client) = server(&ns, &marker);
        let count = Counter::new(&marker);
        let resource = client.resolve("v1", "ConfigMap", "test").expect("resolve");
        let params = WatchParams {
            namespace: Some(ns.clone()),
            page_size: 7,
            watch_list,
            ..WatchParams::default()
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let handle = reflector::spawn(client.clone(), resource, params, tx);
        let objects = loop {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(Event::Synced(objects)) => break objects,
                Ok(_) => continue,
                Err(e) => panic!("no initial list (watch_list {watch_list}): {e}"),
            }
        };
        handle.join();
        assert_eq!(objects.len(), OBJECTS);
        assert_eq!(
            count.get(),
            OBJECTS,
            "parses of {OBJECTS} listed objects (watch_list {watch_list})"
        );
        let first = objects[0].value();
        assert_eq!(
            (first["apiVersion"].as_str(), first["kind"].as_str()),
            (Some("v1"), Some("ConfigMap"))
        );
    }
}

/// A hook with one binding per YAML entry in `bindings` (under `kubernetes:`).
pub(super) fn hook(bindings: &str) -> Hook {
    let text = format!("configVersion: v1\nkubernetes:\n{bindings}");
    let config = crate::hook::config::parse("parse-once.sh", &text).expect("config");
    let jq_filters = config
        .kubernetes
        .iter()
        .map(|b| {
            b.jq_filter
                .as_deref()
                .map(|f| Arc::new(crate::jq::JqFilter::compile(f, None, &[]).expect("jq")))
        })
        .collect();
    Hook {
        name: "parse-once.sh".into(),
        path: "/bin/true".into(),
        limiter: Arc::new(Mutex::new(
            crate::hook::limiter::TokenBucket::from_settings(&config.settings),
        )),
        config_sum: 0,
        retired: false,
        jq_filters,
        config,
    }
}

/// A monitor thread, stopped when dropped.
pub(super) struct Running {
    pub(super) store: Arc<SnapshotStore>,
    /// The hook events the monitor sends (to the router in the operator).
    pub(super) events: crossbeam_channel::Receiver<KubeEvent>,
    /// Held open: the monitor thread ends when its control channel closes, and
    /// every later event would be lost.
    _control: crossbeam_channel::Sender<Control>,
    stop: Option<crossbeam_channel::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Enables `hook` (index 0) on a monitor thread over `client`; returns once the
/// snapshots hold the initial lists.
pub(super) fn enable(client: &Client, hook: Hook) -> Running {
    let bindings = hook.config.kubernetes.len();
    let store = Arc::new(SnapshotStore::new([(0, bindings)]));
    let (events_tx, events) = crossbeam_channel::unbounded();
    let metrics = Arc::new(Metrics::new("parse_once_").expect("metrics"));
    let (watch_tx, watch_rx) = crossbeam_channel::unbounded();
    let monitor = Monitor::new(
        client.clone(),
        Arc::new(vec![hook]).into(),
        Arc::clone(&store),
        metrics,
        watch_tx,
        watch_rx,
        events_tx,
    );
    let (control, control_rx) = crossbeam_channel::unbounded();
    let (stop, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let thread = std::thread::spawn(move || monitor.run(control_rx, stop_rx));
    let (reply, reply_rx) = crossbeam_channel::bounded(1);
    control
        .send(Control::Enable { hook: 0, reply })
        .expect("enable");
    let running = Running {
        store,
        events,
        _control: control,
        stop: Some(stop),
        thread: Some(thread),
    };
    let enabled = reply_rx.recv_timeout(Duration::from_secs(30));
    enabled.expect("reply").expect("enabled");
    running
}

/// Through the monitor: two bindings on one watch (the second joins it and lists
/// again), full objects kept. Each listing parses each object once: 2 per object.
#[test]
fn the_monitor_parses_each_listed_object_once_per_listing() {
    let (ns, marker) = ("po-m", "mark-m");
    let (_sim, client) = server(ns, marker);
    let count = Counter::new(marker);
    let binding = format!(
        "- name: a\n  kind: ConfigMap\n  namespace: {{nameSelector: {{matchNames: [{ns}]}}}}\n"
    );
    let second = binding.replace("name: a", "name: b");
    let run = enable(&client, hook(&format!("{binding}{second}")));
    let store = &run.store;
    assert_eq!(store.size(0, 0).0, OBJECTS);
    assert_eq!(store.size(0, 1).0, OBJECTS);
    assert_eq!(count.get(), 2 * OBJECTS, "one parse per object per listing");
}

/// An object seen by two bindings with a jqFilter (a watch event, a relist) is
/// read by jaq once for both filters: with the decode, two parses, not three.
#[test]
fn two_jq_filters_of_one_object_share_one_jaq_input() {
    use super::filter::{ItemFilter, JqInput};
    let jq = |f: &str| {
        Some(Arc::new(
            crate::jq::JqFilter::compile(f, None, &[]).expect("jq"),
        ))
    };
    let filters = [
        ItemFilter {
            jq: jq(".data"),
            keep_full_object: false,
        },
        ItemFilter {
            jq: jq(".metadata.name"),
            keep_full_object: false,
        },
    ];
    let text = r#"{"data":{"m":"mark-jq-shared"},"metadata":{"name":"a","namespace":"n"}}"#;
    let count = Counter::new("mark-jq-shared");
    let object = crate::kube::Object::decode(text, None).expect("object");
    let mut input = JqInput::default();
    let items: Vec<_> = filters
        .iter()
        .map(|f| f.item_with(&object, &mut input).expect("item"))
        .collect();
    assert_eq!(items[0].filter_result(), Some(r#"{"m":"mark-jq-shared"}"#));
    assert_eq!(items[1].filter_result(), Some(r#""a""#));
    assert_eq!(
        count.get(),
        2,
        "the decode and one jaq input for both filters"
    );
}
