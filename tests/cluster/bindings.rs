//! kubernetes bindings against the real API server: Synchronization and events for
//! ConfigMaps, Pods and a CRD; label, field and namespace selectors; watch resume
//! after kube-apiserver restarts; 410 Expired after an etcd compaction.

use crate::common::hook;
use crate::harness::*;
use serde_json::Value;

/// `(type, watchEvent, object name)` of each context, for compact assertions.
fn events(ctx: &[Value]) -> Vec<(String, String, String)> {
    ctx.iter()
        .map(|c| {
            let name = if c["type"] == "Synchronization" {
                let mut names: Vec<&str> = c["objects"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|o| o["object"]["metadata"]["name"].as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                names.sort();
                names.join(",")
            } else {
                c["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            };
            (
                c["type"].as_str().unwrap_or("").to_string(),
                c["watchEvent"].as_str().unwrap_or("").to_string(),
                name,
            )
        })
        .collect()
}

fn ev(t: &str, w: &str, n: &str) -> (String, String, String) {
    (t.into(), w.into(), n.into())
}

fn configmap_hook(ns: &str) -> String {
    hook(
        "cm",
        &format!(
            "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n"
        ),
        "",
    )
}

#[test]
fn configmap_synchronization_and_events_match_the_server() {
    let _api = api_shared();
    let ns = cp().namespace("bind-cm");
    kubectl(&["-n", &ns, "create", "configmap", "a", "--from-literal=k=1"]);
    let op = admin_operator(&[("cm.sh", configmap_hook(&ns))]);
    let ctx = wait_contexts(&op, 1);
    assert_eq!(events(&ctx), vec![ev("Synchronization", "", "a")]);
    let stored = cp().get("configmap", &ns, "a").expect("a stored");
    assert_eq!(
        ctx[0]["objects"][0]["object"], stored,
        "the hook got the object as the server stores it"
    );

    kubectl(&["-n", &ns, "create", "configmap", "b", "--from-literal=k=2"]);
    kubectl(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "a",
        "-p",
        r#"{"data":{"k":"3"}}"#,
    ]);
    kubectl(&["-n", &ns, "delete", "configmap", "b"]);
    let ctx = wait_contexts(&op, 4);
    assert_eq!(
        events(&ctx),
        vec![
            ev("Synchronization", "", "a"),
            ev("Event", "Added", "b"),
            ev("Event", "Modified", "a"),
            ev("Event", "Deleted", "b"),
        ]
    );
    assert_eq!(ctx[2]["object"]["data"]["k"], "3");
}

/// One line per context: `Synchronization <items>` or `<watchEvent> <item>`, where
/// an item is its filterResult (strings bare, anything else as JSON) when the
/// context has one, else the object's name; a Synchronization's items are sorted.
fn summary(ctx: &[Value]) -> Vec<String> {
    fn item(c: &Value) -> String {
        match c.get("filterResult") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => c["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        }
    }
    ctx.iter()
        .map(|c| match c["type"].as_str() {
            Some("Synchronization") => {
                let mut items: Vec<String> = c["objects"]
                    .as_array()
                    .map(|a| a.iter().map(item).collect())
                    .unwrap_or_default();
                items.sort();
                format!("Synchronization {}", items.join(","))
            }
            _ => format!("{} {}", c["watchEvent"].as_str().unwrap_or("?"), item(c)),
        })
        .collect()
}

/// The contexts of one binding, in order.
fn of(ctx: &[Value], binding: &str) -> Vec<Value> {
    ctx.iter()
        .filter(|c| c["binding"] == binding)
        .cloned()
        .collect()
}

/// Waits until binding `binding` received at least `n` contexts; returns all of
/// the operator's contexts.
fn wait_binding(op: &crate::common::Operator, binding: &str, n: usize) -> Vec<Value> {
    op.wait_runs(WAIT, |_| of(&contexts(op), binding).len() >= n);
    contexts(op)
}

/// Asserts the summaries of `binding`'s contexts, once it received as many as
/// expected.
fn expect(op: &crate::common::Operator, binding: &str, want: &[&str]) -> Vec<Value> {
    let ctx = wait_binding(op, binding, want.len());
    assert_eq!(
        summary(&of(&ctx, binding)),
        want,
        "binding {binding}: {ctx:#?}"
    );
    of(&ctx, binding)
}

/// A Pod that never runs (no kubelet): one container with a port.
fn pod(ns: &str, name: &str, labels: &str, node: Option<&str>) -> String {
    let node = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{{labels}}}\n\
         spec:\n{node}  containers:\n  - name: c\n    image: registry.invalid/pause:1\n    ports:\n    - containerPort: 8080\n"
    )
}

/// A ConfigMap with `labels` (flow-style YAML inside braces) and `data`.
fn labelled_cm(ns: &str, name: &str, labels: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{{labels}}}\ndata: {{{data}}}\n"
    )
}

#[test]
fn pod_synchronization_and_events_match_the_server() {
    let _api = api_shared();
    let ns = cp().namespace("bind-pod");
    apply(&pod(&ns, "p1", "app: web", None));
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n"
    );
    let op = admin_operator(&[("pods.sh", hook("pods", &config, ""))]);
    let ctx = expect(&op, "pods", &["Synchronization p1"]);
    let stored = cp().get("pod", &ns, "p1").expect("p1 stored");
    assert_eq!(ctx[0]["objects"][0]["object"], stored);
    // Numbers stay numbers, as the server typed them (serde_json's equality tells
    // 8080 from 8080.0 and from "8080").
    let object = &ctx[0]["objects"][0]["object"];
    assert!(
        object["spec"]["containers"][0]["ports"][0]["containerPort"].is_u64(),
        "{object}"
    );
    assert!(
        object["spec"]["terminationGracePeriodSeconds"].is_u64(),
        "{object}"
    );
    assert_eq!(
        object["status"]["phase"], "Pending",
        "the server sets the phase"
    );

    apply(&pod(&ns, "p2", "app: web", None));
    expect(&op, "pods", &["Synchronization p1", "Added p2"]);
    let p2 = cp().get("pod", &ns, "p2").expect("p2 stored");
    kubectl(&["-n", &ns, "label", "pod", "p1", "tier=front"]);
    let ctx = expect(
        &op,
        "pods",
        &["Synchronization p1", "Added p2", "Modified p1"],
    );
    assert_eq!(ctx[1]["object"], p2);
    assert_eq!(
        ctx[2]["object"],
        cp().get("pod", &ns, "p1").expect("p1 stored")
    );
    assert_eq!(ctx[2]["object"]["metadata"]["labels"]["tier"], "front");

    // A pod on no node is deleted with grace period 0, in two writes: first its
    // deletionTimestamp is set (Modified), then it is removed (Deleted, carrying
    // that last state under the deletion's resourceVersion).
    kubectl(&["-n", &ns, "delete", "pod", "p2", "--wait=false"]);
    let ctx = expect(
        &op,
        "pods",
        &[
            "Synchronization p1",
            "Added p2",
            "Modified p1",
            "Modified p2",
            "Deleted p2",
        ],
    );
    let terminating = &ctx[3]["object"];
    assert_eq!(terminating["metadata"]["deletionGracePeriodSeconds"], 0);
    assert!(
        terminating["metadata"]["deletionTimestamp"].is_string(),
        "{terminating}"
    );
    let mut deleted = ctx[4]["object"].clone();
    assert_ne!(
        deleted["metadata"]["resourceVersion"],
        terminating["metadata"]["resourceVersion"]
    );
    deleted["metadata"]["resourceVersion"] = terminating["metadata"]["resourceVersion"].clone();
    assert_eq!(
        &deleted, terminating,
        "the Deleted object is the last state"
    );
    let mut before = terminating.clone();
    let meta = before["metadata"].as_object_mut().expect("metadata");
    for field in [
        "deletionGracePeriodSeconds",
        "deletionTimestamp",
        "generation",
        "resourceVersion",
    ] {
        meta.remove(field);
    }
    let mut p2 = p2;
    let meta = p2["metadata"].as_object_mut().expect("metadata");
    for field in ["generation", "resourceVersion"] {
        meta.remove(field);
    }
    assert_eq!(before, p2, "only the deletion fields changed");
    assert!(
        cp().get("pod", &ns, "p2").is_none(),
        "p2 is gone from the server"
    );
}

/// A CRD with a unique group, Established; its objects keep the server's typing.
fn widget_crd() -> (String, String) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let group = format!("b{}-{n}.bindings.test.example.com", std::process::id());
    let name = format!("widgets.{group}");
    apply(&format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}\n\
         spec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}\n\
         \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n\
         \x20       properties:\n          spec:\n            type: object\n            properties:\n\
         \x20             replicas: {{type: integer}}\n              ratio: {{type: number}}\n              enabled: {{type: boolean}}\n\
         \x20             tags: {{type: array, items: {{type: string}}}}\n\
         \x20             extra: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
    ));
    kubectl(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{name}"),
        "--timeout=30s",
    ]);
    (group, name)
}

fn widget(ns: &str, group: &str, name: &str, replicas: i64) -> String {
    format!(
        "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  replicas: {replicas}\n  ratio: 0.25\n  enabled: true\n  tags: [a, b]\n\
         \x20 extra: {{count: 7, half: 1.5, big: 9007199254740993, none: null, text: \"12\"}}\n"
    )
}

#[test]
fn crd_synchronization_and_events_match_the_server() {
    let _api = api_shared();
    let ns = cp().namespace("bind-crd");
    let (group, crd) = widget_crd();
    apply(&widget(&ns, &group, "w1", 1));
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: widgets\n  apiVersion: {group}/v1\n  kind: Widget\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n\
         - name: specs\n  apiVersion: {group}/v1\n  kind: Widget\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n  jqFilter: .spec\n  keepFullObjectsInMemory: false\n"
    );
    let op = admin_operator(&[("w.sh", hook("w", &config, ""))]);
    let ctx = expect(&op, "widgets", &["Synchronization w1"]);
    let w1 = cp().get(&crd, &ns, "w1").expect("w1 stored");
    assert_eq!(ctx[0]["objects"][0]["object"], w1);
    let spec = &w1["spec"];
    assert!(spec["replicas"].is_i64() && spec["ratio"].is_f64() && spec["enabled"].is_boolean());
    assert_eq!(spec["extra"]["big"].as_u64(), Some(9007199254740993));
    assert!(spec["extra"]["half"].is_f64() && spec["extra"]["none"].is_null());
    assert_eq!(
        spec["extra"]["text"], "12",
        "a string of digits stays a string"
    );
    let specs = expect(&op, "specs", &[&format!("Synchronization {}", spec)]);
    assert_eq!(specs[0]["objects"][0]["filterResult"]["extra"]["half"], 1.5);
    assert!(
        specs[0]["objects"][0].get("object").is_none(),
        "keepFullObjectsInMemory: false"
    );

    apply(&widget(&ns, &group, "w2", 2));
    let ctx = expect(&op, "widgets", &["Synchronization w1", "Added w2"]);
    assert_eq!(
        ctx[1]["object"],
        cp().get(&crd, &ns, "w2").expect("w2 stored")
    );
    kubectl(&[
        "-n",
        &ns,
        "patch",
        &crd,
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":5}}"#,
    ]);
    let ctx = expect(
        &op,
        "widgets",
        &["Synchronization w1", "Added w2", "Modified w1"],
    );
    let w1 = cp().get(&crd, &ns, "w1").expect("w1 stored");
    assert_eq!(ctx[2]["object"], w1);
    assert_eq!(ctx[2]["object"]["spec"]["replicas"].as_i64(), Some(5));
    // A change outside the jqFilter's result runs nothing for "specs"; the label
    // change below is Modified for "widgets" only.
    kubectl(&["-n", &ns, "label", &crd, "w2", "touched=yes"]);
    kubectl(&["-n", &ns, "delete", &crd, "w2"]);
    let ctx = expect(
        &op,
        "widgets",
        &[
            "Synchronization w1",
            "Added w2",
            "Modified w1",
            "Modified w2",
            "Deleted w2",
        ],
    );
    assert_eq!(ctx[4]["object"]["metadata"]["labels"]["touched"], "yes");
    let w2_spec = ctx[4]["object"]["spec"].to_string();
    let want = [
        format!("Synchronization {spec}"),
        format!("Added {w2_spec}"),
        format!("Modified {}", w1["spec"]),
        format!("Deleted {w2_spec}"),
    ];
    expect(
        &op,
        "specs",
        &want.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

#[test]
fn label_selector_follows_objects_relabelled_in_and_out() {
    let _api = api_shared();
    let ns = cp().namespace("bind-labels");
    for (name, labels) in [
        ("m1", "app: web, tier: front"),
        ("m2", "app: web, tier: db"),
        ("m3", "app: other, tier: front"),
        ("m4", "app: web, tier: back, legacy: \"1\""),
        ("m5", "app: web, tier: back, env: prod"),
    ] {
        apply(&labelled_cm(&ns, name, labels, "v: \"1\""));
    }
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: web\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n\
         \x20 labelSelector:\n    matchLabels: {{app: web}}\n    matchExpressions:\n\
         \x20   - {{key: tier, operator: In, values: [front, back]}}\n\
         \x20   - {{key: env, operator: NotIn, values: [prod]}}\n\
         \x20   - {{key: legacy, operator: DoesNotExist}}\n\
         \x20   - {{key: app, operator: Exists}}\n\
         \x20 jqFilter: '.metadata.name + \"=\" + .metadata.labels.tier + \"/\" + .data.v'\n"
    );
    let op = admin_operator(&[("web.sh", hook("web", &config, ""))]);
    expect(&op, "web", &["Synchronization m1=front/1"]);
    // Relabelled into the selector: Added, with the object as it is now.
    kubectl(&[
        "-n",
        &ns,
        "label",
        "--overwrite",
        "configmap",
        "m2",
        "tier=back",
    ]);
    let ctx = expect(
        &op,
        "web",
        &["Synchronization m1=front/1", "Added m2=back/1"],
    );
    assert_eq!(
        ctx[1]["object"],
        cp().get("configmap", &ns, "m2").expect("m2")
    );
    kubectl(&["-n", &ns, "label", "configmap", "m5", "env-"]);
    expect(
        &op,
        "web",
        &[
            "Synchronization m1=front/1",
            "Added m2=back/1",
            "Added m5=back/1",
        ],
    );
    // Relabelled out: Deleted. The API server sends the object's state from before
    // the change (still matching) under the change's resourceVersion.
    let m1_before = cp().get("configmap", &ns, "m1").expect("m1");
    kubectl(&["-n", &ns, "label", "configmap", "m1", "legacy=yes"]);
    let ctx = expect(
        &op,
        "web",
        &[
            "Synchronization m1=front/1",
            "Added m2=back/1",
            "Added m5=back/1",
            "Deleted m1=front/1",
        ],
    );
    let m1_now = cp().get("configmap", &ns, "m1").expect("m1");
    assert_eq!(m1_now["metadata"]["labels"]["legacy"], "yes");
    let mut deleted = ctx[3]["object"].clone();
    assert_eq!(
        deleted["metadata"]["resourceVersion"],
        m1_now["metadata"]["resourceVersion"]
    );
    deleted["metadata"]["resourceVersion"] = m1_before["metadata"]["resourceVersion"].clone();
    assert_eq!(
        deleted, m1_before,
        "the Deleted object is the state before the relabel"
    );
    // Changes to objects outside the selector run nothing; the last one is the fence.
    kubectl(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "m1",
        "-p",
        r#"{"data":{"v":"2"}}"#,
    ]);
    kubectl(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "m3",
        "-p",
        r#"{"data":{"v":"2"}}"#,
    ]);
    kubectl(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "m2",
        "-p",
        r#"{"data":{"v":"2"}}"#,
    ]);
    let ctx = expect(
        &op,
        "web",
        &[
            "Synchronization m1=front/1",
            "Added m2=back/1",
            "Added m5=back/1",
            "Deleted m1=front/1",
            "Modified m2=back/2",
        ],
    );
    assert_eq!(ctx.len(), 5);
}

#[test]
fn field_and_name_selectors_on_configmaps_and_pods() {
    let _api = api_shared();
    let ns = cp().namespace("bind-fields");
    for name in ["c1", "c2", "c3"] {
        apply(&labelled_cm(&ns, name, "", "v: \"1\""));
    }
    apply(&pod(&ns, "waiting", "", None));
    apply(&pod(&ns, "placed", "", Some("node-a")));
    let binding = |name: &str, kind: &str, extra: &str, jq: &str| {
        format!(
            "- name: {name}\n  kind: {kind}\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n{extra}  jqFilter: '{jq}'\n"
        )
    };
    let cm_jq = ".metadata.name + \"=\" + .data.v";
    let pod_jq = ".metadata.name + \"/\" + .status.phase + \"/\" + (.spec.nodeName // \"-\")";
    let config = [
        "configVersion: v1\nkubernetes:\n".to_string(),
        binding("one-name", "ConfigMap", "  nameSelector:\n    matchNames: [c1]\n", cm_jq),
        binding("two-names", "ConfigMap", "  nameSelector:\n    matchNames: [c1, c2]\n", cm_jq),
        binding(
            "not-c1",
            "ConfigMap",
            "  fieldSelector:\n    matchExpressions:\n    - {field: metadata.name, operator: NotEquals, value: c1}\n",
            cm_jq,
        ),
        binding(
            "pending",
            "Pod",
            "  fieldSelector:\n    matchExpressions:\n    - {field: status.phase, operator: Equals, value: Pending}\n",
            pod_jq,
        ),
        binding(
            "running",
            "Pod",
            "  fieldSelector:\n    matchExpressions:\n    - {field: status.phase, operator: Equals, value: Running}\n",
            pod_jq,
        ),
        binding(
            "on-node-a",
            "Pod",
            "  fieldSelector:\n    matchExpressions:\n    - {field: spec.nodeName, operator: Equals, value: node-a}\n",
            pod_jq,
        ),
    ]
    .concat();
    let op = admin_operator(&[("f.sh", hook("f", &config, ""))]);
    expect(&op, "one-name", &["Synchronization c1=1"]);
    expect(&op, "two-names", &["Synchronization c1=1,c2=1"]);
    expect(&op, "not-c1", &["Synchronization c2=1,c3=1"]);
    expect(
        &op,
        "pending",
        &["Synchronization placed/Pending/node-a,waiting/Pending/-"],
    );
    expect(&op, "running", &["Synchronization "]);
    expect(&op, "on-node-a", &["Synchronization placed/Pending/node-a"]);

    // The status subresource moves "waiting" from one phase selector to the other.
    kubectl(&[
        "-n",
        &ns,
        "patch",
        "pod",
        "waiting",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running"}}"#,
    ]);
    let ctx = expect(
        &op,
        "pending",
        &[
            "Synchronization placed/Pending/node-a,waiting/Pending/-",
            "Deleted waiting/Pending/-",
        ],
    );
    let running = expect(
        &op,
        "running",
        &["Synchronization ", "Added waiting/Running/-"],
    );
    assert_eq!(
        running[1]["object"],
        cp().get("pod", &ns, "waiting").expect("waiting")
    );
    assert_eq!(ctx.len(), 2);
    // The binding subresource (what a scheduler calls) sets spec.nodeName.
    cp().kubectl_as(
        &cp().admin_kubeconfig(),
        &["create", "--raw", &format!("/api/v1/namespaces/{ns}/pods/waiting/binding"), "-f", "-"],
        Some(r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"waiting"},"target":{"kind":"Node","name":"node-a"}}"#),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    expect(
        &op,
        "on-node-a",
        &[
            "Synchronization placed/Pending/node-a",
            "Added waiting/Running/node-a",
        ],
    );
    expect(
        &op,
        "running",
        &[
            "Synchronization ",
            "Added waiting/Running/-",
            "Modified waiting/Running/node-a",
        ],
    );

    // ConfigMaps: one change each way through the name selectors.
    kubectl(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "c2",
        "-p",
        r#"{"data":{"v":"2"}}"#,
    ]);
    apply(&labelled_cm(&ns, "c4", "", "v: \"1\""));
    kubectl(&["-n", &ns, "delete", "configmap", "c1"]);
    // The fence of one-name and two-names: c1 again.
    apply(&labelled_cm(&ns, "c1", "", "v: \"3\""));
    expect(
        &op,
        "one-name",
        &["Synchronization c1=1", "Deleted c1=1", "Added c1=3"],
    );
    expect(
        &op,
        "two-names",
        &[
            "Synchronization c1=1,c2=1",
            "Modified c2=2",
            "Deleted c1=1",
            "Added c1=3",
        ],
    );
    // The fence of not-c1: c5.
    apply(&labelled_cm(&ns, "c5", "", "v: \"1\""));
    expect(
        &op,
        "not-c1",
        &[
            "Synchronization c2=1,c3=1",
            "Modified c2=2",
            "Added c4=1",
            "Added c5=1",
        ],
    );
    // The pod bindings saw nothing else: a new pod is their fence.
    apply(&pod(&ns, "fence", "", None));
    expect(
        &op,
        "pending",
        &[
            "Synchronization placed/Pending/node-a,waiting/Pending/-",
            "Deleted waiting/Pending/-",
            "Added fence/Pending/-",
        ],
    );
    let ctx = contexts(&op);
    assert_eq!(of(&ctx, "running").len(), 3, "{ctx:#?}");
    assert_eq!(of(&ctx, "on-node-a").len(), 2, "{ctx:#?}");
}

#[test]
fn namespace_name_and_label_selectors_follow_relabelled_namespaces() {
    let _api = api_shared();
    let watched = cp().namespace("bind-nsa");
    let later = cp().namespace("bind-nsb");
    let named = cp().namespace("bind-nsc");
    let other = cp().namespace("bind-nsd");
    // A label only this test's namespaces carry.
    let label = format!("bindings-test={watched}");
    kubectl(&["label", "namespace", &watched, &label]);
    for ns in [&watched, &later, &named, &other] {
        apply(&labelled_cm(ns, "one", "", "v: \"1\""));
    }
    let (key, value) = label.split_once('=').expect("label");
    let jq = "jqFilter: '.metadata.namespace + \"/\" + .metadata.name'";
    let config = format!(
        "configVersion: v1\nkubernetes:\n\
         - name: named\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{named}, {watched}]\n  {jq}\n\
         - name: labelled\n  kind: ConfigMap\n  namespace:\n    labelSelector:\n      matchLabels: {{{key}: {value}}}\n  {jq}\n"
    );
    let op = admin_operator(&[("ns.sh", hook("ns", &config, ""))]);
    let one = |ns: &str| format!("{ns}/one");
    expect(
        &op,
        "named",
        &[&format!(
            "Synchronization {},{}",
            one(&watched),
            one(&named)
        )],
    );
    let sync = format!("Synchronization {}", one(&watched));
    expect(&op, "labelled", &[&sync]);

    // A namespace relabelled in: its objects arrive as Added, as the server has them.
    kubectl(&["label", "namespace", &later, &label]);
    let added = format!("Added {}", one(&later));
    let ctx = expect(&op, "labelled", &[&sync, &added]);
    assert_eq!(
        ctx[1]["object"],
        cp().get("configmap", &later, "one").expect("one")
    );
    // ... and its later objects as events of its new watch.
    apply(&labelled_cm(&later, "two", "", "v: \"1\""));
    let added_two = format!("Added {later}/two");
    expect(&op, "labelled", &[&sync, &added, &added_two]);

    // A namespace relabelled out: its objects go as Deleted, and its later changes
    // reach only the binding that still names it.
    kubectl(&["label", "namespace", &watched, &format!("{key}-")]);
    let deleted = format!("Deleted {}", one(&watched));
    let ctx = expect(&op, "labelled", &[&sync, &added, &added_two, &deleted]);
    assert_eq!(
        ctx[3]["object"], ctx[0]["objects"][0]["object"],
        "the last state seen"
    );
    apply(&labelled_cm(&watched, "two", "", "v: \"1\""));
    apply(&labelled_cm(&other, "two", "", "v: \"1\""));
    expect(
        &op,
        "named",
        &[
            &format!("Synchronization {},{}", one(&watched), one(&named)),
            &format!("Added {watched}/two"),
        ],
    );
    // The fence: an object in the namespace that is still labelled.
    apply(&labelled_cm(&later, "fence", "", "v: \"1\""));
    expect(
        &op,
        "labelled",
        &[
            &sync,
            &added,
            &added_two,
            &deleted,
            &format!("Added {later}/fence"),
        ],
    );
}

/// A ConfigMap binding on `ns` with full objects ("cms") and one sharing its watch
/// with a jqFilter and only filter results ("values").
fn two_bindings(ns: &str) -> String {
    hook(
        "cm",
        &format!(
            "configVersion: v1\nkubernetes:\n\
             - name: cms\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n\
             - name: values\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n  \
             jqFilter: '.metadata.name + \"=\" + .data.v'\n  keepFullObjectsInMemory: false\n"
        ),
        "",
    )
}

/// The value of `kubernetes_client_watch_errors_total{error_type}` on `op`'s
/// metrics endpoint (0 when absent).
/// ConfigMap `fence` (`v=1`) in `ns`: once a binding reports it, every change made
/// before it has been handled.
fn create_fence(ns: &str) {
    kubectl(&[
        "-n",
        ns,
        "create",
        "configmap",
        "fence",
        "--from-literal=v=1",
    ]);
}

fn watch_errors(op: &crate::common::Operator, error_type: &str) -> f64 {
    let (_, body) = op.http_get("/metrics");
    let label = format!("error_type=\"{error_type}\"");
    body.lines()
        .filter(|l| l.contains("kubernetes_client_watch_errors_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The watches break when kube-apiserver is killed and come back when it is up
/// again; changes made after the restart are each seen once, and nothing seen
/// before is announced again.
#[test]
fn watches_survive_an_apiserver_restart_without_loss_or_doubles() {
    let _api = api_exclusive();
    let ns = cp().namespace("bind-restart");
    for name in ["a", "b", "c"] {
        kubectl(&["-n", &ns, "create", "configmap", name, "--from-literal=v=1"]);
    }
    let (group, crd) = widget_crd();
    apply(&widget(&ns, &group, "w1", 1));
    let widgets = hook(
        "w",
        &format!(
            "configVersion: v1\nkubernetes:\n- name: widgets\n  apiVersion: {group}/v1\n  kind: Widget\n  \
             namespace:\n    nameSelector:\n      matchNames: [{ns}]\n  jqFilter: .spec.replicas\n"
        ),
        "",
    );
    let op = admin_operator(&[("cm.sh", two_bindings(&ns)), ("w.sh", widgets)]);
    expect(&op, "cms", &["Synchronization a,b,c"]);
    expect(&op, "values", &["Synchronization a=1,b=1,c=1"]);
    expect(&op, "widgets", &["Synchronization 1"]);

    with_apiserver_down(|| ());
    // A custom resource's watch comes back too (its CRD is served again once the
    // restarted server has read it).
    kubectl(&[
        "-n",
        &ns,
        "patch",
        &crd,
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":2}}"#,
    ]);
    let ctx = expect(&op, "widgets", &["Synchronization 1", "Modified 2"]);
    assert_eq!(ctx[1]["object"], cp().get(&crd, &ns, "w1").expect("w1"));
    kubectl(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "a",
        "-p",
        r#"{"data":{"v":"2"}}"#,
    ]);
    let ctx = expect(&op, "cms", &["Synchronization a,b,c", "Modified a"]);
    assert_eq!(
        ctx[1]["object"],
        cp().get("configmap", &ns, "a").expect("a")
    );
    kubectl(&["-n", &ns, "create", "configmap", "d", "--from-literal=v=1"]);
    expect(
        &op,
        "cms",
        &["Synchronization a,b,c", "Modified a", "Added d"],
    );
    kubectl(&["-n", &ns, "delete", "configmap", "b"]);
    expect(
        &op,
        "cms",
        &[
            "Synchronization a,b,c",
            "Modified a",
            "Added d",
            "Deleted b",
        ],
    );
    // The fence: everything before it has been handled.
    create_fence(&ns);
    let ctx = expect(
        &op,
        "cms",
        &[
            "Synchronization a,b,c",
            "Modified a",
            "Added d",
            "Deleted b",
            "Added fence",
        ],
    );
    assert_eq!(
        ctx[4]["object"],
        cp().get("configmap", &ns, "fence").expect("fence")
    );
    expect(
        &op,
        "values",
        &[
            "Synchronization a=1,b=1,c=1",
            "Modified a=2",
            "Added d=1",
            "Deleted b=1",
            "Added fence=1",
        ],
    );
    // The kill broke the open watches (the client saw the connection end).
    let line = op.wait_log("\"error_type\":\"unexpected-eof\"", WAIT);
    assert!(line.contains("watch error"), "{line}");
}

/// With kube-apiserver down, one ConfigMap is changed and one deleted directly in
/// etcd and the history is compacted: the operator's resume version is gone (410),
/// it relists, and the hook sees exactly those two differences.
#[test]
fn compaction_while_the_apiserver_is_down_forces_a_relist_with_exact_differences() {
    let _api = api_exclusive();
    let ns = cp().namespace("bind-compact");
    for name in ["change", "keep", "remove"] {
        kubectl(&["-n", &ns, "create", "configmap", name, "--from-literal=v=1"]);
    }
    let op = admin_operator(&[("cm.sh", two_bindings(&ns))]);
    let sync = expect(&op, "cms", &["Synchronization change,keep,remove"]);
    expect(&op, "values", &["Synchronization change=1,keep=1,remove=1"]);
    let removed = sync[0]["objects"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|o| o["object"]["metadata"]["name"] == "remove")
        })
        .map(|o| o["object"].clone())
        .expect("remove in the Synchronization");
    let expired_before = watch_errors(&op, "expired");

    let etcd = cp().etcd();
    with_apiserver_down(|| {
        let key = format!("/registry/configmaps/{ns}/change");
        let text = etcd.get(&key).expect("etcd get").expect("change in etcd");
        let mut stored: Value = serde_json::from_str(&text).expect("stored as JSON");
        assert!(
            stored["metadata"].get("resourceVersion").is_none(),
            "the API server keeps resourceVersion out of etcd: {stored}"
        );
        stored["data"]["v"] = "2".into();
        etcd.put(&key, &stored.to_string()).expect("etcd put");
        etcd.delete(&format!("/registry/configmaps/{ns}/remove"))
            .expect("etcd delete");
        etcd.compact().expect("etcd compact");
    });

    // A relist sends what changed in list order, then what is gone; the fence
    // comes after both.
    wait_binding(&op, "cms", 3);
    create_fence(&ns);
    let ctx = expect(
        &op,
        "cms",
        &[
            "Synchronization change,keep,remove",
            "Modified change",
            "Deleted remove",
            "Added fence",
        ],
    );
    let change = cp().get("configmap", &ns, "change").expect("change");
    assert_eq!(change["data"]["v"], "2", "the server serves what etcd has");
    assert_eq!(ctx[1]["object"], change);
    assert_eq!(
        ctx[2]["object"], removed,
        "a relist's Deleted carries the last state seen"
    );
    assert!(cp().get("configmap", &ns, "remove").is_none());
    expect(
        &op,
        "values",
        &[
            "Synchronization change=1,keep=1,remove=1",
            "Modified change=2",
            "Deleted remove=1",
            "Added fence=1",
        ],
    );
    let line = op.wait_log("\"error_type\":\"expired\"", WAIT);
    assert!(line.contains("watch error"), "{line}");
    assert!(
        watch_errors(&op, "expired") > expired_before,
        "kubernetes_client_watch_errors_total{{error_type=\"expired\"}} counted the 410"
    );
}

/// A field selector the real server refuses (ConfigMaps know only metadata.name and
/// metadata.namespace; kube-sim accepts any path): enabling fails at once with the
/// server's reason, naming hook and binding, and is retried; the monitor does not
/// sit out the initial-list timeout (60 s) on a request that cannot succeed.
#[test]
fn a_field_selector_the_server_refuses_fails_enabling_with_its_reason() {
    let _api = api_shared();
    let ns = cp().namespace("bind-refused");
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: phases\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n  \
         fieldSelector:\n    matchExpressions:\n    - {{field: status.phase, operator: Equals, value: Running}}\n"
    );
    let op = admin_operator(&[("refused.sh", hook("refused", &config, ""))]);
    let line = op.wait_log("EnableKubernetesBindings failed", WAIT);
    for part in [
        "refused.sh",
        "phases",
        "400",
        r#"\"status.phase\" is not a known field selector"#,
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    assert!(
        !op.logs().contains("does not stream initial lists"),
        "a refused selector is not a server without streaming lists:\n{}",
        op.logs()
    );
    assert!(op.runs().is_empty(), "no hook ran");
}

/// How often each of `bindings` saw ConfigMap `name`: in its Synchronization
/// objects or as an Added event.
fn seen_once_each(ctx: &[Value], bindings: &[&str], name: &str) -> Vec<usize> {
    let count = |c: &Value| match c["type"].as_str() {
        Some("Synchronization") => c["objects"].as_array().map_or(0, |o| {
            o.iter()
                .filter(|o| o["object"]["metadata"]["name"] == name)
                .count()
        }),
        _ => usize::from(c["watchEvent"] == "Added" && c["object"]["metadata"]["name"] == name),
    };
    bindings
        .iter()
        .map(|b| of(ctx, b).iter().map(count).sum())
        .collect()
}

/// Two jqFilter bindings of one hook share one watch. ConfigMaps created while the
/// operator starts (racing the watch's initial list and the second binding's own
/// list) and one created after the Synchronization reach each binding exactly once:
/// in its Synchronization or as an Added event. kube-sim's twin is
/// `operator_kube::objects_created_during_startup_reach_each_shared_binding_once`.
#[test]
fn objects_created_during_startup_reach_each_shared_jq_binding_once() {
    let _api = api_shared();
    let ns = cp().namespace("bind-race");
    let config = format!(
        "configVersion: v1\nkubernetes:\n\
         - name: data\n  kind: ConfigMap\n  namespace: {{nameSelector: {{matchNames: [{ns}]}}}}\n  jqFilter: .data\n\
         - name: names\n  kind: ConfigMap\n  namespace: {{nameSelector: {{matchNames: [{ns}]}}}}\n  jqFilter: .metadata.name\n"
    );
    let synced = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let op = admin_operator(&[("race.sh", hook("race", &config, ""))]);
    let creator = {
        let (ns, synced) = (ns.clone(), std::sync::Arc::clone(&synced));
        std::thread::spawn(move || {
            let mut n = 0;
            while !synced.load(std::sync::atomic::Ordering::SeqCst) {
                let name = format!("racer-{n}");
                kubectl(&[
                    "-n",
                    &ns,
                    "create",
                    "configmap",
                    &name,
                    "--from-literal=k=v",
                ]);
                n += 1;
            }
            n
        })
    };
    wait_binding(&op, "data", 1);
    wait_binding(&op, "names", 1);
    synced.store(true, std::sync::atomic::Ordering::SeqCst);
    let created = creator.join().expect("creator");
    kubectl(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "late",
        "--from-literal=k=v",
    ]);
    create_fence(&ns);
    op.wait_runs(WAIT, |_| {
        seen_once_each(&contexts(&op), &["data", "names"], "fence") == [1, 1]
    });
    let ctx = contexts(&op);
    let names = (0..created).map(|n| format!("racer-{n}"));
    for name in names.chain(["late".to_string()]) {
        assert_eq!(
            seen_once_each(&ctx, &["data", "names"], &name),
            [1, 1],
            "{name}: {ctx:#?}"
        );
    }
}
