//! Mutating webhooks through both operators on the same real API server: each
//! registers its own MutatingWebhookConfiguration (its own name, Service and TLS
//! endpoint) for the same hook, so the API server calls both in turn, in the order of
//! the configurations' names, and the second receives the object with the first's
//! patch applied. The hook counts the mutations it has seen in an annotation and adds
//! a data key per step, so what each receives depends only on its place in the chain.
//!
//! Two namespaces, one per order: in the first flant's configuration sorts first, in
//! the second ours does. Then the first-called contexts of both are compared, the
//! second-called contexts of both, the objects that landed, and the configurations.

use crate::common::Operator;
use crate::oracle::{Pair, recorder, unexplained_diff};
use crate::webhooks::{flags, reviews, strs};
use control_plane::ControlPlane;
use serde_json::Value;
use std::time::Duration;

/// The mutating hook: bumps annotation `mutations` and adds `data.step<N>`.
fn mutating_hook(ns: &str) -> String {
    let config = format!(
        "configVersion: v1\nkubernetesMutating:\n- name: mutate.example.com\n  \
         namespace:\n    labelSelector:\n      matchLabels: {{kubernetes.io/metadata.name: {ns}}}\n  \
         rules:\n  - apiGroups: [\"\"]\n    apiVersions: [v1]\n    operations: [CREATE]\n    \
         resources: [configmaps]\n    scope: Namespaced"
    );
    recorder("mut", &config)
        + r#"
patch=$(jq -c '.[0].review.request.object as $o
  | (($o.metadata.annotations.mutations // "0") | tonumber + 1 | tostring) as $n
  | (if $o.metadata.annotations then [{op: "add", path: "/metadata/annotations/mutations", value: $n}]
     else [{op: "add", path: "/metadata/annotations", value: {mutations: $n}}] end)
    + (if $o.data then [{op: "add", path: ("/data/step" + $n), value: "patched"}]
       else [{op: "add", path: "/data", value: {("step" + $n): "patched"}}] end)' "$BINDING_CONTEXT_PATH" | base64 -w0)
printf '{"allowed": true, "patch": "%s"}' "$patch" > "$VALIDATING_RESPONSE_PATH"
"#
}

/// Two operators on `ns`, flant's configuration named `<flant_prefix>-<ns>` and
/// ours `<ours_prefix>-<ns>`: the API server calls the smaller name first.
fn start_in(cp: &ControlPlane, ns: &str, flant_prefix: &str, ours_prefix: &str) -> Pair {
    let ep_flant = cp.webhook_endpoint(ns, "flant-mut").expect("endpoint");
    let ep_ours = cp.webhook_endpoint(ns, "ours-mut").expect("endpoint");
    // The admission server's flags are the validating ones; the configuration name
    // names both configurations (`<name>-hooks`).
    let fa = flags(cp, ns, &ep_flant, &format!("{flant_prefix}-{ns}"));
    let oa = flags(cp, ns, &ep_ours, &format!("{ours_prefix}-{ns}"));
    let hooks = [("mut.sh", mutating_hook(ns))];
    let pair = Pair::start_each(&hooks, (&strs(&fa), &[]), (&strs(&oa), &[]));
    wait_called_mut(cp, ns, &pair);
    pair
}

/// Waits until the API server sends dry-run reviews to both operators (it learns of
/// new configurations through informers).
fn wait_called_mut(cp: &ControlPlane, ns: &str, pair: &Pair) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let last = cp.kubectl(&["-n", ns, "create", "configmap", "probe", "--dry-run=server"]);
        if [&pair.flant, &pair.ours]
            .iter()
            .all(|op| !reviews(op, true).is_empty())
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the API server never called both webhooks in {ns}; last: {last:?}\nflant: {}\nours: {}",
            pair.flant.logs(),
            pair.ours.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The one real review `op` received, its namespace written as `<ns>` and what the
/// server decides per call (uid, timestamps) blanked.
fn the_review(op: &Operator, ns: &str) -> Value {
    let all = reviews(op, false);
    assert_eq!(all.len(), 1, "one real review: {all:#?}\n{}", op.logs());
    neutral(&all[0], ns)
}

/// `v` with `ns` written as `<ns>` and the server's per-object fields blanked.
fn neutral(v: &Value, ns: &str) -> Value {
    let text = v.to_string().replace(ns, "<ns>");
    let mut v: Value = serde_json::from_str(&text).expect("json");
    blank(&mut v);
    v
}

fn blank(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for k in ["uid", "creationTimestamp", "resourceVersion", "time"] {
                if map.get(k).is_some_and(Value::is_string) {
                    map.insert(k.into(), Value::from(format!("<{k}>")));
                }
            }
            map.values_mut().for_each(blank);
        }
        Value::Array(items) => items.iter_mut().for_each(blank),
        _ => {}
    }
}

/// ConfigMap `name` of `ns` as it landed.
fn landed(cp: &ControlPlane, ns: &str, name: &str) -> Value {
    let obj = cp.get("configmap", ns, name).expect("the ConfigMap landed");
    let mut obj = neutral(&obj, ns);
    obj["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("managedFields");
    obj
}

/// A MutatingWebhookConfiguration as stored, without what names it.
fn configuration(cp: &ControlPlane, name: &str, ns: &str) -> Value {
    let text = cp
        .kubectl(&["get", "mutatingwebhookconfiguration", name, "-o", "json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let cfg: Value = serde_json::from_str(&text).expect("json");
    let mut cfg = neutral(&cfg, ns);
    cfg.as_object_mut().expect("object").remove("metadata");
    for hook in cfg["webhooks"].as_array_mut().expect("webhooks") {
        hook["clientConfig"]["service"]["name"] = Value::Null;
        hook["clientConfig"]["caBundle"] = Value::Null;
    }
    cfg
}

#[test]
fn mutating_webhooks_chain_and_see_the_same_reviews() {
    let cp = control_plane::shared();
    let ns_a = cp.namespace("compat-mut-a");
    let ns_b = cp.namespace("compat-mut-b");
    // In ns_a flant's configuration ("a-…") is called first; in ns_b ours is.
    let first_flant = start_in(cp, &ns_a, "a", "b");
    let first_ours = start_in(cp, &ns_b, "b", "a");
    for ns in [&ns_a, &ns_b] {
        cp.kubectl(&["-n", ns, "create", "configmap", "cm", "--from-literal=v=1"])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    first_flant.settle(Duration::from_millis(1000));
    first_ours.settle(Duration::from_millis(1000));

    let flant_first = the_review(&first_flant.flant, &ns_a);
    let ours_second = the_review(&first_flant.ours, &ns_a);
    let ours_first = the_review(&first_ours.ours, &ns_b);
    let flant_second = the_review(&first_ours.flant, &ns_b);
    let annotation =
        |c: &Value| c["review"]["request"]["object"]["metadata"]["annotations"].clone();
    assert_eq!(
        annotation(&flant_first),
        Value::Null,
        "the first in line sees the object as created: {flant_first}"
    );
    assert_eq!(
        annotation(&ours_second)["mutations"],
        "1",
        "ours, called second, sees flant's patch: {ours_second}"
    );
    assert_eq!(
        annotation(&flant_second)["mutations"],
        "1",
        "flant, called second, sees our patch: {flant_second}"
    );
    let mut report = Vec::new();
    for (place, f, o) in [
        ("first", &flant_first, &ours_first),
        ("second", &flant_second, &ours_second),
    ] {
        report.extend(
            unexplained_diff(f, o)
                .into_iter()
                .map(|d| format!("called {place}: {d}")),
        );
    }
    assert!(
        report.is_empty(),
        "the mutating contexts differ:\n{}",
        report.join("\n")
    );

    let (a, b) = (landed(cp, &ns_a, "cm"), landed(cp, &ns_b, "cm"));
    assert_eq!(a["metadata"]["annotations"]["mutations"], "2", "{a}");
    assert_eq!(a["data"]["step1"], "patched", "{a}");
    assert_eq!(a["data"]["step2"], "patched", "{a}");
    assert_eq!(
        a, b,
        "the same object landed whichever operator patched first"
    );
    assert_eq!(
        configuration(cp, &format!("a-{ns_a}-hooks"), &ns_a),
        configuration(cp, &format!("b-{ns_a}-hooks"), &ns_a),
        "the two MutatingWebhookConfigurations, names and Services aside"
    );
}
