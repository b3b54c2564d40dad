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
