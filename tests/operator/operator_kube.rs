//! End-to-end tests of kubernetes bindings: the real binary against kube-sim. Hooks
//! record the binding contexts they receive; tests compare them with the objects as
//! they are stored in kube-sim.

use crate::common;

use common::{Operator, hook};
use kube_sim::Sim;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// An operator started against a kube-sim, with its kubeconfig's directory.
struct KubeOperator {
    op: Operator,
    _kubeconfig: common::TempDir,
}

impl std::ops::Deref for KubeOperator {
    type Target = Operator;
    fn deref(&self) -> &Operator {
        &self.op
    }
}

fn start(sim: &Sim, hooks: &[(&str, String)]) -> KubeOperator {
    let dir = common::TempDir::new("kubeconfig");
    let kubeconfig = dir.0.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let path = kubeconfig.to_str().expect("utf8").to_string();
    KubeOperator {
        op: Operator::start(hooks, &["--kube-config", &path], &[]),
        _kubeconfig: dir,
    }
}

fn cm(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data})
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

/// Every context every run received, in order.
fn contexts(op: &Operator) -> Vec<Value> {
    op.runs()
        .into_iter()
        .flat_map(|(_, c)| c.as_array().cloned().unwrap_or_default())
        .collect()
}

fn wait_contexts(op: &Operator, n: usize) -> Vec<Value> {
    op.wait_runs(WAIT, |r| {
        r.iter()
            .map(|(_, c)| c.as_array().map_or(0, Vec::len))
            .sum::<usize>()
            >= n
    });
    contexts(op)
}

/// A fence for "nothing else ran": creates ConfigMap `fence` (data `v: fence`) in
/// `ns` and waits until a hook context mentions it. Events are handled in order, so
/// every context from an event before the fence is in the returned list, before
/// the fence's own context (the last one).
fn fence(sim: &Sim, op: &Operator, ns: &str) -> Vec<Value> {
    sim.create(cm(ns, "fence", json!({"v": "fence"})))
        .expect("create fence");
    op.wait_runs(WAIT, |r| {
        r.iter().any(|(_, c)| c.to_string().contains("fence"))
    });
    let ctx = contexts(op);
    assert!(
        ctx.last().is_some_and(|c| c.to_string().contains("fence")),
        "the fence is the last context: {ctx:#?}"
    );
    ctx
}

fn live(sim: &Sim, ns: &str, name: &str) -> Value {
    sim.get("v1", "ConfigMap", ns, name)
        .expect("object in kube-sim")
}

/// Breaks every watch and keeps the operator out while `changes` run, then forgets
/// that history: the operator's resume version is gone (410), so it must relist.
fn while_cut_off(sim: &Sim, changes: impl FnOnce()) {
    sim.fail_next(1_000_000, 500);
    sim.drop_watches();
    changes();
    sim.compact();
    sim.fail_next(0, 500);
}

#[test]
fn synchronization_then_added_modified_deleted_with_jq_suppression() {
    let sim = Sim::start();
    sim.create(cm("default", "cm1", json!({"k": "v"})))
        .expect("seed");
    sim.create(cm("other", "elsewhere", json!({})))
        .expect("seed");
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  apiVersion: v1\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [default]\n  jqFilter: .data";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    let sync = wait_contexts(&op, 1);
    assert_eq!(
        sync[0],
        json!({"binding": "cms", "type": "Synchronization", "objects": [{"object": live(&sim, "default", "cm1"), "filterResult": {"k": "v"}}]})
    );
    sim.create(cm("default", "cm2", json!({"a": "1"})))
        .expect("create");
    let ctx = wait_contexts(&op, 2);
    assert_eq!(
        ctx[1],
        json!({"binding": "cms", "type": "Event", "watchEvent": "Added", "object": live(&sim, "default", "cm2"), "filterResult": {"a": "1"}})
    );
    // An annotation change leaves .data alone: no run.
    let mut annotated = live(&sim, "default", "cm2");
    annotated["metadata"]["annotations"] = json!({"note": "x"});
    sim.update(annotated).expect("update");
    let mut changed = live(&sim, "default", "cm2");
    changed["data"] = json!({"a": "2"});
    sim.update(changed).expect("update");
    let ctx = wait_contexts(&op, 3);
    assert_eq!(
        ctx[2],
        json!({"binding": "cms", "type": "Event", "watchEvent": "Modified", "object": live(&sim, "default", "cm2"), "filterResult": {"a": "2"}})
    );
    let last = live(&sim, "default", "cm2");
    sim.delete("v1", "ConfigMap", "default", "cm2")
        .expect("delete");
    let ctx = wait_contexts(&op, 4);
    assert_eq!(ctx[3]["watchEvent"], "Deleted");
    assert_eq!(ctx[3]["object"]["metadata"]["name"], "cm2");
    assert_eq!(ctx[3]["object"]["data"], last["data"]);
    assert_eq!(ctx[3]["filterResult"], json!({"a": "2"}));
    let all = fence(&sim, &op, "default");
    assert_eq!(all.len(), 5, "the annotation change ran nothing: {all:#?}");
}

/// A Deleted context carries the object of the DELETED event (its final
/// resourceVersion, as flant and client-go pass it), not the binding's last copy.
#[test]
fn deleted_context_carries_the_delete_events_object() {
    let sim = Sim::start();
    sim.create(cm("default", "gone", json!({"k": "v"})))
        .expect("seed");
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  apiVersion: v1\n  kind: ConfigMap\n  jqFilter: .data";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    wait_contexts(&op, 1);
    let seen_rv = live(&sim, "default", "gone")["metadata"]["resourceVersion"].clone();
    sim.delete("v1", "ConfigMap", "default", "gone")
        .expect("delete");
    let deleted_rv = sim.resource_version();
    assert_ne!(seen_rv, json!(deleted_rv), "the delete has its own version");
    let ctx = wait_contexts(&op, 2);
    assert_eq!(ctx[1]["watchEvent"], "Deleted", "{ctx:#?}");
    assert_eq!(
        ctx[1]["object"]["metadata"]["resourceVersion"],
        json!(deleted_rv)
    );
    assert_eq!(ctx[1]["filterResult"], json!({"k": "v"}));
}

#[test]
fn keep_full_objects_false_keeps_only_filter_results() {
    let sim = Sim::start();
    sim.create(cm("default", "a", json!({"x": "1"})))
        .expect("seed");
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  kind: configmaps\n  keepFullObjectsInMemory: false\n  jqFilter: '.metadata.name'";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    assert_eq!(
        wait_contexts(&op, 1)[0],
        json!({"binding": "cms", "type": "Synchronization", "objects": [{"filterResult": "a"}]})
    );
    sim.create(cm("default", "b", json!({}))).expect("create");
    assert_eq!(
        wait_contexts(&op, 2)[1],
        json!({"binding": "cms", "type": "Event", "watchEvent": "Added", "filterResult": "b"})
    );
    // The snapshot holds two keys and filter results, and no object text:
    // "default" NUL "a" NUL "\"a\"" is 13 bytes, and the same for b.
    let (_, metrics) = op.http_get("/metrics");
    let labels = r#"{binding="cms",hook="h.sh",queue="main"}"#;
    for line in [
        format!("shell_operator_kube_snapshot_objects{labels} 2"),
        format!("shell_operator_kube_snapshot_bytes{labels} 26"),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
}

#[test]
fn name_label_and_field_selectors() {
    let sim = Sim::start();
    for (name, app) in [
        ("one", "x"),
        ("two", "x"),
        ("three", "x"),
        ("skip", "x"),
        ("other", "y"),
    ] {
        let mut obj = cm("default", name, json!({}));
        obj["metadata"]["labels"] = json!({"app": app});
        sim.create(obj).expect("seed");
    }
    let config = "configVersion: v1\nkubernetes:\n\
- name: by-names\n  kind: ConfigMap\n  nameSelector:\n    matchNames: [one, two]\n  jqFilter: .metadata.name\n  executeHookOnEvent: []\n\
- name: by-one-name\n  kind: ConfigMap\n  nameSelector:\n    matchNames: [three]\n  jqFilter: .metadata.name\n  executeHookOnEvent: []\n\
- name: by-labels\n  kind: ConfigMap\n  labelSelector:\n    matchExpressions:\n    - {key: app, operator: In, values: [x]}\n  fieldSelector:\n    matchExpressions:\n    - {field: metadata.name, operator: NotEquals, value: skip}\n  jqFilter: .metadata.name\n  executeHookOnEvent: []";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    let ctx = wait_contexts(&op, 3);
    let names = |c: &Value| -> Vec<String> {
        c["objects"]
            .as_array()
            .expect("objects")
            .iter()
            .map(|i| i["filterResult"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(names(&ctx[0]), ["one", "two"]);
    assert_eq!(names(&ctx[1]), ["three"]);
    assert_eq!(names(&ctx[2]), ["one", "three", "two"]);
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.contains("fieldSelector=metadata.name%3Dthree")
                || r.contains("fieldSelector=metadata.name=three")),
        "one name is a server-side field selector: {:?}",
        sim.requests()
    );
}

#[test]
fn namespace_label_selector_follows_relabelled_namespaces() {
    let sim = Sim::start();
    sim.create(namespace("ns1", json!({"watch": "yes"})))
        .expect("ns");
    sim.create(namespace("ns2", json!({}))).expect("ns");
    sim.create(cm("ns1", "c1", json!({}))).expect("cm");
    sim.create(cm("ns2", "c2", json!({}))).expect("cm");
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  namespace:\n    labelSelector:\n      matchLabels: {watch: \"yes\"}\n  jqFilter: '.metadata.namespace + \"/\" + .metadata.name'\n  keepFullObjectsInMemory: false";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    assert_eq!(
        wait_contexts(&op, 1)[0]["objects"],
        json!([{"filterResult": "ns1/c1"}])
    );
    let mut ns2 = sim.get("v1", "Namespace", "", "ns2").expect("ns2");
    ns2["metadata"]["labels"] = json!({"watch": "yes"});
    sim.update(ns2).expect("label ns2");
    assert_eq!(
        wait_contexts(&op, 2)[1],
        json!({"binding": "cms", "type": "Event", "watchEvent": "Added", "filterResult": "ns2/c2"})
    );
    let mut ns1 = sim.get("v1", "Namespace", "", "ns1").expect("ns1");
    ns1["metadata"]["labels"] = json!({});
    sim.update(ns1).expect("unlabel ns1");
    assert_eq!(
        wait_contexts(&op, 3)[2],
        json!({"binding": "cms", "type": "Event", "watchEvent": "Deleted", "filterResult": "ns1/c1"})
    );
    sim.create(cm("ns1", "late", json!({}))).expect("cm");
    sim.create(cm("ns2", "late", json!({}))).expect("cm");
    assert_eq!(
        wait_contexts(&op, 4)[3]["filterResult"],
        "ns2/late",
        "ns1 is no longer watched"
    );
}

/// A namespace whose watch fails to start when it begins to match is started again
/// on its next event: here its objects arrive after the namespace is modified. The
/// failure is one refused LIST: binding "fixed" already watches ns2, so "cms" joins
/// that watch with a LIST of its own, which kube-sim answers 403.
#[test]
fn a_namespace_whose_watch_failed_to_start_is_retried_on_its_next_event() {
    let sim = Sim::start();
    sim.create(namespace("ns2", json!({}))).expect("ns");
    sim.create(cm("ns2", "c2", json!({}))).expect("cm");
    let config = "configVersion: v1\nkubernetes:\n- name: fixed\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [ns2]\n  executeHookOnEvent: []\n  executeHookOnSynchronization: false\n- name: cms\n  kind: ConfigMap\n  namespace:\n    labelSelector:\n      matchLabels: {watch: \"yes\"}\n  jqFilter: '.metadata.namespace + \"/\" + .metadata.name'\n  keepFullObjectsInMemory: false";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    assert_eq!(
        wait_contexts(&op, 1)[0],
        json!({"binding": "cms", "type": "Synchronization", "objects": []})
    );
    sim.fail_matching("GET /api/v1/namespaces/ns2/configmaps", 1, 403);
    let mut ns2 = sim.get("v1", "Namespace", "", "ns2").expect("ns2");
    ns2["metadata"]["labels"] = json!({"watch": "yes"});
    sim.update(ns2).expect("label ns2");
    let line = op.wait_log("cannot watch a namespace", WAIT);
    assert!(line.contains("403"), "{line}");
    let mut ns2 = sim.get("v1", "Namespace", "", "ns2").expect("ns2");
    ns2["metadata"]["annotations"] = json!({"touched": "yes"});
    sim.update(ns2).expect("annotate ns2");
    assert_eq!(
        wait_contexts(&op, 2)[1],
        json!({"binding": "cms", "type": "Event", "watchEvent": "Added", "filterResult": "ns2/c2"})
    );
}

#[test]
fn group_and_include_snapshots_and_snapshot_only_bindings() {
    let sim = Sim::start();
    sim.create(cm("default", "settings", json!({"mode": "a"})))
        .expect("seed");
    let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1", "namespace": "default"}, "type": "Opaque"});
    sim.create(secret.clone()).expect("seed");
    let config = "configVersion: v1\nkubernetes:\n\
- name: settings\n  kind: ConfigMap\n  jqFilter: .data\n  executeHookOnSynchronization: false\n  executeHookOnEvent: []\n\
- name: secrets\n  kind: Secret\n  jqFilter: .metadata.name\n  group: g\n\
- name: maps\n  kind: ConfigMap\n  jqFilter: .metadata.name\n  group: g\n  includeSnapshotsFrom: [settings]";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    // Two grouped Synchronization tasks are combined and collapse to the last one.
    let ctx = wait_contexts(&op, 1);
    let group = json!({
        "binding": "maps", "type": "Group", "groupName": "g",
        "snapshots": {
            "maps": [{"object": live(&sim, "default", "settings"), "filterResult": "settings"}],
            "secrets": [{"object": sim.get("v1", "Secret", "default", "s1").expect("s1"), "filterResult": "s1"}],
            "settings": [{"object": live(&sim, "default", "settings"), "filterResult": {"mode": "a"}}]
        }
    });
    assert_eq!(ctx, vec![group]);
    secret["metadata"]["name"] = json!("s2");
    sim.create(secret).expect("create");
    let ctx = wait_contexts(&op, 2);
    assert_eq!(ctx[1]["type"], "Group");
    assert_eq!(ctx[1]["binding"], "secrets");
    assert_eq!(
        ctx[1]["snapshots"]["secrets"].as_array().map(Vec::len),
        Some(2)
    );
    assert!(ctx[1].get("object").is_none() && ctx[1].get("watchEvent").is_none());
    assert_eq!(
        ctx[1]["snapshots"].as_object().map(|m| m.len()),
        Some(2),
        "own group only: {}",
        ctx[1]
    );
}

#[test]
fn watches_dropped_and_history_compacted_lose_and_double_nothing() {
    let sim = Sim::start();
    for n in ["keep", "change", "remove"] {
        sim.create(cm("default", n, json!({"v": "1"})))
            .expect("seed");
    }
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  jqFilter: .data.v\n  keepFullObjectsInMemory: false";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    wait_contexts(&op, 1);
    while_cut_off(&sim, || {
        let mut changed = live(&sim, "default", "change");
        changed["data"] = json!({"v": "2"});
        sim.update(changed).expect("update");
        sim.delete("v1", "ConfigMap", "default", "remove")
            .expect("delete");
        sim.create(cm("default", "new", json!({"v": "1"})))
            .expect("create");
    });
    wait_contexts(&op, 4);
    let ctx = fence(&sim, &op, "default");
    let mut seen: Vec<(String, String)> = ctx[1..ctx.len() - 1]
        .iter()
        .map(|c| {
            (
                c["watchEvent"].as_str().unwrap_or("").to_string(),
                c["filterResult"].to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("Added".to_string(), "\"1\"".to_string()),
            ("Deleted".into(), "\"1\"".into()),
            ("Modified".into(), "\"2\"".into())
        ],
        "{ctx:#?}"
    );
}

#[test]
fn v0_hooks_get_v0_contexts_and_no_synchronization() {
    let sim = Sim::start();
    sim.create(cm("default", "before", json!({})))
        .expect("seed");
    let config = "onKubernetesEvent:\n- kind: ConfigMap\n  event: [add]";
    let op = start(&sim, &[("v0.sh", hook("v0", config, ""))]);
    // Once the bindings are enabled, the first context is the later Added: no
    // Synchronization ran before it.
    op.wait_log("startup finished", WAIT);
    sim.create(cm("default", "after", json!({})))
        .expect("create");
    assert_eq!(
        wait_contexts(&op, 1)[0],
        json!({"binding": "onKubernetesEvent", "resourceEvent": "add", "resourceKind": "ConfigMap", "resourceName": "after", "resourceNamespace": "default"})
    );
}

#[test]
fn an_unknown_kind_fails_enabling_with_hook_and_binding_named() {
    let sim = Sim::start();
    let op = start(
        &sim,
        &[(
            "u.sh",
            hook(
                "u",
                "configVersion: v1\nkubernetes:\n- name: nope\n  kind: Frobnicator",
                "",
            ),
        )],
    );
    let line = op.wait_log("Frobnicator", WAIT);
    assert!(line.contains("u.sh") && line.contains("nope"), "{line}");
}

/// Exec credential plugins run as children of the operator; with the reaper running
/// their exit status must still reach the client.
#[test]
fn exec_credential_plugin_authenticates_the_operator() {
    let sim = Sim::start_with(kube_sim::SimOptions {
        require_token: Some("from-plugin".into()),
        ..Default::default()
    })
    .expect("sim");
    sim.create(cm("default", "c", json!({}))).expect("seed");
    let dir = common::TempDir::new("exec");
    let plugin = dir.0.join("plugin.sh");
    std::fs::write(&plugin, "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-plugin\"}}'\n").expect("plugin");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let kubeconfig = dir.0.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\ncontexts:\n- name: c\n  context:\n    cluster: sim\n    user: u\ncurrent-context: c\n",
        sim.url(),
        plugin.display()
    );
    std::fs::write(&kubeconfig, text).expect("kubeconfig");
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  jqFilter: .metadata.name\n  keepFullObjectsInMemory: false";
    let op = Operator::start(
        &[("h.sh", hook("h", config, ""))],
        &["--kube-config", kubeconfig.to_str().expect("utf8")],
        &[],
    );
    op.wait_runs(WAIT, |r| !r.is_empty());
    assert_eq!(contexts(&op)[0]["objects"], json!([{"filterResult": "c"}]));
}

/// `shell-operator hook snapshot` shows a kubernetes binding's current snapshot.
#[test]
fn debug_cli_shows_binding_snapshots() {
    let sim = Sim::start();
    sim.create(cm("default", "one", json!({}))).expect("seed");
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  jqFilter: .metadata.name\n  keepFullObjectsInMemory: false";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    wait_contexts(&op, 1);
    let socket = op.debug_socket();
    let (code, out, err) = common::run_binary(
        &[
            "hook",
            "snapshot",
            "h.sh",
            "-o",
            "json",
            "--debug-unix-socket",
            socket.to_str().expect("utf8"),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let view: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        view,
        json!({"cms": {"snapshot": [{"filterResult": "one"}]}})
    );
}

/// Two hooks watching ConfigMaps with different jqFilter and keepFullObjectsInMemory
/// settings share one watch stream; the second joins it with a fresh list, and both
/// see the same later events, each through its own settings.
#[test]
fn bindings_with_different_settings_share_one_watch() {
    let sim = Sim::start();
    sim.create(cm("default", "a", json!({"x": "1"})))
        .expect("seed");
    let slim = "configVersion: v1\nkubernetes:\n- name: slim\n  kind: ConfigMap\n  keepFullObjectsInMemory: false\n  jqFilter: .data";
    let full = "configVersion: v1\nkubernetes:\n- name: full\n  kind: ConfigMap";
    let op = start(
        &sim,
        &[("a.sh", hook("a", slim, "")), ("b.sh", hook("b", full, ""))],
    );
    let by_hook = |n: usize| {
        let runs = op.wait_runs(WAIT, |r| r.len() >= n);
        let mut runs: Vec<(String, Value)> = runs
            .into_iter()
            .map(|(tag, c)| (tag, c[0].clone()))
            .collect();
        runs.sort_by(|x, y| x.0.cmp(&y.0));
        runs
    };
    let a = live(&sim, "default", "a");
    assert_eq!(
        by_hook(2),
        [
            (
                "a".to_string(),
                json!({"binding": "slim", "type": "Synchronization", "objects": [{"filterResult": {"x": "1"}}]})
            ),
            (
                "b".to_string(),
                json!({"binding": "full", "type": "Synchronization", "objects": [{"object": a}]})
            ),
        ]
    );
    assert_eq!(sim.watch_count(), 1, "one stream for both bindings");
    sim.create(cm("default", "b", json!({"x": "2"})))
        .expect("create");
    let runs = by_hook(4);
    let b = live(&sim, "default", "b");
    let events: Vec<&(String, Value)> = runs.iter().filter(|(_, c)| c["type"] == "Event").collect();
    assert_eq!(
        events,
        [
            &(
                "a".to_string(),
                json!({"binding": "slim", "type": "Event", "watchEvent": "Added", "filterResult": {"x": "2"}})
            ),
            &(
                "b".to_string(),
                json!({"binding": "full", "type": "Event", "watchEvent": "Added", "object": b})
            ),
        ]
    );
}

/// Without a jqFilter every change to an object counts, so a relist must recognise
/// unchanged objects whatever text they arrived in: an object last seen in a watch
/// event and then listed again runs nothing; only the real change does.
#[test]
fn relist_without_jq_filter_reports_only_real_changes() {
    let sim = Sim::start();
    for n in ["keep", "change"] {
        sim.create(cm("default", n, json!({"v": "1"})))
            .expect("seed");
    }
    let config = "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    wait_contexts(&op, 1);
    let mut keep = live(&sim, "default", "keep");
    keep["data"] = json!({"v": "2"});
    sim.update(keep).expect("update");
    let ctx = wait_contexts(&op, 2);
    assert_eq!(ctx[1]["watchEvent"], "Modified");
    assert_eq!(ctx[1]["object"], live(&sim, "default", "keep"));

    while_cut_off(&sim, || {
        let mut change = live(&sim, "default", "change");
        change["data"] = json!({"v": "2"});
        sim.update(change).expect("update");
    });
    wait_contexts(&op, 3);
    let ctx = fence(&sim, &op, "default");
    assert_eq!(
        ctx[2..ctx.len() - 1],
        [
            json!({"binding": "cms", "type": "Event", "watchEvent": "Modified",
                "object": live(&sim, "default", "change")})
        ],
        "{ctx:#?}"
    );
}

/// A jqFilter that fails on an object skips that object, in the initial list and in
/// events alike, with a log line naming hook, binding, object and filter; the other
/// objects and the binding go on.
#[test]
fn a_failing_jq_filter_skips_only_that_object() {
    let sim = Sim::start();
    sim.create(cm("default", "a", json!({"v": "1"})))
        .expect("seed");
    sim.create(cm("default", "b", json!({"v": "x"})))
        .expect("seed");
    let config = "configVersion: v1\nkubernetes:\n- name: nums\n  kind: ConfigMap\n  jqFilter: .data.v | tonumber";
    let op = start(&sim, &[("h.sh", hook("h", config, ""))]);
    assert_eq!(
        wait_contexts(&op, 1)[0],
        json!({"binding": "nums", "type": "Synchronization",
               "objects": [{"object": live(&sim, "default", "a"), "filterResult": 1}]})
    );
    let line = op.wait_log("default/b", WAIT);
    for part in ["jqFilter failed", "h.sh", "nums", ".data.v | tonumber"] {
        assert!(line.contains(part), "{part} in {line}");
    }
    sim.create(cm("default", "c", json!({"v": "y"})))
        .expect("create");
    op.wait_log("default/c", WAIT);
    sim.create(cm("default", "d", json!({"v": "2"})))
        .expect("create");
    // "d" is the fence: "c" was handled before it and ran nothing.
    let ctx = wait_contexts(&op, 2);
    assert_eq!(ctx.len(), 2, "{ctx:#?}");
    assert_eq!(ctx[1]["watchEvent"], "Added");
    assert_eq!(ctx[1]["filterResult"], 2);
}

/// One hook, two bindings on one watch (same kind and namespace, different
/// jqFilters).
const TWO_FILTERS: &str = "configVersion: v1\nkubernetes:\n\
- name: data\n  kind: ConfigMap\n  namespace: {nameSelector: {matchNames: [default]}}\n  jqFilter: .data\n\
- name: names\n  kind: ConfigMap\n  namespace: {nameSelector: {matchNames: [default]}}\n  jqFilter: .metadata.name";

/// How often each binding saw ConfigMap `name`: in its Synchronization objects or
/// as an Added event.
fn seen_by_binding(ctx: &[Value], name: &str) -> Vec<(String, usize)> {
    ["data", "names"]
        .iter()
        .map(|b| {
            let mine = ctx.iter().filter(|c| c["binding"] == *b);
            let n = mine
                .map(|c| match c["type"].as_str() {
                    Some("Synchronization") => c["objects"].as_array().map_or(0, |o| {
                        o.iter()
                            .filter(|o| o["object"]["metadata"]["name"] == name)
                            .count()
                    }),
                    _ if c["watchEvent"] == "Added" => {
                        usize::from(c["object"]["metadata"]["name"] == name)
                    }
                    _ => 0,
                })
                .sum();
            (b.to_string(), n)
        })
        .collect()
}

/// Creates ConfigMap `fence` and waits until both bindings saw it.
fn fence_both(sim: &Sim, op: &Operator) -> Vec<Value> {
    sim.create(cm("default", "fence", json!({"v": "fence"})))
        .expect("create fence");
    op.wait_runs(WAIT, |_| {
        seen_by_binding(&contexts(op), "fence")
            .iter()
            .all(|(_, n)| *n > 0)
    });
    contexts(op)
}

/// Two jqFilter bindings of one hook share one watch. Objects created while the
/// operator starts (racing the watch's initial list and the second binding's own
/// list) until both Synchronizations ran reach each binding exactly once: in its
/// Synchronization or as an Added event. One created afterwards is an Added event
/// for each, through its own filter. The real API server's twin is
/// `bindings::objects_created_during_startup_reach_each_shared_jq_binding_once`
/// in tests/cluster.
#[test]
fn objects_created_during_startup_reach_each_shared_binding_once() {
    let sim = Arc::new(Sim::start());
    let synced = Arc::new(AtomicBool::new(false));
    let op = start(&sim, &[("h.sh", hook("h", TWO_FILTERS, ""))]);
    let creator = {
        let (sim, synced) = (Arc::clone(&sim), Arc::clone(&synced));
        std::thread::spawn(move || {
            let mut n = 0;
            while !synced.load(Ordering::SeqCst) {
                let name = format!("racer-{n}");
                sim.create(cm("default", &name, json!({"k": name})))
                    .expect("create");
                n += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        })
    };
    op.wait_runs(WAIT, |_| {
        let ctx = contexts(&op);
        ctx.iter()
            .filter(|c| c["type"] == "Synchronization")
            .count()
            == 2
    });
    synced.store(true, Ordering::SeqCst);
    let created = creator.join().expect("creator");
    assert_eq!(sim.watch_count(), 1, "one stream for both bindings");
    sim.create(cm("default", "late", json!({"k": "late"})))
        .expect("create");
    let ctx = fence_both(&sim, &op);
    for n in 0..created {
        let name = format!("racer-{n}");
        assert_eq!(
            seen_by_binding(&ctx, &name),
            [("data".into(), 1), ("names".into(), 1)],
            "{name}: {ctx:#?}"
        );
    }
    let late: Vec<(&Value, &Value, &Value)> = ctx
        .iter()
        .filter(|c| c["object"]["metadata"]["name"] == "late")
        .map(|c| (&c["binding"], &c["watchEvent"], &c["filterResult"]))
        .collect();
    assert_eq!(
        late,
        [
            (&json!("data"), &json!("Added"), &json!({"k": "late"})),
            (&json!("names"), &json!("Added"), &json!("late"))
        ],
        "{ctx:#?}"
    );
}

/// The object patcher's requests are counted on `/metrics` with
/// `component="object_patcher"`, as flant's are (issue 37: the node tier's token
/// check could not see a 401 the patcher retried, its series were never
/// registered).
#[test]
fn object_patcher_requests_are_on_metrics() {
    let sim = Sim::start();
    let body = r#"echo '{"operation":"Create","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"written","namespace":"default"}}}' > "$KUBERNETES_PATCH_PATH""#;
    let op = start(
        &sim,
        &[("w.sh", hook("w", "configVersion: v1\nonStartup: 1", body))],
    );
    op.wait_runs(WAIT, |r| !r.is_empty());
    let deadline = std::time::Instant::now() + WAIT;
    let series = loop {
        let (_, metrics) = op.http_get("/metrics");
        let series: Vec<String> = metrics
            .lines()
            .filter(|l| l.contains("kubernetes_client_request_result_total{"))
            .filter(|l| l.contains("component=\"object_patcher\""))
            .map(String::from)
            .collect();
        if !series.is_empty() || std::time::Instant::now() > deadline {
            break series;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(sim.get("v1", "ConfigMap", "default", "written").is_some());
    assert!(
        series.iter().any(|l| l.contains("code=\"201\"")),
        "{series:#?}"
    );
}
